"""The terminal front end: `idrrun run|grade|course|doctor`, thin over the pipeline and grading.

This module only dispatches: each command lives in idrrun/commands/ and is imported when it
runs, so that `idrrun --version` answers at once and `idrrun run` loads only what a run needs.
Exit codes: 0 ok, 1 build failed (grade: some submission did not pass), 2 usage or
configuration error, 3 run or check failed, 124 timeout, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from .errors import IdrrunError, UsageError
from .version import __version__

EXIT_OK, EXIT_BUILD, EXIT_USAGE, EXIT_RUN, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 124, 130
# command -> (its module, what it does)
COMMANDS = {
    "run": ("idrrun.commands.run", "compile and run a source file (same flags as %%idrrun)"),
    "grade": ("idrrun.commands.grade", "grade a class of submissions of one exercise"),
    "course": ("idrrun.commands.course", "course check | course strip"),
    "doctor": ("idrrun.commands.doctor", "what this machine offers for the course"),
}


def command(name: str) -> Callable[[Sequence[str]], int]:
    """A command's main(tokens); imported on use (start-up time)."""
    main: Callable[[Sequence[str]], int] = import_module(COMMANDS[name][0]).main
    return main


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="idrrun", description="Compile, run and check OpenACC course code.",
        epilog="Commands: " + "; ".join(f"{name}: {what}" for name, (_, what) in COMMANDS.items())
        + ". 'idrrun COMMAND --help' for details.",
    )
    parser.add_argument("--version", action="version", version=f"idrrun {__version__}")
    parser.add_argument("command", nargs="?", choices=sorted(COMMANDS), help="what to do")
    if not argv or argv[0] in ("-h", "--help", "--version"):
        parser.parse_args(argv)
        parser.print_help()
        return EXIT_USAGE
    name, rest = argv[0], argv[1:]
    try:
        if name not in COMMANDS:
            raise UsageError(f"unknown command {name!r} (known: {', '.join(sorted(COMMANDS))})")
        return command(name)(rest)
    except IdrrunError as exc:
        print(f"idrrun: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("idrrun: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
