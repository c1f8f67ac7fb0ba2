"""Timed figures are measured, not sampled once. Pure: the runs are the caller's (checking.py).

A timed check's figure (specs.TIMED_KINDS: a share of GPU time, a rate) moves from run to run
even alone on its GPU: one sample is a draw, not a measurement. So the run is repeated until
the figure is stable — its last REPEAT.least values within ±REPEAT.rel_tol of their median, or
within ±REPEAT.abs_tol for a figure near zero — or REPEAT.most runs were made. The median is
the figure the check compares; the spread is shown with it ("59 % (median of 3 runs: 57–61 %)").
A figure that does not settle decides nothing unless every run fell on the same side of the
bound: noise never fails a program (kinds.measured_result).

A figure that does not depend on time (the program never used the GPU: a share of 0 by
definition) is `exact`: one run says it all.

    repeat(first, again, how) -> {check label: Measured}
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Repeat:
    """How a timed figure is measured: the tolerance it must settle within, the runs it takes."""

    least: int = 3
    most: int = 7
    rel_tol: float = 0.10
    abs_tol: float = 0.02

    def describe(self) -> str:
        return f"±{100 * self.rel_tol:.0f} % of its median over {self.least} runs"


# The one measurement policy of every timed check (the thresholds in the specs were measured
# with it: benchmarks/timed_figures.py).
REPEAT = Repeat()


@dataclass(frozen=True)
class Figure:
    """One run's value of a timed figure."""

    value: float
    exact: bool = False  # it did not depend on time (nothing ran on the GPU)


@dataclass(frozen=True)
class Measured:
    """A timed figure over the runs that measured it."""

    samples: tuple[float, ...]
    exact: bool = False
    stopped: str = ""  # why the runs stopped before the figure settled (a run that failed)
    how: Repeat = REPEAT

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    @property
    def stable(self) -> bool:
        return self.exact or settled(self.samples, self.how)


def settled(samples: Sequence[float], how: Repeat = REPEAT) -> bool:
    """The last `how.least` values lie within the tolerance of their median."""
    if len(samples) < how.least:
        return False
    last = samples[-how.least:]
    middle = statistics.median(last)
    room = max(how.abs_tol, how.rel_tol * abs(middle))
    return max(last) - middle <= room and middle - min(last) <= room


# Another run: each timed check's figure by its label, or why it could not be had (its run
# failed, it left no trace).
Again = Callable[[], "Mapping[str, Figure] | str"]


def repeat(first: Mapping[str, Figure], again: Again, how: Repeat = REPEAT) -> dict[str, Measured]:
    """The figures of `first` (one run's), measured: `again()` runs once more while one of
    them has not settled and fewer than `how.most` runs were made."""
    samples = {label: [f.value] for label, f in first.items()}
    exact = {label: f.exact for label, f in first.items()}
    stopped = ""
    runs = 1
    while runs < how.most and any(not exact[k] and not settled(v, how) for k, v in samples.items()):
        figures = again()
        runs += 1
        if isinstance(figures, str):
            stopped = figures
            break
        for label, values in samples.items():
            if label in figures:
                values.append(figures[label].value)
    return {label: Measured(tuple(values), exact[label], stopped, how)
            for label, values in samples.items()}
