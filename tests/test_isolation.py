"""run/isolation and run/jail: what this machine enforces, one run's jail opened and closed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from idrrun.model import Cgroups, Limits
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


def test_a_user_without_memory_cap_gets_no_cgroup_but_rlimit_nproc(tmp_path: Path) -> None:
    # Joining a cgroup costs an RCU grace period (~11 ms on the 2-core machine): a user's run
    # without memory cap takes RLIMIT_NPROC; root (which RLIMIT_NPROC does not hold) and a
    # memory cap keep the cgroups. (A folder stands for the cgroup parent: nothing is joined.)
    real = isolation.probe(CACHE)
    parent = tmp_path / "pids"
    parent.mkdir()
    cg = Cgroups(version=2, memory_parent=None, pids_parent=parent)
    user = replace(real, cgroups=cg, root=False)
    j = jail.open_jail(user, Limits(memory=None, tasks=32), tmp_path, gpu_run=False)
    assert j.cgroup_dirs == () and j.guard_args is not None and j.guard_args.nproc > 32
    j2 = jail.open_jail(replace(user, root=True), Limits(memory=None, tasks=32), tmp_path, False)
    assert [d.parent for d in j2.cgroup_dirs] == [parent] and j2.guard_args is not None
    assert j2.guard_args.nproc == 0 and j2.guard_args.cgroups == (j2.cgroup_dirs[0] / "cgroup.procs",)
    j3 = jail.open_jail(user, Limits(memory=1 << 30, tasks=32), tmp_path, gpu_run=False)
    assert [d.parent for d in j3.cgroup_dirs] == [parent]
    for d in (*j2.cgroup_dirs, *j3.cgroup_dirs):
        d.rmdir()


def test_sweep_kills_what_carries_the_marker() -> None:
    env = dict(os.environ, IDRRUN_RUN="sweep-test-marker")
    child = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    time.sleep(0.05)
    assert jail.sweep("sweep-test-marker") >= 1
    assert child.wait(timeout=5) == -9
    assert jail.sweep("sweep-test-marker") == 0


def test_fake_bwrap_that_cannot_mount_proc_names_the_container_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fake bwrap (a script) fails as bubblewrap fails in a podman or docker container whose
    # /proc is partly masked: the reason names the flag that lifts it.
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Can'\"'\"'t mount proc on /newroot/proc: "
                    "Operation not permitted' >&2\nexit 1\n")
    fake.chmod(0o755)
    real_which = shutil.which
    monkeypatch.setattr(isolation.shutil, "which",
                        lambda name, *a, **k: str(fake) if name == "bwrap" else
                        None if name == "setpriv" else real_which(name, *a, **k))
    isolation.sandbox_support.cache_clear()
    try:
        support = isolation.sandbox_support()
    finally:
        isolation.sandbox_support.cache_clear()
    assert support.level in ("uid", "none")
    assert "Can't mount proc" in support.why and "--security-opt systempaths=unconfined" in support.why


def test_the_guard_s_name_follows_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """guard.c's digest names the guard; it is remembered by the source's identity (a stat per
    call), and a changed source (another size, mtime, ctime) is read and hashed again."""
    source = tmp_path / "guard.c"
    source.write_text(isolation.GUARD_SOURCE.read_text())
    monkeypatch.setattr(isolation, "GUARD_SOURCE", source)
    monkeypatch.setattr(isolation.tools, "FRESH", -1.0)  # remembered however young the file
    first = isolation.guard_digest()
    assert isolation.guard_digest() == first
    source.write_text(source.read_text() + "/* changed */\n")
    assert isolation.guard_digest() != first
