"""Working copies of the course (`idrrun course init`, for teachers or for students), the
students' copies of the notebooks and specs (without the cells tagged "solution", the hidden data
and the solutions' checks), and a new exercise from the template (`idrrun course new`).

    init_course(source, dest, students) -> CourseCopy
    strip_tree(notebooks, out) -> [(notebook, cells removed)]; strip_solutions(path, dest) -> cells removed
    students_spec(text, solutions_kept) -> the spec as a students' course holds it
    new_exercise(course, name, title, languages) -> NewExercise
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import tomlkit
from tomlkit.container import Container
from tomlkit.items import Comment, Whitespace

from ..checks import specs, words
from ..checks.score import points
from ..errors import UsageError
from ..files import write_atomic
from ..model import FailureKind
from ..request import notebook


_COMPILE_FAILURES = (FailureKind.COMPILE_ERROR, FailureKind.COMPILE_TIMEOUT)
# What a copy of the course leaves out: a checkout's scratch files.
_SCRATCH_DIRS = frozenset({".ipynb_checkpoints", "__pycache__", ".idrrun", "idrrun-profile"})
_SCRATCH_SUFFIXES = frozenset({".o", ".gimple", ".original", ".pyc"})
STUDENTS_NOTE = ("A students' copy of the course (idrrun course init --students): no solution "
                 "sources but those its notebooks show, no grading-only data.")
T = TypeVar("T")


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
