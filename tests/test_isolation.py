"""run/isolation and run/jail: what this machine enforces, one run's jail opened and closed."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from idrrun.model import Limits
from idrrun.run import isolation, jail

CACHE = Path("/tmp/idrrun-test-isolation-cache")


def test_probe_builds_the_guard_once() -> None:
    first = isolation.probe(CACHE)
    assert first.guard is not None and os.access(first.guard, os.X_OK)
    mtime = first.guard.stat().st_mtime
    assert isolation.probe(CACHE).guard == first.guard and first.guard.stat().st_mtime == mtime
    assert "wall-clock limit" in first.describe()


def test_jail_limits_and_cleanup(tmp_path: Path) -> None:
    protections = isolation.probe(CACHE)
    limits = Limits(memory=256 << 20, tasks=32, file_size=1 << 20)
    j = jail.open_jail(protections, limits, tmp_path, gpu_run=False)
    assert j.env == {"IDRRUN_RUN": j.run_id} and j.guard_args is not None
    assert j.guard_args.file_size == 1 << 20 and j.guard_args.parent == os.getpid()
    for d in j.cgroup_dirs:
        assert d.is_dir()
    if protections.cgroups is None and not protections.root:
        assert j.guard_args.address_space == 256 << 20  # no cgroup: RLIMIT_AS on host runs
    hit, notes = jail.close_jail(j, 0)
    assert hit is None and notes == ()
    assert not any(d.exists() for d in j.cgroup_dirs)


def test_gpu_runs_get_no_address_space_limit(tmp_path: Path) -> None:
    protections = isolation.probe(CACHE)
    j = jail.open_jail(protections, Limits(memory=256 << 20), tmp_path, gpu_run=True)
    assert j.guard_args is not None and j.guard_args.address_space == 0
    jail.close_jail(j, 0)


def test_sweep_kills_what_carries_the_marker() -> None:
    env = dict(os.environ, IDRRUN_RUN="sweep-test-marker")
    child = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    time.sleep(0.05)
    assert jail.sweep("sweep-test-marker") >= 1
    assert child.wait(timeout=5) == -9
    assert jail.sweep("sweep-test-marker") == 0
