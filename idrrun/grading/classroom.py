"""A whole class: finding submissions, grading each in its own scratch copy, in parallel, and
the reports (CSV/JSON, resumable) and per-student feedback.

    discover(paths) -> [Submission]; grade_one(sub) -> GradeRow (never raises); grade_all(...)
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import errno
import hashlib
import hmac
import io
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import build as build_mod
from ..checks.specs import Exercise
from ..errors import IdrrunError, UsageError
from ..checks.specs import COURSE_DIRS
from ..model import (CheckResult, FailureKind, Language, Outcome, Probe, RunRequest, Settings,
                     Source, temp_beside)
from ..request import notebook, options, resolve
from ..request import source as source_mod
from ..request.options import Options
from ..run import boundary, launch, sandbox
from . import rooms
from .checked import NullReporter, check_language, execute_checked, solution_output

SOURCE_SUFFIXES = {".c", ".cpp", ".cc", ".cxx", ".cu", ".f90", ".f95", ".f03", ".f08", ".f", ".F90"}
# What a graded notebook's magic line may set; the grader decides the rest (arguments, limits,
# time, compiler flags), so that a submission cannot give itself more than its classmates.
GRADED_FLAGS = frozenset({"acc", "accopts", "language", "openmp", "threads", "profile"})

GradeStatus = Literal["pass", "fail", "incomplete", "error"]
# A submission bigger than this is refused (one error row), not read into the grader's memory.
MAX_SOURCE_BYTES = 2 << 20
# The most of a folder a student may hand in (its walk at discovery, its copy into the box).
SUBMISSION_BUDGET = boundary.Budget()
_INCLUDE = re.compile(r'^[ \t]*(?:#[ \t]*include[ \t]*["<]([^">\n]+)[">]|include[ \t]*[\'"]([^\'"\n]+)[\'"])',
                      re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path  # what was handed in: a file, a notebook or a folder
    source: Source | None  # None when it could not be read
    problem: str = ""  # why source is None
    options: Options = Options()  # what a notebook's magic line asked for (GRADED_FLAGS only)
    chosen: Path | None = None  # in a folder handed in, the file that is graded


@dataclass(frozen=True)
class GradeRow:
    student: str
    exercise: str
    language: str
    status: GradeStatus
    build_seconds: float
    run_seconds: float
    submission: str
    failure: FailureKind | None = None  # why it did not pass; CHECK: the checks said so
    failure_what: str = ""  # the failure in words: "exit code 3", "killed by SIGSEGV"
    error: str = ""  # status "error": why it could not be graded
    checks: tuple[CheckResult, ...] = ()
    sandbox: str = ""  # how it was walled off: the machine's level, or "none (--unsafe)"
    # Where the run's tasks ran and where the compiler ran, when they were cluster job steps
    # (SLURMD_NODENAME of the step; nodes joined by "," for a run over several).
    node: str = ""
    build_node: str = ""
    # The hidden argument sets its checks ran with (drawn ones included): for the instructor's
    # report (JSON, state), never for a student's feedback.
    hidden_args: tuple[tuple[str, ...], ...] = ()

    @property
    def reasons(self) -> str:
        """One line for the report: the failure, then each failed check with its reason."""
        if self.status == "error":
            return self.error
        parts = []
        if self.failure is not None and self.failure is not FailureKind.CHECK:
            parts.append(f"{self.failure.step} failed: {self.failure_what}")
        parts += [f"{c.name}: {c.reason}" for c in self.checks if c.status == "fail"]
        parts += [f"{c.name}: not evaluated ({c.reason})" for c in self.checks
                  if c.status == "incomplete"]
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "student": self.student, "exercise": self.exercise, "language": self.language,
            "verdict": self.status, "reasons": self.reasons,
            "build_seconds": round(self.build_seconds, 3), "run_seconds": round(self.run_seconds, 3),
            "submission": self.submission, "sandbox": self.sandbox, "node": self.node,
            "build_node": self.build_node,
        }


def notebook_cell(nb: dict[str, Any], name: str, exercise: str) -> tuple[Options, str]:
    """The %%idrrun cell of a notebook to grade: the one with --check NAME, else the only one.

    Each line is parsed as the magic parses it, but nothing is ever printed: a line that asks
    for the help or cannot be read is never the cell graded. Returns (the line's options, cell
    body). Raises UsageError with the reason otherwise."""
    cells = notebook.magic_cells(nb)
    if not cells:
        raise UsageError(f"{name}: no %%idrrun cell")
    parsed: list[tuple[notebook.MagicCell, Options]] = []
    broken: list[tuple[notebook.MagicCell, str]] = []
    for cell in cells:
        try:
            opts = options.parse_line(cell.line, show_help=False)
        except IdrrunError as exc:
            broken.append((cell, str(exc)))
            continue
        assert opts is not None  # show_help=False: help raises
        parsed.append((cell, opts))
    # A line naming the exercise that cannot be read is the cell the student meant: its
    # reason is the row's, rather than another cell graded in its place.
    meant = [(cell, why) for cell, why in broken if exercise in cell.line.replace("=", " ").split()]
    if meant:
        raise UsageError(f"{name}: cell {meant[0][0].index + 1}: {meant[0][1]}")
    for cell, opts in parsed:
        if opts.check == exercise:
            return opts, cell.body
    if len(cells) == 1:
        if broken:
            raise UsageError(f"{name}: {broken[0][1]}")
        return parsed[0][1], parsed[0][0].body
    unread = "".join(f"; cell {cell.index + 1}: {why}" for cell, why in broken[:3])
    raise UsageError(f"{name}: {len(cells)} %%idrrun cells and none with --check {exercise}{unread}")


def _parse(raw: bytes, path: Path, student: str, exercise: Exercise,
           language: Language | None) -> Submission:
    """A submission from the bytes of its file (`path` names it in the report)."""
    try:
        if path.suffix == ".ipynb":
            opts, body = notebook_cell(notebook.parse(raw, path.name), path.name, exercise.name)
            opts = resolve.restricted(opts, GRADED_FLAGS)
            src = source_mod.from_cell(body, f"{path.name}:cell", language or opts.language, None,
                                       path.parent)
            return Submission(student, path, src, options=opts)
        src = source_mod.from_bytes(raw, path, language, path.name, path.parent)
    except IdrrunError as exc:
        return Submission(student, path, None, str(exc))
    return Submission(student, path, src)


def _read(dirfd: int, rel: str, path: Path, student: str, exercise: Exercise,
          language: Language | None) -> Submission:
    """The file `rel` of the folder `dirfd` (shown as `path`): read through the folder's
    descriptor, a regular file with one name and at most MAX_SOURCE_BYTES, or refused before a
    byte of it is read or parsed (a link could make the grader read a file the student cannot,
    a FIFO would block it, a 400 MB notebook would fill its memory)."""
    taken = boundary.take(dirfd, rel, MAX_SOURCE_BYTES)
    if taken.data is None:
        return Submission(student, path, None, f"refused: {path.name}: {taken.why} (a submission "
                                               f"is a regular file of at most "
                                               f"{MAX_SOURCE_BYTES >> 20} MiB)")
    return _parse(taken.data, path, student, exercise, language)


def _is_candidate(rel: str, language: Language | None) -> bool:
    parts = rel.split("/")
    suffix = Path(parts[-1]).suffix
    if ".ipynb_checkpoints" in parts or (suffix not in SOURCE_SUFFIXES and suffix != ".ipynb"):
        return False
    return language is None or suffix == ".ipynb" or source_mod.language_of_path(rel) == language


def _pick(files: Sequence[str], exercise: Exercise, language: Language | None) -> str | None:
    """Which of a folder's files (relative paths) is graded: a source or a notebook whose name
    holds the exercise's, else the first source or notebook."""
    candidates = sorted((rel for rel in files if _is_candidate(rel, language)),
                        key=lambda rel: rel.split("/"))
    named = [rel for rel in candidates if exercise.name in rel.rsplit("/", 1)[-1]]
    chosen = named or candidates
    return chosen[0] if chosen else None


def _listing(dirfd: int, budget: boundary.Budget) -> list[str] | str:
    """The regular files of a handed-in folder (relative paths), or why it is refused: walked
    through descriptors, links never followed, within the budget a copy of it may take."""
    try:
        found = list(boundary.walk(dirfd, budget))
    except boundary.BoundaryError as exc:
        return f"refused: {exc.strerror} ({_bounds(budget)})"
    except OSError as exc:
        return f"cannot read the folder: {exc.strerror or exc}"
    total = sum(st.st_size for _, st in found)
    if total > budget.size:
        return (f"refused: more than {budget.size >> 20} MiB of files ({total} bytes, sizes as "
                f"the files claim them, holes included; {_bounds(budget)})")
    return [rel for rel, _ in found]


def _bounds(budget: boundary.Budget) -> str:
    return (f"a submission folder may hold {budget.entries} files and folders, "
            f"{budget.depth} levels deep, {budget.size >> 20} MiB")


def _discover_one(path: Path, exercise: Exercise, language: Language | None,
                  budget: boundary.Budget) -> Submission:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return Submission(path.stem, path, None, "no such file or folder"
                          if exc.errno == errno.ENOENT else f"cannot read it: {exc.strerror}")
    if stat.S_ISLNK(st.st_mode):
        return Submission(path.stem, path, None, "refused: a link, not followed (hand in the "
                                                 "file or the folder itself)")
    if stat.S_ISREG(st.st_mode):
        try:
            parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            return Submission(path.stem, path, None, f"cannot read it: {exc.strerror}")
        try:
            return _read(parent, path.name, path, path.stem, exercise, language)
        finally:
            os.close(parent)
    if not stat.S_ISDIR(st.st_mode):
        return Submission(path.stem, path, None, "refused: not a regular file or a folder")
    try:
        top = boundary.open_dir(path)
    except OSError as exc:
        return Submission(path.name, path, None, f"cannot read the folder: {exc.strerror}")
    try:
        files = _listing(top, budget)
        if isinstance(files, str):
            return Submission(path.name, path, None, files)
        choice = _pick(files, exercise, language)
        if choice is None:
            return Submission(path.name, path, None, "no source file or notebook in the folder")
        sub = _read(top, choice, path / choice, path.name, exercise, language)
        return dataclasses.replace(sub, path=path, chosen=path / choice)
    finally:
        os.close(top)


def _one_each(subs: Sequence[Submission]) -> list[Submission]:
    """Submissions that resolve to one student name (alice.c and alice.ipynb, or a folder
    alice/) make one error row naming them all, in the place of the first: which of them
    counts is the teacher's call, and one row, one feedback file per student stays true."""
    by_student: dict[str, list[Submission]] = {}
    for sub in subs:
        by_student.setdefault(sub.student, []).append(sub)
    out = []
    for sub in subs:
        same = by_student[sub.student]
        if len(same) == 1:
            out.append(sub)
        elif sub is same[0]:
            paths = [str(s.path) for s in same]
            named = f"{', '.join(paths[:-1])} and {paths[-1]}"
            which = "neither" if len(same) == 2 else "none"
            out.append(Submission(sub.student, sub.path, None,
                                  f"{len(same)} submissions for one student, {sub.student}: "
                                  f"{named}; {which} graded (keep one)"))
    return out


def discover(paths: Sequence[Path], exercise: Exercise, language: Language | None,
             budget: boundary.Budget = SUBMISSION_BUDGET) -> list[Submission]:
    """One Submission per student, in the order given; what cannot be graded (unreadable,
    refused, two for one student) is a Submission without a source, saying why."""
    seen: set[str] = set()
    subs = []
    for path in paths:
        if os.path.abspath(path) not in seen:  # the same path given twice is one submission
            seen.add(os.path.abspath(path))
            subs.append(_discover_one(path, exercise, language, budget))
    return _one_each(subs)


def resumed(sub: Submission, already: dict[str, GradeRow] | None) -> GradeRow | None:
    """The row an earlier grading left for `sub`, when it is kept: not for a submission that
    cannot be read now (alice.ipynb came beside the alice.c graded before), and not when that
    row said it could not be graded (the files may have changed since: one of two removed, a
    folder trimmed; such a row costs little to make again)."""
    row = already.get(str(sub.path)) if already and sub.source is not None else None
    return row if row is not None and row.status != "error" else None


def exposed(exercise: Exercise, submissions: Sequence[Path]) -> list[Path]:
    """What a box could read without namespaces (the "uid" level: it sees every file other users
    can read) and must not: the exercise's solutions, its spec and folders (the notebooks'
    solution cells), and the class's submissions."""
    secrets = [exercise.path, *exercise.folders, *submissions,
               *(p.solution for p in exercise.sources.values() if p.solution is not None)]
    return [p for p in dict.fromkeys(secrets) if sandbox.readable_by_others(p)]


def outside_includes(text: str) -> list[str]:
    """Files a source includes from outside its own folder (absolute paths, or `..`): refused
    in grading, where only what was handed in may be compiled. Linear: one pattern per line."""
    found = []
    for m in _INCLUDE.finditer(text[:MAX_SOURCE_BYTES]):
        name = m.group(1) or m.group(2) or ""
        if name.startswith("/") or ".." in Path(name).parts or name.startswith("~"):
            found.append(name)
    return found


def _nodes(nodes: Sequence[str]) -> str:
    return ",".join(dict.fromkeys(n for n in nodes if n))


def row_from_outcome(sub: Submission, exercise: Exercise, outcome: Outcome,
                     sandbox_level: str) -> GradeRow:
    failure = outcome.failure
    verdict = outcome.verdict
    status: GradeStatus = "pass" if outcome.ok else \
        "incomplete" if failure is None and verdict is not None and verdict.incomplete else "fail"
    return GradeRow(
        student=sub.student, exercise=exercise.name, language=outcome.request.source.language,
        status=status, sandbox=sandbox_level,
        build_seconds=outcome.build.seconds if outcome.build is not None else 0.0,
        run_seconds=outcome.run.proc.seconds if outcome.run is not None else 0.0,
        submission=str(sub.path),
        failure=failure.kind if failure is not None else None,
        failure_what=failure.what if failure is not None else "",
        checks=outcome.verdict.checks if outcome.verdict is not None else (),
        node=_nodes(outcome.run.nodes) if outcome.run is not None else "",
        build_node=_nodes(outcome.build.nodes) if outcome.build is not None else "",
        hidden_args=exercise.hidden_args,
    )


def _grader_options(sub: Submission, timeout: float | None,
                    exercise: Exercise | None = None) -> Options:
    """The submission's own (graded) flags, OpenACC on, the grader's time limit, and the
    profiler on when the exercise has GPU-trace checks (they need a trace to be evaluated)."""
    profile = sub.options.profile
    if profile is None and exercise is not None and exercise.needs_trace:
        profile = "auto"
    openacc = exercise is None or exercise.model == "openacc"
    return dataclasses.replace(sub.options,
                               acc=openacc if sub.options.acc is None else sub.options.acc,
                               timeout=timeout, profile=profile)


def graded(request: RunRequest, exercise: Exercise, room: Path, sandbox: str) -> RunRequest:
    """A graded request: in the grader's room (fresh box folders, a uid of its own, its builds
    kept apart from the shared cache and thrown away with the room), the course's folders
    hidden."""
    return dataclasses.replace(request, sandbox=not sandbox.startswith("none"), room=room,
                               hide=(*exercise.folders, *COURSE_DIRS))


def warm_solution(exercise: Exercise, subs: Sequence[Submission], settings: Settings,
                  probe: Probe, timeout: float | None, sandbox: str) -> None:
    """Run the solution once for each language the submissions use and each argument set
    (filling the cache)."""
    languages = sorted({s.source.language for s in subs if s.source is not None} & set(exercise.sources))
    for language in languages:
        pair = exercise.sources[language]
        if pair.solution is None:
            continue  # a students' course: the checks that need it say so
        try:
            src = source_mod.from_file(pair.solution, language, str(pair.solution))
            request, toolchain = resolve.resolve(Options(acc=exercise.model == "openacc",
                                                         timeout=timeout), src,
                                                 pair.solution.parent, settings, probe, exercise)
            request = graded(request, exercise, rooms.scratch_root(settings), sandbox)
            # Every argument set a row runs: the public one, then the hidden ones (one build).
            for args in (request.program_args, *exercise.hidden_args):
                solution_output(dataclasses.replace(request, program_args=tuple(args)), toolchain,
                                exercise, probe, settings)
        except IdrrunError:
            pass  # each row reports it


def grade_one(sub: Submission, exercise: Exercise, settings: Settings, probe: Probe,
              timeout: float | None = None, sandbox: str = "namespaces") -> GradeRow:
    """Grade one submission in its own scratch folder and sandbox; every problem becomes a row.

    sandbox: the machine's level (run/sandbox.py), or "none (--unsafe)" to grade without one."""
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
            rel = _inside(sub)
            again = _read(fd, rel, src / rel, sub.student, exercise, sub.source.language)
        finally:
            os.close(fd)
        if again.source is None:
            return error_row(again.problem, sub.source.language)
        source = dataclasses.replace(again.source, name=sub.source.name, origin_dir=src)
        check_language(source, exercise)
        request, toolchain = resolve.resolve(_grader_options(sub, timeout, exercise), source, src,
                                             settings, probe, exercise)
        request = graded(request, exercise, room, sandbox)
        if toolchain.target != "gpu" and sub.options.profile is None:
            # The trace checks need a GPU: a host build is not profiled for them (nsys would
            # only add seconds to every row), and they stay incomplete.
            request = dataclasses.replace(request, profile=None)
        outcome = execute_checked(request, toolchain, exercise, probe, settings, NullReporter(),
                                  hidden=True)
        return row_from_outcome(sub, exercise, outcome, sandbox)
    except IdrrunError as exc:
        return error_row(str(exc), sub.source.language)
    except OSError as exc:
        return error_row(f"cannot prepare the submission: {exc}", sub.source.language)
    finally:
        boundary.remove(room)


def _inside(sub: Submission) -> str:
    """Where the file that was read lies in the grader's copy of the submission."""
    if sub.chosen is not None:
        return sub.chosen.relative_to(sub.path).as_posix()
    return sub.path.name


def grade_all(subs: Sequence[Submission], exercise: Exercise, settings: Settings, probe: Probe,
              jobs: int, timeout: float | None,
              on_done: Callable[[GradeRow], None] | None = None,
              already: dict[str, GradeRow] | None = None,
              on_progress: Callable[[list[GradeRow]], None] | None = None,
              sandbox: str = "namespaces") -> list[GradeRow]:
    """Grade in parallel; rows come back in submission order. Workers wait on compilers and
    programs, not on Python, so threads are enough.

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
        if exercise.needs_solution and jobs > 1 and todo:
            # The solution's output is needed by every row: start it first, beside the students.
            started.append(pool.submit(warm_solution, exercise, subs, settings, probe, timeout,
                                       sandbox))
        futures = {pool.submit(grade_one, subs[i], exercise, settings, probe, timeout, sandbox): i
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
    return [rows[i] for i in range(len(subs))]


# How long an interrupted grader waits for its running rows once their steps are cancelled.
STOP_WAIT = 60.0


def stop_grading(pool: ThreadPoolExecutor, started: Sequence[Future[Any]],
                 settings: Settings) -> None:
    """An interrupted grading (Ctrl-C, or SIGTERM turned into one by the CLI): no new row
    starts, and what runs on a cluster is cancelled on every node, so that the rows' threads
    return at once. The rows that end now are not kept: a resumed grading grades them again."""
    pool.shutdown(wait=False, cancel_futures=True)
    if settings.launcher.kind != "srun":
        return  # local runs end by their own time limit
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
    build_mod.write_atomic(path, launch.SESSION + "\n")
    return notes


def _check_from(record: Any) -> CheckResult:
    status = str(record["status"])
    if status not in ("pass", "fail", "incomplete"):
        raise ValueError(status)
    return CheckResult(str(record["name"]), status,  # type: ignore[arg-type]
                       str(record.get("expected", "")), str(record.get("got", "")),
                       str(record.get("reason", "")), int(record.get("hidden") or 0),
                       str(record.get("kind") or ""))


def state_path(report: Path) -> Path:
    """Where the grader keeps every row in full (typed checks included) beside its report:
    a CSV report is for people, this is what a resumed grading reads."""
    return report.with_name(f".{report.name}.idrrun-state.json")


def private_cache(settings: Settings) -> None:
    """The cache as a grader needs it: the grader's own (refused when someone else made it or
    can write it), passable (a box's uid reaches its room through CACHE/scratch with srun) but
    not listable, and what no program may read (builds, the solutions' outputs, the grader's
    key) private to the grader."""
    cache = boundary.own_dir(settings.cache_dir, 0o711, parents=True)
    for name in ("builds", "solutions", "private"):
        boundary.own_dir(cache / name, 0o700)


def _private_secret(settings: Settings, name: str, size: int, make: Callable[[], bytes]) -> bytes:
    """CACHE/private/NAME (which no box sees), made once with make() when missing or shorter
    than size bytes, readable by the grader alone."""
    path = settings.cache_dir / "private" / name
    private_cache(settings)
    try:
        secret = path.read_bytes()
        if len(secret) >= size:
            return secret
    except OSError:
        pass
    tmp = temp_beside(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(make())
    os.replace(tmp, path)
    return path.read_bytes()


def grading_key(settings: Settings) -> bytes:
    """The grader's secret (in its cache, which no box sees): rows it wrote carry a MAC made
    with it, so that a resumed grading keeps only those — a forged row is graded again."""
    return _private_secret(settings, "grading.key", 32, lambda: secrets.token_bytes(32))


def grading_seed(settings: Settings, given: str | None = None) -> tuple[str, str]:
    """The instructor's seed of the hidden argument sets drawn when grading, and where it came
    from: --seed, else [grading] seed or IDRRUN_GRADING_SEED, else one made at random the first
    time and kept beside the grading key, so that a regrading draws the same values. It is
    never written into a report or a feedback file."""
    if given:
        return given, "given by --seed"
    if settings.grading_seed:
        return settings.grading_seed, "of [grading] seed or IDRRUN_GRADING_SEED"
    kept = _private_secret(settings, "grading.seed", 32, lambda: secrets.token_hex(16).encode())
    return kept.decode("ascii", "replace").strip(), \
        f"kept in {settings.cache_dir / 'private' / 'grading.seed'}"


def _record(row: GradeRow) -> dict[str, Any]:
    return row.as_dict() | {"failure": row.failure.value if row.failure is not None else None,
                            "failure_what": row.failure_what,
                            "checks": [dataclasses.asdict(c) for c in row.checks],
                            "hidden_args": [list(args) for args in row.hidden_args]}


def _mac(record: dict[str, Any], key: bytes) -> str:
    body = json.dumps({k: v for k, v in record.items() if k != "mac"}, sort_keys=True)
    return hmac.new(key, body.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def load_report(path: Path, exercise: str, key: bytes) -> dict[str, GradeRow]:
    """Rows of an earlier grading of the same exercise, by submission, that this grader can
    prove it wrote (their MAC); {} when none or unreadable. Rows that ended in an internal
    error are left out, so they are graded again."""
    state = state_path(path)
    if not state.is_file():
        return {}
    try:
        records = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    out: dict[str, GradeRow] = {}
    for rec in records if isinstance(records, list) else []:
        try:
            if not hmac.compare_digest(str(rec.get("mac", "")), _mac(rec, key)):
                continue
            status = str(rec["verdict"])
            if rec["exercise"] != exercise or status not in ("pass", "fail", "incomplete", "error") or \
                    str(rec["reasons"]).startswith("internal error"):
                continue
            kind = rec.get("failure")
            failure = FailureKind(kind) if kind else None
            out[str(rec["submission"])] = GradeRow(
                student=str(rec["student"]), exercise=exercise, language=str(rec["language"]),
                status=status,  # type: ignore[arg-type]
                build_seconds=float(rec["build_seconds"]), run_seconds=float(rec["run_seconds"]),
                submission=str(rec["submission"]), failure=failure,
                failure_what=str(rec.get("failure_what") or ""),
                error=str(rec["reasons"]) if status == "error" else "",
                checks=tuple(_check_from(c) for c in rec.get("checks") or []),
                sandbox=str(rec.get("sandbox", "")),
                # Absent from states written before rows had nodes: those resume too.
                node=str(rec.get("node") or ""), build_node=str(rec.get("build_node") or ""),
                hidden_args=tuple(tuple(str(a) for a in args) for args in rec.get("hidden_args") or []),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


REPORT_FIELDS = ("student", "exercise", "language", "verdict", "reasons", "build_seconds",
                 "run_seconds", "submission", "sandbox", "node", "build_node")


# OWASP's rule against CSV injection: Excel, LibreOffice Calc and Google Sheets read a cell
# that starts with = + - or @ as a formula (=HYPERLINK, =WEBSERVICE, DDE), and some drop a
# leading tab or carriage return (or spaces, LibreOffice's "trim spaces") before looking.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def inert(value: object) -> object:
    """A report cell no spreadsheet reads as a formula: text that would start one gets a single
    quote first, which they show as text. Numbers pass (ours are never negative)."""
    if isinstance(value, str) and value.lstrip(" ").startswith(_FORMULA_START):
        return "'" + value
    return value


def render_report(rows: Sequence[GradeRow], path: Path) -> str:
    """The report as people read it. JSON keeps every value as it is; in CSV every cell is
    inert and quoted (a spreadsheet set to another separator, the semicolon of a French Excel,
    would otherwise cut a cell at a student's ";" and start a new one)."""
    if path.suffix.lower() == ".json":
        return json.dumps([_record(r) for r in rows], indent=2) + "\n"
    if path.suffix.lower() == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=REPORT_FIELDS, quoting=csv.QUOTE_ALL)
        writer.writeheader()
        for r in rows:
            writer.writerow({key: inert(value) for key, value in r.as_dict().items()})
        return buf.getvalue()
    raise UsageError(f"--report {path}: use a .csv or .json file name")


def write_report(rows: Sequence[GradeRow], path: Path, key: bytes) -> None:
    """The report, and the state a resumed grading reads (state_path, every row signed with
    the grader's key), both written atomically."""
    records = [_record(r) for r in rows]
    for rec in records:
        rec["mac"] = _mac(rec, key)
    build_mod.write_atomic(state_path(path), json.dumps(records, indent=1) + "\n")
    build_mod.write_atomic(path, render_report(rows, path))


def _table_cell(text: str) -> str:
    """A Markdown table cell: on one line, inert (a table is pasted into spreadsheets too),
    its bars escaped."""
    return str(inert(" ".join(text.splitlines()))).replace("|", "\\|")


# What a student's feedback says of a check on a hidden argument set, instead of its values.
HIDDEN_CASE = "{kind} check on a hidden case (its arguments and values are not shown)"


def feedback_markdown(row: GradeRow, exercise: Exercise) -> str:
    """A student's feedback: every check with its values, but those of hidden runs, which say
    only their result and their kind (the arguments, drawn or fixed, stay the instructor's)."""
    lines = [f"# {exercise.title}", "", f"Student: {row.student}  ", f"Verdict: **{row.status}**", ""]
    if row.checks:
        lines += ["| check | result | expected | got | why |", "|---|---|---|---|---|"]
        for c in row.checks:
            cells = [c.name, c.status, c.expected, c.got, c.reason] if not c.hidden else \
                [c.name, c.status, "", "", HIDDEN_CASE.format(kind=c.kind or "output")]
            lines.append("| " + " | ".join(_table_cell(c) for c in cells) + " |")
    elif row.reasons:
        lines.append(row.reasons)
    return "\n".join(lines) + "\n"


def feedback_names(students: Sequence[str]) -> dict[str, str]:
    """A file name for each student's feedback, no two alike, nor alike but for case (a file
    system may ignore it). A name the sanitiser changes, that starts with "." or "-", or that
    another's matches but for case, gets a digest of the name as it was after a "~", which the
    sanitiser never lets through: two students never share a file."""
    safe = {s: re.sub(r"[^A-Za-z0-9_.-]+", "_", s) for s in students}
    folded = collections.Counter(name.casefold() for name in safe.values())
    names = {}
    for student, name in safe.items():
        if name == student and name and name[0] not in ".-" and folded[name.casefold()] == 1:
            names[student] = f"{name}.md"
        else:
            digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:12]
            names[student] = f"{re.sub(r'^[.-]', '_', name)}~{digest}.md"
    return names


def write_feedback(rows: Sequence[GradeRow], exercise: Exercise, folder: Path) -> None:
    names = feedback_names([row.student for row in rows])
    for row in rows:
        build_mod.write_atomic(folder / names[row.student], feedback_markdown(row, exercise))


