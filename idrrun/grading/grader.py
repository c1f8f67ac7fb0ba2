"""Grading a class: each submission in a room of its own (run/rooms.py), with the grader's
policy (request/policy.py), in parallel; an interrupted grading cancels its cluster steps.
Everything decided once for the whole grading is its session (session.py).

    grade_one(session, sub, exercise) -> GradeRow (never raises): GRADE_STEPS, in order
    grade_all(session, exercise, subs) -> [GradeRow]
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..checking import execute_checked, solution_output
from ..checks import compare
from ..checks.specs import COURSE_DIRS, Exercise
from ..errors import IdrrunError
from ..model import FailureKind, Settings, Source, RunRequest, Toolchain
from ..pipeline import Outcome
from ..request import resolve
from ..request import source as source_mod
from ..request.options import Options
from ..request.policy import Policy
from ..run import boundary, launch, proc, rooms
from . import comparison, state
from .discover import Submission, outside_includes, take_in
from .rows import GradeRow, row_from_outcome, scored
from .session import Session


def policy(session: Session, exercise: Exercise, room: Path) -> Policy:
    """The grader's policy for a request of this exercise in `room` (request/policy.py): the
    session's time limit, sandbox level ("none ...": the course's own files, --unsafe) and GPU
    lanes."""
    return Policy(room=room, sandbox=not session.sandbox.startswith("none"),
                  hide=(*exercise.folders, *COURSE_DIRS), timeout=session.timeout,
                  openacc=exercise.model == "openacc", profile_traces=exercise.needs_trace,
                  lanes=session.lanes, timed=exercise.timed)


def warm_solution(session: Session, exercise: Exercise, subs: Sequence[Submission]) -> None:
    """Run the solution once for each language the submissions use and each argument set
    (filling the cache)."""
    languages = sorted({s.source.language for s in subs if s.source is not None} & set(exercise.sources))
    settings, probe = session.settings, session.probe
    for language in languages:
        pair = exercise.sources[language]
        if pair.solution is None:
            continue  # a students' course: the checks that need it say so
        try:
            src = source_mod.from_file(pair.solution, language, str(pair.solution))
            # As a row would ask for it; solution_output gives it a room of its own.
            request, toolchain = resolve.resolve(
                Options(), src, pair.solution.parent, settings, probe, exercise,
                policy(session, exercise, rooms.scratch_root(settings)))
            # Every argument set a row runs, the solution's output and time kept for each (a
            # check compares with it, a timeout says it): the public one (profiled as a row's
            # is, for the comparison), then the hidden ones (one build).
            job = session.job(request, toolchain)
            solution_output(job.with_args(tuple(request.program_args)), exercise)
            for args in exercise.hidden_args:
                solution_output(job.with_args(tuple(args), hidden=True), exercise)
        except IdrrunError:
            pass  # each row reports it


# --- one submission: a declared sequence of steps ----------------------------------------------

@dataclass(frozen=True)
class Work:
    """A submission on its way through the steps: what each step adds for the next."""

    sub: Submission
    exercise: Exercise
    room: Path  # its room (run/rooms.py), removed when the row is made
    source: Source | None = None  # the room's copy of the source (copy_in)
    request: RunRequest | None = None
    toolchain: Toolchain | None = None
    outcome: Outcome | None = None

    @property
    def language(self) -> str:
        return self.sub.source.language if self.sub.source is not None else ""


# A step: the next value, or the row (a failure, as data) that ends the submission's grading.
StepResult = Work | GradeRow


class Step(NamedTuple):
    name: str  # what an error row of ours names
    run: Callable[[Session, Work], StepResult]


def error_row(session: Session, work: Work | Submission, exercise: Exercise, reason: str,
              language: str = "") -> GradeRow:
    """A row that could not be graded (ours, or unreadable): no score, the reason."""
    sub = work.sub if isinstance(work, Work) else work
    return GradeRow(sub.student, exercise.name, language, "error", 0.0, 0.0, str(sub.path),
                    error=reason, sandbox=session.sandbox)


def read_in(session: Session, work: Work) -> StepResult:
    """What discover read once (a Submission made by hand is read now, the same way): the
    source, its digest and what is compiled are that one copy, the grader's own."""
    sub = take_in(work.sub, work.exercise, work.room)
    if sub.source is None or sub.copy is None:
        return error_row(session, sub, work.exercise, sub.problem)
    return dataclasses.replace(work, sub=sub)


def refuse_outside(session: Session, work: Work) -> StepResult:
    """Only what was handed in is compiled: a source (or a header of its own) that includes
    files from elsewhere is refused."""
    assert work.sub.source is not None
    outside = outside_includes(work.sub.source)
    if outside:
        return error_row(session, work, work.exercise,
                         f"refused: the source includes files from outside the submission "
                         f"({', '.join(outside[:3])}); only what was handed in is compiled",
                         work.language)
    return work


def copy_in(session: Session, work: Work) -> StepResult:
    """The grader's copy into the room's source folder, through descriptors."""
    assert work.sub.source is not None and work.sub.copy is not None
    src = rooms.source_folder(work.room)
    fd = boundary.open_dir(src)
    try:
        copied = boundary.copy_tree(work.sub.copy, fd, boundary.Budget(size=1 << 40,
                                                                       entries=1 << 20,
                                                                       depth=1 << 10))
    finally:
        os.close(fd)
    if copied.refused:
        return error_row(session, work, work.exercise, f"refused: {copied.refused}", work.language)
    return dataclasses.replace(work, source=dataclasses.replace(work.sub.source, origin_dir=src))


def request_of(session: Session, work: Work) -> StepResult:
    """The request under the grader's policy; a fail row when the student's own choices make
    it impossible (_resolved)."""
    assert work.source is not None
    resolved = _resolved(work.sub, work.source, session, work.exercise,
                         policy(session, work.exercise, work.room))
    if isinstance(resolved, str):
        return scored(GradeRow(
            work.sub.student, work.exercise.name, work.source.language, "fail", 0.0, 0.0,
            str(work.sub.path), failure=FailureKind.COMPILE_ERROR,
            failure_what=f"refused: {resolved}", sandbox=session.sandbox,
            hidden_args=work.exercise.hidden_args,
            content=state.content_key(work.sub, work.exercise, session.policy_key)), work.exercise)
    request, toolchain = resolved
    return dataclasses.replace(work, request=request, toolchain=toolchain)


def run_checked(session: Session, work: Work) -> StepResult:
    """Built, run (its hidden sets too) and checked; what could not be started is ours."""
    assert work.request is not None and work.toolchain is not None
    outcome = execute_checked(session.job(work.request, work.toolchain), work.exercise,
                              hidden=True)
    failure = outcome.failure
    if failure is not None and failure.kind is FailureKind.NOT_STARTED:
        # The compiler, the box or the program could not be started: the grader's failure
        # (a machine or a setting to mend), never the student's.
        step = "build" if failure.compile_step else "run"
        return error_row(session, work, work.exercise, f"not graded: the {step} {failure.what}",
                         work.language)
    return dataclasses.replace(work, outcome=outcome)


def row_of(session: Session, work: Work) -> StepResult:
    """The row of the outcome, its comparison's timelines kept where the feedback finds them."""
    assert work.outcome is not None
    row = row_from_outcome(work.sub, work.exercise, work.outcome, session.sandbox,
                           state.content_key(work.sub, work.exercise, session.policy_key))
    return dataclasses.replace(row, comparison=comparison.kept(row.comparison, session.settings))


# How a submission is graded, in order; each step returns the next value or the row that ends
# it. A new step is one function and one line here (docs/architecture.md, "Add a grading step").
GRADE_STEPS: tuple[Step, ...] = (
    Step("read", read_in),
    Step("refuse outside includes", refuse_outside),
    Step("copy into the room", copy_in),
    Step("resolve", request_of),
    Step("build, run and check", run_checked),
    Step("make the row", row_of),
)


def grade_one(session: Session, sub: Submission, exercise: Exercise) -> GradeRow:
    """Grade one submission in its own room and sandbox, through GRADE_STEPS; every problem
    becomes a row (ours name the step)."""
    if sub.source is None:
        return error_row(session, sub, exercise, sub.problem)
    work = Work(sub, exercise, rooms.new_room(session.settings, "idrrun-grade-"))
    step = GRADE_STEPS[0]
    try:
        for step in GRADE_STEPS:
            done = step.run(session, work)
            if isinstance(done, GradeRow):
                return done
            work = done
        return error_row(session, work, exercise, "internal error: no step made the row",
                         work.language)
    except IdrrunError as exc:
        return error_row(session, work, exercise, str(exc), work.language)
    except OSError as exc:
        return error_row(session, work, exercise,
                         f"cannot prepare the submission ({step.name}): {exc}", work.language)
    finally:
        boundary.remove(work.room)


def _resolved(sub: Submission, source: Source, session: Session, exercise: Exercise,
              rules: Policy) -> tuple[RunRequest, Toolchain] | str:
    """The request of a submission, or why the student's own choices make it impossible: a
    language (its file's name, its line's -l) the exercise does not have, or a flag of its line
    the resolver refuses, which is the student's only when the same submission resolves
    without its line (then a fail row says why). What fails without the line too is ours (a
    setting, a missing compiler): it raises, an error row."""
    src = source.origin_dir
    if source.language not in exercise.sources:
        return (f"the exercise has no {source.language} version (it has: "
                f"{', '.join(exercise.sources)}): the submission's name or its line chose "
                f"{source.language}")
    try:
        return resolve.resolve(sub.options, source, src, session.settings, session.probe,
                               exercise, rules)
    except IdrrunError as exc:
        if sub.options == Options():
            raise
        resolve.resolve(Options(), source, src, session.settings, session.probe, exercise, rules)
        return f"its %%idrrun line cannot run: {exc}"


def late(session: Session, row: GradeRow) -> GradeRow:
    """The row with when it was handed in and how late (the session's lateness), if known."""
    if session.lateness is None:
        return row
    submitted, past = session.lateness.of(row.student)
    return dataclasses.replace(row, submitted=submitted, late=past)


def grade_all(session: Session, exercise: Exercise, subs: Sequence[Submission],
              on_done: Callable[[GradeRow], None] | None = None,
              on_progress: Callable[[list[GradeRow]], None] | None = None) -> list[GradeRow]:
    """Grade in parallel, `session.jobs` at once; rows come back in submission order. Workers
    wait on compilers and programs, not on Python, so threads are enough. On a machine with
    GPUs the runs take its lanes (run/lanes.py): a timed one waits for a GPU of its own while
    the others go on.

    The session's resumed rows (an earlier, interrupted grading's, by submission path) are
    kept, not graded again. `on_progress` sees every row known so far after each one
    finishes, in order, so that the report on disk is always whole."""
    rows: dict[int, GradeRow] = {}
    for i, sub in enumerate(subs):
        kept = state.resumed(sub, session.resumed)
        if kept is not None:
            rows[i] = late(session, kept)
    todo = [i for i in range(len(subs)) if i not in rows]
    pool = ThreadPoolExecutor(max_workers=max(1, session.jobs))
    started: list[Future[Any]] = []
    try:
        if (exercise.needs_solution or compare.wanted(exercise)) and session.jobs > 1 and todo:
            # The solution's output is needed by every row: start it first, beside the students.
            started.append(pool.submit(warm_solution, session, exercise, subs))
        futures = {pool.submit(grade_one, session, subs[i], exercise): i for i in todo}
        started += futures
        for future in as_completed(futures):
            i = futures[future]
            try:
                row = future.result()
            except Exception as exc:  # a bug must not cost a student their row
                row = error_row(session, subs[i], exercise,
                                f"internal error: {type(exc).__name__}: {exc}")
            rows[i] = late(session, row)
            if on_done is not None:
                on_done(rows[i])
            if on_progress is not None:
                on_progress([rows[k] for k in sorted(rows)])
    except BaseException:
        stop_grading(pool, started, session.settings)
        raise
    finally:
        pool.shutdown(wait=True)
        proc.resume()
    return [rows[i] for i in range(len(subs))]


# How long an interrupted grader waits for its running rows once their steps are cancelled.
STOP_WAIT = 60.0


def stop_grading(pool: ThreadPoolExecutor, started: Sequence[Future[Any]],
                 settings: Settings) -> None:
    """An interrupted grading (Ctrl-C, or SIGTERM turned into one by the CLI): no new row
    starts, and what runs on a cluster is cancelled on every node, so that the rows' threads
    return at once. The rows that end now are not kept: a resumed grading grades them again."""
    pool.shutdown(wait=False, cancel_futures=True)
    proc.stop_all()  # every row's run, in its own thread, killed now: not at its time limit
    if settings.launcher.kind != "srun":
        return
    deadline = time.monotonic() + STOP_WAIT
    while True:
        # Again after each wait: a row may have started its next step (the run after the build,
        # the solution) after the last sweep.
        launch.cancel_session()
        running = [f for f in started if not f.done()]
        if not running or time.monotonic() > deadline:
            return
        wait(running, timeout=0.5)
