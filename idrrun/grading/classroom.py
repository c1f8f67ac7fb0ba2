"""A whole class: finding submissions, grading each in its own scratch copy, in parallel, and
the reports (CSV/JSON, resumable) and per-student feedback.

    discover(paths) -> [Submission]; grade_one(sub) -> GradeRow (never raises); grade_all(...)
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import build as build_mod
from ..checks.specs import Exercise
from ..errors import IdrrunError, UsageError
from ..model import CheckResult, FailureKind, Language, Outcome, Probe, Settings, Source
from ..request import notebook, options, resolve
from ..request import source as source_mod
from ..request.options import Options
from ..run import launch
from .checked import NullReporter, check_language, execute_checked, solution_output

SOURCE_SUFFIXES = {".c", ".cpp", ".cc", ".cxx", ".cu", ".f90", ".f95", ".f03", ".f08", ".f", ".F90"}
# What a graded notebook's magic line may set; the grader decides the rest (arguments, limits,
# time, compiler flags), so that a submission cannot give itself more than its classmates.
GRADED_FLAGS = frozenset({"acc", "accopts", "language", "openmp", "threads", "profile"})

GradeStatus = Literal["pass", "fail", "error"]


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path  # what was handed in: a file, a notebook or a folder
    source: Source | None  # None when it could not be read
    problem: str = ""  # why source is None
    options: Options = Options()  # what a notebook's magic line asked for (GRADED_FLAGS only)


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
    # Where the run's tasks ran and where the compiler ran, when they were cluster job steps
    # (SLURMD_NODENAME of the step; nodes joined by "," for a run over several).
    node: str = ""
    build_node: str = ""

    @property
    def reasons(self) -> str:
        """One line for the report: the failure, then each failed check with its reason."""
        if self.status == "error":
            return self.error
        parts = []
        if self.failure is not None and self.failure is not FailureKind.CHECK:
            parts.append(f"{self.failure.step} failed: {self.failure_what}")
        parts += [f"{c.name}: {c.reason}" for c in self.checks if c.status == "fail"]
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "student": self.student, "exercise": self.exercise, "language": self.language,
            "verdict": self.status, "reasons": self.reasons,
            "build_seconds": round(self.build_seconds, 3), "run_seconds": round(self.run_seconds, 3),
            "submission": self.submission, "node": self.node, "build_node": self.build_node,
        }


def notebook_cell(path: Path, exercise: str) -> tuple[Options, str]:
    """The %%idrrun cell of a notebook: the one with --check NAME, else the only one.

    Returns (the line's options, cell body). Raises UsageError with the reason otherwise.
    """
    cells = notebook.magic_cells(notebook.read(path))
    if not cells:
        raise UsageError(f"{path.name}: no %%idrrun cell")
    parsed: list[tuple[Options, str]] = []
    for cell in cells:
        try:
            opts = options.parse_line(cell.line)
        except IdrrunError:
            continue
        if opts is not None:
            parsed.append((opts, cell.body))
    for opts, body in parsed:
        if opts.check == exercise:
            return opts, body
    if len(cells) == 1 and len(parsed) == 1:
        return parsed[0]
    if len(cells) == 1:
        raise UsageError(f"{path.name}: its %%idrrun line cannot be read")
    raise UsageError(f"{path.name}: {len(cells)} %%idrrun cells and none with --check {exercise}")


def _read(path: Path, student: str, exercise: Exercise, language: Language | None) -> Submission:
    try:
        if path.suffix == ".ipynb":
            opts, body = notebook_cell(path, exercise.name)
            opts = resolve.restricted(opts, GRADED_FLAGS)
            src = source_mod.from_cell(body, f"{path.name}:cell", language or opts.language, None,
                                       path.parent)
            return Submission(student, path, src, options=opts)
        src = source_mod.from_file(path, language, path.name)
    except IdrrunError as exc:
        return Submission(student, path, None, str(exc))
    return Submission(student, path, src)


def _pick(folder: Path, exercise: Exercise, language: Language | None) -> Path | None:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and
                   (p.suffix in SOURCE_SUFFIXES or p.suffix == ".ipynb") and
                   ".ipynb_checkpoints" not in p.parts)
    if language is not None:
        files = [p for p in files if p.suffix == ".ipynb" or source_mod.language_of_path(str(p)) == language]
    named = [p for p in files if exercise.name in p.name]
    candidates = named or files
    return candidates[0] if candidates else None


def discover(paths: Sequence[Path], exercise: Exercise, language: Language | None) -> list[Submission]:
    subs: list[Submission] = []
    for path in paths:
        if path.is_dir():
            choice = _pick(path, exercise, language)
            if choice is None:
                subs.append(Submission(path.name, path, None, "no source file or notebook in the folder"))
            else:
                sub = _read(choice, path.name, exercise, language)
                subs.append(dataclasses.replace(sub, student=path.name, path=path))
        elif path.is_file():
            subs.append(_read(path, path.stem, exercise, language))
        else:
            subs.append(Submission(path.name, path, None, "no such file or folder"))
    return subs


def _nodes(nodes: Sequence[str]) -> str:
    return ",".join(dict.fromkeys(n for n in nodes if n))


def row_from_outcome(sub: Submission, exercise: Exercise, outcome: Outcome) -> GradeRow:
    failure = outcome.failure
    return GradeRow(
        student=sub.student, exercise=exercise.name, language=outcome.request.source.language,
        status="pass" if outcome.ok else "fail",
        build_seconds=outcome.build.seconds if outcome.build is not None else 0.0,
        run_seconds=outcome.run.proc.seconds if outcome.run is not None else 0.0,
        submission=str(sub.path),
        failure=failure.kind if failure is not None else None,
        failure_what=failure.what if failure is not None else "",
        checks=outcome.verdict.checks if outcome.verdict is not None else (),
        node=_nodes(outcome.run.nodes) if outcome.run is not None else "",
        build_node=_nodes(outcome.build.nodes) if outcome.build is not None else "",
    )


def _grader_options(sub: Submission, timeout: float | None) -> Options:
    """The submission's own (graded) flags, OpenACC on, and the grader's time limit."""
    return dataclasses.replace(sub.options, acc=True if sub.options.acc is None else sub.options.acc,
                               timeout=timeout)


def warm_solution(exercise: Exercise, subs: Sequence[Submission], settings: Settings,
                  probe: Probe, timeout: float | None) -> None:
    """Run the solution once for each language the submissions use (filling the cache)."""
    languages = sorted({s.source.language for s in subs if s.source is not None} & set(exercise.sources))
    for language in languages:
        pair = exercise.sources[language]
        try:
            src = source_mod.from_file(pair.solution, language, str(pair.solution))
            request, toolchain = resolve.resolve(Options(acc=True, timeout=timeout), src,
                                                 pair.solution.parent, settings, probe, exercise)
            solution_output(request, toolchain, exercise, probe, settings)
        except IdrrunError:
            pass  # each row reports it


def grade_one(sub: Submission, exercise: Exercise, settings: Settings, probe: Probe,
              timeout: float | None = None) -> GradeRow:
    """Grade one submission in its own scratch folder; every problem becomes a row."""
    def error_row(reason: str, language: str = "") -> GradeRow:
        return GradeRow(sub.student, exercise.name, language, "error", 0.0, 0.0, str(sub.path),
                        error=reason)

    if sub.source is None:
        return error_row(sub.problem)
    scratch = Path(tempfile.mkdtemp(prefix="idrrun-grade-", dir=launch.scratch_root(settings)))
    try:
        # A copy of the student's folder, so includes and data files work and the original is
        # never touched.
        if sub.path.is_dir():
            shutil.copytree(sub.path, scratch / "work", symlinks=True)
        else:
            (scratch / "work").mkdir()
            shutil.copy2(sub.path, scratch / "work" / sub.path.name)
        workdir = scratch / "work"
        src = dataclasses.replace(sub.source, origin_dir=workdir)
        check_language(src, exercise)
        request, toolchain = resolve.resolve(_grader_options(sub, timeout), src, workdir, settings,
                                             probe, exercise)
        outcome = execute_checked(request, toolchain, exercise, probe, settings, NullReporter())
        return row_from_outcome(sub, exercise, outcome)
    except IdrrunError as exc:
        return error_row(str(exc), sub.source.language)
    except OSError as exc:
        return error_row(f"cannot prepare the submission: {exc}", sub.source.language)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def grade_all(subs: Sequence[Submission], exercise: Exercise, settings: Settings, probe: Probe,
              jobs: int, timeout: float | None,
              on_done: Callable[[GradeRow], None] | None = None,
              already: dict[str, GradeRow] | None = None,
              on_progress: Callable[[list[GradeRow]], None] | None = None) -> list[GradeRow]:
    """Grade in parallel; rows come back in submission order. Workers wait on compilers and
    programs, not on Python, so threads are enough.

    `already` holds rows of an earlier, interrupted grading (by submission path): those are
    kept, not graded again. `on_progress` sees every row known so far after each one finishes,
    in order, so that the report on disk is always whole."""
    rows: dict[int, GradeRow] = {}
    for i, sub in enumerate(subs):
        if already and str(sub.path) in already:
            rows[i] = already[str(sub.path)]
    todo = [i for i in range(len(subs)) if i not in rows]
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    started: list[Future[Any]] = []
    try:
        if exercise.needs_solution and jobs > 1 and todo:
            # The solution's output is needed by every row: start it first, beside the students.
            started.append(pool.submit(warm_solution, exercise, subs, settings, probe, timeout))
        futures = {pool.submit(grade_one, subs[i], exercise, settings, probe, timeout): i
                   for i in todo}
        started += futures
        for future in as_completed(futures):
            i = futures[future]
            try:
                row = future.result()
            except Exception as exc:  # a bug must not cost a student their row
                sub = subs[i]
                row = GradeRow(sub.student, exercise.name, "", "error", 0.0, 0.0, str(sub.path),
                               error=f"internal error: {type(exc).__name__}: {exc}")
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
    if status not in ("pass", "fail", "skipped"):
        raise ValueError(status)
    return CheckResult(str(record["name"]), status,  # type: ignore[arg-type]
                       str(record.get("expected", "")), str(record.get("got", "")),
                       str(record.get("reason", "")))


def state_path(report: Path) -> Path:
    """Where the grader keeps every row in full (typed checks included) beside its report:
    a CSV report is for people, this is what a resumed grading reads."""
    return report.with_name(f".{report.name}.idrrun-state.json")


def load_report(path: Path, exercise: str) -> dict[str, GradeRow]:
    """Rows of an earlier grading of the same exercise, by submission; {} when none or
    unreadable. Rows that ended in an internal error are left out, so they are graded again."""
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
            status = str(rec["verdict"])
            if rec["exercise"] != exercise or status not in ("pass", "fail", "error") or \
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
                # Absent from states written before rows had nodes: those resume too.
                node=str(rec.get("node") or ""), build_node=str(rec.get("build_node") or ""),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


REPORT_FIELDS = ("student", "exercise", "language", "verdict", "reasons", "build_seconds",
                 "run_seconds", "submission", "node", "build_node")


def render_report(rows: Sequence[GradeRow], path: Path) -> str:
    if path.suffix.lower() == ".json":
        return json.dumps([r.as_dict() | {
            "failure": r.failure.value if r.failure is not None else None,
            "failure_what": r.failure_what,
            "checks": [dataclasses.asdict(c) for c in r.checks]} for r in rows], indent=2) + "\n"
    if path.suffix.lower() == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=REPORT_FIELDS)
        writer.writeheader()
        for r in rows:
            writer.writerow(r.as_dict())
        return buf.getvalue()
    raise UsageError(f"--report {path}: use a .csv or .json file name")


def write_report(rows: Sequence[GradeRow], path: Path) -> None:
    """The report, and the state a resumed grading reads (state_path), both written atomically."""
    build_mod.write_atomic(state_path(path), render_report(rows, Path("state.json")))
    build_mod.write_atomic(path, render_report(rows, path))


def feedback_markdown(row: GradeRow, exercise: Exercise) -> str:
    lines = [f"# {exercise.title}", "", f"Student: {row.student}  ", f"Verdict: **{row.status}**", ""]
    if row.checks:
        lines += ["| check | result | expected | got | why |", "|---|---|---|---|---|"]
        for c in row.checks:
            cells = [c.name, c.status, c.expected, c.got, c.reason]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    elif row.reasons:
        lines.append(row.reasons)
    return "\n".join(lines) + "\n"


def write_feedback(rows: Sequence[GradeRow], exercise: Exercise, folder: Path) -> None:
    for row in rows:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", row.student) or "student"
        build_mod.write_atomic(folder / f"{safe}.md", feedback_markdown(row, exercise))


