"""Run isolation: limits for a student's program, and what this machine can enforce.

Layers, each used where the machine allows it (`idrrun doctor` says which are active):
- wall clock deadline and process-group kill (always, proc.py);
- the guard (guard.c, built on first use): kills the whole run when the kernel dies, applies
  RLIMIT_FSIZE (file size), RLIMIT_NPROC (non-root only: it does not apply to root and counts a
  user's every process), RLIMIT_AS (host runs only: a CUDA context maps ~13 GiB of address
  space, so an address-space limit breaks GPU runs), and sweeps /proc for processes carrying the
  run's IDRRUN_RUN marker, which catches what escaped the group with setsid();
- a cgroup per run (v2, or v1 memory + pids) where one can be created: memory.max and pids.max,
  with the kernel's own accounting of what was hit.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .model import Cgroups, Limits, Protections

GUARD_SOURCE = Path(__file__).with_name("guard.c")


def _own_cgroup_paths() -> dict[str, str]:
    """controller -> path of this process's cgroup ("" key for v2)."""
    out: dict[str, str] = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    except (OSError, ValueError):
        pass
    return out


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fs type, options) of cgroup file systems."""
    found = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                found.append((parts[1], parts[2], parts[3]))
    except OSError:
        pass
    return found


def _writable_dir(parent: Path, probe_file: str) -> bool:
    """Can we make a child cgroup here that has the controller file we need?"""
    test = parent / f"idrrun-probe-{os.getpid()}"
    try:
        test.mkdir()
    except OSError:
        return False
    try:
        return (test / probe_file).exists()
    finally:
        try:
            test.rmdir()
        except OSError:
            pass


def probe_cgroups() -> Cgroups | None:
    own = _own_cgroup_paths()
    mounts = _mounts()
    v1 = {opt: point for point, kind, opts in mounts if kind == "cgroup"
          for opt in opts.split(",") if opt in ("memory", "pids")}
    if v1:
        mem = Path(v1["memory"]) / own.get("memory", "/").lstrip("/") if "memory" in v1 else None
        pids = Path(v1["pids"]) / own.get("pids", "/").lstrip("/") if "pids" in v1 else None
        mem = mem if mem is not None and _writable_dir(mem, "memory.limit_in_bytes") else None
        pids = pids if pids is not None and _writable_dir(pids, "pids.max") else None
        if mem or pids:
            return Cgroups(1, mem, pids)
    for point, kind, _ in mounts:
        if kind != "cgroup2":
            continue
        # Our own cgroup first (delegated to us); else the root of the hierarchy, where a
        # process-holding parent does not forbid enabling controllers (root only).
        for base in (Path(point) / own.get("", "/").lstrip("/"), Path(point)):
            if base == Path(point):
                _try_write(base / "cgroup.subtree_control", "+memory +pids")
            ok_mem = _writable_dir(base, "memory.max")
            ok_pids = _writable_dir(base, "pids.max")
            if ok_mem or ok_pids:
                return Cgroups(2, base if ok_mem else None, base if ok_pids else None)
    return None


def build_guard(cache_dir: Path, cc: str | None) -> tuple[Path | None, str]:
    """Compile guard.c once per source version; (None, why) when it cannot be built."""
    from . import proc

    digest = hashlib.sha256(GUARD_SOURCE.read_bytes()).hexdigest()[:12]
    target = cache_dir / "guard" / f"idrrun-guard-{digest}"
    if target.is_file() and os.access(target, os.X_OK):
        return target, ""
    compiler = cc or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler to build the run guard"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    result = proc.run([compiler, "-O2", "-o", str(tmp), str(GUARD_SOURCE)], what="build guard",
                      timeout=60)
    if not result.ok or not tmp.is_file():
        return None, f"the run guard did not build ({result.describe()}): {result.output.strip()[:200]}"
    os.replace(tmp, target)
    return target, ""


def probe(cache_dir: Path, cc: str | None = None) -> Protections:
    guard, why = build_guard(cache_dir, cc)
    cgroups = probe_cgroups()
    root = os.geteuid() == 0
    notes = []
    if guard is None:
        notes.append(f"reduced protection: {why}; a killed kernel may leave programs running")
    if cgroups is None:
        if root:
            notes.append("reduced protection: no cgroup can be created here, so no memory limit for "
                         "GPU runs and no task limit (RLIMIT_NPROC does not apply to root)")
        else:
            notes.append("reduced protection: no cgroup can be created here; memory is limited by "
                         "RLIMIT_AS on host runs only, tasks by RLIMIT_NPROC")
    return Protections(guard=guard, cgroups=cgroups, root=root, notes=tuple(notes))


# ---------------------------------------------------------------------------------------
# One run


@dataclass
class Jail:
    """The isolation of one run: created before it starts, finished after it ends."""

    run_id: str
    workdir: Path
    status_file: Path
    guard_prefix: tuple[str, ...]
    env: Mapping[str, str]
    cgroup_dirs: tuple[Path, ...]
    cgroup_version: int
    limits: Limits
    started: float = field(default_factory=time.time)

    def wrap(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        return (*self.guard_prefix, *argv) if self.guard_prefix else argv

    def child_pid(self) -> int | None:
        try:
            for line in self.status_file.read_text().splitlines():
                if line.startswith("child "):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return None

    def status(self) -> int | None:
        """The program's own wait status as a returncode (negative: signal), from the guard."""
        try:
            for line in self.status_file.read_text().splitlines():
                kind, _, value = line.partition(" ")
                if kind == "exit":
                    return int(value)
                if kind == "signal":
                    return -int(value)
        except (OSError, ValueError):
            pass
        return None


def open_jail(protections: Protections, limits: Limits, workdir: Path, scratch: Path,
              gpu_run: bool) -> Jail:
    run_id = uuid.uuid4().hex
    status = scratch / f"status-{run_id}"
    cg_dirs: list[Path] = []
    procs: list[str] = []
    cg = protections.cgroups
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
                    _try_write(d / "memory.memsw.limit_in_bytes", str(limits.memory))
                if cg.version == 1 and files == "pids" and limits.tasks:
                    (d / "pids.max").write_text(str(limits.tasks))
                if cg.version == 2:
                    if limits.memory and (d / "memory.max").exists():
                        (d / "memory.max").write_text(str(limits.memory))
                        _try_write(d / "memory.swap.max", "0")
                    if limits.tasks and (d / "pids.max").exists():
                        (d / "pids.max").write_text(str(limits.tasks))
            except OSError:
                pass
            procs.append(str(d / "cgroup.procs"))
    prefix: tuple[str, ...] = ()
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
        prefix = (str(protections.guard), str(status), str(os.getpid()),
                  str(limits.file_size or 0), str(nproc), str(address or 0),
                  ":".join(procs) or "-", "--")
    return Jail(run_id=run_id, workdir=workdir, status_file=status, guard_prefix=prefix,
                env={"IDRRUN_RUN": run_id}, cgroup_dirs=tuple(cg_dirs),
                cgroup_version=cg.version if cg else 0, limits=limits)


def _try_write(path: Path, text: str) -> None:
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


def close_jail(jail: Jail) -> tuple[str | None, tuple[str, ...]]:
    """After the run: what limit was hit (if any), cleanup notes; removes the cgroups."""
    hit: str | None = None
    notes: list[str] = []
    for d in jail.cgroup_dirs:
        if _cgroup_oom(d, jail.cgroup_version):
            hit = "memory"
        if _cgroup_pids_max_hit(d, jail.cgroup_version):
            hit = hit or "tasks"
    if jail.status() == -signal.SIGXFSZ:
        hit = "file size"
        notes += _remove_capped_files(jail)
    for d in jail.cgroup_dirs:
        for _ in range(50):
            try:
                d.rmdir()
                break
            except OSError:
                _kill_cgroup(d)
                time.sleep(0.02)
    try:
        jail.status_file.unlink()
    except OSError:
        pass
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
        _try_write(d / "cgroup.kill", "1")
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
