"""A timed figure judged relative to the solution's (STYLE.md 27): the solution measured the
same way, on the same GPU, in the same grading, and the bound a ratio to it. Pure: the runs
are the caller's (idrrun/relative.py).

A share of GPU time or a run's time is a property of the GPU as much as of the program: the
solution keeps an H100 busy 68 % of its run and an H200 54 %. A bound written as a number on
one GPU is wrong on the next; a bound written as a ratio to the solution's figure, both
measured on the GPU at hand, is not. Both figures move from run to run, so each is a set of
runs, and their ratio a range:

    ratio   the median of your last `least` runs over the median of the solution's last ones
    range   the least and the most ratio those runs allow (the smallest of yours over the
            largest of the solution's, and the other way round)

`decide` judges the range against the bound: wholly on one side, it is decided once each side
made `least` runs, or at once where the range lies far from it (widened by a factor `far` both
ways, it is still on that side: a spinning port at 0.13x against 0.7x, a start file 66x the
solution's time against the scale's 10x; measure.Repeat.far says why 3); across it, more
runs are needed (`again`: of yours, of the solution's, or both, whichever spreads more) until
`most` of each were made, and then the check is not judged, its range said: never a coin flip,
and two copies of one program get one mark unless its figure is at the bound itself. A scale
(the `speed` check's points, full at one ratio and none at another, in steps) is judged the
same way, each step's edge a bound.

    decide(yours, solution, bound)          -> Decision
    scale_decide(yours, solution, scale)    -> ScaleDecision (a credit in steps)
    measure(first, again_yours, again_solution, judge, how) -> the runs until judged
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from .measure import REPEAT, Repeat, settled
from .words import plural

Side = Literal["at_least", "at_most"]
Status = Literal["pass", "fail", "again", "not_judged"]
More = Literal["yours", "solution", "both", ""]


@dataclass(frozen=True)
class Bound:
    """A bound written as a ratio to the solution's figure: yours at least (a share of GPU
    time) or at most (a time) `ratio` times the solution's."""

    ratio: float
    side: Side

    def holds(self, value: float) -> bool:
        return value >= self.ratio if self.side == "at_least" else value <= self.ratio

    def describe(self) -> str:
        sign = "≥" if self.side == "at_least" else "≤"
        return f"{sign} {self.ratio:g}× the solution's"


@dataclass(frozen=True)
class Range:
    """Yours beside the solution's: the ratio of the medians and what the last runs allow."""

    ratio: float
    low: float
    high: float
    runs: tuple[int, int]  # yours, the solution's

    def widened(self, how: Repeat) -> tuple[float, float]:
        """The range widened by the factor how.far both ways: what noise could not reach."""
        return self.low / how.far, self.high * how.far

    def shown(self) -> str:
        """"2.3×"; over several runs "2.3× (2.1–2.5× over 3 runs and 5 of the solution's)"."""
        if self.runs == (1, 1):
            return times(self.ratio)
        spread = "" if math.isclose(self.low, self.high) else \
            f"{times(self.low).rstrip('×')}–{times(self.high)} "
        return (f"{times(self.ratio)} ({spread}over {plural(self.runs[0], 'run')} and "
                f"{self.runs[1]} of the solution's)")


def times(value: float) -> str:
    """2.3×, 1.04×, 12.5×: a ratio as people write it."""
    return f"{value:.2f}×" if value < 10 else f"{value:.1f}×"




def window(samples: Sequence[float], how: Repeat) -> Sequence[float]:
    return samples[-how.least:] if len(samples) > how.least else samples


def ratio_range(yours: Sequence[float], solution: Sequence[float], how: Repeat = REPEAT) -> Range | None:
    """The ratio of yours to the solution's and its range over the last how.least runs of each;
    None where it has none (no runs, or a solution's figure of 0)."""
    if not yours or not solution:
        return None
    mine, theirs = window(yours, how), window(solution, how)
    if min(theirs) <= 0:
        return None
    return Range(statistics.median(mine) / statistics.median(theirs),
                 min(mine) / max(theirs), max(mine) / min(theirs), (len(yours), len(solution)))


def _spread(samples: Sequence[float], how: Repeat) -> float:
    last = window(samples, how)
    return max(last) / min(last) if min(last) > 0 else math.inf


def _more(yours: Sequence[float], solution: Sequence[float], how: Repeat) -> More:
    """Whose runs to make again: those still short of how.least, else the wider-spread side
    that may still run and has not settled, else the other; "" when none would help."""
    short = [side for side, runs in (("yours", yours), ("solution", solution)) if len(runs) < how.least]
    if len(short) == 2:
        return "both"
    if short:
        return "yours" if short[0] == "yours" else "solution"
    # A side whose last runs settled (measure.settled) would say the same again.
    room = [side for side, runs in (("yours", yours), ("solution", solution))
            if len(runs) < how.most and not settled(runs, how)]
    if not room:
        return ""
    if len(room) == 1:
        return "yours" if room[0] == "yours" else "solution"
    return "yours" if _spread(yours, how) >= _spread(solution, how) else "solution"


def _first(yours: Sequence[float], solution: Sequence[float]) -> More:
    """Where a ratio has no range: the side without a run first (one of each may decide a
    figure far from its bound), "" where both have runs (a solution's figure of 0)."""
    if yours and solution:
        return ""
    if not yours and not solution:
        return "both"
    return "solution" if yours else "yours"


@dataclass(frozen=True)
class Decision:
    status: Status
    range: Range | None
    more: More = ""  # whose runs to make again (status "again")


def decide(yours: Sequence[float], solution: Sequence[float], bound: Bound,
           how: Repeat = REPEAT, exact: bool = False) -> Decision:
    """Yours against the bound, relative to the solution's: decided once the range of the
    last runs lies on one side of it (an exact figure, one that does not depend on time, at
    once), else more runs, else not judged."""
    found = ratio_range(yours, solution, how)
    if found is None:
        more = _first(yours, solution)
        return Decision("again", None, more) if more else Decision("not_judged", None)
    ends = {bound.holds(found.low), bound.holds(found.high)}
    more = _more(yours, solution, how)
    far = {bound.holds(low) for low in found.widened(how)} == ends
    if len(ends) == 1 and (exact or min(found.runs) >= how.least or not more or far):
        return Decision("pass" if ends == {True} else "fail", found)
    return Decision("again", found, more) if more else Decision("not_judged", found)


@dataclass(frozen=True)
class Scale:
    """Points for a ratio at most (a time): all of them at `full` or below, none at `none` or
    above, in `steps` equal steps between (log-linear: 2x slower costs the same everywhere)."""

    full: float
    none: float
    steps: int = 4

    def credit(self, ratio: float) -> float:
        """The share of the points a ratio earns, down to its step."""
        if ratio <= self.full:
            return 1.0
        if ratio >= self.none:
            return 0.0
        exact = 1.0 - math.log(ratio / self.full) / math.log(self.none / self.full)
        return math.floor(exact * self.steps + 1e-9) / self.steps

    def describe(self) -> str:
        return f"all at ≤ {self.full:g}×, none at ≥ {self.none:g}× the solution's"


@dataclass(frozen=True)
class ScaleDecision:
    status: Status  # "pass": a credit decided (a share of the points: `credit`)
    range: Range | None
    credit: float = 0.0
    more: More = ""
    across: bool = False  # the range crosses one step of the scale: the better one's credit


def scale_decide(yours: Sequence[float], solution: Sequence[float], scale: Scale,
                 how: Repeat = REPEAT) -> ScaleDecision:
    """The credit of yours on the scale, relative to the solution's: decided once both ends
    of the range earn the same step, else more runs; when the runs are done, a range across
    one step earns the better step; else not judged."""
    found = ratio_range(yours, solution, how)
    if found is None:
        more = _first(yours, solution)
        return ScaleDecision("again", None, more=more) if more else ScaleDecision("not_judged", None)
    low, high = scale.credit(found.high), scale.credit(found.low)
    more = _more(yours, solution, how)
    far = {scale.credit(end) for end in found.widened(how)} == {low}
    if low == high and (min(found.runs) >= how.least or more == "" or far):
        return ScaleDecision("pass", found, low)
    if more:
        return ScaleDecision("again", found, more=more)
    if high - low <= 1.0 / scale.steps + 1e-9 and min(found.runs) >= how.least:
        # The runs are done and their range crosses one step: the better step's points (noise
        # never costs points; two steps or more apart is no figure), said so (across).
        return ScaleDecision("pass", found, high, across=True)
    return ScaleDecision("not_judged", found)


# Another run of yours or of the solution's: its figure, or why none could be had.
Again = Callable[[], "float | str"]
Judge = Callable[[Sequence[float], Sequence[float]], "Decision | ScaleDecision"]


@dataclass(frozen=True)
class Measured:
    """The runs a relative figure took, and what they decided."""

    yours: tuple[float, ...]
    solution: tuple[float, ...]
    decision: Decision | ScaleDecision
    stopped: str = ""  # why the runs stopped before deciding (a run that failed)


def measure(yours: Sequence[float], solution: Sequence[float], again_yours: Again,
            again_solution: Again, judge: Judge) -> Measured:
    """The runs made until `judge` decides (or says they cannot): each `again` of the side
    it names runs once more."""
    mine, theirs = list(yours), list(solution)
    while True:
        decision = judge(mine, theirs)
        if decision.status != "again":
            return Measured(tuple(mine), tuple(theirs), decision)
        for side, runs, again in (("yours", mine, again_yours), ("solution", theirs, again_solution)):
            if decision.more in (side, "both"):
                got = again()
                if isinstance(got, str):
                    return Measured(tuple(mine), tuple(theirs), judge_final(judge, mine, theirs), got)
                runs.append(got)


def judge_final(judge: Judge, yours: Sequence[float], solution: Sequence[float]) -> Decision | ScaleDecision:
    """What the runs made decide when no more can be made: "again" is "not judged"."""
    decision = judge(yours, solution)
    if decision.status != "again":
        return decision
    if isinstance(decision, ScaleDecision):
        return ScaleDecision("not_judged", decision.range)
    return Decision("not_judged", decision.range)
