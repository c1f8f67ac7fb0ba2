"""A whole class: finding submissions, grading them in parallel, reports, the course self-check."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from . import build as build_mod
from . import source as source_mod
from .config import Settings
from .errors import IdrrunError, UsageError
from .grading import GradeRow, Submission, grade_one, warm_solution

__all__ = ["GradeRow", "Submission"]
from .model import Language, Probe
from .specs import Exercise

SOURCE_SUFFIXES = {".c", ".cpp", ".cc", ".cxx", ".cu", ".f90", ".f95", ".f03", ".f08", ".f", ".F90"}
_MAGIC = re.compile(r"^\s*%%idrrun\b(.*)$")


def notebook_cell(path: Path, exercise: str) -> tuple[str, str]:
    """The %%idrrun cell of a notebook: the one with --check NAME, else the only one.

    Returns (magic line flags, cell body). Raises UsageError with the reason otherwise.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        cells = data["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path.name}: not a readable notebook ({type(exc).__name__}: {exc})") from None
    found: list[tuple[str, str]] = []
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        text = cell.get("source", "")
        text = "".join(text) if isinstance(text, list) else str(text)
        first, _, body = text.partition("\n")
        match = _MAGIC.match(first)
        if match:
            found.append((match.group(1), body))
    if not found:
        raise UsageError(f"{path.name}: no %%idrrun cell")
    for flags, body in found:
        try:
            words = shlex.split(flags)
        except ValueError:
            continue
        for i, word in enumerate(words[:-1]):
            if word in ("--check", "--exercise") and words[i + 1] == exercise:
                return flags, body
    if len(found) == 1:
        return found[0]
    raise UsageError(f"{path.name}: {len(found)} %%idrrun cells and none with --check {exercise}")


def _read(path: Path, student: str, exercise: Exercise, language: Language | None) -> Submission:
    try:
        if path.suffix == ".ipynb":
            flags, body = notebook_cell(path, exercise.name)
            lang = language
            if lang is None:
                m = re.search(r"(?:-l|--language)[ =]+(\S+)", flags)
                lang = m.group(1).lower() if m and m.group(1).lower() in source_mod.SUFFIXES else None  # type: ignore[assignment]
            src = source_mod.from_cell(body, f"{path.name}:cell", lang, None, path.parent)
        else:
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
                subs.append(Submission(path.name, path, sub.source, sub.problem))
        elif path.is_file():
            subs.append(_read(path, path.stem, exercise, language))
        else:
            subs.append(Submission(path.name, path, None, "no such file or folder"))
    return subs


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
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        if exercise.needs_solution and jobs > 1 and todo:
            # The solution's output is needed by every row: start it first, beside the students.
            pool.submit(warm_solution, exercise, subs, settings, probe, timeout)
        futures = {pool.submit(grade_one, subs[i], exercise, settings, probe, True, timeout): i
                   for i in todo}
        for future in as_completed(futures):
            i = futures[future]
            try:
                row = future.result()
            except Exception as exc:  # a bug must not cost a student their row
                sub = subs[i]
                row = GradeRow(sub.student, exercise.name, "", "error",
                               f"internal error: {type(exc).__name__}: {exc}", 0.0, 0.0, str(sub.path))
            rows[i] = row
            if on_done is not None:
                on_done(row)
            if on_progress is not None:
                on_progress([rows[k] for k in sorted(rows)])
    return [rows[i] for i in range(len(subs))]


def load_report(path: Path, exercise: str) -> dict[str, GradeRow]:
    """Rows of an earlier report of the same exercise, by submission; {} when none or unreadable.

    Rows that ended in an internal error are left out, so they are graded again."""
    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".json":
            records = json.loads(text)
        else:
            records = list(csv.DictReader(io.StringIO(text)))
    except (OSError, ValueError):
        return {}
    out: dict[str, GradeRow] = {}
    for rec in records if isinstance(records, list) else []:
        try:
            if rec["exercise"] != exercise or str(rec["reasons"]).startswith("internal error"):
                continue
            checks = tuple(tuple(str(c[k]) for k in ("name", "status", "expected", "got", "reason"))
                           for c in rec.get("checks") or [])
            out[str(rec["submission"])] = GradeRow(
                student=str(rec["student"]), exercise=exercise, language=str(rec["language"]),
                verdict=str(rec["verdict"]), reasons=str(rec["reasons"]),
                build_seconds=float(rec["build_seconds"]), run_seconds=float(rec["run_seconds"]),
                submission=str(rec["submission"]), checks=checks,  # type: ignore[arg-type]
            )
        except (KeyError, TypeError, ValueError):
            continue
    return out


REPORT_FIELDS = ("student", "exercise", "language", "verdict", "reasons", "build_seconds",
                 "run_seconds", "submission")


def render_report(rows: Sequence[GradeRow], path: Path) -> str:
    if path.suffix.lower() == ".json":
        return json.dumps([r.as_dict() | {"checks": [dict(zip(("name", "status", "expected", "got", "reason"), c))
                                                     for c in r.checks]} for r in rows], indent=2) + "\n"
    if path.suffix.lower() == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=REPORT_FIELDS)
        writer.writeheader()
        for r in rows:
            writer.writerow(r.as_dict())
        return buf.getvalue()
    raise UsageError(f"--report {path}: use a .csv or .json file name")


def write_report(rows: Sequence[GradeRow], path: Path) -> None:
    build_mod.write_atomic(path, render_report(rows, path))


def feedback_markdown(row: GradeRow, exercise: Exercise) -> str:
    lines = [f"# {exercise.title}", "", f"Student: {row.student}  ", f"Verdict: **{row.verdict}**", ""]
    if row.checks:
        lines += ["| check | result | expected | got | why |", "|---|---|---|---|---|"]
        for name, status, expected, got, reason in row.checks:
            cells = [name, status, expected, got, reason]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    elif row.reasons:
        lines.append(row.reasons)
    return "\n".join(lines) + "\n"


def write_feedback(rows: Sequence[GradeRow], exercise: Exercise, folder: Path) -> None:
    for row in rows:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", row.student) or "student"
        build_mod.write_atomic(folder / f"{safe}.md", feedback_markdown(row, exercise))


# ---------------------------------------------------------------------------------------
# The course's own check: every solution passes, every start file builds and fails.


@dataclass(frozen=True)
class CourseRow:
    exercise: str
    language: str
    solution: GradeRow
    start: GradeRow

    @property
    def ok(self) -> bool:
        start_built = not any(r.startswith("compile failed") for r in self.start.reasons.split("; "))
        return self.solution.verdict == "pass" and self.start.verdict == "fail" and start_built


def course_check(exercises: Sequence[Exercise], languages: Sequence[str] | None, settings: Settings,
                 probe: Probe, jobs: int,
                 on_done: Callable[[GradeRow], None] | None = None) -> list[CourseRow]:
    subs: list[tuple[Exercise, str, str, Submission]] = []
    for ex in exercises:
        for language, pair in ex.sources.items():
            if languages and language not in languages:
                continue
            for role, path in (("solution", pair.solution), ("start", pair.exercise)):
                src = source_mod.from_file(path, language, path.name)  # type: ignore[arg-type]
                subs.append((ex, language, role, Submission(f"{ex.name}/{language}/{role}", path, src)))
    results: dict[int, GradeRow] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(grade_one, s[3], s[0], settings, probe, True, None): i
                   for i, s in enumerate(subs)}
        for future in as_completed(futures):
            i = futures[future]
            results[i] = future.result()
            if on_done is not None:
                on_done(results[i])
    rows: list[CourseRow] = []
    for i in range(0, len(subs), 2):
        ex, language = subs[i][0], subs[i][1]
        rows.append(CourseRow(ex.name, language, solution=results[i], start=results[i + 1]))
    return rows


def strip_solutions(notebook: Path, dest: Path) -> int:
    """Copy a notebook without the cells tagged "solution"; returns how many were removed."""
    data = json.loads(notebook.read_text(encoding="utf-8"))
    cells = data.get("cells", [])
    kept = [c for c in cells if "solution" not in c.get("metadata", {}).get("tags", [])]
    for cell in kept:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    data["cells"] = kept
    build_mod.write_atomic(dest, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return len(cells) - len(kept)
