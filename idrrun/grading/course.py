"""The course's own check: every solution passes (its output held to the reference values,
authoring/references.py, where the course has them), every start file builds and fails, and
with --ladder each exercise's near-misses score in a teacher's order (ladder.py). The course's
copies and its reference values are authoring's (idrrun/authoring/)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar


from ..checks import reference, spec_fields, specs
from ..checks.score import points
from ..checks.specs import Exercise
from ..errors import UsageError
from ..model import CheckResult, FailureKind
from ..request import source as source_mod
from ..run import boundary, rooms
from .grader import grade_one
from ..authoring.references import reference_checks
from . import ladder as ladder_mod
from .discover import Submission
from .rows import GradeRow
from .session import Session

_COMPILE_FAILURES = (FailureKind.COMPILE_ERROR, FailureKind.COMPILE_TIMEOUT)
# What a copy of the course leaves out: a checkout's scratch files.
_SCRATCH_DIRS = frozenset({".ipynb_checkpoints", "__pycache__", ".idrrun", "idrrun-profile"})
_SCRATCH_SUFFIXES = frozenset({".o", ".gimple", ".original", ".pyc"})
STUDENTS_NOTE = ("A students' copy of the course (idrrun course init --students): no solution "
                 "sources but those its notebooks show, no grading-only data.")
T = TypeVar("T")


@dataclass(frozen=True)
class CourseRow:
    exercise: str
    language: str
    solution: GradeRow
    start: GradeRow
    # The solution's output held to its reference (the students' course compares with it):
    # the exercise's checks that compare with the solution, on the solution's run here.
    reference: tuple[CheckResult, ...] = ()
    # With --ladder: the near-misses made from the solution (grading/ladder.py), graded, and
    # whether they ran on a GPU (the slow rung must then earn less than the solution).
    ladder: tuple[ladder_mod.Graded, ...] = ()
    on_gpu: bool = False
    checked: Exercise | None = None  # the exercise the ladder was graded with

    @property
    def ok(self) -> bool:
        """The solution passes (or could not be judged fully here) and still prints what its
        reference says, the start file builds and fails; the solution earns every point this
        machine can evaluate, the start file at most START_SHARE of those it can be given;
        the ladder's marks (when graded) keep the teacher's order and bounds."""
        return (self.solution.status in ("pass", "incomplete") and self.start.status == "fail"
                and self.start.failure not in _COMPILE_FAILURES
                and not any(c.status == "fail" for c in self.reference)
                and self.solution_full and self.start_low and not self.judged.findings)

    @property
    def judged(self) -> ladder_mod.Judged:
        """The ladder's marks judged (nothing found without a ladder)."""
        if not self.ladder or self.checked is None:
            return ladder_mod.Judged((), ())
        ends = (ladder_mod.Graded(ladder_mod.Rung("solution", "", "the solution"), self.solution),
                ladder_mod.Graded(ladder_mod.Rung("start", "", "the start file"), self.start))
        return ladder_mod.judge(self.checked, (*ends, *self.ladder), self.on_gpu)

    @property
    def solution_full(self) -> bool:
        """The solution earns every point evaluated here."""
        s = self.solution.score
        return s is not None and s.earned >= s.evaluated - _EPSILON

    @property
    def start_share(self) -> float | None:
        """What the start file earns, as a share of the points it can be given here (None:
        not scored, or nothing could be evaluated here)."""
        s = self.start.score
        if s is None or s.evaluated <= 0:
            return None
        return s.earned / s.evaluated

    @property
    def start_low(self) -> bool:
        share = self.start_share
        return self.start.score is not None and (share is None or share <= START_SHARE + _EPSILON)

    def scores(self) -> str:
        """"solution 23/23, start 0/23 (0 %)"; with what this machine could not evaluate."""
        return f"solution {_scored(self.solution)}, start {_scored(self.start)}" + (
            f" ({100 * self.start_share:.0f} %)" if self.start_share is not None else "")

    @property
    def incomplete(self) -> bool:
        """OK as far as this machine can tell: some of the solution's checks need a GPU, or its
        reference for these arguments is missing."""
        return self.ok and (self.solution.status == "incomplete"
                            or any(c.status == "incomplete" for c in self.reference))


# The most an untouched start file may earn of the points it can be given (STYLE.md 22: it earns
# almost nothing); the published solution earns every point.
START_SHARE = 0.10
_EPSILON = 1e-9


def _scored(row: GradeRow) -> str:
    return str(row.score) if row.score is not None else "not scored"


def course_check(session: Session, languages: Sequence[str] | None,
                 on_done: Callable[[GradeRow], None] | None = None,
                 ladder: bool = False) -> list[CourseRow]:
    """Every solution and start file of the session's exercises graded, `session.jobs` at
    once, in the machine's GPU lanes (the session's sandbox: the course's own files, none);
    with `ladder`, each one's near-misses too (grading/ladder.py)."""
    folder = rooms.intake_room(session.settings) if ladder else None
    try:
        return _course_check(session, languages, on_done, folder)
    finally:
        if folder is not None:
            boundary.remove(folder)


def _course_check(session: Session, languages: Sequence[str] | None,
                  on_done: Callable[[GradeRow], None] | None,
                  folder: Path | None) -> list[CourseRow]:
    subs: list[tuple[Exercise, str, str, Submission]] = []
    rungs: dict[tuple[str, str], list[tuple[ladder_mod.Rung, int | None]]] = {}
    for ex in session.exercises:
        for language, pair in ex.sources.items():
            if languages and language not in languages:
                continue
            if pair.solution is None:
                raise UsageError(f"{ex.path}: a students' copy of the course has no solutions to "
                                 "check: run `idrrun course check` on the teacher's course")
            # A start file only has to fail: at the host arguments it does so in a second,
            # where a serial run at the GPU sizes took minutes (Exercise.as_start_file).
            for role, path, checked in (("solution", pair.solution, ex),
                                        ("start", pair.exercise, ex.as_start_file())):
                src = source_mod.from_file(path, language, path.name)  # type: ignore[arg-type]
                subs.append((checked, language, role,
                             Submission(f"{ex.name}/{language}/{role}", path, src)))
            if folder is not None:
                mine = rungs.setdefault((ex.name, language), [])
                for rung, sub in ladder_mod.submissions(ex, language, folder):
                    mine.append((rung, len(subs) if sub is not None else None))
                    if sub is not None:
                        subs.append((ex, language, rung.name, sub))
    results: dict[int, GradeRow] = {}
    with ThreadPoolExecutor(max_workers=max(1, session.jobs)) as pool:
        futures = {pool.submit(grade_one, session, s[3], s[0]): i
                   for i, s in enumerate(subs)}
        for future in as_completed(futures):
            i = futures[future]
            results[i] = future.result()
            if on_done is not None:
                on_done(results[i])
    rows: list[CourseRow] = []
    for i, (ex, language, role, _) in enumerate(subs):
        if role != "solution":
            continue
        graded = tuple(ladder_mod.Graded(rung, results[at] if at is not None else None)
                       for rung, at in rungs.get((ex.name, language), ()))
        rows.append(CourseRow(ex.name, language, solution=results[i], start=results[i + 1],
                              reference=reference_checks(ex, language, session.settings,
                                                         session.probe),
                              ladder=graded, on_gpu=bool(session.probe.gpus), checked=ex))
    return rows


def _where(exercise: Exercise, field: str) -> str:
    """FILE:LINE of a field of the spec (as SpecErrors and compilers name places)."""
    try:
        line = spec_fields.field_line(exercise.path.read_text(encoding="utf-8"), field)
    except OSError:
        line = None
    return f"{exercise.path}:{line}" if line is not None else str(exercise.path)


def _hidden_field(exercise: Exercise, case: int) -> str:
    """The field a hidden case comes from: args.hidden[N] for the fixed ones (run first), else
    the ranges of [args.draw]."""
    fixed = len(specs.load(exercise.path).hidden_args)  # the spec as written: nothing drawn
    return f"args.hidden[{case - 1}]" if case <= fixed else "args.draw.ranges"


def findings(row: CourseRow, exercise: Exercise) -> list[str]:
    """What is wrong with an exercise, each said where to change it: the spec's field and
    line (a check the solution fails, a hidden case it fails on), or the source file."""
    out = _solution_findings(row.solution, exercise, row.language) + \
        _start_findings(row.start, exercise, row.language) + \
        [f"{exercise.path}: {c.name}: {c.reason}" for c in row.reference if c.status == "fail"]
    out += _score_findings(row, exercise)
    out += [f"{_where(exercise, 'check')}: the ladder ({row.language}): {said}"
            for said in row.judged.findings]
    if not any(c.points or c.points_hidden for c in exercise.checks):
        out.append(f"{_where(exercise, 'check[0].points')}: every check is worth 0 points: every "
                   f"score will be 0/0")
    return out


def _score_findings(row: CourseRow, exercise: Exercise) -> list[str]:
    """The two bounds of a course's marks: the solution earns every point evaluated here, the
    start file at most START_SHARE of them; each said with the points' whereabouts."""
    out: list[str] = []
    sol, start = row.solution.score, row.start.score
    if sol is not None and not row.solution_full and row.solution.status != "fail":
        lost = [f"{i.label}: {i.why or 'lost'}" for i in sol.items if i.outcome == "lost"]
        out.append(f"{_where(exercise, 'check')}: the solution earns {points(sol.earned)} of the "
                   f"{points(sol.evaluated)} points evaluated here: " + "; ".join(lost))
    share = row.start_share
    if start is not None and share is not None and not row.start_low:
        earned = [f"{i.label} ({points(i.worth)})" for i in start.items if i.outcome == "earned"]
        out.append(f"{_where(exercise, 'check')}: the start file earns {points(start.earned)} of "
                   f"the {points(start.evaluated)} points evaluated here ({100 * share:.0f} %, "
                   f"more than {100 * START_SHARE:.0f} %): {', '.join(earned)}; let those points "
                   "wait for the port (counts_when, examples/README.md \"Points\")")
    return out


def _solution_findings(sol: GradeRow, exercise: Exercise, language: str) -> list[str]:
    path = exercise.sources[language].solution
    if sol.status == "error":
        return [f"{path}: the solution could not be graded: {sol.error}"]
    if sol.failure in _COMPILE_FAILURES:
        return [f"{path}: the solution does not build: {sol.failure_what}"]
    if sol.status != "fail":
        return []
    out = [_failed_check(c, sol, exercise) for c in sol.checks if c.status == "fail"]
    return out or [f"{path}: the solution fails: {sol.reasons}"]


def _failed_check(c: CheckResult, sol: GradeRow, exercise: Exercise) -> str:
    """A check the solution fails, at its [[check]]; on a hidden case, with the field the case
    comes from."""
    field = f"check[{c.check}]" if c.check >= 0 else "check"
    said = f"{_where(exercise, field)}: {field} ({c.name}): the solution fails it: {c.reason}"
    if c.hidden:
        args = " ".join(sol.hidden_args[c.hidden - 1]) if c.hidden <= len(sol.hidden_args) else ""
        hidden = _hidden_field(exercise, c.hidden)
        said += (f" (hidden case {c.hidden}, arguments {args}: choose {hidden} where the "
                 f"solution passes, {_where(exercise, hidden)})")
    return said


def _start_findings(start: GradeRow, exercise: Exercise, language: str) -> list[str]:
    path = exercise.sources[language].exercise
    if start.status == "error":
        return [f"{path}: the start file could not be graded: {start.error}"]
    if start.failure in _COMPILE_FAILURES:
        return [f"{path}: the start file does not build ({start.failure_what}): students start "
                f"from it, it must build and fail a check"]
    if start.status == "pass":
        return [f"{_where(exercise, 'check')}: the start file passes every check: add a check it "
                f"fails (the result of the work asked, uses_openacc, ...): examples/README.md"]
    if start.status == "incomplete":
        return [f"{_where(exercise, 'check')}: the start file fails no check this machine can "
                f"evaluate: add one it fails here (not only GPU-trace checks)"]
    return []


# ---------------------------------------------------------------------------------------
