"""The course's own check (every solution passes, every start file builds and fails), the
students' copies of the notebooks (without the cells tagged "solution"), and working copies of
the whole course (`idrrun course init`, for teachers or for students)."""

from __future__ import annotations

import json
import os
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

from ..checks import specs
from ..checks.specs import Exercise
from ..errors import UsageError
from ..model import FailureKind, Lanes, Probe, Settings
from ..request import notebook
from ..request import source as source_mod
from .classroom import grade_one
from .discover import Submission
from .report import GradeRow

_COMPILE_FAILURES = (FailureKind.COMPILE_ERROR, FailureKind.COMPILE_TIMEOUT)
SANDBOX = "none (the course's own files)"
SOLUTION_TAG = "solution"
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

    @property
    def ok(self) -> bool:
        """The solution passes (or could not be judged fully here), the start file builds and
        fails."""
        return (self.solution.status in ("pass", "incomplete") and self.start.status == "fail"
                and self.start.failure not in _COMPILE_FAILURES)

    @property
    def incomplete(self) -> bool:
        """OK as far as this machine can tell: some of the solution's checks need a GPU."""
        return self.ok and self.solution.status == "incomplete"


def course_check(exercises: Sequence[Exercise], languages: Sequence[str] | None, settings: Settings,
                 probe: Probe, jobs: int,
                 on_done: Callable[[GradeRow], None] | None = None,
                 lanes: Lanes | None = None) -> list[CourseRow]:
    """Every solution and start file graded, `jobs` at once, in the machine's GPU lanes."""
    subs: list[tuple[Exercise, str, str, Submission]] = []
    for ex in exercises:
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
    results: dict[int, GradeRow] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        # The course's own files: nothing hostile to wall off, so no sandbox.
        futures = {pool.submit(grade_one, s[3], s[0], settings, probe, None, SANDBOX, lanes): i
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


# ---------------------------------------------------------------------------------------
# Students' notebooks


def strip_notebook(nb: dict[str, Any]) -> int:
    """Remove the cells tagged "solution" and every code cell's outputs, in place; returns how
    many cells were removed."""
    cells = [c for c in nb.get("cells", []) if isinstance(c, dict)]
    kept = [c for c in cells if SOLUTION_TAG not in _tags(c)]
    for cell in kept:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["cells"] = kept
    return len(cells) - len(kept)


def _tags(cell: dict[str, Any]) -> list[Any]:
    metadata = cell.get("metadata")
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return tags if isinstance(tags, list) else []


def _write_notebook(nb: dict[str, Any], dest: Path) -> None:
    """As nbformat writes one (one-space indent, sorted keys, UTF-8), without its import."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")


def strip_solutions(path: Path, dest: Path) -> int:
    """Write a copy of a notebook without its solution cells; returns how many were removed."""
    nb = notebook.read(path)
    removed = strip_notebook(nb)
    _write_notebook(nb, dest)
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


def students_spec(text: str, solutions_kept: Collection[str]) -> str:
    """A spec as the students' course carries it: the solutions it does not ship and every
    grading-only part (fixed hidden argument sets, the ranges of drawn ones, checks marked
    grading_only) removed, with the comment lines right above them, marked `students = true`;
    its other comments and its layout kept (tomlkit). A students' spec stays as it is."""
    doc = tomlkit.parse(text)
    for pair in doc.get("sources", {}).values():
        if "solution" in pair and str(pair["solution"]) not in solutions_kept:
            del pair["solution"]
    args = doc.get("args")
    for key in ("hidden", "draw"):
        if args is not None and key in args:
            _drop(args.value, key)
    checks = doc.get("check")
    if checks is not None:
        for i in reversed(range(len(checks))):
            if checks[i].get("grading_only", False):
                if i > 0:  # a comment above [[check]] ends the table before it
                    previous = checks[i - 1].value.body
                    _drop_comments_above(previous, len(previous))
                del checks[i]
    if "students" not in doc:
        doc.add(tomlkit.comment(STUDENTS_NOTE))
        doc.add("students", True)
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
            if path.suffix != ".ipynb" or not students:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
            else:
                nb = notebook.read(path)
                removed += strip_notebook(nb)
                shown += [notebook.cell_source(c) for c in nb["cells"] if c.get("cell_type") == "code"]
                _write_notebook(nb, target)
            count += path.suffix == ".ipynb"
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
