"""What the commands share: the parser that raises UsageError, job counts, the console, JSON
output, the progress display."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..escape import terminal_line
from ..grading import names
from ..grading.rows import GradeRow
from ..model import CheckResult
from ..request import options

T = TypeVar("T")
# Columns for rich when the output is not a terminal (a file, a pipe, a CI log): wide enough that
# no table cell is cut or wrapped; rich would otherwise assume 80.
PIPED_WIDTH = 100_000


def jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("expected at least 1")
    return value


Parser = options.SuggestingParser  # its errors are UsageErrors that say what was meant


CONFIG_HELP = ("the teacher's config, read where ./idrrun.toml would be: the grader reads none "
               "from the folder it runs in, which may hold the submissions")


SEED_REFUSED = ("--seed TEXT is refused: a command line is shown to every user of the machine "
                "(ps, /proc/PID/cmdline) and, without namespaces, to every program graded. Give "
                "the seed with --seed-file FILE (a file of yours that others cannot read), "
                "IDRRUN_GRADING_SEED in the grader's environment, or [grading] seed in a config "
                "others cannot read")


def _refused_seed(text: str) -> str:
    raise argparse.ArgumentTypeError(SEED_REFUSED)


def add_seed_options(parser: argparse.ArgumentParser, what: str) -> None:
    """--seed-file FILE, and --seed TEXT refused with the reason (a seed never goes on a
    command line: issue 33)."""
    parser.add_argument("--seed-file", type=Path, metavar="FILE",
                        help=f"a file of yours, that nobody else can read, holding {what}; "
                             "default: IDRRUN_GRADING_SEED, [grading] seed in the config, else "
                             "one made once and kept in the grader's cache. The report holds "
                             "the values drawn, never the seed")
    parser.add_argument("--seed", type=_refused_seed, metavar="TEXT",
                        help="refused: a command line is visible to every user (use --seed-file)")


def deadline(text: str) -> dt.datetime:
    """--deadline ISO-TIME: a date and time, in the machine's time zone when it names none."""
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date and time such as "
                                         f"2026-12-01T18:00+01:00, got {text!r}") from None
    return value if value.tzinfo else value.astimezone()


def console() -> Console:
    """rich on stdout: a terminal gets its width and colours (unless NO_COLOR, which rich
    honours); anything else gets full lines, without colour."""
    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(highlight=False, width=PIPED_WIDTH, no_color=True, soft_wrap=True)


def print_json(value: Any) -> None:
    """One JSON document on stdout (--json): what scripts read instead of the tables."""
    # A file's name can hold bytes that are not UTF-8: written by the reports' rule (names.py).
    sys.stdout.write(json.dumps(names.decodable_data(value), indent=1, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def check_dict(check: CheckResult) -> dict[str, str]:
    return {"name": check.name, "status": check.status, "expected": check.expected,
            "got": check.got, "reason": check.reason}


def row_dict(row: GradeRow) -> dict[str, object]:
    """A graded row for --json: the report's columns and every check."""
    return {**row.as_dict(), "failure": row.failure.value if row.failure is not None else None,
            "checks": [check_dict(c) for c in row.checks]}


def with_progress(console: Console, total: int, label: str,
                  work: Callable[[Callable[[GradeRow], None]], list[T]],
                  quiet: bool = False) -> list[T]:
    """Run work(done_callback) under a progress bar with ETA on a terminal, plain lines
    elsewhere; nothing at all when quiet (--json: stdout holds the JSON only)."""
    if quiet:
        return work(lambda row: None)
    if console.is_terminal:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=console) as progress:
            task = progress.add_task(label, total=total)
            return work(lambda row: progress.advance(task))
    # One line per row whatever the name holds: "eve: pass\n\rmallory.c" never prints a line
    # "eve: pass" (escape.terminal_line shows its controls).
    return work(lambda row: print(f"{terminal_line(names.decodable(row.student))}: {row.status}", flush=True))
