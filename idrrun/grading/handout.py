"""What a class is handed and what comes back untouched: the copy of a file that `classroom
release` may publish, the files of the teacher's course released for an exercise, and the plain
reasons why a submission looks like the release itself. Pure: bytes and paths in, values out.

    released_copy(name, data, exercise) -> Handout    (solution cells stripped, solutions refused)
    course_handout(exercise, course) -> [Path]        (its notebooks and start files)
    unchanged(submitted, released) -> (reason, ...)   (byte for byte the release, or never run)

A release must never publish a solution (issue 44: the teacher's chapter notebook went out with
its solution cells, without a word), and a student who hands in the release untouched, having
run her port but not saved it, must be told so at once, not by a feedback file that speaks of
a notebook she never saw.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..checks import specs
from ..errors import IdrrunError, UsageError, did_you_mean
from ..request import notebook, options

NOTEBOOK_SUFFIX = ".ipynb"
# A solution source of the course, by the name the course gives it (examples/README.md:
# NAME_exercise.c is the start file, NAME_solution.c its solution): the stem before
# "_solution", and the suffix, which the start file shares.
_SOLUTION_NAME = re.compile(r"(?P<stem>.*)_solution(?P<suffix>\..*)")
# The names an exercise may have (as specs.find accepts them): anything else is no file name.
_EXERCISE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# How many known exercises an unknown name's message lists: enough to see the naming, short
# enough to read.
_KNOWN_SHOWN = 8

SOLUTION_REFUSED = ("{name} is the exercise's solution: release the start file {start} "
                    "instead")
STRIPPED_CELL = "cell {number} (tagged {tag})"
UNKNOWN_EXERCISE = "unknown exercise {name!r}{hint} in {folder} (known: {known})"
NOT_A_COURSE = "{course}: not a course (no examples/ folder)"
# Each reason holds "unchanged from the release": what submit, status and collect say of it.
SAME_BYTES = "{name}: unchanged from the release (byte for byte the released file)"
SAME_BYTES_AS = "{name}: unchanged from the release (byte for byte the released file {released})"
NOT_RUN = ("{name}: unchanged from the release? its --check cell has no output: run it, save, "
           "and submit again")
NOT_RUN_MANY = ("{name}: unchanged from the release? its --check cells have no output: run "
                "them, save, and submit again")


@dataclass(frozen=True)
class Handout:
    """A file as the class receives it: its bytes, and what was removed from them."""

    name: str
    data: bytes
    # Each solution cell removed, said as "cell 14 (tagged solution)" (numbered from 1, in the
    # notebook given): what release tells the teacher.
    stripped: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------
# What is released


def released_copy(name: str, data: bytes, exercise: str) -> Handout:
    """The copy of the file `name` (its bytes `data`) that may be released for `exercise`: a
    notebook without its solution cells and outputs, by the rule of `course init --students`
    (request/notebook.strip_solution_cells), written as idrrun writes notebooks; any other file as it is.
    Raises UsageError for a notebook that cannot be read, and for a solution source (a name
    NAME_solution.SUFFIX), naming the start file to release instead."""
    base = PurePosixPath(name).name
    if base.endswith(NOTEBOOK_SUFFIX):
        return _stripped_notebook(name, data)
    solution = _SOLUTION_NAME.fullmatch(base)
    if solution is not None:
        start = f"{solution['stem'] or exercise}_exercise{solution['suffix']}"
        raise UsageError(SOLUTION_REFUSED.format(name=name, start=start))
    return Handout(name, data)


def _stripped_notebook(name: str, data: bytes) -> Handout:
    nb = notebook.parse(data, name)
    removed = tuple(STRIPPED_CELL.format(number=i + 1, tag=notebook.SOLUTION_TAG)
                    for i, cell in enumerate(nb["cells"]) if notebook.is_solution(cell))
    notebook.strip_solution_cells(nb)
    # As notebook.write writes (course init's copies): the form JupyterLab 4 saves for this
    # environment's kernel, so that the released copy opens unmodified there.
    notebook.as_jupyterlab_saves(nb, notebook.python_version())
    # A lone surrogate (a "\udc80" escape in the teacher's JSON) has no UTF-8: written back as
    # that same JSON escape, which reads as the same string.
    return Handout(name, notebook.dumps(nb).encode("utf-8", "backslashreplace"), removed)


# ---------------------------------------------------------------------------------------
# What the teacher's course releases for an exercise


def course_handout(exercise: str, course: Path) -> list[Path]:
    """The files of the course in `course` (examples/ and notebooks/, as `course init` copies
    it) to release for `exercise`: every notebook with a %%idrrun cell that checks it (read as
    grading reads a cell, discover.notebook_cell), both languages, in path order; then its start
    files, as its spec names them. The notebooks are the teacher's: release them through
    released_copy. Raises UsageError for a folder that is no course and for an unknown
    exercise (naming a few known ones), SpecError for its broken spec."""
    examples = course / "examples"
    if not examples.is_dir():
        raise UsageError(NOT_A_COURSE.format(course=course))
    spec = specs.load(_spec_path(exercise, examples))
    found = [path for path in _notebooks(course / "notebooks") if _checks(path, exercise)]
    return found + [pair.exercise for pair in spec.sources.values()]


def _spec_path(exercise: str, examples: Path) -> Path:
    path = examples / f"{exercise}.toml"
    if _EXERCISE_NAME.fullmatch(exercise) and path.is_file():
        return path
    names = sorted(p.stem for p in examples.glob("*.toml"))
    known = ", ".join(names[:_KNOWN_SHOWN]) or "none"
    if len(names) > _KNOWN_SHOWN:
        known += f", ... ({len(names)} in all)"
    raise UsageError(UNKNOWN_EXERCISE.format(name=exercise, hint=did_you_mean(exercise, names),
                                             folder=examples, known=known))


def _notebooks(folder: Path) -> Iterator[Path]:
    """The course's notebooks, never a scratch copy (.ipynb_checkpoints, or any hidden folder:
    JupyterLab's and editors' own, which nobody released)."""
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*" + NOTEBOOK_SUFFIX)):
        if path.is_file() and not any(part.startswith(".")
                                      for part in path.relative_to(folder).parts):
            yield path


def _checks(path: Path, exercise: str) -> bool:
    """A %%idrrun cell of the notebook has --check EXERCISE, its line read as grading reads it;
    a line that cannot be read checks nothing."""
    return any(_checked(cell) == exercise for cell in notebook.magic_cells(notebook.read(path)))


def _checked(cell: notebook.MagicCell) -> str | None:
    """The exercise a cell's line checks; None when it checks none or cannot be read."""
    try:
        opts = options.parse_line(cell.line, show_help=False)
    except IdrrunError:
        return None
    return opts.check if opts is not None else None


# ---------------------------------------------------------------------------------------
# What comes back untouched


def unchanged(submitted: Mapping[str, bytes], released: Mapping[str, bytes], *,
              exercise: str | None = None) -> tuple[str, ...]:
    """Why the submission (file name -> bytes) looks like untouched work, one plain reason per
    file, each saying "unchanged from the release": a file byte for byte one of the released
    files, or a notebook whose --check cells all have no output (never run, or run and not
    saved). With `exercise`, a notebook's cells that check it are the ones that count (a chapter
    holds several exercises), when it has some. Empty when nothing looks untouched. Any bytes
    may come: what is not a notebook is only compared; nothing here raises."""
    originals: dict[bytes, str] = {}
    for released_name, data in released.items():
        originals.setdefault(bytes(data), released_name)
    reasons = []
    for name, data in submitted.items():
        same = originals.get(bytes(data))
        if same is not None:
            form = SAME_BYTES if PurePosixPath(same).name == PurePosixPath(name).name \
                else SAME_BYTES_AS
            reasons.append(form.format(name=name, released=same))
        elif PurePosixPath(name).name.endswith(NOTEBOOK_SUFFIX):
            unrun = _unrun_checks(bytes(data), exercise)
            if unrun:
                reasons.append((NOT_RUN if unrun == 1 else NOT_RUN_MANY).format(name=name))
    return tuple(reasons)


def _unrun_checks(data: bytes, exercise: str | None) -> int:
    """How many --check cells the notebook `data` has, when none of them has an output; 0 when
    one has, when it has none, or when it is no notebook (grading says why)."""
    try:
        nb = notebook.parse(data, "submission")
    except UsageError:
        return 0
    checks = [cell for cell in notebook.magic_cells(nb) if _holds_check(cell)]
    mine = [cell for cell in checks if exercise is not None and _names(cell, exercise)]
    counted = mine or checks
    cells = nb["cells"]
    if any(_has_output(cells[cell.index]) for cell in counted):
        return 0
    return len(counted)


def _holds_check(cell: notebook.MagicCell) -> bool:
    """Its line holds --check (or its other name, --exercise), read as the magic reads it; an
    unreadable line by its words, as the student wrote them."""
    if _checked(cell) is not None:
        return True
    return any(word.split("=", 1)[0] in ("--check", "--exercise") for word in cell.line.split())


def _names(cell: notebook.MagicCell, exercise: str) -> bool:
    """The cell checks `exercise`: its line read, else the name among its words (as grading
    takes an unreadable line that names the exercise for the student's cell)."""
    return _checked(cell) == exercise or exercise in cell.line.replace("=", " ").split()


def _has_output(cell: Any) -> bool:
    outputs = cell.get("outputs") if isinstance(cell, dict) else None
    return isinstance(outputs, list) and bool(outputs)
