"""The terminal front end: `idrrun run|grade|gradebook|similarity|course|doctor`, thin over
the pipeline and grading.

This module only dispatches: each command lives in idrrun/commands/ and is imported when it
runs, so that `idrrun --version` answers at once and `idrrun run` loads only what a run needs.

Exit codes:
    0    done: run: the program built, ran (and passed its check); grade: every submission
         was graded, whatever its verdict (as nbgrader autograde and otter grade: the verdicts
         are in the report); gradebook: written; course check: every exercise is right;
         doctor: something compiles
    1    run: the build failed; grade: some submission could not be graded (an "error" row);
         gradebook: written, but some graded submissions match no student of the roster;
         similarity: some submission could not be read (not compared);
         classroom: some student's submission or feedback is an error row;
         course check: some exercise is not right; doctor: nothing can compile
    2    usage or configuration error: nothing was done
    3    run: the program failed (exit status, signal, limit) or its check says FAIL
    4    run: its check says INCOMPLETE: no check failed, but some could not be evaluated
         here (a GPU trace without a GPU, no solution in a students' course)
    124  run: the program timed out
    130  interrupted (Ctrl-C)
    141  the output's reader went away (`idrrun doctor | head`), as a tool killed by SIGPIPE
"""

from __future__ import annotations

import os
import sys
from importlib import import_module

from .errors import IdrrunError, UsageError, did_you_mean
from .version import __version__

# argparse and collections cost 20 ms: `idrrun run` hands its argv to the resident server first
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

EXIT_OK, EXIT_BUILD, EXIT_USAGE, EXIT_RUN, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 124, 130
EXIT_INCOMPLETE = 4  # run: a check that could not be evaluated, and none failed
EXIT_FAILED = 1  # grade, course check, doctor: see the module's docstring
EXIT_BROKEN_PIPE = 141
# command -> (its module, what it does)
COMMANDS = {
    "run": ("idrrun.commands.run", "compile and run a source file (same flags as %%idrrun)"),
    "grade": ("idrrun.commands.grade", "grade a class of submissions of one exercise"),
    "gradebook": ("idrrun.commands.gradebook", "the scores of graded exercises, for Moodle, "
                                               "Canvas or a spreadsheet"),
    "similarity": ("idrrun.commands.similarity",
                   "compare a class's submissions with each other and the solution (instructor)"),
    "classroom": ("idrrun.commands.classroom", "the class's exchange: release, fetch, submit, "
                                               "status, collect, return, feedback"),
    "course": ("idrrun.commands.course", "course check | course new | course strip | course init"),
    "doctor": ("idrrun.commands.doctor", "what this machine offers for the course"),
}


def command(name: str) -> Callable[[Sequence[str]], int]:
    """A command's main(tokens); imported on use (start-up time)."""
    main: Callable[[Sequence[str]], int] = import_module(COMMANDS[name][0]).main
    return main


def parser() -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(
        prog="idrrun", description="Compile, run and check OpenACC course code.",
        epilog="Commands: " + "; ".join(f"{name}: {what}" for name, (_, what) in COMMANDS.items())
        + ". 'idrrun COMMAND --help' for its flags and more ('%%idrrun --help' in a notebook: "
          "the flags of 'idrrun run'). Exit codes: 0 done, 1 build failed / some exercise or "
          "submission not right, 2 usage, 3 run or check failed, 4 check incomplete, 124 "
          "timeout, 130 interrupted.",
    )
    p.add_argument("--version", action="version", version=f"idrrun {__version__}",
                   help="print idrrun's version and exit")
    p.add_argument("command", nargs="?", choices=sorted(COMMANDS), help="what to do")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        # `idrrun run` by the resident server when there is one (resident.py): no imports
        from . import resident

        code = resident.call(argv)
        if code is not None:
            return code
    return run_in_process(argv)


def run_in_process(argv: list[str]) -> int:
    """The command, in this process."""
    try:
        if not argv or argv[0] in ("-h", "--help", "--version"):
            p = parser()
            p.parse_args(argv)
            p.print_help()
            return EXIT_USAGE
        name, rest = argv[0], argv[1:]
        try:
            if name not in COMMANDS:
                raise UsageError(f"unknown command {name!r}{did_you_mean(name, COMMANDS)} "
                                 f"(known: {', '.join(sorted(COMMANDS))})")
            return command(name)(rest)
        except IdrrunError as exc:
            print(f"idrrun: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print("idrrun: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of our output is gone (`| head`): stop without a traceback. stdout goes to
        # /dev/null first, or Python's final flush of it would complain again at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
