"""The timed checks judged relative to the solution (a `speed` check, a gpu_busy check with
`min_ratio`), over runs of both made in the grading (STYLE.md 27). Pure: the runs come from
the caller (checking.py's hook: her build again in its lane, the solution's the same way).

The solution's runs are kept for the grading, in this process, per build and arguments and
per GPU and driver (`SolutionRuns`): every student of a class is held to the same runs of the
solution, made on the GPU at hand (never an H100's on an H200, nor another driver's), and more
are made only when a student's figure needs them to be decided.

    judged(exercise, checks, yours, solution) -> checks with the relative ones measured
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

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


def judged(exercise: Exercise, checks: Sequence[CheckResult], yours: Sequence[Run],
           again_yours: Again, solution: Sequence[Run], again_solution: Again,
           how: Repeat = REPEAT) -> tuple[CheckResult, ...]:
    """The verdict's checks with each relative one judged over runs of hers and of the
    solution's, made until decided (checks/ratio.py): her first run's figures first, then her
    build's runs again and the solution's (both in their lanes, alone on their GPUs)."""
    mine = _Side(list(yours), again_yours)
    theirs = _Side(list(solution), again_solution)
    # A check her first run gives no figure for (no iteration count printed), or that only a
    # GPU can judge, stays as judged.
    kept = {c.check for c in checks if c.gpu_only and not c.hidden}
    measured = {spec.index: _measure(spec, mine, theirs, how) for spec in exercise.checks
                if relative(spec) and mine.figures(spec) and spec.index not in kept}
    return tuple(replace(measured[c.check], name=c.name) if c.check in measured and not c.hidden
                 else c for c in checks)
