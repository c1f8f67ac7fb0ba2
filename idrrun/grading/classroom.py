"""Grading a class: each submission in a room of its own (run/rooms.py), with the grader's
policy (request/policy.py), in parallel; an interrupted grading cancels its cluster steps.

    grade_one(sub) -> GradeRow (never raises); grade_all(subs, ...) -> [GradeRow]
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from pathlib import Path
from typing import Any

from .. import files
from ..checking import check_language, execute_checked, solution_output
from ..checks import compare, specs
from ..checks.specs import COURSE_DIRS, Exercise
from ..errors import IdrrunError, UsageError
from ..model import FailureKind, Lanes, Probe, Settings
from ..pipeline import NullReporter
from ..request import resolve
from ..request import source as source_mod
from ..request.options import Options
from ..request.policy import Policy
from ..run import boundary, isolation, launch, proc, rooms
from . import comparison
from .discover import Submission, exposed, outside_includes, read_submission, source_in_copy
from .report import GradeRow, resumed, row_from_outcome


def exercise_for_grading(name: str, settings: Settings, workdir: Path) -> tuple[Exercise, list[str]]:
    """The exercise NAME as a grader takes it: from the configuration or idrrun's own course,
    never from the working folder, which may be the submissions' (a spec handed in would decide
    the grading); a students' copy (no solutions, no grading-only checks) is refused. Returns
    it and what to tell the teacher."""
    exercise = specs.find(name, settings, None)
    notes = []
    walked = specs.locate_examples(settings, workdir)
    # (Not when it is the course taken anyway: idrrun's own, graded from its checkout.)
    if walked is not None and walked.origin == "found" and \
            walked.path.resolve() != exercise.path.parent.resolve():
        notes.append(f"{walked.path} was not read (a grader reads no course from its working "
                     f"folder): give it with IDRRUN_EXAMPLES or examples_dir in --config")
    if exercise.students:
        raise UsageError(f"{exercise.path} is from a students' copy of the course (no solutions, "
                         "no grading-only checks): grade with the teacher's course (examples_dir "
                         "or IDRRUN_EXAMPLES)")
    return exercise, notes


def sandbox_level(exercise: Exercise, submissions: Sequence[Path], unsafe: bool) -> str:
    """The level a class is graded at (run/sandbox.py), as the report names it; UsageError
    where grading would not be safe: no sandbox at all (unless unsafe), or, without namespaces,
    a course or submissions that other users (a box's uid) can read."""
    support = isolation.sandbox_support()
    if support.level == "none" and not unsafe:
        raise UsageError(f"cannot grade safely here: {support.why}. Submissions would run as "
                         "you, seeing your files: install bubblewrap (or run as root), or give "
                         "--unsafe to grade anyway (the report says so)")
    if support.level == "uid" and not unsafe:
        open_to_all = exposed(exercise, submissions)
        if open_to_all:
            shown = ", ".join(str(p) for p in open_to_all[:3])
            raise UsageError(f"cannot grade safely here: without namespaces ({support.why}) a "
                             f"submission can read every file other users can, and these are "
                             f"readable by them: {shown}. Make them private (chmod -R o-rwx, on "
                             f"the course and the submissions), install bubblewrap, or give "
                             f"--unsafe to grade anyway")
    return support.level if support.level != "none" else "none (--unsafe)"


def policy(exercise: Exercise, room: Path, timeout: float | None, sandbox: str,
           lanes: Lanes | None = None) -> Policy:
    """The grader's policy for a request of this exercise in `room` (request/policy.py).
    sandbox: the machine's level, or "none ..." (the course's own files, --unsafe); lanes: the
    machine's GPU lanes (run/lanes.py), None without."""
    return Policy(room=room, sandbox=not sandbox.startswith("none"),
                  hide=(*exercise.folders, *COURSE_DIRS), timeout=timeout,
                  openacc=exercise.model == "openacc", profile_traces=exercise.needs_trace,
                  lanes=lanes, timed=exercise.timed)


def warm_solution(exercise: Exercise, subs: Sequence[Submission], settings: Settings,
                  probe: Probe, timeout: float | None, sandbox: str,
                  lanes: Lanes | None = None) -> None:
    """Run the solution once for each language the submissions use and each argument set
    (filling the cache)."""
    languages = sorted({s.source.language for s in subs if s.source is not None} & set(exercise.sources))
    for language in languages:
        pair = exercise.sources[language]
        if pair.solution is None:
            continue  # a students' course: the checks that need it say so
        try:
            src = source_mod.from_file(pair.solution, language, str(pair.solution))
            # As a row would ask for it; solution_output gives it a room of its own.
            request, toolchain = resolve.resolve(
                Options(), src, pair.solution.parent, settings, probe, exercise,
                policy(exercise, rooms.scratch_root(settings), timeout, sandbox, lanes))
            # Every argument set a row runs, the solution's output and time kept for each (a
            # check compares with it, a timeout says it): the public one (profiled as a row's
            # is, for the comparison), then the hidden ones (one build).
            for args in (request.program_args, *exercise.hidden_args):
                solution_output(resolve.with_args(request, tuple(args)), toolchain, exercise,
                                probe, settings)
        except IdrrunError:
            pass  # each row reports it


def grade_one(sub: Submission, exercise: Exercise, settings: Settings, probe: Probe,
              timeout: float | None = None, sandbox: str = "namespaces",
              lanes: Lanes | None = None) -> GradeRow:
    """Grade one submission in its own scratch folder and sandbox; every problem becomes a row.

    sandbox: the machine's level (run/sandbox.py), or "none (--unsafe)" to grade without one;
    lanes: the machine's GPU lanes (run/lanes.py), which its runs take."""
    def error_row(reason: str, language: str = "") -> GradeRow:
        return GradeRow(sub.student, exercise.name, language, "error", 0.0, 0.0, str(sub.path),
                        error=reason, sandbox=sandbox)

    if sub.source is None:
        return error_row(sub.problem)
    outside = outside_includes(sub.source.text)
    if outside:
        return error_row(f"refused: the source includes files from outside the submission "
                         f"({', '.join(outside[:3])}); only what was handed in is compiled",
                         sub.source.language)
    room = rooms.new_room(settings, "idrrun-grade-")
    try:
        # The grader's own copy of what was handed in (regular files only, nothing followed,
        # bounded), read again from there: what is compiled is what was copied.
        src = rooms.source_folder(room)
        fd = boundary.open_dir(src)
        try:
            copied = boundary.copy_tree(sub.path, fd)
        finally:
            os.close(fd)
        if copied.refused:
            return error_row(f"refused: {copied.refused}", sub.source.language)
        fd = boundary.open_dir(src)
        try:
            rel = source_in_copy(sub)
            again = read_submission(fd, rel, src / rel, sub.student, exercise, sub.source.language)
        finally:
            os.close(fd)
        if again.source is None:
            return error_row(again.problem, sub.source.language)
        source = dataclasses.replace(again.source, name=sub.source.name, origin_dir=src)
        check_language(source, exercise)
        request, toolchain = resolve.resolve(sub.options, source, src, settings, probe, exercise,
                                             policy(exercise, room, timeout, sandbox, lanes))
        outcome = execute_checked(request, toolchain, exercise, probe, settings, NullReporter(),
                                  hidden=True)
        failure = outcome.failure
        if failure is not None and failure.kind is FailureKind.NOT_STARTED:
            # The compiler, the box or the program could not be started: the grader's failure
            # (a machine or a setting to mend), never the student's.
            step = "build" if failure.compile_step else "run"
            return error_row(f"not graded: the {step} {failure.what}", sub.source.language)
        row = row_from_outcome(sub, exercise, outcome, sandbox)
        return dataclasses.replace(row, comparison=comparison.kept(row.comparison, settings))
    except IdrrunError as exc:
        return error_row(str(exc), sub.source.language)
    except OSError as exc:
        return error_row(f"cannot prepare the submission: {exc}", sub.source.language)
    finally:
        boundary.remove(room)


def grade_all(subs: Sequence[Submission], exercise: Exercise, settings: Settings, probe: Probe,
              jobs: int, timeout: float | None,
              on_done: Callable[[GradeRow], None] | None = None,
              already: dict[str, GradeRow] | None = None,
              on_progress: Callable[[list[GradeRow]], None] | None = None,
              sandbox: str = "namespaces", lanes: Lanes | None = None) -> list[GradeRow]:
    """Grade in parallel; rows come back in submission order. Workers wait on compilers and
    programs, not on Python, so threads are enough. On a machine with GPUs the runs take its
    lanes (run/lanes.py): a timed one waits for a GPU of its own while the others go on.

    `already` holds rows of an earlier, interrupted grading (by submission path): those are
    kept, not graded again. `on_progress` sees every row known so far after each one finishes,
    in order, so that the report on disk is always whole."""
    rows: dict[int, GradeRow] = {}
    for i, sub in enumerate(subs):
        kept = resumed(sub, already)
        if kept is not None:
            rows[i] = kept
    todo = [i for i in range(len(subs)) if i not in rows]
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    started: list[Future[Any]] = []
    try:
        if (exercise.needs_solution or compare.wanted(exercise)) and jobs > 1 and todo:
            # The solution's output is needed by every row: start it first, beside the students.
            started.append(pool.submit(warm_solution, exercise, subs, settings, probe, timeout,
                                       sandbox, lanes))
        futures = {pool.submit(grade_one, subs[i], exercise, settings, probe, timeout, sandbox,
                               lanes): i
                   for i in todo}
        started += futures
        for future in as_completed(futures):
            i = futures[future]
            try:
                row = future.result()
            except Exception as exc:  # a bug must not cost a student their row
                sub = subs[i]
                row = GradeRow(sub.student, exercise.name, "", "error", 0.0, 0.0, str(sub.path),
                               error=f"internal error: {type(exc).__name__}: {exc}", sandbox=sandbox)
            rows[i] = row
            if on_done is not None:
                on_done(row)
            if on_progress is not None:
                on_progress([rows[k] for k in sorted(rows)])
    except BaseException:
        stop_grading(pool, started, settings)
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


def session_path(report: Path) -> Path:
    """Beside the report while a grading runs: the name of its session's job steps."""
    return report.with_name(f".{report.name}.idrrun-session")


def adopt_session(report: Path) -> list[str]:
    """A grader killed outright (SIGKILL, a lost login node) cannot cancel its job steps: they
    run on until their time limit. The next grading with the same report cancels them first,
    then notes its own session for the one after. Returns what to tell the user."""
    path = session_path(report)
    notes = []
    try:
        earlier = path.read_text(encoding="utf-8").strip()
    except OSError:
        earlier = ""
    if re.fullmatch(r"[0-9a-f]{8}", earlier) and earlier != launch.SESSION:
        cancelled, gone = launch.cancel_session(earlier)
        if cancelled:
            notes.append(f"cancelled {len(cancelled)} job steps left running by an earlier, "
                         f"killed grading ({', '.join(cancelled)})")
        if not gone:
            notes.append(f"job steps of an earlier grading (idrrun-{earlier}-*) are still listed by squeue")
    files.write_atomic(path, launch.SESSION + "\n")
    return notes
