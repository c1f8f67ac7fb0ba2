"""run/launch: the run command — direct, mpirun, srun — and its environment."""

from __future__ import annotations

import dataclasses
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
    assert how.launcher == () and how.program == how.argv
    assert how.env["OMP_NUM_THREADS"] == "4" and how.env["A"] == "1" and how.env["P"] == "2"
    assert how.step is None


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


def test_srun_names_the_step_and_keeps_the_program_apart(tmp_path: Path) -> None:
    """The argv only (the file named srun is never run): srun's options, the step's name and
    time limit, the task prolog that records the node; the program comes last, apart, so that a
    sandbox can wrap it alone."""
    fake = tmp_path / "srun"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    settings = Settings(cache_dir=tmp_path / "cache",
                        launcher=LauncherConfig(kind="srun", command=str(fake), tasks="--ntasks=",
                                                threads="--cpus-per-task=", gpus="--gres=gpu:",
                                                options=("--qos=dev",)))
    how = launch.command(request(mpi_ranks=4, threads=2, gpus=1, nodes=2, timeout=90,
                                 program_args=("7",)), EXE, settings, {})
    assert how.launcher[:6] == (str(fake), "--qos=dev", "--ntasks=4", "--nodes=2",
                                "--cpus-per-task=2", "--gres=gpu:1")
    assert how.program == ("/w/prog", "7") and how.argv == (*how.launcher, *how.program)
    assert how.step is not None and how.step.name.startswith(f"idrrun-{launch.SESSION}-")
    assert f"--job-name={how.step.name}" in how.launcher and "--time=2" in how.launcher
    prolog = tmp_path / "cache" / "slurm" / "task-prolog.sh"
    assert f"--task-prolog={prolog}" in how.launcher and os.access(prolog, os.X_OK)
    assert how.env["IDRRUN_STEP_RECORDS"] == str(how.step.records) and how.step.records.is_dir()
    again = launch.command(request(), EXE, settings, {})
    assert again.step is not None and again.step.name != how.step.name


def test_builds_go_through_srun_only_when_asked(tmp_path: Path) -> None:
    fake = tmp_path / "srun"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    srun = LauncherConfig(kind="srun", command=str(fake))
    assert launch.compile_launch(request(), Settings(launcher=srun), {}) is None
    settings = Settings(cache_dir=tmp_path, launcher=dataclasses.replace(srun, builds=True))
    how = launch.compile_launch(request(compile_timeout=120, mpi_ranks=4), settings, {"A": "1"})
    assert how is not None and how.program == () and how.env["A"] == "1"
    assert how.step is not None
    assert how.launcher[:4] == (str(fake), "--ntasks=1", "--nodes=1", f"--job-name={how.step.name}")
    assert launch.scratch_root(settings) == tmp_path / "scratch"
    assert launch.scratch_root(Settings()) is None


def test_placement_reads_the_task_prologs_records(tmp_path: Path) -> None:
    step = launch.Step("idrrun-x-1", tmp_path)
    assert launch.placement(step) == ()
    for rank, node in ((0, "n1"), (1, "n1"), (3, "n2")):
        (tmp_path / str(rank)).write_text(f"{node} 12.0\n")
    assert launch.placement(step) == ("n1", "n1", "", "n2")
    assert launch.describe_placement(("n1", "n1", "n2", "n2")) == "ranks 0-1 on n1, 2-3 on n2"
    assert launch.describe_placement(("n3",)) == "ranks 0 on n3"


def test_missing_launcher_is_a_clear_error() -> None:
    settings = Settings(launcher=LauncherConfig(kind="srun", command="/no/srun"))
    with pytest.raises(ToolNotFound, match="launcher '/no/srun' not found"):
        launch.command(request(), EXE, settings, {})
