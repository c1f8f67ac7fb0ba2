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

import functools
import hashlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from ..model import Cgroups, ProcResult, Protections, SandboxSupport
from . import proc, sandbox, tools
from .guard import SOURCE as GUARD_SOURCE
from .jail import read, try_write


def _own_cgroup_paths() -> dict[str, str]:
    """controller -> path of this process's cgroup ("" key for v2)."""
    out: dict[str, str] = {}
    try:
        for line in read("/proc/self/cgroup").splitlines():
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


# probe_cgroups' answers in this process, by the cgroups it is in.
_cgroups_found: dict[tuple[tuple[str, str], ...], Cgroups | None] = {}


def probe_cgroups() -> Cgroups | None:
    """Where this process can make a cgroup per run: cgroup v1's memory and pids hierarchies,
    else a cgroup v2 hierarchy; None where it cannot. Tried (a child cgroup made and removed in
    each) once per process and cgroup it is in: ~4 ms at every call otherwise."""
    own = _own_cgroup_paths()
    where = tuple(sorted(own.items()))
    if where not in _cgroups_found:
        mounts = _mounts()
        _cgroups_found[where] = _probe_v1(own, mounts) or _probe_v2(own, mounts)
    return _cgroups_found[where]


def _probe_v1(own: dict[str, str], mounts: list[tuple[str, str, str]]) -> Cgroups | None:
    points = {opt: point for point, kind, opts in mounts if kind == "cgroup"
              for opt in opts.split(",") if opt in ("memory", "pids")}
    mem = _v1_parent(points, own, "memory", "memory.limit_in_bytes")
    pids = _v1_parent(points, own, "pids", "pids.max")
    return Cgroups(1, mem, pids) if mem or pids else None


def _v1_parent(points: dict[str, str], own: dict[str, str], controller: str,
               probe_file: str) -> Path | None:
    """Our own cgroup in the controller's hierarchy, when a child made there has its file."""
    if controller not in points:
        return None
    parent = Path(points[controller]) / own.get(controller, "/").lstrip("/")
    return parent if _writable_dir(parent, probe_file) else None


def _probe_v2(own: dict[str, str], mounts: list[tuple[str, str, str]]) -> Cgroups | None:
    for point, kind, _ in mounts:
        if kind == "cgroup2":
            found = _v2_parent(Path(point), own)
            if found is not None:
                return found
    return None


def _v2_parent(point: Path, own: dict[str, str]) -> Cgroups | None:
    # Our own cgroup first (delegated to us); else the root of the hierarchy, where a
    # process-holding parent does not forbid enabling controllers (root only).
    for base in (point / own.get("", "/").lstrip("/"), point):
        if base == point:
            try_write(base / "cgroup.subtree_control", "+memory +pids")
        ok_mem = _writable_dir(base, "memory.max")
        ok_pids = _writable_dir(base, "pids.max")
        if ok_mem or ok_pids:
            return Cgroups(2, base if ok_mem else None, base if ok_pids else None)
    return None


# How the guard is built: the first of these that links. It is started twice per compiled
# cell, once per cached one. With musl's C library (Debian's musl-tools, where installed) its
# start costs ~0.15 ms on the 2-core development machine, against ~0.7 ms linked statically
# with glibc, whose start asks the CPU of its features and caches some 70 times (cpuid, a trap
# to the hypervisor in a virtual machine: 6.8 us each there; benchmarks/RESULTS.md, 2026-12-03
# 16:50); statically with the system's C library, without the dynamic loader, ~0.3 ms less than
# linked dynamically (1.66 against 1.95 ms, 2026-12-03 11:25), which is what is left where no
# static C library is installed. None: the C compiler (tools.c_compiler).
MUSL_GCC = "musl-gcc"
GUARD_BUILDS: tuple[tuple[str | None, tuple[str, ...]], ...] = (
    (MUSL_GCC, ("-O2", "-static")),
    (None, ("-O2", "-static")),
    (None, ("-O2",)),
)


# guard.c's digest (with GUARD_BUILDS and the musl compiler found), by the identity of the file
# it was read from: a stat at every call instead of a read and a hash (tools.py's rule: a file
# changed within the clock's tick of its last change may keep its identity, so a fresh one is
# read every time).
_source_digest: dict[tuple[object, ...], str] = {}


def guard_digest(musl: str | None = None) -> str:
    """What names the guard's build: guard.c's bytes, GUARD_BUILDS and whether it is built with
    musl (`musl`: its compiler, None where there is none): a musl installed since gives a
    guard of its own."""
    st = os.stat(GUARD_SOURCE)
    seen = (*tools.identity(st), musl)
    digest = _source_digest.get(seen)
    if digest is None:
        digest = hashlib.sha256(GUARD_SOURCE.read_bytes() + repr((GUARD_BUILDS, musl)).encode()
                                ).hexdigest()[:12]
        if time.time() - st.st_ctime > tools.FRESH:
            if len(_source_digest) >= 8:
                _source_digest.clear()
            _source_digest[seen] = digest
    return digest


def build_guard(cache_dir: Path, cc: str | None,
                which: Callable[[str], str | None] = shutil.which) -> tuple[Path | None, str]:
    """Compile guard.c once per source version (checked before every use: tools.py); (None,
    why) when it cannot be built. With musl (found by `which`) unless a C compiler `cc` is
    named; which: a PATH lookup (the probe's, which a kernel keeps while PATH is as it was)."""
    musl = which(MUSL_GCC) if cc is None else None
    target = cache_dir / "guard" / f"idrrun-guard-{guard_digest(musl)}"
    if tools.checked(target):
        return target, ""
    compiler = tools.c_compiler(None, cc)
    builds = [(c, flags) for c, flags in ((musl if name == MUSL_GCC else compiler, flags)
                                          for name, flags in GUARD_BUILDS) if c is not None]
    if not builds:
        return None, "no C compiler to build the run guard"

    def compile_to(tmp: Path) -> ProcResult:
        # Static where the C library's static archive is installed (Debian's libc6-dev has
        # it; Fedora's glibc-static is apart), else as the system links.
        for c, flags in builds:
            done = proc.run([c, *flags, "-o", str(tmp), str(GUARD_SOURCE)],
                            what="build guard", timeout=60)
            if done.ok:
                break
        return done

    return tools.build(target, compile_to, "the run guard")


def probe(cache_dir: Path, cc: str | None = None,
          which: Callable[[str], str | None] = shutil.which) -> Protections:
    guard, why = build_guard(cache_dir, cc, which)
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


@functools.cache
def sandbox_support() -> SandboxSupport:
    """Which sandbox level this machine allows (sandbox.py), tried for real once per process:
    a box is only as good as the namespaces the kernel really grants."""
    root = os.geteuid() == 0
    bwrap = shutil.which("bwrap")
    why = "bubblewrap is not installed (apt-get install bubblewrap)"
    if bwrap is not None:
        argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                "--proc", "/proc", "--dev", "/dev", "true"]
        setpriv = shutil.which("setpriv")
        if root and setpriv is not None:
            # The boxes run as a fresh uid: try bubblewrap as one.
            uid = sandbox.fresh_uid()
            argv = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        result = proc.run(argv, what="probe", timeout=10)
        if result.ok:
            return SandboxSupport("namespaces", bwrap, root)
        said = result.output.strip().splitlines()[-1] if result.output.strip() else result.describe()
        why = f"bubblewrap cannot create namespaces here ({said})"
        if "mount proc" in said:
            # A container whose /proc is partly masked (podman's and docker's default)
            why += ("; in a container, run it with --security-opt systempaths=unconfined "
                    "(docker/README.md)")
    if root:
        return SandboxSupport("uid", None, root, why)
    return SandboxSupport("none", None, root, why + "; and not root, so no separate uid either")
