"""What the commands share: the parser that raises UsageError, job counts, the console, the
progress display."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..display import neutralise
from ..errors import UsageError
from ..grading.classroom import GradeRow

T = TypeVar("T")


def jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("expected at least 1")
    return value


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def console() -> Console:
    return Console(stderr=False, highlight=False)


def with_progress(console: Console, total: int, label: str,
                   work: Callable[[Callable[[GradeRow], None]], list[T]]) -> list[T]:
    """Run work(done_callback) under a progress bar with ETA on a terminal, plain lines elsewhere."""
    if console.is_terminal:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=console) as progress:
            task = progress.add_task(label, total=total)
            return work(lambda row: progress.advance(task))
    return work(lambda row: print(neutralise(f"{row.student}: {row.status}"), flush=True))


