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

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..model import CheckResult
from . import registry, specs, words
from .specs import Exercise
from .spec_values import CheckSpec

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
    """How much of a check's points count: the share that holds (every check of its
    counts_when passed on the main run, and its part of each of its counts_in_part that did,
    what those wait for holding in turn), the share that could not be judged here; the checks
    that fail (or could not be judged) and keep the rest from counting."""

    holds: float = 1.0
    unknown: float = 0.0
    failing: tuple[CheckSpec, ...] = ()
    unknowns: tuple[CheckSpec, ...] = ()

    @property
    def lost(self) -> float:
        return max(0.0, 1.0 - self.holds - self.unknown)


def _dep_gate(exercise: Exercise, dep: CheckSpec, main: Mapping[int, CheckResult]) -> _Gate:
    """What one check waited for gives: its own gate when it passed on the main run, nothing
    when it failed (or did not run), the unknown when it could not be judged here."""
    result = main.get(dep.index)
    status = result.status if result is not None else "fail"
    if status == "pass":
        return _gate(exercise, dep, main)
    if status == "incomplete":
        return _Gate(0.0, 1.0, unknowns=(dep,))
    return _Gate(0.0, 0.0, failing=(dep,))


def _specs(exercise: Exercise, indices: Sequence[int]) -> list[CheckSpec]:
    return [d for index in indices if (d := exercise.check_at(index)) is not None]


def _gate(exercise: Exercise, spec: CheckSpec, main: Mapping[int, CheckResult]) -> _Gate:
    """counts_when: all of them hold or nothing counts (a failed one decides, else one that
    could not be judged here); counts_in_part: each holds its equal part (a half port that
    runs one of its two hot loops on the device earns half). Specs refuse cycles."""
    for dep in _specs(exercise, spec.counts_when):
        inner = _dep_gate(exercise, dep, main)
        if inner.lost > _EPSILON:
            return _Gate(0.0, 0.0, inner.failing or (dep,))
    for dep in _specs(exercise, spec.counts_when):
        inner = _dep_gate(exercise, dep, main)
        if inner.unknown > _EPSILON:
            return _Gate(0.0, 1.0, unknowns=inner.unknowns or (dep,))
    parts = [_dep_gate(exercise, dep, main) for dep in _specs(exercise, spec.counts_in_part)]
    if not parts:
        return _Gate()
    n = len(parts)
    return _Gate(sum(p.holds for p in parts) / n, sum(p.unknown for p in parts) / n,
                 tuple(dict.fromkeys(d for p in parts for d in p.failing)),
                 tuple(dict.fromkeys(d for p in parts for d in p.unknowns)))


def cannot_count(exercise: Exercise, checks: Sequence[CheckResult]) -> dict[int, tuple[CheckSpec, ...]]:
    """The checks none of whose points can count on this main run, whatever they measure: by
    [[check]] index, the checks that failed and keep them from counting (a counts_when or every
    counts_in_part failed, none of them a timed check, whose figure more runs could change).
    Grading does not measure those further (checking.py's _relative): a start file's speed
    earns nothing while its loops are not on the device, however long it takes."""
    main = {r.check: r for r in checks if r.check >= 0 and not r.hidden}
    timed = registry.timed_names()
    out: dict[int, tuple[CheckSpec, ...]] = {}
    for spec in exercise.checks:
        if not spec.counts_when and not spec.counts_in_part:
            continue
        gate = _gate(exercise, spec, main)
        if gate.holds <= _EPSILON and gate.unknown <= _EPSILON and gate.failing and \
                not any(d.kind in timed for d in gate.failing):
            out[spec.index] = gate.failing
    return out


def waits_said(waits: Sequence[CheckSpec]) -> str:
    """What a check's points wait for, in words: "the saxpy loop runs in a compute region"."""
    return words.listing([words.holds(d.kind, d.label, d.minimum) for d in waits])


def _counts_once(part: float, worth: float, label: str, waits: Sequence[CheckSpec],
                 unknown: bool) -> str:
    """"3 points for pi count once the pi loop runs in a compute region"; "1.5 of the 3 points
    for y_last count once the saxpy loop runs in a compute region"."""
    said = waits_said(waits)
    one = part == 1
    share = "" if abs(part - worth) < _EPSILON else f" of the {points(worth)}"
    text = (f"{points(part)}{share} {'point' if one and not share else 'points'} for {label} "
            f"{'counts' if one and not share else 'count'} once {said}")
    return text + ", which could not be judged here" if unknown else text


_EPSILON = 1e-9


def _parts(spec: CheckSpec, hidden: int, label: str, worth: float, gate: _Gate) -> list[CheckPoints]:
    """A passed check's points as its gate lets them count: earned, lost (what fails said),
    not evaluated (what could not be judged here said)."""
    out = [CheckPoints(spec.index, hidden, label, worth * gate.holds, "earned")] \
        if gate.holds > _EPSILON else []
    if gate.lost > _EPSILON:
        out.append(CheckPoints(spec.index, hidden, label, worth * gate.lost, "lost",
                               _counts_once(worth * gate.lost, worth, spec.label,
                                            gate.failing or gate.unknowns, False)))
    if gate.unknown > _EPSILON:
        out.append(CheckPoints(spec.index, hidden, label, worth * gate.unknown, "not_evaluated",
                               _counts_once(worth * gate.unknown, worth, spec.label,
                                            gate.unknowns, True)))
    return out


def _items(spec: CheckSpec, hidden: int, result: CheckResult | None, gate: _Gate,
           built: bool) -> list[CheckPoints]:
    """What became of one check's points on one run."""
    worth = spec.points_hidden if hidden else spec.points
    label = result.name if result is not None else \
        spec.label + (f" (hidden run {hidden})" if hidden else "")
    if result is None:
        why = NOT_BUILT if not built else HIDDEN_NOT_RUN if hidden else NOT_JUDGED
        return [CheckPoints(spec.index, hidden, label, worth, "lost", why)]
    outcome = _OUTCOME[result.status]
    if outcome != "earned" or worth <= 0:
        return [CheckPoints(spec.index, hidden, label, worth, outcome)]
    # A check that earns its points in part (a speed check's step of its scale): the rest lost.
    credit = result.credit if result.credit is not None else 1.0
    out = [CheckPoints(spec.index, hidden, label, worth * (1 - credit), "lost",
                       f"{points(worth * (1 - credit))} of the {points(worth)} points for "
                       f"{spec.label} lost: {result.reason}")] if credit < 1 - _EPSILON else []
    if gate.holds < 1.0 - _EPSILON:
        return out + _parts(spec, hidden, label, worth * credit, gate)
    return out + [CheckPoints(spec.index, hidden, label, worth * credit, "earned")]


def result_kind(name: str) -> bool:
    """A kind that judges the result of the work asked: what the program prints or writes, its
    exit aside (exit_ok says it ran to its end, not that it is right)."""
    kind = registry.get(name)
    return kind is not None and kind.reads == "output" and kind.name != "exit_ok"


WRONG_RESULT = ("a result that is wrong ({which}) earns at most {share} of the points: {lost} "
                "of the {earned} earned are lost (wrong_result)")


def _capped(exercise: Exercise, items: list[CheckPoints], checks: Sequence[CheckResult],
            evaluated: float) -> list[CheckPoints]:
    """The items of a submission whose result is wrong (a check of what it prints or writes
    failed, on any run), its earned points brought down to the exercise's wrong_result share
    of those evaluated here, each earned item in proportion: a full port with a wrong answer
    earns less than a right one with a loop left on the host."""
    wrong = [r for r in checks if r.status == "fail" and r.check >= 0 and
             (spec := exercise.check_at(r.check)) is not None and result_kind(spec.kind)]
    earned = sum(i.worth for i in items if i.outcome == "earned")
    most = exercise.wrong_result * evaluated
    if not wrong or earned <= most + _EPSILON:
        return items
    keep = most / earned
    which = words.listing(list(dict.fromkeys(exercise.check_at(r.check).label  # type: ignore[union-attr]
                                             for r in wrong)))
    why = WRONG_RESULT.format(which=which, share=f"{100 * exercise.wrong_result:.0f} %",
                              lost=points(earned - most), earned=points(earned))
    out: list[CheckPoints] = []
    for i in items:
        if i.outcome != "earned":
            out.append(i)
            continue
        out.append(dataclasses.replace(i, worth=i.worth * keep))
        out.append(dataclasses.replace(i, worth=i.worth * (1 - keep), outcome="lost", why=why))
    return out


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
        items += _items(spec, 0, main.get(spec.index), gate, built)
        if _hidden_runs(spec):
            for h in range(1, hidden_sets + 1):
                items += _items(spec, h, runs.get((spec.index, h)), gate, built)
    most = possible(exercise, hidden_sets)
    not_evaluated = sum(i.worth for i in items if i.outcome == "not_evaluated")
    items = _capped(exercise, items, [*main.values(), *runs.values()], most - not_evaluated)
    # Parts of points (counts_in_part, a wrong result's bound) add up to what they split,
    # not to a float's last digit.
    earned = round(sum(i.worth for i in items if i.outcome == "earned"), 9)
    return Score(earned, most, round(not_evaluated, 9), tuple(items))
