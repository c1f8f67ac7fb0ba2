"""A score with partial credit, from a graded verdict and the points its spec gives. Pure.

Each check is worth its `points` on the main run and its `hidden_points` on each hidden run
(examples/README.md, "Points"). A passed check earns them; a failed one, or one that did not run
(the hidden runs of a program whose main run failed), earns nothing; an incomplete one could
not be judged here: its points are counted apart, never as zero without saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import CheckResult
from .specs import OUTPUT_KINDS, Exercise


@dataclass(frozen=True)
class Score:
    earned: float
    possible: float
    not_evaluated: float = 0.0  # points of checks that could not be judged here

    def __str__(self) -> str:
        """"7/10", "7/10, 2 points not evaluated here"."""
        text = f"{points(self.earned)}/{points(self.possible)}"
        if self.not_evaluated:
            text += f", {points(self.not_evaluated)} points not evaluated here"
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


def score(exercise: Exercise, checks: Sequence[CheckResult], hidden_sets: int) -> Score:
    """The score of a graded verdict: `checks` as grading left them (CheckResult.check names
    their [[check]]), `hidden_sets` the hidden argument sets the class ran with."""
    earned = not_evaluated = 0.0
    for result in checks:
        spec = exercise.check_at(result.check)
        if spec is None or result.hidden > hidden_sets:
            continue  # idrrun's own rows are worth nothing
        worth = spec.points_hidden if result.hidden else spec.points
        if result.status == "pass":
            earned += worth
        elif result.status == "incomplete":
            not_evaluated += worth
    return Score(earned, possible(exercise, hidden_sets), not_evaluated)
