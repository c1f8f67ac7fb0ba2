"""The timed checks judged relative to the solution (a `speed` check, a gpu_busy check with
`min_ratio`), over runs of both made in the grading (STYLE.md 27). Pure: the runs come from
the caller (checking.py's hook: her build again in its lane, the solution's the same way).

The solution's runs are kept for the grading, in this process, per build and arguments and
per GPU and driver (`SolutionRuns`): every student of a class is held to the same runs of the
solution, made on the GPU at hand (never an H100's on an H200, nor another driver's), and more
are made only when a student's figure needs them to be decided.

Identical work is measured once (`Shared`): the timed figures of a build that another row of
the grading already measured (the same build, files, arguments, GPU and driver: the caller's
key) are that row's, so that identical submissions get one mark and the GPU does not measure
them again.

    measured(exercise, checks, yours, again_yours, solution, again_solution)
                                -> the relative checks measured, by their [[check]]'s index
    applied(checks, measured)   -> the verdict's checks with those results (a Shared record's)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from ..model import CheckResult
from . import ratio, trace_kinds
from .measure import REPEAT, Repeat
from .specs import Exercise
from .spec_values import CheckSpec


def relative(spec: CheckSpec) -> bool:
    """A check judged against the solution's figure measured the same way."""
    return spec.kind == "speed" or spec.min_ratio is not None


@dataclass(frozen=True)
class Run:
    """What one run says for the relative checks: its time, its output (an iteration count),
    its trace's figures (None: no trace)."""

    seconds: float
    output: str
    values: Mapping[str, float] | None

    def figure(self, spec: CheckSpec) -> float | None:
        """This run's figure for the check: its time (per iteration where the spec counts
        them), its share of GPU time; None where it has none."""
        if spec.kind == "speed":
            return trace_kinds.per_run(spec, self.seconds, self.output, self.values)
        if self.values is None:
            return None
        return self.values.get("gpu_busy", 0.0)


# Another run, or why none could be had.
Again = Callable[[], "Run | str"]
NO_FIGURE = "a run left no figure to judge (no GPU trace, or no iteration count printed)"


class SolutionRuns:
    """The solution's runs of one grading, per key (its build, its arguments, the GPU and its
    driver): a list that grows when a student's figure needs more, shared by every row."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, ...], list[Run]] = {}
        self._lock = threading.Lock()

    def runs(self, key: tuple[str, ...]) -> list[Run]:
        with self._lock:
            return list(self._runs.get(key, ()))

    def add(self, key: tuple[str, ...], run: Run) -> None:
        with self._lock:
            self._runs.setdefault(key, []).append(run)


T = TypeVar("T")


class Turns:
    """One holder at a time per key: a grading's rows of identical work go through their timed
    steps in turn (checking.py), the first measuring, a later one finding its figures (Shared,
    whose measures take the same turns). None: no turn (work nothing shares)."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, ...], threading.Lock] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def turn(self, key: tuple[str, ...] | None) -> Iterator[None]:
        if key is None:
            yield
            return
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            yield


class Shared(Generic[T]):
    """What the first row of a key measured, for every row of that key (identical work: its
    build, its files, its arguments, the GPU and its driver, as the caller keys it): the
    first measures under the key's own lock; a row of the same key that comes meanwhile waits
    for it (measuring again would make a second mark of the same work), and every later one
    takes its record at once. A measure that gives None is not kept (the next row measures)."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, ...], T] = {}
        self._turns = Turns()
        self._guard = threading.Lock()

    def known(self, key: tuple[str, ...]) -> bool:
        with self._guard:
            return key in self._found

    def once(self, key: tuple[str, ...], measure: Callable[[], T | None]) -> T | None:
        with self._turns.turn(key):
            with self._guard:
                if key in self._found:
                    return self._found[key]
            made = measure()
            if made is not None:
                with self._guard:
                    self._found[key] = made
            return made


@dataclass
class _Side:
    """The runs of one side a check reads, and how to have one more."""

    runs: list[Run]
    again: Again
    stopped: str = ""

    def figures(self, spec: CheckSpec) -> list[float]:
        return [f for r in self.runs if (f := r.figure(spec)) is not None]

    def more(self, spec: CheckSpec, seen: int) -> float | str:
        """The check's figure of a run it has not read yet (one made for another check, else a
        new one)."""
        figures = self.figures(spec)
        if len(figures) > seen:
            return figures[seen]
        got = self.again()
        if isinstance(got, str):
            self.stopped = got
            return got
        self.runs.append(got)
        figure = got.figure(spec)
        if figure is None:
            self.stopped = NO_FIGURE
            return NO_FIGURE
        return figure


def _measure(spec: CheckSpec, yours: _Side, solution: _Side, how: Repeat) -> CheckResult:
    """One relative check over the runs both sides have, made again until decided."""
    mine, theirs = yours.figures(spec), solution.figures(spec)

    def judge(a: Sequence[float], b: Sequence[float]) -> ratio.Decision | ratio.ScaleDecision:
        if spec.kind == "speed":
            assert spec.scale is not None
            return ratio.scale_decide(a, b, ratio.Scale(*spec.scale), how)
        assert spec.min_ratio is not None
        return ratio.decide(a, b, ratio.Bound(spec.min_ratio, "at_least"), how, exact=_exact(yours))

    measured = ratio.measure(mine, theirs, lambda: yours.more(spec, len(yours.figures(spec))),
                             lambda: solution.more(spec, len(solution.figures(spec))), judge)
    stopped = measured.stopped or yours.stopped or solution.stopped
    if spec.kind == "speed":
        return trace_kinds.speed_result(spec, measured.yours, measured.solution, how, stopped)
    return trace_kinds.relative_result(spec, measured.yours, measured.solution, how,
                                       exact=_exact(yours), stopped=stopped)


def _exact(side: _Side) -> bool:
    """Her first run put nothing on the GPU: a share of 0, one run says it."""
    values = side.runs[0].values if side.runs else None
    return values is not None and not values.get("kernels") and not values.get("bytes_moved")


def _no_more() -> str:
    return "not run again: its points cannot count"


# Said of a relative check whose points cannot count on this run (score.cannot_count).
NOT_COUNTED = ("one run: not measured further, its points count only once {which}, which "
               "failed here")


def measured(exercise: Exercise, checks: Sequence[CheckResult], yours: Sequence[Run],
             again_yours: Again, solution: Sequence[Run], again_solution: Again,
             how: Repeat = REPEAT,
             uncounted: Mapping[int, str] | None = None) -> dict[int, CheckResult]:
    """Each relative check judged over runs of hers and of the solution's, made until decided
    (checks/ratio.py), by its [[check]]'s index: her first run's figures first, then her
    build's runs again and the solution's (both in their lanes, alone on their GPUs).
    `uncounted`: the checks whose points cannot count on this run, by index, with the failed
    checks that keep them from counting in words: they stay as her first run judged them,
    said so (runs alone on the GPU could not change her marks)."""
    mine = _Side(list(yours), again_yours)
    theirs = _Side(list(solution), again_solution)
    # A check her first run gives no figure for (no iteration count printed), or that only a
    # GPU can judge, stays as judged.
    kept = {c.check for c in checks if c.gpu_only and not c.hidden}
    out: dict[int, CheckResult] = {}
    for spec in exercise.checks:
        if not relative(spec) or not mine.figures(spec) or spec.index in kept:
            continue
        if uncounted and spec.index in uncounted:
            # Her first run against one of the solution's (the grading's, shared by the class).
            once = _measure(spec, _Side(mine.runs[:1], _no_more), theirs, trace_kinds.ONE_RUN)
            note = NOT_COUNTED.format(which=uncounted[spec.index])
            out[spec.index] = replace(once, reason=f"{once.reason} ({note})" if once.reason else note)
            continue
        out[spec.index] = _measure(spec, mine, theirs, how)
    return out


def applied(checks: Sequence[CheckResult], found: Mapping[int, CheckResult]) -> tuple[CheckResult, ...]:
    """The verdict's checks with each public relative one as `measured` judged it."""
    return tuple(replace(found[c.check], name=c.name) if c.check in found and not c.hidden
                 else c for c in checks)
