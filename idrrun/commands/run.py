"""`idrrun run FILE`: compile, run (and check) one file in a terminal.

Exit codes (EXIT_CODES, from the failure's kind; EXIT_HELP says them): 0 ok, 1 build failed, 2
usage or configuration error, 3 run failed or the check failed, 4 the check is incomplete, 124
timeout, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import toolchains
from ..cli import (EXIT_BUILD, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN, EXIT_TIMEOUT,
                   EXIT_USAGE)
from ..display import TextReporter, color_allowed, live_terminal, render_failure
from ..errors import UsageError
from ..checking import run_with_options
from ..model import VERDICT_MEANINGS, VERDICT_WORDS, FailureKind
from ..pipeline import Outcome
from ..request import config, options, source

PROG = "idrrun run"  # the option parser's name (the resident server builds it beforehand)

EXIT_CODES: dict[FailureKind, int] = {
    FailureKind.COMPILE_ERROR: EXIT_BUILD,
    FailureKind.COMPILE_TIMEOUT: EXIT_BUILD,
    FailureKind.NOT_STARTED: EXIT_RUN,
    FailureKind.TIMEOUT: EXIT_TIMEOUT,
    FailureKind.LIMIT: EXIT_RUN,
    FailureKind.SIGNAL: EXIT_RUN,
    FailureKind.EXIT_STATUS: EXIT_RUN,
    FailureKind.MISSING_FILES: EXIT_RUN,
    FailureKind.INTERRUPTED: EXIT_INTERRUPTED,
    FailureKind.CHECK: EXIT_RUN,
}


# What `idrrun run --help` says of them, after the flags.
EXIT_HELP = (f"exit codes: {EXIT_OK} built and ran (its check: {VERDICT_WORDS['pass']}); "
             f"{EXIT_BUILD} the build failed; {EXIT_USAGE} usage or configuration error; "
             f"{EXIT_RUN} the program failed (exit status, signal, limit) or its check is "
             f"{VERDICT_WORDS['fail']}; {EXIT_INCOMPLETE} its check is "
             f"{VERDICT_WORDS['incomplete']}: {VERDICT_MEANINGS['incomplete']}; "
             f"{EXIT_TIMEOUT} the program timed out; {EXIT_INTERRUPTED} interrupted. With several "
             "files, the first file's that did not pass.")


def exit_code(outcome: Outcome) -> int:
    if outcome.failure is None:
        if outcome.ok:
            return EXIT_OK
        return EXIT_INCOMPLETE if outcome.verdict is not None and outcome.verdict.incomplete \
            else EXIT_RUN
    return EXIT_CODES[outcome.failure.kind]


def parser() -> argparse.ArgumentParser:
    """The command's parser (its --help), as main parses with it."""
    return options.files_parser(PROG, EXIT_HELP)


def main(tokens: Sequence[str]) -> int:
    """Each file in turn, with the same flags; the exit code is the first failure's (0 when
    all passed)."""
    try:
        parsed = options.parse_files(list(tokens), prog=PROG, epilog=EXIT_HELP)
    except UsageError as exc:
        raise UsageError(str(exc) + options.dash_hint(tokens, f"{PROG} [flags]")) from None
    if parsed is None:
        return EXIT_OK
    opts, files = parsed
    workdir = Path.cwd()
    settings = config.load(workdir)
    reporter = TextReporter(sys.stdout, color=sys.stdout.isatty() and color_allowed(), sanitize=True,
                            live=live_terminal(sys.stdout))
    probe = toolchains.probe(settings, opts.family)
    if probe.protections is not None:
        reporter.notes(probe.protections.notes)
    code = EXIT_OK
    for name in files:
        src = source.from_file(workdir / os.path.expanduser(name), opts.language, name)
        outcome = run_with_options(opts, src, settings, workdir, probe, reporter)
        if outcome.failure is not None:
            print(render_failure(outcome.failure), file=sys.stderr)
        code = code or exit_code(outcome)
    return code


