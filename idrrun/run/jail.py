"""The isolation of one run: its cgroups, its guard command line, and what is left after it.

open_jail() before the program starts, close_jail() after it ended (what limit was hit, what
was cleaned up), sweep() for processes that escaped the group. Only file-system operations and
signals here: proc.py starts the processes.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..model import Limits, Protections
from .guard import GuardArgs

@dataclass(frozen=True)
class Jail:
    """The isolation of one run: created before it starts, finished after it ends."""

    run_id: str  # IDRRUN_RUN=<run_id> marks every process of the run
    workdir: Path
    guard: Path | None  # the guard executable; None: the program runs without one
    guard_args: GuardArgs | None  # without status_fd (proc.py opens the pipe)
    cgroup_dirs: tuple[Path, ...]
    cgroup_version: int
    limits: Limits
    started: float = field(default_factory=time.time)

    @property
    def env(self) -> dict[str, str]:
        return {"IDRRUN_RUN": self.run_id}


def open_jail(protections: Protections, limits: Limits, workdir: Path, gpu_run: bool,
              cgroups: bool = True) -> Jail:
    """cgroups=False: limits by rlimits only (a compiler: creating, joining and removing two
    cgroups costs more than the compile of a small cell; its memory is capped by RLIMIT_AS)."""
    run_id = uuid.uuid4().hex
    cg_dirs: list[Path] = []
    procs: list[Path] = []
    cg = protections.cgroups if cgroups and _cgroups_pay(protections, limits) else None
    if cg is not None:
        wanted = (("memory", cg.memory_parent, limits.memory), ("pids", cg.pids_parent, limits.tasks))
        for files, parent, limit in wanted:
            if parent is None or not limit:
                continue
            d = parent / f"idrrun-{run_id}"
            if d in cg_dirs:
                continue
            try:
                d.mkdir()
            except OSError:
                continue
            cg_dirs.append(d)
            try:
                if cg.version == 1 and files == "memory" and limits.memory:
                    (d / "memory.limit_in_bytes").write_text(str(limits.memory))
                    try_write(d / "memory.memsw.limit_in_bytes", str(limits.memory))
                if cg.version == 1 and files == "pids" and limits.tasks:
                    (d / "pids.max").write_text(str(limits.tasks))
                if cg.version == 2:
                    if limits.memory and (d / "memory.max").exists():
                        (d / "memory.max").write_text(str(limits.memory))
                        try_write(d / "memory.swap.max", "0")
                    if limits.tasks and (d / "pids.max").exists():
                        (d / "pids.max").write_text(str(limits.tasks))
            except OSError:
                pass
            procs.append(d / "cgroup.procs")
    args: GuardArgs | None = None
    if protections.guard is not None:
        in_cgroup = {parent for parent in (cg.memory_parent, cg.pids_parent) if parent is not None
                     and any(d.parent == parent for d in cg_dirs)} if cg is not None else set()
        has_pids = cg is not None and cg.pids_parent in in_cgroup
        has_memory = cg is not None and cg.memory_parent in in_cgroup
        nproc = 0
        if limits.tasks and not protections.root and not has_pids:
            # RLIMIT_NPROC counts every process of the user: leave room for the ones running.
            nproc = limits.tasks + _user_process_count()
        address = limits.memory if (limits.memory and not gpu_run and not has_memory) else 0
        args = GuardArgs(status_fd=-1, parent=os.getpid(), file_size=limits.file_size or 0,
                         nproc=nproc, address_space=address or 0, cgroups=tuple(procs),
                         stack=-1 if limits.stack is None else limits.stack)
    return Jail(run_id=run_id, workdir=workdir, guard=protections.guard, guard_args=args,
                cgroup_dirs=tuple(cg_dirs), cgroup_version=cg.version if cg else 0, limits=limits)


def _cgroups_pay(protections: Protections, limits: Limits) -> bool:
    """Whether this run's limits need cgroups: for a memory cap, and for root (RLIMIT_NPROC
    does not hold uid 0). A user's task cap is RLIMIT_NPROC's job just as well, and the guard,
    a child subreaper, reaps what the run leaves without a cgroup's list, for less than a
    cgroup's mkdir, limits, join and rmdir (~1 ms). The join itself is cheap since the guard
    moves only its own thread (v1) or forks the program into the cgroup (v2): written the
    usual way, to cgroup.procs, it waited for an RCU grace period, 11 ms median after a
    compile on the 2-core machine (guard.c, benchmarks/RESULTS.md)."""
    return protections.root or bool(limits.memory)


def try_write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:
        pass


def _user_process_count() -> int:
    uid = os.getuid()
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def sweep(run_id: str, seconds: float = 2.0) -> int:
    """SIGKILL every process carrying the run's marker, until none is left; returns the count."""
    marker = f"IDRRUN_RUN={run_id}".encode()
    killed = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                data = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in data:
                found += 1
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    pass
        killed += found
        if not found:
            break
        time.sleep(0.02)
    return killed


def close_jail(jail: Jail, returncode: int | None) -> tuple[str | None, tuple[str, ...]]:
    """After the run (returncode: the program's own, from the guard): what limit was hit (if
    any), cleanup notes; removes the cgroups."""
    hit: str | None = None
    notes: list[str] = []
    for d in jail.cgroup_dirs:
        if _cgroup_oom(d, jail.cgroup_version):
            hit = "memory"
        if _cgroup_pids_max_hit(d, jail.cgroup_version):
            hit = hit or "tasks"
    if returncode == -signal.SIGXFSZ:
        hit = "file size"
        notes += _remove_capped_files(jail)
    stuck = False
    for d in jail.cgroup_dirs:
        for _ in range(50):
            try:
                d.rmdir()
                break
            except OSError:
                _kill_cgroup(d)
                time.sleep(0.02)
        else:
            stuck = True
    if stuck or (not jail.cgroup_dirs and jail.guard is None):
        # A cgroup that would not empty (or none at all): find what is left by its marker.
        sweep(jail.run_id)
    return hit, tuple(notes)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _cgroup_oom(d: Path, version: int) -> bool:
    if version == 2:
        text = _read(d / "memory.events")
    else:
        text = _read(d / "memory.oom_control")
        if not text and _read(d / "memory.failcnt").strip() not in ("", "0"):
            return True
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip() not in ("", "0"):
            return True
    return False


def _cgroup_pids_max_hit(d: Path, version: int) -> bool:
    for line in _read(d / "pids.events").splitlines():
        key, _, value = line.partition(" ")
        if key == "max" and value.strip() not in ("", "0"):
            return True
    return False


def _kill_cgroup(d: Path) -> None:
    if (d / "cgroup.kill").exists():
        try_write(d / "cgroup.kill", "1")
        return
    for pid in _read(d / "cgroup.procs").split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _remove_capped_files(jail: Jail) -> list[str]:
    """A file stopped at the size cap is truncated garbage: remove it, give the disk back."""
    cap = jail.limits.file_size
    notes: list[str] = []
    if not cap:
        return notes
    for root, dirs, files in os.walk(jail.workdir):
        if Path(root) != jail.workdir and len(Path(root).relative_to(jail.workdir).parts) > 2:
            dirs.clear()
            continue
        for name in files:
            path = Path(root) / name
            try:
                st = path.stat()
            except OSError:
                continue
            if st.st_size >= cap and st.st_mtime >= jail.started - 1:
                try:
                    path.unlink()
                    notes.append(f"removed {path} ({st.st_size} bytes): it reached the file-size cap")
                except OSError:
                    pass
    return notes


def remove_orphan_cgroups() -> list[str]:
    """Run cgroups (idrrun-<run id>) left by a killed idrrun: removed when no process is left
    in them (a live run's cgroup, of another grader, always holds one)."""
    removed = []
    for root in (Path("/sys/fs/cgroup"),):
        try:
            candidates = list(root.glob("idrrun-*")) + list(root.glob("*/idrrun-*")) + \
                list(root.glob("*/*/idrrun-*"))
        except OSError:
            continue
        for d in candidates:
            if d.is_dir() and not _read(d / "cgroup.procs").strip():
                try:
                    d.rmdir()
                    removed.append(str(d))
                except OSError:
                    pass
    return removed
