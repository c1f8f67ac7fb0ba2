"""The course's own check (every solution passes, every start file builds and fails), the
students' copies of the notebooks (without the cells tagged "solution"), and working copies of
the whole course (`idrrun course init`, for teachers or for students)."""

from __future__ import annotations

import dataclasses
import gzip
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import tomlkit
from tomlkit.container import Container
from tomlkit.items import Comment, Whitespace

from ..checking import SolutionRun, solution_output
from ..checks import reference, registry, spec_fields, specs, words
from ..checks.evidence import Evidence
from ..checks.score import points
from ..checks.specs import Exercise
from ..checks.verdict import evaluate_one
from ..errors import IdrrunError, UsageError
from ..files import write_atomic
from ..pipeline import Job, prepare
from ..model import (BuildResult, CheckResult, FailureKind, Probe, ProcResult, RunResult,
                     Settings, Toolchain)
from ..request import notebook, resolve
from ..request import source as source_mod
from ..request.options import Options
from ..run import boundary, rooms
from .classroom import grade_one
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
# Reference values: the solutions' outputs for the public arguments (checks/reference.py)

# A reference for the GPU arguments made on a host: each run may take this many times the
# exercise's timeout (a GPU-size run on one core is long), unless --gpu-timeout says.
GPU_ON_HOST_FACTOR = 1.0
# The course (and the wheel) carries no picture larger than this, once gzip-compressed (a larger
# one is kept as NAME.gz: mandelbrot_rows' 13.4 MB at the GPU arguments is 0.6 MB so): its image
# check is then incomplete for those arguments.
MAX_REFERENCE_FILE = 4 << 20
REFERENCE_NOTE = ("The solutions' outputs for the exercise's public arguments (idrrun course",
                  "references): a students' course, which has no solutions, compares with them.")


@dataclass(frozen=True)
class ReferenceRow:
    """What `idrrun course references` did for one exercise, language and argument set."""

    exercise: str
    language: str
    target: str  # "host" or "gpu"
    args: tuple[str, ...]
    made: str = ""  # how it was made, when it was
    missing: str = ""  # why it was not
    seconds: float = 0.0


def _solution_job(exercise: Exercise, language: str, settings: Settings, probe: Probe) -> Job:
    """The solution's Job as a student's check would compare with it (OpenACC or OpenMP as
    the exercise asks), run where solution_output runs it (a scratch folder)."""
    pair = exercise.sources[language]
    assert pair.solution is not None
    src = source_mod.from_file(pair.solution, language, str(pair.solution))  # type: ignore[arg-type]
    model = Options(acc=True) if exercise.model == "openacc" else Options()
    request, toolchain = resolve.resolve(model, src, pair.solution.parent, settings, probe,
                                         exercise)
    return prepare(request, toolchain, probe, settings)


def _made(toolchain: Toolchain) -> str:
    return f"{toolchain.compiler.version}, built for the {toolchain.target}"


def make_reference(exercise: Exercise, language: str, target: str, settings: Settings,
                   probe: Probe, gpu_timeout: float | None = None) -> tuple[ReferenceRow, SolutionRun | None]:
    """The solution run with the target's public arguments (a GPU-size run on a host within
    gpu_timeout seconds); the row says how, or why not."""
    args = reference.target_args(exercise)[target]
    try:
        job = _solution_job(exercise, language, settings, probe).with_args(args)
    except IdrrunError as exc:
        return ReferenceRow(exercise.name, language, target, args, missing=str(exc)), None
    toolchain = job.toolchain
    if target == "gpu" and toolchain.target != "gpu":
        limit = gpu_timeout if gpu_timeout is not None else exercise.timeout * GPU_ON_HOST_FACTOR
        job = job.with_timeout(limit)
    run = solution_output(job, exercise)
    if run.output is None:
        where = "on a host without a GPU" if toolchain.target != "gpu" else "here"
        return ReferenceRow(exercise.name, language, target, args,
                            missing=f"not made {where}: {run.problem}"), None
    return ReferenceRow(exercise.name, language, target, args, made=_made(toolchain)), run


def _keep_file(files: Path, name: str, folder: Path) -> str:
    """The solution's file `name` (a picture, in `files`) kept in the reference folder: as it
    is, or as NAME.gz over MAX_REFERENCE_FILE; "" when kept (or not written), else why not."""
    picture = files / name
    if not picture.is_file():
        return ""
    size = picture.stat().st_size
    if size <= MAX_REFERENCE_FILE:
        shutil.copyfile(picture, folder / name)
        return ""
    # mtime 0: the same picture makes the same bytes (the course is under git).
    packed = gzip.compress(picture.read_bytes(), compresslevel=9, mtime=0)
    if len(packed) <= MAX_REFERENCE_FILE:
        (folder / (name + reference.PACKED)).write_bytes(packed)
        return ""
    return (f"{name} ({size / 1e6:.1f} MB, {len(packed) / 1e6:.1f} MB compressed: larger "
            f"than the {MAX_REFERENCE_FILE >> 20} MiB a reference keeps)")


def write_references(exercise: Exercise, made: Sequence[tuple[ReferenceRow, SolutionRun | None]]) -> Path:
    """The exercise's reference folder from what make_reference returned: every entry given
    replaced (an entry not made keeps the one already there, when it was made for the same
    arguments: a host without a GPU does not forget what a GPU made)."""
    base = reference.folder(exercise)
    base.mkdir(parents=True, exist_ok=True)
    index = reference.read_index(exercise) or {}
    for row, run in made:
        old = index.get(row.language, {}).get(row.target)
        kept = isinstance(old, dict) and "missing" not in old and \
            tuple(str(a) for a in old.get("args", ())) == row.args
        if run is None and kept:
            continue
        entry: dict[str, object] = {"args": list(row.args)}
        folder = reference.entry_folder(exercise, row.language, row.target)
        shutil.rmtree(folder, ignore_errors=True)
        if run is None or run.output is None:
            entry["missing"] = row.missing
        else:
            entry["made"] = row.made
            folder.mkdir(parents=True)
            (folder / reference.OUTPUT).write_text(run.output, encoding="utf-8")
            left_out = [why for name in exercise.solution_files
                        if run.files is not None and (why := _keep_file(run.files, name, folder))]
            if left_out:
                entry["left_out"] = left_out
        index.setdefault(row.language, {})[row.target] = entry
    doc = tomlkit.document()
    for line in REFERENCE_NOTE:
        doc.add(tomlkit.comment(line))
    for language in sorted(index):
        table = tomlkit.table(is_super_table=True)
        for target in reference.TARGETS:
            if target in index[language]:
                table.add(target, index[language][target])
        doc.add(language, table)
    (base / reference.INDEX).write_text(tomlkit.dumps(doc), encoding="utf-8")
    return base


def make_references(exercises: Sequence[Exercise], languages: Sequence[str] | None,
                    settings: Settings, probe: Probe, jobs: int, targets: Sequence[str],
                    gpu_timeout: float | None = None,
                    on_done: Callable[[ReferenceRow], None] | None = None) -> list[ReferenceRow]:
    """Every exercise that compares with its solution: the solution run with each of the
    targets' public arguments, its output (and pictures) written as the exercise's references."""
    work = [(ex, language, target) for ex in exercises if ex.needs_solution
            for language, pair in ex.sources.items()
            if pair.solution is not None and (not languages or language in languages)
            for target in reference.target_args(ex) if target in targets]
    done: dict[int, tuple[ReferenceRow, SolutionRun | None]] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(make_reference, ex, language, target, settings, probe,
                               gpu_timeout): i for i, (ex, language, target) in enumerate(work)}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            if on_done is not None:
                on_done(done[futures[future]][0])
    for ex in exercises:
        mine = [done[i] for i, w in enumerate(work) if w[0] is ex]
        if mine:
            write_references(ex, mine)
    return [done[i][0] for i in range(len(work))]


def reference_checks(exercise: Exercise, language: str, settings: Settings,
                     probe: Probe) -> tuple[CheckResult, ...]:
    """The exercise's checks that compare with the solution, evaluated on the solution's own run
    here against its reference for the same arguments: a solution that no longer prints what
    its reference says fails them (make the references again)."""
    if not exercise.needs_solution or exercise.sources[language].solution is None:
        return ()
    try:
        job = _solution_job(exercise, language, settings, probe)
    except IdrrunError as exc:
        return (CheckResult("reference", "fail", reason=str(exc)),)
    ref = reference.lookup(exercise, language, job.request.program_args)
    if ref is None:
        return (CheckResult("reference", "fail", "reference values", "none", NO_REFERENCE),)
    ran = solution_output(job, exercise)
    if ran.output is None:
        return (CheckResult("reference", "incomplete",
                            reason=f"the solution did not run: {ran.problem}"),)
    built = BuildResult(ok=True, command=(), proc=None, output="", cached=True, key="",
                        build_dir=None)
    run = RunResult(("solution",), ProcResult(("solution",), 0, output=ran.output))
    evidence = Evidence(source_text="", language=language, build=built, run=run, acc=None,
                        solution_output=ref.output, solution_problem=ref.problem,
                        from_reference=True, run_dir=ran.files, solution_dir=ref.folder,
                        solution_left_out=ref.left_out)
    solution_kinds = {k.name for k in registry.all_kinds() if k.needs_solution}
    return tuple(dataclasses.replace(evaluate_one(c, evidence), name=f"{c.label} (reference)")
                 for c in exercise.checks if c.kind in solution_kinds)


NO_REFERENCE = ("no reference values: run `idrrun course references` (the students' course "
                "compares with them)")


# ---------------------------------------------------------------------------------------
# Students' notebooks


def strip_solutions(path: Path, dest: Path) -> int:
    """Write a copy of a notebook without its solution cells; returns how many were removed."""
    nb = notebook.read(path)
    removed = notebook.strip_solution_cells(nb)
    notebook.write(nb, dest)
    return removed


def new_folder(dest: Path, fill: Callable[[Path], T]) -> T:
    """Make the folder dest with fill(folder), all or nothing: fill writes into a temporary
    folder beside dest, renamed to dest when it is complete. An existing dest that is not empty
    is refused (UsageError): nothing of it is overwritten."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"{dest}: exists and is not empty; give a new folder (nothing was written)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.tmp-"))
    try:
        result = fill(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would hide the copy from a class
        if dest.exists():
            dest.rmdir()  # empty, checked above
        os.rename(tmp, dest)
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def strip_tree(notebooks: Sequence[tuple[Path, Path]], out: Path) -> list[tuple[Path, int]]:
    """Students' copies of notebooks (source, path relative to out) in the new folder out, all
    or nothing; returns (relative path, solution cells removed) per notebook."""
    def fill(folder: Path) -> list[tuple[Path, int]]:
        return [(rel, strip_solutions(src, folder / rel)) for src, rel in notebooks]

    return new_folder(out, fill)


# ---------------------------------------------------------------------------------------
# Working copies of the course


@dataclass(frozen=True)
class CourseCopy:
    """What `idrrun course init` wrote."""

    dest: Path
    students: bool
    notebooks: int
    solution_cells_removed: int = 0
    solutions_left_out: tuple[str, ...] = ()  # relative to examples/
    # Solution sources the students' notebooks run in cells of their own (a worked example):
    # the notebooks show them anyway, so they stay, and the checks that need them still work.
    solutions_kept: tuple[str, ...] = ()


def _course_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not _SCRATCH_DIRS & set(rel.parts) and path.suffix not in _SCRATCH_SUFFIXES:
            yield path


def _drop_comments_above(body: list[tuple[Any, Any]], end: int) -> None:
    """Blank the comment lines that end right at body[end] (no blank line between): they speak
    of what is removed there. In place: the container's index of its keys stays right."""
    i = end - 1
    while i >= 0 and body[i][0] is None and isinstance(body[i][1], Comment):
        body[i] = (None, Whitespace(""))
        i -= 1


def _drop(table: Container, key: str) -> None:
    """Remove key from a TOML table, with the comment lines right above it."""
    keys = [k.key if k is not None else None for k, _ in table.body]
    _drop_comments_above(table.body, keys.index(key))
    del table[key]


def _dropped(check: Any) -> bool:
    return bool(check.get("grading_only", False)) or check.get("visibility") == "hidden"


def _label(check: Any) -> str:
    """A [[check]]'s label as specs.load gives it (its own, else its kind's default)."""
    if check.get("label"):
        return str(check["label"])
    return words.default_label(str(check.get("kind", "")), check.get("pattern"), check.get("exact"),
                               check.get("file"))


def _forget_dropped(checks: Any) -> None:
    """The labels of checks a students' copy leaves out, removed from the counts_when and
    counts_in_part of the checks it keeps (a notebook scores nothing; the spec must still
    load)."""
    gone = {_label(c) for c in checks if _dropped(c)}
    for check in checks:
        for key in ("counts_when", "counts_in_part"):
            if gone and key in check and not _dropped(check):
                kept = [label for label in check[key] if str(label) not in gone]
                if kept:
                    check[key] = kept
                else:
                    del check[key]


def students_spec(text: str, solutions_kept: Collection[str]) -> str:
    """A spec as the students' course carries it: the solutions it does not ship and every
    grading-only part (fixed hidden argument sets, the ranges of drawn ones, checks marked
    grading_only or hidden from students) removed, with the comment lines right above them,
    marked `students = true` (and `more_at_grading = true` when something was removed: a
    notebook says that grading runs more); its other comments and its layout kept (tomlkit).
    A students' spec stays as it is."""
    doc = tomlkit.parse(text)
    for pair in doc.get("sources", {}).values():
        if "solution" in pair and str(pair["solution"]) not in solutions_kept:
            del pair["solution"]
    removed = False
    args = doc.get("args")
    for key in ("hidden", "draw"):
        if args is not None and key in args:
            _drop(args.value, key)
            removed = True
    checks = doc.get("check")
    if checks is not None:
        _forget_dropped(checks)
        for i in reversed(range(len(checks))):
            if _dropped(checks[i]):
                if i > 0:  # a comment above [[check]] ends the table before it
                    previous = checks[i - 1].value.body
                    _drop_comments_above(previous, len(previous))
                del checks[i]
                removed = True
    if "students" not in doc:
        doc.add(tomlkit.comment(STUDENTS_NOTE))
        doc.add("students", True)
        if removed:
            doc.add("more_at_grading", True)
    return tomlkit.dumps(doc)


def init_course(source: Path, dest: Path, students: bool) -> CourseCopy:
    """A working copy of the course in source (its examples/ and notebooks/) in the new folder
    dest, all or nothing. students: the notebooks without their solution cells and outputs, the
    examples without the solutions (but those the remaining cells run) and without grading-only
    data."""
    examples, notebooks = source / "examples", source / "notebooks"
    for folder in (examples, notebooks):
        if not folder.is_dir():
            raise UsageError(f"{source}: not a course (no {folder.name}/ folder)")
    exercises = specs.all_exercises(examples)

    def fill(out: Path) -> CourseCopy:
        removed = 0
        shown: list[str] = []  # the code of every notebook cell the copy keeps
        count = 0
        for path in _course_files(notebooks):
            target = out / "notebooks" / path.relative_to(notebooks)
            if path.suffix != ".ipynb":
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                continue
            # Every notebook as JupyterLab saves it for this environment's kernel: the copy
            # opens unmodified there.
            nb = notebook.read(path)
            if students:
                removed += notebook.strip_solution_cells(nb)
                shown += [notebook.cell_source(c) for c in nb["cells"] if c.get("cell_type") == "code"]
            notebook.write(nb, target)
            count += 1
        solutions = {pair.solution.relative_to(examples).as_posix(): ex
                     for ex in exercises for pair in ex.sources.values() if pair.solution is not None}
        kept = sorted(rel for rel in solutions if any(Path(rel).name in code for code in shown))
        left_out = sorted(set(solutions) - set(kept)) if students else []
        specs_paths = {ex.path for ex in exercises}
        for path in _course_files(examples):
            rel = path.relative_to(examples).as_posix()
            target = out / "examples" / rel
            if rel in left_out:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if students and path in specs_paths:
                target.write_text(students_spec(path.read_text(encoding="utf-8"), kept),
                                  encoding="utf-8")
            else:
                shutil.copy2(path, target)
        # The copy must load as a course: a spec that points at a file left out fails here.
        specs.all_exercises(out / "examples")
        return CourseCopy(dest, students, count, removed, tuple(left_out),
                          tuple(kept) if students else ())

    return new_folder(dest, fill)


# ---------------------------------------------------------------------------------------
# An exercise of the teacher's own


TEMPLATE = Path(__file__).resolve().parent / "template"
# Every exercise is <topic>_<name> (examples/README.md): the topic is its first word.
EXERCISE_NAME = re.compile(r"[a-z][a-z0-9]*_[a-z0-9_]+")
# Where each language's sources go in a course's examples/, and their suffix.
_LANGUAGE_FOLDERS = {"c": ("C", ".c"), "fortran": ("Fortran", ".f90")}


@dataclass(frozen=True)
class NewExercise:
    """What `idrrun course new` wrote."""

    spec: Path
    sources: tuple[Path, ...]


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def new_exercise(course: Path, name: str, title: str | None,
                 languages: Sequence[str]) -> NewExercise:
    """A new exercise NAME in the course folder `course` (its examples/, made when missing)
    from idrrun's template: a spec with points, hidden cases and a visibility, a start file and
    a solution per language. Nothing is overwritten: an exercise whose files exist is refused
    before anything is written."""
    if not EXERCISE_NAME.fullmatch(name):
        raise UsageError(f"{name!r}: an exercise is named topic_name, in lower case, letters, "
                         f"digits and _ (e.g. loops_dot): examples/README.md")
    title = title or name.replace("_", " ")
    if "\n" in title or "*/" in title or not title.isprintable():
        raise UsageError("--title: one line of text (it goes into the sources' first comment)")
    examples = course / "examples"
    spec = examples / f"{name}.toml"
    sources: dict[Path, str] = {}
    tables = []
    for language in languages:
        folder, suffix = _LANGUAGE_FOLDERS[language]
        tables.append(f"[sources.{language}]\n"
                      f'exercise = "{folder}/{name}_exercise{suffix}"\n'
                      f'solution = "{folder}/{name}_solution{suffix}"\n')
        for role in ("exercise", "solution"):
            sources[examples / folder / f"{name}_{role}{suffix}"] = f"{role}{suffix}"
    taken = [p for p in (spec, *sources) if p.exists()]
    if taken:
        raise UsageError(f"{taken[0]}: exists; nothing was written (choose another name, or "
                         f"remove the exercise's files first)")
    values = {"name": name, "title": title, "topic": name.split("_")[0],
              "sources": "\n" + "\n".join(tables)}

    def fill(template: str, escape: bool = False) -> str:
        text = (TEMPLATE / template).read_text(encoding="utf-8")
        for key, value in values.items():
            text = text.replace(f'"{{{{{key}}}}}"', _toml_string(value)) if escape else text
            text = text.replace(f"{{{{{key}}}}}", value)
        return text

    for path, template in sources.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, fill(template))
    write_atomic(spec, fill("spec.toml", escape=True))
    specs.load(spec)  # the template makes a spec that loads: a SpecError here is idrrun's bug
    return NewExercise(spec, tuple(sources))
