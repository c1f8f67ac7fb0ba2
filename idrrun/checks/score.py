"""A score with partial credit, from a graded verdict and the points its spec gives. Pure.

Each check is worth its `points` on the main run and its `hidden_points` on each hidden run
(examples/README.md, "Points"). A passed check earns them; a failed one, or one that did not run
(the hidden runs of a program whose main run failed, every check of a program that did not
build), earns nothing; an incomplete one could not be judged here: its points are counted apart,
never as zero without saying so. A check's points may wait for others (`counts_when`): a passed
check counts only once they pass on the main run, and is not evaluated while one of them could
not be judged here (a GPU-trace check on a host): the points follow what can be judged.

A score keeps, per check and run, what became of its points (`items`): earned, lost or not
evaluated here, with why, so that a report, a feedback file and a gradebook say where every
point went.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..model import CheckResult
from . import registry, specs, words
from .specs import CheckSpec, Exercise

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
            text += f", {words.plural(self.not_evaluated, 'point')} not evaluated here"
        return text


def points(value: float) -> str:
    """2.0 -> "2", 0.5 -> "0.5", 1/3 -> "0.33": as people write marks."""
    return f"{round(value, 2):g}"


def _hidden_runs(check: CheckSpec) -> bool:
    kind = registry.get(check.kind)
    return kind is not None and kind.hidden_runs


def possible(exercise: Exercise, hidden_sets: int) -> float:
    """What a submission can earn: every check on the main run, and the output checks on each
    hidden run."""
    main = sum(c.points for c in exercise.checks)
    hidden = sum(c.points_hidden for c in exercise.checks if _hidden_runs(c))
    return main + hidden_sets * hidden


_OUTCOME: dict[str, PointsOutcome] = {"pass": "earned", "fail": "lost",
                                      "incomplete": "not_evaluated"}
NOT_BUILT = "the program did not build: no check judged it"
NOT_JUDGED = "the check did not judge this run"
HIDDEN_NOT_RUN = "not run: the hidden runs follow a main run that ends normally"


@dataclass(frozen=True)
class _Gate:
    """Whether a check's points count (counts_when): every check it waits for passed on the
    main run ("pass"), one failed ("fail"), or one could not be judged here ("incomplete");
    `on` is the check that decided it."""

    status: str
    on: CheckSpec | None = None


def _gate(exercise: Exercise, spec: CheckSpec, main: Mapping[int, CheckResult]) -> _Gate:
    """A check waited for holds when it passed and what it waits for holds in turn; a failed
    one decides, else an incomplete one (specs refuse cycles)."""
    gate = _Gate("pass")
    for index in spec.counts_when:
        dep = exercise.check_at(index)
        if dep is None:
            continue
        result = main.get(index)
        status = result.status if result is not None else "fail"
        inner = _gate(exercise, dep, main) if status == "pass" else _Gate(status, dep)
        if inner.status == "fail":
            return inner
        if inner.status == "incomplete" and gate.status == "pass":
            gate = inner
    return gate


def _counts_once(worth: float, label: str, gate: _Gate) -> str:
    """"3 points for pi count once the saxpy loop runs in a compute region"."""
    assert gate.on is not None
    dep = gate.on
    said = words.holds(dep.kind, dep.label, dep.minimum)
    one = worth == 1
    text = (f"{points(worth)} {'point' if one else 'points'} for {label} "
            f"{'counts' if one else 'count'} once {said}")
    return text if gate.status == "fail" else text + ", which could not be judged here"


def _item(spec: CheckSpec, hidden: int, result: CheckResult | None, gate: _Gate,
          built: bool) -> CheckPoints:
    """What became of one check's points on one run."""
    worth = spec.points_hidden if hidden else spec.points
    label = result.name if result is not None else \
        spec.label + (f" (hidden run {hidden})" if hidden else "")
    if result is None:
        why = NOT_BUILT if not built else HIDDEN_NOT_RUN if hidden else NOT_JUDGED
        return CheckPoints(spec.index, hidden, label, worth, "lost", why)
    outcome = _OUTCOME[result.status]
    if outcome == "earned" and gate.status != "pass":
        outcome = "lost" if gate.status == "fail" else "not_evaluated"
        return CheckPoints(spec.index, hidden, label, worth, outcome,
                           _counts_once(worth, spec.label, gate))
    return CheckPoints(spec.index, hidden, label, worth, outcome)


def score(exercise: Exercise, checks: Sequence[CheckResult], hidden_sets: int) -> Score:
    """The score of a graded verdict: `checks` as grading left them (CheckResult.check names
    their [[check]]), `hidden_sets` the hidden argument sets the class ran with. Every check
    has an item per run it is worth points on: a check with no result (the program did not
    build, the hidden runs of a main run that failed) is lost, and says why; a passed check
    whose counts_when does not hold is lost (or not evaluated, when what it waits for could
    not be judged here), and says what it waits for."""
    main = {r.check: r for r in checks if r.check >= 0 and not r.hidden}
    runs = {(r.check, r.hidden): r for r in checks if r.check >= 0 and 0 < r.hidden <= hidden_sets}
    built = not any(r.kind == specs.BUILD_ROW and r.status == "fail" for r in checks)
    items: list[CheckPoints] = []
    for spec in exercise.checks:
        gate = _gate(exercise, spec, main)
        items.append(_item(spec, 0, main.get(spec.index), gate, built))
        if _hidden_runs(spec):
            items += [_item(spec, h, runs.get((spec.index, h)), gate, built)
                      for h in range(1, hidden_sets + 1)]
    earned = sum(i.worth for i in items if i.outcome == "earned")
    not_evaluated = sum(i.worth for i in items if i.outcome == "not_evaluated")
    return Score(earned, possible(exercise, hidden_sets), not_evaluated, tuple(items))
