"""run/guard: the guard's command line is one typed record on both sides; its status pipe cannot
be forged by the program it supervises."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from idrrun.model import Limits
from idrrun.run import guard, isolation, proc

PROTECTIONS_CACHE = Path("/tmp/idrrun-test-guard-cache")


def test_guard_c_reads_the_fields_of_guard_args_in_order() -> None:
    source = guard.SOURCE.read_text()
    for table_name, record in (("OPTIONS", guard.GuardArgs), ("INNER_OPTIONS", guard.InnerGuardArgs)):
        table = re.search(table_name + r"\[\]\s*=\s*\{([^}]*)\}", source)
        assert table is not None, f"guard.c lost its {table_name} table"
        names = re.findall(r'"([a-z-]+)"', table.group(1))
        assert names == [f.name.replace("_", "-") for f in dataclasses.fields(record)]


def test_argv_is_named_options_then_the_program() -> None:
    args = guard.GuardArgs(status_fd=5, parent=42, file_size=10, nproc=0, address_space=0,
                           cgroups=(Path("/a/cgroup.procs"), Path("/b/cgroup.procs")))
    assert args.argv(Path("/g")) == ("/g", "--status-fd=5", "--parent=42", "--file-size=10",
                                     "--nproc=0", "--address-space=0",
                                     "--cgroups=/a/cgroup.procs:/b/cgroup.procs", "--uid=-1",
                                     "--gid=-1", "--sweep=1", "--stack=0", "--cpus=", "--")


def test_read_status() -> None:
    assert guard.read_status("child 12\nexit 3\n") == guard.GuardStatus(12, 3)
    assert guard.read_status("child 12\nsignal 11\n") == guard.GuardStatus(12, -11)
    assert guard.read_status("child 12\n") == guard.GuardStatus(12, None)
    assert guard.read_status("garbage\nexit x\n") == guard.GuardStatus(None, None)
    # Inside a sandbox the inner guard tells a signal from bubblewrap's `exit 128+N`.
    status = guard.read_status("child 12\ninner signal 11\nexit 139\n")
    assert status.program == -11 and status.returncode == 139


def test_the_program_does_not_inherit_the_status_pipe(tmp_path: Path) -> None:
    # stdin is /dev/null and stdout/stderr a terminal: any pipe the program holds would be the
    # guard's status pipe, through which it could claim "exit 0" for itself.
    program = tmp_path / "fds.sh"
    program.write_text("#!/bin/sh\nfor fd in /proc/$$/fd/*; do readlink $fd; done\nkill -ABRT $$\n")
    program.chmod(0o755)
    protections = isolation.probe(PROTECTIONS_CACHE)
    assert protections.guard is not None
    limits = Limits(memory=None, tasks=None, file_size=None)
    r = proc.run([str(program)], what="run", timeout=10,
                 spec=proc.ProcSpec(terminal=True, protections=protections, limits=limits))
    assert "/dev/pts/" in r.output and "pipe:" not in r.output, r.output
    assert r.returncode == -6 and r.signal_name == "SIGABRT"


def test_unknown_guard_option_is_refused(tmp_path: Path) -> None:
    protections = isolation.probe(PROTECTIONS_CACHE)
    assert protections.guard is not None
    r = proc.run([str(protections.guard), "--bogus=1", "--", "true"], what="probe", timeout=10)
    assert r.returncode == 125 and "unknown option --bogus=1" in r.output


def _writable_cgroup_parents() -> list[tuple[str, Path]]:
    """(hierarchy as /proc/PID/cgroup names it, a folder where a child cgroup can be made)."""
    found: list[tuple[str, Path]] = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        if kind == "cgroup2":
            found.append(("0:", Path(point)))
        elif kind == "cgroup" and "pids" in options.split(","):
            found.append(("pids", Path(point)))
    usable = []
    for key, parent in found:
        probe = parent / f"idrrun-test-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
            usable.append((key, parent))
        except OSError:
            continue
    return usable


def test_the_program_is_born_in_its_cgroup(tmp_path: Path) -> None:
    # The guard joins a v1 cgroup by moving its own thread ("0" to tasks) and forks a v2
    # program straight into its cgroup (clone3): both skip the RCU grace period that a write
    # to cgroup.procs costs (~12 ms here). Whatever the way, the program must be inside.
    parents = _writable_cgroup_parents()
    if not parents:
        pytest.skip("no cgroup hierarchy where this user can make a cgroup")
    protections = isolation.probe(PROTECTIONS_CACHE)
    assert protections.guard is not None
    for key, parent in parents:
        cg = parent / f"idrrun-test-{os.getpid()}"
        cg.mkdir()
        try:
            read, write = os.pipe()
            args = guard.GuardArgs(status_fd=write, parent=os.getpid(), file_size=0, nproc=0,
                                   address_space=0, cgroups=(cg / "cgroup.procs",), sweep=0)
            done = subprocess.run([*args.argv(protections.guard), "cat", "/proc/self/cgroup"],
                                  pass_fds=(write,), capture_output=True, text=True, timeout=10)
            os.close(write)
            with os.fdopen(read) as status:
                said = guard.read_status(status.read())
            assert said.returncode == 0 and done.returncode == 0, done.stderr
            assert "cannot join" not in done.stderr, done.stderr
            line = next(x for x in done.stdout.splitlines()
                        if x.startswith(key) or f":{key}:" in x or f",{key}:" in x)
            assert line.endswith(f"/{cg.name}"), (key, done.stdout)
        finally:
            cg.rmdir()


def test_the_guard_runs_the_program_on_the_cpus_of_its_limits() -> None:
    """Limits.cpus reach the guard (--cpus), which pins the program before it starts: a timed
    run gets CPUs of its own and every other graded process keeps off them (run/lanes.py)."""
    protections = isolation.probe(PROTECTIONS_CACHE)
    assert protections.guard is not None
    last = max(os.sched_getaffinity(0))
    for cpus, shown in (((last,), str(last)), ((), None)):
        limits = Limits(memory=None, tasks=None, file_size=None, cpus=cpus)
        r = proc.run(["grep", "Cpus_allowed_list", "/proc/self/status"], what="run", timeout=10,
                     spec=proc.ProcSpec(protections=protections, limits=limits))
        assert r.ok, r.output
        allowed = r.output.split(":", 1)[1].strip()
        assert allowed == shown if shown is not None else allowed != "", r.output
    # A CPU the machine does not offer: the program runs where it was, and the guard says so.
    limits = Limits(memory=None, tasks=None, file_size=None, cpus=(1000,))
    r = proc.run(["true"], what="run", timeout=10,
                 spec=proc.ProcSpec(protections=protections, limits=limits))
    assert r.ok and "cannot run on CPUs 1000" in r.output


def _interpreter(binary: Path) -> bool:
    """Whether an ELF file names a dynamic loader (binutils' readelf: its INTERP header)."""
    r = subprocess.run(["readelf", "--program-headers", "--wide", str(binary)],
                       capture_output=True, text=True, check=True)
    return "Requesting program interpreter" in r.stdout


def _c_library(binary: Path) -> str:
    """Which C library a static ELF file was linked with (binutils' nm: musl's own start-up
    function, __init_libc, is not glibc's)."""
    r = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True)
    return "musl" if re.search(r" T __init_libc$", r.stdout, re.MULTILINE) else "glibc"


@pytest.mark.skipif(shutil.which("musl-gcc") is None, reason="musl-tools is not installed")
def test_the_guard_is_built_with_musl_where_it_is_installed_else_with_glibc(tmp_path: Path) -> None:
    """musl's start is ~0.5 ms shorter than glibc's in a virtual machine (glibc's cpuid calls):
    the guard is built with it where musl-gcc is on PATH; named apart from a glibc guard, so
    that a musl installed since gives a guard of its own; a machine without it, the glibc one."""
    guard_path, why = isolation.build_guard(tmp_path / "musl", None)
    assert guard_path is not None, why
    assert not _interpreter(guard_path) and _c_library(guard_path) == "musl"
    r = proc.run([str(guard_path), "--bogus=1", "--", "true"], what="probe", timeout=10)
    assert r.returncode == 125 and "unknown option --bogus=1" in r.output, r.output
    without, why = isolation.build_guard(tmp_path / "musl", None, which=lambda command: None)
    assert without is not None, why
    assert not _interpreter(without) and _c_library(without) == "glibc"
    assert without.name != guard_path.name and guard_path.is_file()


def test_the_guard_is_linked_statically_where_it_can_be_else_as_the_system_links(tmp_path: Path) -> None:
    """It is started twice per compiled cell: static, it starts without the dynamic loader. A C
    compiler that cannot link statically (no static C library) gives the dynamic guard."""
    guard_path, why = isolation.build_guard(tmp_path / "static", None)
    assert guard_path is not None, why
    assert not _interpreter(guard_path)
    r = proc.run([str(guard_path), "--bogus=1", "--", "true"], what="probe", timeout=10)
    assert r.returncode == 125, r.output
    cc = tmp_path / "cc-without-static"
    cc.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -static ] && { echo "cannot find -lc" >&2; exit 1; }; done\n'
                  'exec gcc "$@"\n')
    cc.chmod(0o755)
    guard_path, why = isolation.build_guard(tmp_path / "dynamic", str(cc))
    assert guard_path is not None, why
    assert _interpreter(guard_path)
    r = proc.run([str(guard_path), "--bogus=1", "--", "true"], what="probe", timeout=10)
    assert r.returncode == 125, r.output
