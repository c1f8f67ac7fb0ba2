"""What the IDRIS notebooks met under idrrun (issue 34.7): a program written for srun picks its
GPU from SLURM_LOCALID, which each rank gets under mpirun too; `-g N` under mpirun says it does
nothing; a timeout shows the student's command, not idrrun's wrappers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT
from idrrun.model import RunRequest, Settings
from idrrun.request.source import from_cell
from idrrun.run import launch

SRC = from_cell("int main(void){return 0;}\n", "cell[1]", "c", None, Path("/w"))
EXE = Path("/w/prog")
FAKES = ROOT / "tests" / "fakes"

needs_mpi = pytest.mark.skipif(shutil.which("mpirun") is None or shutil.which("mpicc") is None,
                               reason="Open MPI is not installed")


def idrrun(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, XDG_CACHE_HOME=str(cwd / ".cache"), **extra)
    return subprocess.run([sys.executable, "-m", "idrrun", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


# As IDRIS's init_openacc.h reads the local rank (the multi-GPU notebook's 3 cells).
LOCAL_RANK_C = r"""#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *local = getenv("SLURM_LOCALID");
    if (local == NULL) {
        printf("impossible to determine the local rank of the process\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("rank %d local %s procid %s of %s\n", rank, local, getenv("SLURM_PROCID"),
           getenv("SLURM_NTASKS"));
    MPI_Finalize();
    return 0;
}
"""


@needs_mpi
def test_each_rank_gets_the_local_rank_a_program_for_srun_reads(tmp_path: Path) -> None:
    (tmp_path / "ranks.c").write_text(LOCAL_RANK_C)
    r = idrrun("run", "-m", "3", "ranks.c", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    said = sorted(line for line in r.stdout.splitlines() if line.startswith("rank "))
    assert said == [f"rank {n} local {n} procid {n} of 3" for n in range(3)], r.stdout
    # The command shown is the student's: mpirun and the program, not idrrun's shell.
    assert 'exec "$0"' not in r.stdout and "/bin/sh" not in r.stdout


def request(**kw: object) -> RunRequest:
    return RunRequest(source=SRC, workdir=Path("/w"), **kw)  # type: ignore[arg-type]


@needs_mpi
def test_the_rank_variables_shell_is_in_the_argv_not_in_the_command_shown() -> None:
    how = launch.command(request(mpi_ranks=2, program_args=("7",)), EXE, Settings(), {},
                         ("/bin/sh", "-c", ': > "$IDRRUN_LAUNCHED"; exec "$0" "$@"'))
    assert how.argv[-5:-2] == ("/bin/sh", "-c", ': > "$IDRRUN_LAUNCHED"; exec "$0" "$@"')
    assert launch.RANK_VARIABLES[2] in how.argv
    assert os.path.basename(how.shown[0]) == "mpirun" and how.shown[1:] == ("-np", "2", "/w/prog", "7")


@needs_mpi
def test_gpus_under_mpirun_say_they_have_no_effect() -> None:
    how = launch.command(request(mpi_ranks=2, gpus=2), EXE, Settings(), {})
    assert launch.GPUS_UNDER_MPIRUN.format(gpus=2) in how.notes
    assert "2" not in how.argv[3:-1]  # no GPU option went to mpirun
    alone = launch.command(request(mpi_ranks=2), EXE, Settings(), {})
    assert not any("--gpus" in note for note in alone.notes)


SLOW_C = "int main(void) { for (;;) {} }\n"


def test_a_timeout_under_profile_shows_the_students_command_with_fake_nsys(tmp_path: Path) -> None:
    # nsys alone from the fakes (tests/fakes/nsys runs the program it is given, as nsys does)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").symlink_to(FAKES / "nsys")
    (tmp_path / "slow.c").write_text(SLOW_C)
    r = idrrun("run", "--profiler", "nsys", "--timeout", "2", "slow.c", cwd=tmp_path,
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "timed out after 2 s" in out, out
    command = next(line for line in out.splitlines() if line.strip().startswith("command:"))
    assert "IDRRUN_LAUNCHED" not in command and "/bin/sh" not in command, command
    assert 'exec "$0"' not in command and "nsys profile" in command, command


LOOPING_ACC = ("int main(void) { double s = 0; for (;;) {\n#pragma acc parallel loop reduction(+:s)\n"
               "for (int i = 0; i < 10; i++) s += i; } return (int)s; }\n")


@pytest.mark.parametrize("flags, on_host", [(("-a",), True), ((), False)])
def test_a_timeout_of_openacc_regions_run_on_the_host_says_so(tmp_path: Path, flags: tuple[str, ...],
                                                              on_host: bool) -> None:
    # IDRIS's Game of Life, sized for a V100, runs minutes on a host's cores: the hint says why
    (tmp_path / "life.c").write_text(LOOPING_ACC)
    r = idrrun("run", *flags, "--accopts", "host", "--timeout", "2", "life.c", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 124 and "timed out after 2 s" in out, out
    assert ("Its OpenACC regions ran on the host (no GPU build)" in out) is on_host, out


# IDRIS's data-management notebook: a function's local array made device_resident.
DEVICE_RESIDENT = """#include <stdio.h>
void twice(double *a, int n) {
    double t[n];
    #pragma acc declare device_resident(t)
    #pragma acc parallel loop copy(a[0:n])
    for (int i = 0; i < n; i++) { t[i] = 2 * a[i]; a[i] = t[i]; }
}
int main(void) { double a[4] = {1, 2, 3, 4}; twice(a, 4); printf("%g\\n", a[3]); return 0; }
"""


def test_libgomps_goacc_declare_assertion_is_explained_on_its_line(tmp_path: Path) -> None:
    (tmp_path / "resident.c").write_text(DEVICE_RESIDENT)
    r = idrrun("run", "-a", "resident.c", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 3 and "GOACC_declare: Assertion" in out, out
    assert ("stopped at a `declare` directive (device_resident(t) at line 4): its GOACC_declare "
            "has no case for this clause") in out, out
    # what the hint advises runs
    (tmp_path / "created.c").write_text(DEVICE_RESIDENT.replace("device_resident(t)", "create(t)"))
    fixed = idrrun("run", "-a", "created.c", cwd=tmp_path)
    assert fixed.returncode == 0 and "8" in fixed.stdout, fixed.stdout + fixed.stderr
