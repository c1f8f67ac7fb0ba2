"""Timed figures are measured, not sampled once. Pure: the runs are the caller's (checking.py).

A timed check's figure (specs.TIMED_KINDS: a share of GPU time, a rate) moves from run to run
even alone on its GPU: one sample is a draw, not a measurement. So the run is repeated until
the figure is stable — its last REPEAT.least values within ±REPEAT.rel_tol of their median, or
within ±REPEAT.abs_tol for a figure near zero — or REPEAT.most runs were made. The median is
the figure the check compares; the spread is shown with it ("59 % (median of 3 runs: 57–61 %)").
A figure that does not settle decides nothing unless every run fell on the same side of the
bound: noise never fails a program (trace_kinds.measured_result). Where the check's bound is given,
the runs also stop once REPEAT.least of them are all clear of it by more than the tolerance:
the verdict is decided, and more runs (alone on a GPU the class waits for) could not change it.
A figure far from its bound (REPEAT.far: a factor 3 beyond it, `far_from`) is decided by the
runs at hand, one included: the GPU's noise is of tens of percent, not of a factor 3.

A figure that does not depend on time (the program never used the GPU: a share of 0 by
definition) is `exact`: one run says it all.

    repeat(first, again, how, bounds) -> {check label: Measured}
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
    # A figure this factor beyond its bound is decided on the runs made, one included: alone on
    # an H200 the solution's own runs of profile_cg spread 0.81-1.24x of their median, and the
    # slowest first run of a machine measured was 2.5x the next ones (5.7 s against 2.3 s:
    # checking.solution_times); a factor 3 is neither.
    far: float = 3.0

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
    bound: float | None = None  # the check's bound, where the runs could stop once clear of it

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

    @property
    def clear(self) -> bool:
        """Every run is clear of the bound (`clear_of`), or far from it (`far_from`): the
        verdict does not hang on noise."""
        return self.bound is not None and (clear_of(self.samples, self.bound, self.how) or
                                           far_from(self.samples, self.bound, self.how))


def _room(samples: Sequence[float], how: Repeat) -> float:
    return max(how.abs_tol, how.rel_tol * abs(statistics.median(samples)))


def settled(samples: Sequence[float], how: Repeat = REPEAT) -> bool:
    """The last `how.least` values lie within the tolerance of their median."""
    if len(samples) < how.least:
        return False
    last = samples[-how.least:]
    middle = statistics.median(last)
    room = _room(last, how)
    return max(last) - middle <= room and middle - min(last) <= room


def clear_of(samples: Sequence[float], bound: float, how: Repeat = REPEAT) -> bool:
    """At least `how.least` values, all on one side of `bound` and each farther from it than
    the tolerance (of their median): "61 %, 49 %, 63 % against 25 %" is a pass whatever the
    spread; "27 %, 31 %, 45 %" is not clear."""
    if len(samples) < how.least:
        return False
    room = _room(samples, how)
    return all(v - bound > room for v in samples) or all(bound - v > room for v in samples)


def far_from(samples: Sequence[float], bound: float, how: Repeat = REPEAT) -> bool:
    """Every value lies beyond `bound` by more than a factor how.far, on one side (and by
    more than the absolute tolerance, for a figure near zero): "8 % against 25 %" is a fail
    on one run, "61 % against 25 %" is not yet a pass."""
    if not samples or bound <= 0:
        return False
    above = all(v >= how.far * bound and v - bound > how.abs_tol for v in samples)
    below = all(v * how.far <= bound and bound - v > how.abs_tol for v in samples)
    return above or below


# Another run: each timed check's figure by its label, or why it could not be had (its run
# failed, it left no trace).
Again = Callable[[], "Mapping[str, Figure] | str"]


def repeat(first: Mapping[str, Figure], again: Again, how: Repeat = REPEAT,
           bounds: Mapping[str, float] | None = None) -> dict[str, Measured]:
    """The figures of `first` (one run's), measured: `again()` runs once more while one of
    them has neither settled nor (where `bounds` gives its check's bound) cleared its bound or
    lain far from it, and fewer than `how.most` runs were made."""
    samples = {label: [f.value] for label, f in first.items()}
    exact = {label: f.exact for label, f in first.items()}
    bound = dict(bounds or {})

    def done(label: str) -> bool:
        values = samples[label]
        return exact[label] or settled(values, how) or label in bound and (
            clear_of(values, bound[label], how) or far_from(values, bound[label], how))

    stopped = ""
    runs = 1
    while runs < how.most and not all(done(label) for label in samples):
        figures = again()
        runs += 1
        if isinstance(figures, str):
            stopped = figures
            break
        for label, values in samples.items():
            if label in figures:
                values.append(figures[label].value)
    return {label: Measured(tuple(values), exact[label], stopped, how, bound.get(label))
            for label, values in samples.items()}
