"""`idrrun doctor` on this machine, and %idrrun_doctor in a kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from pathlib import Path

from conftest import PYTHONPATH, Kernel, has_gpu
from idrrun.toolchains import gcc


def doctor(env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=PYTHONPATH, **(env or {}))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", "doctor"], env=full, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def line(output: str, topic: str) -> str:
    return next(ln for ln in output.splitlines() if ln.startswith(topic))


def test_doctor_on_this_machine(tmp_path: Path) -> None:
    r = doctor(cwd=tmp_path)
    print(r.stdout)
    assert r.returncode == 0
    assert "OK" in line(r.stdout, "compiler gcc c") and shutil.which("gcc") in line(r.stdout, "compiler gcc c")
    assert "OK" in line(r.stdout, "compiler gcc fortran")
    offload = line(r.stdout, "gcc offloading")
    if gcc.has_offload(shutil.which("gcc")):
        assert "OK" in offload and "test build for sm_80 links" in offload
    else:
        assert "missing" in offload and "gcc-12-offload-nvptx" in r.stdout
    gpu = line(r.stdout, "GPU")
    assert ("OK" in gpu) if has_gpu() else ("none: OpenACC regions run on the host" in gpu)
    assert "protections" in r.stdout and "wall-clock limit" in line(r.stdout, "protections")
    assert "MPI" in r.stdout and "SLURM" in r.stdout and "nsys" in r.stdout
    assert "none (built-in defaults)" in line(r.stdout, "config files")
    (tmp_path / "idrrun.toml").write_text("timeout = 10\n")
    assert str(tmp_path / "idrrun.toml") in line(doctor(cwd=tmp_path).stdout, "config files")


def test_doctor_fails_when_nothing_can_compile(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    r = doctor(env={"PATH": str(empty)}, cwd=tmp_path)
    assert r.returncode == 1
    assert "no compiler found" in r.stderr
    assert "missing" in line(r.stdout, "compiler gcc c") and "apt-get install gcc" in r.stdout


def test_doctor_magic(kernel: Kernel) -> None:
    r = kernel.run("%idrrun_doctor")
    assert r.status == "ok", r.error_text
    html = next(d["text/html"] for d in r.displays if "text/html" in d)
    assert "compiler gcc c" in html and "protections" in html


def test_doctor_says_when_the_built_in_profiler_cannot_be_built(tmp_path: Path) -> None:
    r = doctor(env={"CUDA_HOME": str(tmp_path / "no-cuda")}, cwd=tmp_path)
    cupti = line(r.stdout, "CUPTI")
    assert "missing" in cupti and str(tmp_path / "no-cuda") in cupti
    assert "install the CUDA toolkit" in r.stdout


def test_doctor_and_the_students_readme_name_what_each_notebook_needs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """MPI for the -m N cells of notebooks 11, 13 and 16; a GPU for the trace checks: the
    README says so up front, and doctor where this machine lacks them."""
    import re as _re
    import shutil as _shutil

    from idrrun import doctor as doc

    root = Path(__file__).resolve().parent.parent
    readme = (root / "notebooks" / "README.md").read_text()
    for notebook in ("11_multi_gpu", "13_interop", "16_mandelbrot"):
        assert notebook in doc.NEEDS_MPI and f"`{notebook}`" in readme
        cells = (root / "notebooks" / "C" / f"{notebook}.ipynb").read_text()
        assert _re.search(r"%%idrrun[^\\n]* -m \d", cells), notebook  # it has MPI cells
    assert "openmpi-bin" in readme and "INCOMPLETE" in readme
    which = _shutil.which
    monkeypatch.setattr(doc.shutil, "which", lambda name, *a, **kw: None if name == "mpirun"
                        else which(name, *a, **kw))
    line = doc._tool("MPI", "mpirun", f"apt-get install openmpi-bin ({doc.NEEDS_MPI})")
    assert line.status == doc.MISSING and "16_mandelbrot" in line.fix


def test_every_course_notebook_with_cells_of_idrrun_loads_it_first() -> None:
    """The first code cell of each notebook that has %%idrrun cells loads the extension: a cell
    run before it would get IPython's bare "Cell magic not found"."""
    import json

    root = Path(__file__).resolve().parent.parent / "notebooks"
    for path in sorted(root.glob("*/*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        sources = ["".join(c["source"]) for c in cells]
        if any(s.startswith(("%%idrrun", "%idrrunfile")) for s in sources):
            assert sources[0].split("\n", 1)[0].strip() == "%load_ext idrrun", path
