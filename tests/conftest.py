"""Shared fixtures: a real Jupyter kernel, isolated caches and configs, and a report header."""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_kernel import ANSI, CellResult, Kernel, started  # noqa: F401  (for the tests)

ROOT = Path(__file__).resolve().parent.parent
# For child processes (kernels, the CLI): the checkout first, and whatever the environment had.
PYTHONPATH = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def _version(cmd: str) -> str:
    path = shutil.which(cmd)
    if not path:
        return "missing"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.splitlines()[0] if out else "unknown"


def _gpu() -> str:
    if not shutil.which("nvidia-smi"):
        return "none"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "none (nvidia-smi failed)"
    return out or "none"


def pytest_report_header(config: Any) -> list[str]:
    return [
        f"gcc: {_version('gcc')}",
        f"gfortran: {_version('gfortran')}",
        f"nvc: {_version('nvc')}",
        f"mpirun: {_version('mpirun')}",
        f"GPU: {_gpu()}",
    ]


# Run in parallel (pytest-xdist, `-n N --dist loadgroup`): the tests of one file stay on one
# worker (their module fixtures are made once: a cluster, a hub, the dists), and these files
# share one worker, one after the other, because they change or watch the machine as a whole:
# local users made and removed (useradd), the grader's check that a hostile class left the
# machine's files as they were (nothing of a box's uid in /tmp, /var/tmp, /dev/shm: so the
# files whose boxes run at the "uid" level too), SLURM clusters of daemons on this machine.
ONE_AT_A_TIME = ("test_classroom.py", "test_hub.py", "test_slurm.py", "test_grader_boundary.py",
                 "test_read_once.py", "test_secrets.py", "test_evidence.py", "test_grade.py",
                 "test_nsys.py", "test_regions.py")


def pytest_xdist_auto_num_workers(config: Any) -> int:
    """`-n auto`: one worker more than the CPUs this process may use. Many tests spend their
    time waiting rather than computing (a server or a browser starting, a kernel, a SLURM job,
    a timeout on purpose): a whole `.ci/run` with a worker per CPU used 27 CPU-minutes in 19.7
    minutes on 2 CPUs; its tests took 848 s with 2 workers, 812 s with 3 (one run each)."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_configure(config: Any) -> None:
    """The checkout's bytecode, written once before the tests start (by the controller, not
    each xdist worker): the tests start hundreds of Python processes that import idrrun, and
    where PYTHONDONTWRITEBYTECODE is set (the development machine sets it, and CI runs on one
    like it) none of them writes what it compiles, so each compiled idrrun's sources again:
    `import IPython, idrrun.magic` took 0.87-0.96 s without the bytecode, 0.58 s with it;
    compiling the three folders, 0.9 s of CPU once. Bytecode left stale by a test's edit is
    ignored (Python checks each source's mtime and size)."""
    if hasattr(config, "workerinput"):
        return
    for folder in ("idrrun", "tests", "benchmarks"):
        compileall.compile_dir(ROOT / folder, quiet=2, workers=0)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the markers
def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    for item in items:
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group("the machine" if name in ONE_AT_A_TIME else name))


def has_gpu() -> bool:
    return _gpu() not in ("none", "none (nvidia-smi failed)")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's config or writes to the developer's cache."""
    home = tmp_path_factory.getbasetemp() / "home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    for var in ("IDRRUN_CONFIG", "IDR_CONFIG_FILE", "IDRRUN_FAMILY", "IDRRUN_LANGUAGE",
                "IDRRUN_TIMEOUT", "IDRRUN_OFFLOAD", "IDRRUN_EXAMPLES", "IDRRUN_GRADING_SEED"):
        monkeypatch.delenv(var, raising=False)


# ---------------------------------------------------------------------------------------
# A real Jupyter kernel (jupyter_kernel.py, which the benchmarks use too)


def _kernel_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.getbasetemp() / "home"
    env = dict(os.environ)
    env.update(XDG_CACHE_HOME=str(home / "cache"), XDG_CONFIG_HOME=str(home / "config"),
               PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    for var in ("IDRRUN_CONFIG", "IDR_CONFIG_FILE", "IDRRUN_FAMILY"):
        env.pop(var, None)
    return env


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    with started(tmp_path_factory.mktemp("nb"), _kernel_env(tmp_path_factory)) as k:
        yield k


@pytest.fixture
def fresh_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A kernel of the test's own: what a kernel session says once, it has not said yet."""
    with started(tmp_path_factory.mktemp("nb"), _kernel_env(tmp_path_factory)) as k:
        yield k


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
