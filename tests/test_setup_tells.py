"""A setup that tells (issue 34.5): what each notebook needs is said up front (`idrrun doctor`,
the students' README); a cell whose MPI is missing says so in one line and the cell that shows
its picture does not fail for it; every course notebook loads the magic in its first code cell,
and the line `course init` gives loads it in every kernel."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import PYTHONPATH, ROOT, started
from idrrun import doctor
from idrrun.checks import specs
from idrrun.commands.course import LOAD_EVERYWHERE
from idrrun.errors import MPI_MISSING

MPI_NOTEBOOKS = ("11_multi_gpu", "13_interop", "16_mandelbrot")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, XDG_CACHE_HOME=str(tmp_path / "cache"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), **extra)
    for var in ("IDRRUN_CONFIG", "IDRRUN_FAMILY", "IDRRUN_EXAMPLES"):
        env.pop(var, None)
    return env


def test_course_needs_names_the_mpi_and_gpu_notebooks() -> None:
    exercises = {e.name: e for e in specs.all_exercises(ROOT / "examples")}
    needs = doctor.course_needs(ROOT / "notebooks", exercises)
    assert needs.mpi == MPI_NOTEBOOKS
    # 02_data's exercise checks its transfers in the GPU trace; 00_how_to_use checks nothing there
    assert "02_data" in needs.gpu and "00_how_to_use" not in needs.gpu
    assert set(needs.gpu) <= {p.stem for p in (ROOT / "notebooks" / "C").glob("*.ipynb")}


def test_doctor_says_which_notebooks_need_the_mpi_it_lacks(tmp_path: Path) -> None:
    # Compilers without Open MPI: a PATH with gcc and gfortran alone.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcc", "gfortran"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "doctor"], cwd=ROOT,
                       env=_env(tmp_path, PATH=str(bin_dir)), capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    mpi = next(i for i, line in enumerate(lines) if line.startswith("notebooks: MPI"))
    assert "missing" in lines[mpi] and ", ".join(MPI_NOTEBOOKS) in lines[mpi], lines[mpi]
    assert "mpirun and mpicc not found" in lines[mpi]
    assert "apt-get install openmpi-bin libopenmpi-dev" in lines[mpi + 1]
    # before the machine's own lines: up front
    assert mpi < next(i for i, line in enumerate(lines) if line.startswith("GPU "))
    gpu = next(line for line in lines if line.startswith("notebooks: GPU"))
    assert "02_data" in gpu


def test_the_students_readme_says_what_each_notebook_needs() -> None:
    readme = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What each notebook needs", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{name}`" in section for name in MPI_NOTEBOOKS)
    assert "apt-get install openmpi-bin libopenmpi-dev" in section and "NVIDIA GPU" in section
    assert 'c.InteractiveShellApp.extensions.append("idrrun")' in readme


MISSING_MPI_CELL = """%%idrrun -m 2 --get rows.pgm
#include <stdio.h>
int main(void)
{
    FILE *f = fopen("rows.pgm", "w");
    fputs("P2 1 1 1 0\\n", f);
    return fclose(f);
}
"""


def test_a_cell_without_mpi_says_so_in_one_line_and_its_picture_is_shown_missing(
        tmp_path: Path) -> None:
    # Open MPI missing, as idrrun sees it: the MPI compiler wrapper named by the config is not
    # on PATH (the same ToolNotFound as a machine without mpicc).
    (tmp_path / "idrrun.toml").write_text('[compilers.gcc]\nmpi_c = "no-such-mpicc"\n')
    with started(tmp_path, _env(tmp_path)) as kernel:
        failed = kernel.run(MISSING_MPI_CELL)
        # IPython's UsageError: one line on stderr, no traceback
        assert failed.status == "error" and failed.stderr.startswith("UsageError: "), failed
        message = failed.stderr.strip()
        assert "\n" not in message and "no-such-mpicc" in message and MPI_MISSING in message
        number = failed.execution_count
        shown = kernel.run('from idrrun.images import show\nshow("rows.pgm")')
        assert shown.status == "ok", shown.error_text
        said = " ".join(d.get("text/plain", "") for d in shown.displays)
        assert f"rows.pgm: not written: cell In [{number}] did not run" in said, shown.displays
        assert "no-such-mpicc" in said
        # A picture no failed cell was to write is still an error of the cell that shows it.
        other = kernel.run('show("never.pgm")')
        assert other.status == "error" and "no such file" in other.error_text
        # Once the cell runs, its picture is shown again (a cell that runs well takes it off).
        (tmp_path / "idrrun.toml").write_text("")
        ran = kernel.run(MISSING_MPI_CELL.replace("-m 2 ", ""))
        assert ran.status == "ok", ran.error_text
        again = kernel.run('show("rows.pgm")')
        assert again.status == "ok" and any("image/png" in d for d in again.displays), again.displays


def test_every_course_notebook_loads_the_magic_in_its_first_code_cell() -> None:
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        if any(c.lstrip().startswith(("%%idrrun", "%idrrun")) for c in code):
            assert code[0].splitlines()[0].strip() == "%load_ext idrrun", path


def test_the_line_course_init_gives_loads_the_magic_in_every_kernel(tmp_path: Path) -> None:
    found = re.search(r"`(c\.InteractiveShellApp\.extensions[^`]+)` to (\S+)", LOAD_EVERYWHERE)
    assert found, LOAD_EVERYWHERE
    line, where = found.groups()
    ipython = tmp_path / "ipython"
    config = ipython / Path(where).relative_to("~/.ipython")
    config.parent.mkdir(parents=True)
    config.write_text(line + "\n")
    cell = "%%idrrun\n#include <stdio.h>\nint main(void) { puts(\"loaded\"); return 0; }\n"
    with started(tmp_path, _env(tmp_path, IPYTHONDIR=str(ipython)), load_idrrun=False) as kernel:
        r = kernel.run(cell)
        assert r.status == "ok", r.error_text
        assert "loaded" in r.stdout
    # Without it, the bare IPython error the README explains.
    with started(tmp_path, _env(tmp_path, IPYTHONDIR=str(tmp_path / "bare")),
                 load_idrrun=False) as kernel:
        r = kernel.run(cell)
        assert r.status == "error" and "Cell magic `%%idrrun` not found" in r.stderr
