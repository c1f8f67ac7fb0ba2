"""What `classroom release` hands a class and what comes back untouched (grading/handout.py), on
the checkout's real course: a chapter notebook released never carries its solution cells, a
solution source is refused, an exercise's name finds its notebooks and start files, and a
submission that is the release (or never ran its --check cell) is said to be "unchanged from
the release", whatever bytes come."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from idrrun.authoring import copies
from idrrun.errors import UsageError
from idrrun.grading import handout
from idrrun.request import notebook

NOTEBOOKS = ROOT / "notebooks"
EXAMPLES = ROOT / "examples"
CHAPTERS = sorted(p for p in NOTEBOOKS.glob("*/*.ipynb"))
WITH_SOLUTIONS = [p for p in CHAPTERS
                  if any("solution" in (c.get("metadata", {}).get("tags") or [])
                         for c in json.loads(p.read_text(encoding="utf-8"))["cells"])]
INTRO = NOTEBOOKS / "C" / "01_intro.ipynb"
UNCHANGED = "unchanged from the release"


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _tagged(cell: dict[str, Any], tag: str) -> bool:
    return tag in (cell.get("metadata", {}).get("tags") or [])


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ---------------------------------------------------------------------------------------
# released_copy


def test_the_course_has_chapters_with_solution_cells() -> None:
    """The tests below read the real course: it must hold what they test."""
    assert len(WITH_SOLUTIONS) >= 30, WITH_SOLUTIONS


@pytest.mark.parametrize("path", WITH_SOLUTIONS, ids=_rel)
def test_released_chapter_never_holds_its_solution_cells(path: Path) -> None:
    raw = path.read_bytes()
    cells = json.loads(raw)["cells"]
    solutions = [i for i, c in enumerate(cells) if _tagged(c, "solution")]
    kept_code = [_source(c) for c in cells if not _tagged(c, "solution")]
    # The solution's own lines: what no cell the students keep shows (the exercise cell and its
    # solution share their first lines).
    secret = {line.strip() for i in solutions for line in _source(cells[i]).splitlines()
              if len(line.strip()) > 12 and not any(line.strip() in kept for kept in kept_code)}
    assert secret, f"{path}: its solution cells show nothing the exercise cells do not"

    copy = handout.released_copy(path.name, raw, "any")

    assert copy.name == path.name
    assert copy.stripped == tuple(f"cell {i + 1} (tagged solution)" for i in solutions)
    released = json.loads(copy.data)
    assert len(released["cells"]) == len(cells) - len(solutions)
    assert not any(_tagged(c, "solution") for c in released["cells"])
    shown = [_source(c) for c in released["cells"]]
    assert not any(_source(cells[i]) in shown for i in solutions if cells[i]["cell_type"] == "code")
    text = copy.data.decode("utf-8")
    leaked = [line for line in secret if line in text or json.dumps(line)[1:-1] in text]
    assert not leaked, f"{path}: the released copy shows solution lines: {leaked[:3]}"
    assert all(c.get("outputs", []) == [] and c.get("execution_count") is None
               for c in released["cells"] if c["cell_type"] == "code")


def test_released_notebook_is_the_students_copy_of_course_init(tmp_path: Path) -> None:
    """The same rule and the same bytes as `idrrun course init --students` (strip_solutions)."""
    dest = tmp_path / INTRO.name
    removed = copies.strip_solutions(INTRO, dest)
    copy = handout.released_copy(INTRO.name, INTRO.read_bytes(), "intro_pi")
    assert copy.data == dest.read_bytes()
    assert len(copy.stripped) == removed == 4
    assert copy.data.endswith(b"}\n")


def test_release_of_a_notebook_tagged_by_hand() -> None:
    """Tags as a teacher may leave them: a string, not a list, is no tag; a solution markdown
    cell goes too."""
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {"tags": ["solution"]}, "source": "the answer: 42"},
        {"cell_type": "code", "metadata": {"tags": "solution"}, "source": "kept", "outputs": [
            {"output_type": "stream", "name": "stdout", "text": "out"}], "execution_count": 3},
        {"cell_type": "code", "metadata": {"tags": ["exercise", "solution"]},
         "source": "%%idrrun -a --check intro_pi\nsecret()", "outputs": []},
    ]}
    copy = handout.released_copy("ch.ipynb", json.dumps(nb).encode(), "intro_pi")
    assert copy.stripped == ("cell 1 (tagged solution)", "cell 3 (tagged solution)")
    assert b"42" not in copy.data and b"secret" not in copy.data
    (kept,) = json.loads(copy.data)["cells"]
    assert kept["source"] == "kept" and kept["outputs"] == [] and kept["execution_count"] is None
    # Written as course init writes it: as JupyterLab saves it for this environment's kernel.
    assert json.loads(copy.data)["metadata"]["kernelspec"] == notebook.KERNELSPEC


SOLUTIONS = sorted(p for p in EXAMPLES.glob("*/*_solution.*"))


@pytest.mark.parametrize("path", SOLUTIONS, ids=_rel)
def test_a_solution_source_is_refused(path: Path) -> None:
    start = path.name.replace("_solution.", "_exercise.")
    assert (path.parent / start).is_file()
    with pytest.raises(UsageError) as caught:
        handout.released_copy(path.name, path.read_bytes(), path.name.split("_solution")[0])
    assert str(caught.value) == (f"{path.name} is the exercise's solution: release the start "
                                 f"file {start} instead")


def test_solutions_found() -> None:
    assert len(SOLUTIONS) >= 30 and any(p.suffix == ".f90" for p in SOLUTIONS)


def test_a_start_file_and_other_files_are_released_as_they_are() -> None:
    start = EXAMPLES / "C" / "intro_pi_exercise.c"
    assert handout.released_copy(start.name, start.read_bytes(), "intro_pi") == \
        handout.Handout(start.name, start.read_bytes(), ())
    assert handout.released_copy("README.md", b"\xff\x00", "intro_pi").data == b"\xff\x00"
    # A word "solution" elsewhere in a name is no solution source.
    assert handout.released_copy("solutions.txt", b"x", "intro_pi").data == b"x"


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe", b"[]", b'{"cells": 3}', b"nul\x00l"])
def test_an_unreadable_notebook_is_refused_by_name(raw: bytes) -> None:
    with pytest.raises(UsageError, match=r"^02_data\.ipynb: not a"):
        handout.released_copy("02_data.ipynb", raw, "data_laplace")


# ---------------------------------------------------------------------------------------
# course_handout


def _checking(name: str) -> list[Path]:
    """The notebooks with a %%idrrun line checking `name`, read from their text: the oracle."""
    line = re.compile(rf"^%%idrrun\b[^\n]*--check[ =]{re.escape(name)}(\s|$)")
    return [p for p in CHAPTERS
            if any(line.match(_source(c)) for c in json.loads(p.read_text("utf-8"))["cells"]
                   if c["cell_type"] == "code")]


EXERCISES = sorted(p.name.split("_exercise")[0] for p in EXAMPLES.glob("C/*_exercise.c"))


def test_course_handout_of_intro_pi() -> None:
    assert handout.course_handout("intro_pi", ROOT) == [
        NOTEBOOKS / "C" / "01_intro.ipynb", NOTEBOOKS / "Fortran" / "01_intro.ipynb",
        EXAMPLES / "C" / "intro_pi_exercise.c", EXAMPLES / "Fortran" / "intro_pi_exercise.f90"]


@pytest.mark.parametrize("name", EXERCISES)
def test_course_handout_finds_the_notebooks_and_start_files(name: str) -> None:
    found = handout.course_handout(name, ROOT)
    notebooks = [p for p in found if p.suffix == ".ipynb"]
    assert notebooks == _checking(name)
    assert {p.parent.name for p in notebooks} == {"C", "Fortran"}
    starts = [p for p in found if p.suffix != ".ipynb"]
    assert EXAMPLES / "C" / f"{name}_exercise.c" in starts
    assert all(p.name.startswith(f"{name}_exercise.") and p.is_file() for p in starts)
    assert not any("_solution" in p.name for p in found)


def test_exercises_found() -> None:
    assert len(EXERCISES) >= 15 and "intro_pi" in EXERCISES


@pytest.mark.parametrize("name", ["intro_px", "../intro_pi", "", "intro_pi_exercise"])
def test_an_unknown_exercise_lists_known_ones(name: str) -> None:
    with pytest.raises(UsageError, match=rf"unknown exercise {re.escape(repr(name))}") as caught:
        handout.course_handout(name, ROOT)
    assert "known: async_matmul, " in str(caught.value)
    if name == "intro_px":
        assert "(did you mean intro_pi?)" in str(caught.value)


def test_course_handout_of_a_copy_skips_scratch_notebooks(tmp_path: Path) -> None:
    """A teacher's course elsewhere: a checkpoint of a notebook is never released with it."""
    (tmp_path / "examples" / "C").mkdir(parents=True)
    (tmp_path / "notebooks" / "C" / ".ipynb_checkpoints").mkdir(parents=True)
    shutil.copy(EXAMPLES / "intro_pi.toml", tmp_path / "examples")
    for role in ("exercise", "solution"):
        for language, suffix in (("C", ".c"), ("Fortran", ".f90")):
            (tmp_path / "examples" / language).mkdir(exist_ok=True)
            shutil.copy(EXAMPLES / language / f"intro_pi_{role}{suffix}",
                        tmp_path / "examples" / language)
    shutil.copy(INTRO, tmp_path / "notebooks" / "C")
    shutil.copy(INTRO, tmp_path / "notebooks" / "C" / ".ipynb_checkpoints" / "01_intro-checkpoint.ipynb")
    shutil.copy(NOTEBOOKS / "C" / "02_data.ipynb", tmp_path / "notebooks" / "C")
    assert handout.course_handout("intro_pi", tmp_path) == [
        tmp_path / "notebooks" / "C" / "01_intro.ipynb",
        tmp_path / "examples" / "C" / "intro_pi_exercise.c",
        tmp_path / "examples" / "Fortran" / "intro_pi_exercise.f90"]
    with pytest.raises(UsageError, match="not a course"):
        handout.course_handout("intro_pi", tmp_path / "notebooks")


# ---------------------------------------------------------------------------------------
# unchanged


@pytest.fixture(scope="module")
def released() -> dict[str, bytes]:
    start = EXAMPLES / "C" / "intro_pi_exercise.c"
    return {INTRO.name: handout.released_copy(INTRO.name, INTRO.read_bytes(), "intro_pi").data,
            start.name: start.read_bytes()}


def _edited(data: bytes, exercise: str, output: bool) -> bytes:
    """The released notebook with the exercise cell of `exercise` edited, its output saved or
    not (as JupyterLab saves it: outputs and an execution count)."""
    nb = json.loads(data)
    (cell,) = [c for c in nb["cells"] if c["cell_type"] == "code"
               and _source(c).startswith("%%idrrun") and f"--check {exercise}" in _source(c)]
    cell["source"] = _source(cell).replace("{", "{\n#pragma acc parallel loop", 1)
    if output:
        cell["outputs"] = [{"output_type": "display_data", "metadata": {},
                            "data": {"text/plain": ["intro_pi: pass"]}}]
        cell["execution_count"] = 7
    return (json.dumps(nb, indent=1) + "\n").encode()


def test_the_release_handed_back_is_unchanged(released: dict[str, bytes]) -> None:
    assert handout.unchanged(released, released) == (
        "01_intro.ipynb: unchanged from the release (byte for byte the released file)",
        "intro_pi_exercise.c: unchanged from the release (byte for byte the released file)")
    # Under another name, it is still the released file, and says which.
    assert handout.unchanged({"pi.c": released["intro_pi_exercise.c"]}, released) == (
        "pi.c: unchanged from the release (byte for byte the released file "
        "intro_pi_exercise.c)",)


def test_an_edited_notebook_not_run_is_unchanged(released: dict[str, bytes]) -> None:
    edited = _edited(released[INTRO.name], "intro_pi", output=False)
    assert edited != released[INTRO.name]
    said = "intro_pi.ipynb: unchanged from the release? its --check cell has no output: run it, " \
           "save, and submit again"
    assert handout.unchanged({"intro_pi.ipynb": edited}, released, exercise="intro_pi") == (said,)
    # Without the exercise, every --check cell of the chapter counts (intro_saxpy's and
    # intro_pi's): none has an output.
    (many,) = handout.unchanged({"intro_pi.ipynb": edited}, released)
    assert many == "intro_pi.ipynb: unchanged from the release? its --check cells have no " \
                   "output: run them, save, and submit again"


def test_a_notebook_run_and_saved_is_not_unchanged(released: dict[str, bytes]) -> None:
    run = _edited(released[INTRO.name], "intro_pi", output=True)
    assert handout.unchanged({"intro_pi.ipynb": run}, released, exercise="intro_pi") == ()
    # One exercise of the chapter run is work done, whichever exercise is graded.
    assert handout.unchanged({"intro_pi.ipynb": run}, released) == ()
    # The other exercise of the chapter never run: its own cell has no output.
    assert len(handout.unchanged({"intro_pi.ipynb": run}, released,
                                 exercise="intro_saxpy")) == 1


def test_an_edited_source_is_not_unchanged(released: dict[str, bytes]) -> None:
    start = released["intro_pi_exercise.c"]
    assert handout.unchanged({"intro_pi_exercise.c": start + b"\n"}, released) == ()
    assert handout.unchanged({}, released) == ()
    assert handout.unchanged({"a.c": b""}, {}) == ()


GARBAGE = [b"", b"\x00", b"\xff\xfe\xfd", b"{", b"[]", b"null", b"42", b'"cells"',
           b'{"cells": 3}', b'{"cells": {"a": 1}}', b'{"cells": [1, "x", null, [], {}]}',
           b'{"cells": [{"cell_type": "code", "source": 5, "metadata": []}]}',
           b'{"cells": [{"cell_type": "code", "source": ["%%idrrun --check", 3], "outputs": "x"}]}',
           b'{"cells": [{"cell_type": "code", "source": "%%idrrun --check \\"x", "outputs": [1]}]}',
           b'{"cells": [{"cell_type": "code", "source": "%%idrrun --help --check x"}]}',
           b'{"cells": [{"cell_type": "code", "source": "%%idrrun -m nan --check=x"}]}',
           b'{"nbformat": 3, "worksheets": 7, "cells": []}',
           b'{"nbformat": 3, "worksheets": [{"cells": [{"cell_type": 1}]}]}',
           b"[" * 200_000, b'{"cells": [' + b'{"a": ' * 50_000]


@pytest.mark.parametrize("raw", GARBAGE, ids=lambda raw: repr(raw[:40]))
def test_any_bytes_are_judged_without_raising(raw: bytes, released: dict[str, bytes]) -> None:
    for name in ("intro_pi.ipynb", "intro_pi.c", "", "x/.ipynb"):
        said = handout.unchanged({name: raw}, released, exercise="intro_pi")
        assert isinstance(said, tuple) and all(UNCHANGED in s for s in said)


def test_odd_cells_say_what_they_can() -> None:
    """A --check line unreadable by the magic is still a --check cell; an output that is not a
    list is none."""
    unread = b'{"cells": [{"cell_type": "code", "source": "%%idrrun --check \\"x", "outputs": []}]}'
    assert len(handout.unchanged({"a.ipynb": unread}, {})) == 1
    odd = b'{"cells": [{"cell_type": "code", "source": "%%idrrun --check x", "outputs": "x"}]}'
    assert len(handout.unchanged({"a.ipynb": odd}, {})) == 1
    plain = b'{"cells": [{"cell_type": "code", "source": "%%idrrun -a", "outputs": []}]}'
    assert handout.unchanged({"a.ipynb": plain}, {}) == ()


def test_mangled_releases_never_raise(released: dict[str, bytes]) -> None:
    """The released notebook cut, spliced and flipped at random (seeded): any answer, never a
    traceback."""
    data = released[INTRO.name]
    rng = random.Random(44)
    for _ in range(300):
        raw = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(raw))
            choice = rng.random()
            if choice < 0.4:
                raw[at] = rng.randrange(256)
            elif choice < 0.7:
                del raw[at:at + rng.randint(1, 400)]
            else:
                raw[at:at] = rng.choice([b'"', b"{", b"]", b"null", b'"outputs": 1,', b"\\u"])
        said = handout.unchanged({"intro_pi.ipynb": bytes(raw)}, released, exercise="intro_pi")
        assert all(UNCHANGED in s for s in said)
