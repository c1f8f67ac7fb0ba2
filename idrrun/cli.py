"""The terminal front end: `idrrun run`, thin over pipeline.execute.

Exit codes: 0 ok, 1 build failed, 2 usage or configuration error, 3 run failed (or the check
failed), 124 timeout, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__, config, options, pipeline, source, toolchains
from .display import TextReporter, render_failure
from .errors import IdrrunError
from .model import Outcome

EXIT_OK, EXIT_BUILD, EXIT_USAGE, EXIT_RUN, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 124, 130


def exit_code(outcome: Outcome) -> int:
    failure = outcome.failure
    if failure is None:
        return EXIT_OK if outcome.ok else EXIT_RUN
    if failure.what == "interrupted":
        return EXIT_INTERRUPTED
    if failure.step == "compile":
        return EXIT_BUILD
    if failure.what.startswith("timed out"):
        return EXIT_TIMEOUT
    return EXIT_RUN


def _run(tokens: Sequence[str]) -> int:
    opts = options.parse_tokens(list(tokens), prog="idrrun run", with_file=True)
    if opts is None:
        return EXIT_OK
    workdir = Path.cwd()
    settings = config.load(workdir)
    assert opts.file is not None
    src = source.from_file(workdir / os.path.expanduser(opts.file), opts.language, opts.file)
    request = pipeline.request_from(opts, src, settings, workdir)
    reporter = TextReporter(sys.stdout, color=sys.stdout.isatty())
    probe = toolchains.probe(settings, opts.family)
    outcome = pipeline.execute(request, probe, settings, reporter)
    if outcome.failure is not None:
        print(render_failure(outcome.failure), file=sys.stderr)
    return exit_code(outcome)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="idrrun", description="Compile, run and check OpenACC course code.",
        epilog="Commands: run (compile and run a file). 'idrrun COMMAND --help' for details.",
    )
    parser.add_argument("--version", action="version", version=f"idrrun {__version__}")
    parser.add_argument("command", nargs="?", choices=["run"], help="what to do")
    if not argv or argv[0] in ("-h", "--help", "--version"):
        parser.parse_args(argv)
        parser.print_help()
        return EXIT_USAGE
    command, rest = argv[0], argv[1:]
    try:
        if command == "run":
            return _run(rest)
        parser.error(f"unknown command {command!r} (known: run)")
    except IdrrunError as exc:
        print(f"idrrun: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("idrrun: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
