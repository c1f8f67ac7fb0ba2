"""A score with partial credit, from a graded verdict and the points its spec gives. Pure.

Each check is worth its `points` on the main run and its `hidden_points` on each hidden run
(examples/README.md, "Points"). A passed check earns them; a failed one, or one that did not run
(the hidden runs of a program whose main run failed), earns nothing; an incomplete one could
not be judged here: its points are counted apart, never as zero without saying so.

A score keeps, per check and run, what became of its points (`items`): earned, lost or not
evaluated here, with why, so that a report, a feedback file and a gradebook say where every
point went.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..model import CheckResult
from .specs import OUTPUT_KINDS, Exercise
from .words import plural

# What became of one check's points on one run: earned (it passed), lost (it failed, or did
# not run), not evaluated (it could not be judged here: counted apart).
PointsOutcome = Literal["earned", "lost", "not_evaluated"]


@dataclass(frozen=True)
class CheckPoints:
    """One check's points on one run (hidden 0: the main run, N: hidden run N)."""

    check: int  # its [[check]] index in the spec
    hidden: int
    label: str
    worth: float
    outcome: PointsOutcome
    why: str = ""  # said when the outcome is not the check's own status ("counts once ...")


@dataclass(frozen=True)
class Score:
    earned: float
    possible: float
    not_evaluated: float = 0.0  # points of checks that could not be judged here
    items: tuple[CheckPoints, ...] = ()

    @property
    def evaluated(self) -> float:
        """The points this machine could judge: possible less those not evaluated here."""
        return self.possible - self.not_evaluated

    @property
    def lost(self) -> float:
        return self.evaluated - self.earned

    def __str__(self) -> str:
        """"7/10", "7/10, 2 points not evaluated here"."""
        text = f"{points(self.earned)}/{points(self.possible)}"
        if self.not_evaluated:
            text += f", {plural(self.not_evaluated, 'point')} not evaluated here"
        return text


def points(value: float) -> str:
    """2.0 -> "2", 0.5 -> "0.5", 1/3 -> "0.33": as people write marks."""
    return f"{round(value, 2):g}"


def possible(exercise: Exercise, hidden_sets: int) -> float:
    """What a submission can earn: every check on the main run, and the output checks on each
    hidden run."""
    main = sum(c.points for c in exercise.checks)
    hidden = sum(c.points_hidden for c in exercise.checks if c.kind in OUTPUT_KINDS)
    return main + hidden_sets * hidden


_OUTCOME: dict[str, PointsOutcome] = {"pass": "earned", "fail": "lost",
                                      "incomplete": "not_evaluated"}


def score(exercise: Exercise, checks: Sequence[CheckResult], hidden_sets: int) -> Score:
    """The score of a graded verdict: `checks` as grading left them (CheckResult.check names
    their [[check]]), `hidden_sets` the hidden argument sets the class ran with."""
    items: list[CheckPoints] = []
    for result in checks:
        spec = exercise.check_at(result.check)
        if spec is None or result.hidden > hidden_sets:
            continue  # idrrun's own rows are worth nothing
        worth = spec.points_hidden if result.hidden else spec.points
        items.append(CheckPoints(result.check, result.hidden, result.name, worth,
                                 _OUTCOME[result.status]))
    earned = sum(i.worth for i in items if i.outcome == "earned")
    not_evaluated = sum(i.worth for i in items if i.outcome == "not_evaluated")
    return Score(earned, possible(exercise, hidden_sets), not_evaluated, tuple(items))
