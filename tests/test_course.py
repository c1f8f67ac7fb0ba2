"""The course: every notebook runs top to bottom in a real kernel; the course checks itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ANSI, PYTHONPATH, ROOT, has_gpu

NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
EXERCISE_NAMES = {p.stem for p in (ROOT / "examples").glob("*.toml")}


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("display_data", "execute_result"):
            data = out.get("data", {})
            parts.append(data.get("text/html", "") + data.get("text/plain", ""))
        elif out.get("output_type") == "error":
            parts.append("\n".join(out.get("traceback", [])))
    return ANSI.sub("", "".join(parts))


def test_every_exercise_has_twin_notebooks() -> None:
    names = {p.relative_to(ROOT / "notebooks").parts[1] for p in NOTEBOOKS}
    for name in names:
        assert (ROOT / "notebooks" / "C" / name).is_file() and (ROOT / "notebooks" / "Fortran" / name).is_file()
    used = set()
    for nb_path in NOTEBOOKS:
        nb = nbformat.read(nb_path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and "--check" in cell.source.split("\n", 1)[0]:
                used.add(cell.source.split("--check", 1)[1].split()[0])
    assert EXERCISE_NAMES <= used, f"exercises without a notebook cell: {EXERCISE_NAMES - used}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(ROOT / "notebooks")) for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path, tmp_path: Path) -> None:
    # The notebooks' own layout (notebooks/LANG beside examples/), so relative paths hold; the
    # cells' files (--keep, program output) land in the temporary copy, not in the repository.
    work = tmp_path / "notebooks" / path.parent.name
    work.mkdir(parents=True)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    nb = nbformat.read(path, as_version=4)
    env_backup = dict(os.environ)
    os.environ["IDRRUN_EXAMPLES"] = str(ROOT / "examples")
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    try:
        # Cells tagged raises-exception may fail (exercise start files); any other error fails here.
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(work)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    for cell in nb.cells:
        if cell.cell_type != "code" or "--check" not in cell.source.split("\n", 1)[0]:
            continue
        out = _text(cell)
        if "solution" in _tags(cell):
            # Without a GPU, checks of the GPU trace cannot be evaluated: INCOMPLETE, not PASS.
            assert ": PASS" in out or (not has_gpu() and ": INCOMPLETE" in out and
                                       "needs a GPU trace" in out), \
                f"solution cell did not pass:\n{out[-2000:]}"
        elif "exercise" in _tags(cell):
            assert "not yet" in out, f"exercise cell did not give 'not yet':\n{out[-2000:]}"
            assert "compile failed" not in out


@pytest.mark.slow
def test_course_check_passes(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ROOT / "examples"))
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "course", "check", "-j", "2"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=900)
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{2 * len(EXERCISE_NAMES)} passed (" in r.stdout and ", 0 failed" in r.stdout


def test_strip_removes_solutions(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "course", "strip", str(ROOT / "notebooks"),
                        "--out", str(tmp_path / "students")], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    stripped = sorted((tmp_path / "students").rglob("*.ipynb"))
    assert len(stripped) == len(NOTEBOOKS)
    for path in stripped:
        nb = nbformat.read(path, as_version=4)
        assert not any("solution" in _tags(c) for c in nb.cells)
        original = nbformat.read(ROOT / "notebooks" / path.relative_to(tmp_path / "students"), as_version=4)
        assert len(nb.cells) == len([c for c in original.cells if "solution" not in _tags(c)])
