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
from typing import Literal

from ..files import read_whole
from ..model import Cgroups, Limits, Protections
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
    # Where they were made (None: unknown, every controller's files are read at the end)
    cgroups: Cgroups | None = None

    def controls(self, d: Path, controller: Literal["memory", "pids"]) -> bool:
        """Whether the run's cgroup `d` was made under the controller's parent: on cgroup v1 a
        pids cgroup has no memory files to read at the end, nor the other way round."""
        if self.cgroups is None:
            return True
        parent = self.cgroups.memory_parent if controller == "memory" else self.cgroups.pids_parent
        return d.parent == parent

    @property
    def env(self) -> dict[str, str]:
        return {"IDRRUN_RUN": self.run_id}


def open_jail(protections: Protections, limits: Limits, workdir: Path, gpu_run: bool,
              cgroups: bool = True) -> Jail:
    """cgroups=False: limits by rlimits only (a compiler: creating, joining and removing two
    cgroups costs more than the compile of a small cell; its memory is capped by RLIMIT_AS)."""
    run_id = uuid.uuid4().hex
    cg = protections.cgroups if cgroups and _cgroups_pay(protections, limits) else None
    made = _make_cgroups(cg, run_id, limits) if cg is not None else ()
    args = _guard_args(protections, limits, cg, made, gpu_run) \
        if protections.guard is not None else None
    return Jail(run_id=run_id, workdir=workdir, guard=protections.guard, guard_args=args,
                cgroup_dirs=made, cgroup_version=cg.version if cg else 0, limits=limits,
                cgroups=cg)


def _make_cgroups(cg: Cgroups, run_id: str, limits: Limits) -> tuple[Path, ...]:
    """The run's cgroups, their limits written: one per controller with a limit to keep (v1),
    one for both (v2, where both controllers have the same parent)."""
    made: list[Path] = []
    wanted = (("memory", cg.memory_parent, limits.memory), ("pids", cg.pids_parent, limits.tasks))
    for controller, parent, limit in wanted:
        if parent is None or not limit:
            continue
        d = parent / f"idrrun-{run_id}"
        if d in made:
            continue
        try:
            d.mkdir()
        except OSError:
            continue
        made.append(d)
        try:
            if cg.version == 1:
                _limit_v1(d, controller, limits)
            elif cg.version == 2:
                _limit_v2(d, limits)
        except OSError:
            pass
    return tuple(made)


def _limit_v1(d: Path, controller: str, limits: Limits) -> None:
    if controller == "memory" and limits.memory:
        write(d / "memory.limit_in_bytes", str(limits.memory))
        try_write(d / "memory.memsw.limit_in_bytes", str(limits.memory))
    if controller == "pids" and limits.tasks:
        write(d / "pids.max", str(limits.tasks))


def _limit_v2(d: Path, limits: Limits) -> None:
    """Both limits in the one cgroup, where its parent enabled the controller."""
    if limits.memory and (d / "memory.max").exists():
        write(d / "memory.max", str(limits.memory))
        try_write(d / "memory.swap.max", "0")
    if limits.tasks and (d / "pids.max").exists():
        write(d / "pids.max", str(limits.tasks))


def _guard_args(protections: Protections, limits: Limits, cg: Cgroups | None,
                made: tuple[Path, ...], gpu_run: bool) -> GuardArgs:
    """The guard's limits: rlimits, where they stand in for a cgroup this run has not got."""
    joined = {d.parent for d in made}
    return GuardArgs(status_fd=-1, parent=os.getpid(), file_size=limits.file_size or 0,
                     nproc=_rlimit_nproc(protections, limits,
                                         cg is not None and cg.pids_parent in joined),
                     address_space=_rlimit_as(limits, gpu_run,
                                              cg is not None and cg.memory_parent in joined),
                     cgroups=tuple(d / "cgroup.procs" for d in made),
                     stack=-1 if limits.stack is None else limits.stack, cpus=limits.cpus)


def _rlimit_nproc(protections: Protections, limits: Limits, in_pids_cgroup: bool) -> int:
    """The task cap for a user's run without a pids cgroup (RLIMIT_NPROC does not hold root);
    0: none. RLIMIT_NPROC counts every process of the user: room is left for the ones running."""
    if not limits.tasks or protections.root or in_pids_cgroup:
        return 0
    return limits.tasks + _user_process_count()


def _rlimit_as(limits: Limits, gpu_run: bool, in_memory_cgroup: bool) -> int:
    """The memory cap as an address-space limit, for a host run without a memory cgroup (a
    CUDA context maps ~13 GiB of address space); 0: none."""
    if not limits.memory or gpu_run or in_memory_cgroup:
        return 0
    return limits.memory


def _cgroups_pay(protections: Protections, limits: Limits) -> bool:
    """Whether this run's limits need cgroups: for a memory cap, and for root (RLIMIT_NPROC
    does not hold uid 0). A user's task cap is RLIMIT_NPROC's job just as well, and the guard,
    a child subreaper, reaps what the run leaves without a cgroup's list, for less than a
    cgroup's mkdir, limits, join and rmdir (~1 ms). The join itself is cheap since the guard
    moves only its own thread (v1) or forks the program into the cgroup (v2): written the
    usual way, to cgroup.procs, it waited for an RCU grace period, 11 ms median after a
    compile on the 2-core machine (guard.c, benchmarks/RESULTS.md)."""
    return protections.root or bool(limits.memory)


def write(path: Path, text: str) -> None:
    """`text` written to a control file of the kernel's (a cgroup's, /proc's): one open, one
    write, as the kernel takes it (a file object's buffering and its probes of the file
    cost four system calls more, at every run)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def try_write(path: Path, text: str) -> None:
    try:
        write(path, text)
    except OSError:
        pass


def read(path: str | Path) -> str:
    """A kernel's control or status file (a cgroup's, /proc's) whole, "" when it cannot be
    read."""
    data = read_whole(path)
    return data.decode(errors="replace") if data is not None else ""


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
        if jail.controls(d, "memory") and _cgroup_oom(d, jail.cgroup_version):
            hit = "memory"
        if jail.controls(d, "pids") and _cgroup_pids_max_hit(d, jail.cgroup_version):
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


def _cgroup_oom(d: Path, version: int) -> bool:
    if version == 2:
        text = read(d / "memory.events")
    else:
        text = read(d / "memory.oom_control")
        if not text and read(d / "memory.failcnt").strip() not in ("", "0"):
            return True
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip() not in ("", "0"):
            return True
    return False


def _cgroup_pids_max_hit(d: Path, version: int) -> bool:
    for line in read(d / "pids.events").splitlines():
        key, _, value = line.partition(" ")
        if key == "max" and value.strip() not in ("", "0"):
            return True
    return False


def _kill_cgroup(d: Path) -> None:
    if (d / "cgroup.kill").exists():
        try_write(d / "cgroup.kill", "1")
        return
    for pid in read(d / "cgroup.procs").split():
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
            if d.is_dir() and not read(d / "cgroup.procs").strip():
                try:
                    d.rmdir()
                    removed.append(str(d))
                except OSError:
                    pass
    return removed
