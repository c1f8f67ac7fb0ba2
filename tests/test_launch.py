"""run/launch: the run command — direct, mpirun, srun — and its environment."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from idrrun.errors import ToolNotFound
from idrrun.model import LauncherConfig, RunRequest, Settings
from idrrun.request.source import from_cell
from idrrun.run import launch

SRC = from_cell("int main(void){return 0;}\n", "cell[1]", "c", None, Path("/w"))
EXE = Path("/w/prog")


def request(**kw: object) -> RunRequest:
    return RunRequest(source=SRC, workdir=Path("/w"), **kw)  # type: ignore[arg-type]


def test_direct_run_with_threads_and_profiler() -> None:
    how = launch.command(request(threads=4, program_args=("10",)), EXE, Settings(), {"A": "1"},
                         ("nsys", "profile"), {"P": "2"})
    assert how.argv == ("nsys", "profile", "/w/prog", "10")
    assert how.env["OMP_NUM_THREADS"] == "4" and how.env["A"] == "1" and how.env["P"] == "2"
    assert how.cancel == ()


def test_gpus_without_a_launcher_is_said_to_do_nothing() -> None:
    how = launch.command(request(gpus=2), EXE, Settings(), {})
    assert any("-g/--gpus only applies with a launcher" in n for n in how.notes)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed")
def test_mpi_ranks_use_mpirun_with_root_and_oversubscribe() -> None:
    how = launch.command(request(mpi_ranks=3), EXE, Settings(), {})
    assert os.path.basename(how.argv[0]) == "mpirun" and how.argv[1:3] == ("-np", "3")
    assert how.env["OMPI_MCA_rmaps_base_oversubscribe"] == "1"
    if os.geteuid() == 0:
        assert how.env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"


def test_srun_names_the_step_and_knows_how_to_cancel_it(tmp_path: Path) -> None:
    fake = tmp_path / "srun"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    settings = Settings(launcher=LauncherConfig(kind="srun", command=str(fake), tasks="--ntasks=",
                                                threads="--cpus-per-task=", gpus="--gres=gpu:",
                                                options=("--qos=dev",)))
    how = launch.command(request(mpi_ranks=4, threads=2, gpus=1, timeout=90), EXE, settings, {})
    assert how.argv[:5] == (str(fake), "--qos=dev", "--ntasks=4", "--cpus-per-task=2", "--gres=gpu:1")
    name = next(a for a in how.argv if a.startswith("--job-name=")).split("=", 1)[1]
    assert "--time=2" in how.argv and how.cancel == ("scancel", "--full", "--name", name)
    assert how.remaining == ("squeue", "--noheader", "--name", name)


def test_missing_launcher_is_a_clear_error() -> None:
    settings = Settings(launcher=LauncherConfig(kind="srun", command="/no/srun"))
    with pytest.raises(ToolNotFound, match="launcher '/no/srun' not found"):
        launch.command(request(), EXE, settings, {})
