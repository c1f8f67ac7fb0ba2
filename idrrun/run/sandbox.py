"""A box for a compile or a run that must not reach anything else: graded submissions always,
any run when `[sandbox] mode = "on"` (or `--sandbox on`).

What a box sees, with bubblewrap (Debian's `bubblewrap`, the tool Flatpak uses), is an
allow-list: the system's program folders read-only (SYSTEM_DIRS: /usr and /lib*, with /bin and
/sbin), a few files of /etc (ETC_ALLOWED), the compiler's and the profiler's own prefixes when
they live elsewhere (an HPC SDK under /opt), the folders it works in read-write, a private
size-capped /tmp, the files it needs read-only (the executable, the GPU tracer) — and nothing
else: no /opt, no /home, no /root, no idrrun cache, no course folder and no idrrun package
(hidden under an empty tmpfs where an allowed folder holds them: a course installed with pip
under /usr/local), no report, no other student. What the grader puts in and takes out of a box
goes through boundary.py. It has its own PID namespace (everything in it dies with the
run), no network, its own IPC and hostname, and a clean environment (ENV_KEEP). As root, each
box also runs as a fresh unprivileged uid, as isolate and Jobe do, so that its files and
processes are its own; RLIMIT_NPROC then counts that uid's processes alone.

Every box is made by one function, `box` (a compile's, a run's, the export of a graded run's
profile): what each kind sees besides what all see is declared once, in `_KINDS`.

Levels, probed once (`probe`), reported by `idrrun doctor`:
- "namespaces": bubblewrap works here (user, mount, PID, network namespaces);
- "uid": no namespaces (e.g. a default Docker container) but root: a fresh uid per box, its
  folders private to it, every process of that uid killed after the run, then its SysV IPC
  objects and its files in the world-writable folders removed (leftovers.py). The box then
  sees every file other users can read: the grader refuses a course whose solutions others
  can read (readable_by_others); and every process's command line
  (/proc/PID/cmdline): a run of hidden arguments runs alone (`beside`), no other box with it;
- "none": neither; `idrrun grade` refuses unless --unsafe.
"""

from __future__ import annotations

import fcntl
import glob
import os
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..model import Protections, SandboxSupport
from . import boundary, tools

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What a compiler, the C and Fortran runtimes, Open MPI and the CUDA driver read in /etc: the
# dynamic linker's cache, names of users and hosts, the alternatives (mpicc, cc), MPI's defaults.
ETC_ALLOWED = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group",
               "nsswitch.conf", "hosts", "host.conf", "localtime", "timezone", "openmpi", "pmix",
               "nvidia", "OpenCL", "gai.conf")
# Variables a program keeps from the environment it was started from: language, terminal, and
# those the OpenMP/OpenACC/MPI/CUDA runtimes read. Everything else (HOME, XDG_*, IDRRUN_*,
# JUPYTER_*, tokens, the grader's paths) stays outside.
ENV_KEEP = ("PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TERM", "TZ", "CUDA_VISIBLE_DEVICES",
            "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
ENV_KEEP_PREFIXES = ("LC_", "OMP_", "ACC_", "GOMP_", "OMPI_", "PRTE_", "PMIX_", "SLURM_",
                     "GFORTRAN_", "NV_ACC_", "PGI_ACC_", "NVCOMPILER_")
TMP_SIZE = 256 << 20  # the box's /tmp
# The box's other writable mounts, each a tmpfs with a size (shared memory, counted by the
# machine, until the box ends): its /dev/shm (POSIX shared memory, Open MPI's shared-memory
# transport), and its root, which bubblewrap fills with mount points only (then read-only to
# the program, as /dev and the empty folders over hidden ones are). Without a size each
# could take half the machine's memory: 3 x 900 MiB written to a box's / and /dev grew the
# machine's shared memory by 2.7 GiB.
SHM_SIZE = 64 << 20
ROOT_SIZE = 1 << 20
# What a box may leave, all its writable mounts together: its writable folders are checked
# while it runs (proc.pump), against what its tmpfs mounts (their sizes) leave of DISK_CAP, the
# run stopped at the "disk" limit when it goes past that or FILES_CAP.
DISK_CAP = 1 << 30
FILES_CAP = 20_000
# A box's own temporary folder, in its folder, at the "uid" level, where it has no /tmp of its
# own: its HOME and TMPDIR there (box_env), made empty with the folder (own_tmp).
BOX_TMP = ".tmp"
# Fresh uids come from here: far above any real account, so that nothing else owns them.
UID_BASE = 1_900_000_000
UID_SPAN = 1 << 24


@dataclass(frozen=True)
class Box:
    """What one sandboxed compile or run may see and be."""

    workdir: Path  # where it starts
    writable: tuple[Path, ...]  # bound read-write (the workdir among them)
    readable: tuple[Path, ...] = ()  # files or folders bound read-only at their own path
    hidden: tuple[Path, ...] = ()  # covered by an empty tmpfs where a visible folder holds them
    env: Mapping[str, str] = field(default_factory=dict)
    gpu: bool = False  # /dev/nvidia* and /sys
    uid: int = -1  # run as this user (root only); -1: as idrrun's own
    gid: int = -1
    tmp_size: int = TMP_SIZE
    disk_caps: bool = False  # DISK_CAP and FILES_CAP on its writable folders (its own folders)
    support: SandboxSupport = SandboxSupport("none", None, False, "not probed")
    # The guard as the box runs it, when the box's uid cannot read idrrun's own copy: a copy
    # placed in the request's room (tools.place). None: idrrun's own.
    inner_guard: Path | None = None


# A box's place among the others at the "uid" level (sandbox.beside): "beside" others, "alone"
# (a run of hidden arguments), or "" where boxes cannot see each other (nothing to leave).
Place = Literal["", "beside", "alone"]


class _Boxes:
    """Which boxes run at once, at the "uid" level. Without a PID namespace every process's
    command line is open to every uid (/proc/PID/cmdline, ps): a box beside a run of hidden
    arguments would read them there (a classmate's, the solution's) and print them in its own
    public output. So a hidden run runs alone: it waits for the boxes running to end (each has
    every process of its uid killed by its guard when it ends) and no box starts until it
    ends. One waiting to run alone goes before new boxes: a class of busy rows never starves
    it. Only the box itself is counted, once everything it waits for (a GPU lane) is held, so
    that no run waits for a lane while holding its place here."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._beside = 0  # boxes running beside each other
        self._alone = False  # a hidden run is running
        self._waiting = 0  # hidden runs waiting to run alone

    def enter(self, place: Place, stopped: Callable[[], bool]) -> bool:
        """Wait until the box may start in `place`; False when stopped() said to give up."""
        with self._cond:
            if place == "alone":
                self._waiting += 1
                try:
                    while self._alone or self._beside:
                        if stopped():
                            return False
                        self._cond.wait(0.2)
                finally:
                    self._waiting -= 1
                self._alone = True
                return True
            while self._alone or self._waiting:
                if stopped():
                    return False
                self._cond.wait(0.2)
            self._beside += 1
            return True

    def leave(self, place: Place) -> None:
        with self._cond:
            if place == "alone":
                self._alone = False
            else:
                self._beside -= 1
            self._cond.notify_all()


_BOXES = _Boxes()

# The same between the gradings of one machine (two teachers, two terminals): every grader
# at the uid level is root, and /run is root's alone. A box holds `boxes` shared, a hidden run
# exclusive; `turnstile` is taken on the way in, so that a hidden run waiting for `boxes`
# holds back the boxes that would start meanwhile (flock lets a shared lock by while an
# exclusive one waits).
LOCK_FOLDER = Path("/run/idrrun")


@dataclass(frozen=True)
class Seat:
    """A box's place among the others (`beside`): "" where boxes cannot see each other."""

    place: Place = ""
    lock: int = -1  # the descriptor holding the machine's lock (-1: none); closed by leave()


def _flock(fd: int, how: int, stopped: Callable[[], bool]) -> bool:
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if stopped():
                return False
            time.sleep(0.05)


def _machine_lock(place: Place, stopped: Callable[[], bool]) -> int | None:
    """The machine's lock for `place` (a descriptor to close after the box); -1 where there is
    no folder of root's for it (not root: nothing else grades at this level); None: stopped."""
    try:
        folder = boundary.own_dir(LOCK_FOLDER, 0o700)
        turn = os.open(folder / "turnstile", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o600)
    except OSError:
        return -1
    try:
        boxes = os.open(folder / "boxes", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                        0o600)
        if not _flock(turn, fcntl.LOCK_EX, stopped):
            os.close(boxes)
            return None
        if not _flock(boxes, fcntl.LOCK_EX if place == "alone" else fcntl.LOCK_SH, stopped):
            os.close(boxes)
            return None
        return boxes
    except OSError:
        return -1
    finally:
        os.close(turn)  # (the turnstile's lock goes with it)


def beside(box: Box | None, alone: bool, stopped: Callable[[], bool]) -> Seat | None:
    """Before `box` starts (proc.spawn): its seat at the "uid" level (_Boxes, and the
    machine's lock for the other gradings), once it may start; leave(seat) after it ended. An
    empty seat where none is needed (no box, or namespaces: a box sees its own processes
    only); None when stopped() said to give up while waiting."""
    if box is None or box.support.level != "uid":
        return Seat()
    place: Place = "alone" if alone else "beside"
    if not _BOXES.enter(place, stopped):
        return None
    lock = _machine_lock(place, stopped)
    if lock is None:
        _BOXES.leave(place)
        return None
    return Seat(place, lock)


def leave(seat: Seat) -> None:
    if seat.lock >= 0:
        os.close(seat.lock)
    if seat.place:
        _BOXES.leave(seat.place)


def fresh_uid() -> int:
    return UID_BASE + secrets.randbelow(UID_SPAN)


def clean_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The box's environment: what ENV_KEEP lets through from `base`, then `extra` (what idrrun
    itself sets for the run: the family's, the launcher's, the profiler's variables)."""
    env = {k: v for k, v in base.items()
           if k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(HOME="/tmp", TMPDIR="/tmp")
    env.update(extra)
    return env


def box_env(base: Mapping[str, str], extra: Mapping[str, str], support: SandboxSupport,
            tmp: Path) -> dict[str, str]:
    """clean_env, with HOME and TMPDIR in `tmp` (the box's own folder) at the "uid" level,
    where the box has no /tmp of its own."""
    env = clean_env(base, extra)
    if support.level == "uid":
        env.update(HOME=str(tmp), TMPDIR=str(tmp))
    return env


def own_tmp(support: SandboxSupport | None) -> str:
    """The temporary folder a box's fresh folder is made with (boundary.box_folder's `tmp`):
    BOX_TMP at the "uid" level, where the box has no /tmp of its own; none elsewhere."""
    return BOX_TMP if support is not None and support.level == "uid" else ""


# What each kind of box sees besides what every box does (box, below): declared here, once.
BoxKind = Literal["compile", "run", "export"]


@dataclass(frozen=True)
class _Kind:
    # The folders of LD_LIBRARY_PATH outside the system's, read-only: a program needs them to
    # start (an offload GCC unpacked in /opt); a compiler finds its own under its prefix.
    libraries: bool
    # DISK_CAP and FILES_CAP on its folder, in a graded request's room (a compile is bounded by
    # its own limits: request.compile_limits).
    disk_caps: bool
    # Without a GPU such a box has no /sys: hwloc (in Open MPI) would warn "failed to find sysfs
    # cpu topology directory" into the output of every rank; it finds the CPUs from cpuid.
    hwloc_without_sysfs: bool


_KINDS: dict[BoxKind, _Kind] = {
    "compile": _Kind(libraries=False, disk_caps=False, hwloc_without_sysfs=False),
    "run": _Kind(libraries=True, disk_caps=True, hwloc_without_sysfs=True),
    "export": _Kind(libraries=False, disk_caps=True, hwloc_without_sysfs=False),
}


def box(kind: BoxKind, folder: Path, support: SandboxSupport, uid: int, *,
        environ: Mapping[str, str], extra_env: Mapping[str, str] | None = None,
        readable: Iterable[Path] = (), installations: Iterable[Path] = (),
        hidden: Iterable[Path] = (), cache: Path | None = None, gpu: bool = False,
        room: Path | None = None, protections: Protections | None = None) -> Box:
    """Every box idrrun makes (a compile's, a run's, the export of a graded run's profile), and
    what it sees, decided here: `folder` read-write, where it starts (and at the "uid" level
    its own BOX_TMP there, HOME and TMPDIR); `readable` read-only (a compile: the source's
    folder; a run: its executable, idrrun's libraries and the profiler it loads), then a run's
    libraries outside the system's folders (_KINDS), then the `installations` (the
    compiler's prefixes, nsys's) outside the system's folders; `hidden` (the request's hidden
    folders), idrrun's own package and its `cache` hidden; its environment box_env of
    `environ` with `extra_env` (the family's, the launcher's, the profiler's); its uid `uid`
    (its group the same); in a graded request's `room`, the caps on what it leaves (_KINDS)
    and the guard of `protections` placed where the box's own uid can run it."""
    what = _KINDS[kind]
    extra = dict(extra_env or {})
    if what.hwloc_without_sysfs and not gpu and support.level == "namespaces":
        extra = {"HWLOC_COMPONENTS": "-linux", **extra}
    libraries = library_path_dirs(environ) if what.libraries else ()
    guard = protections.guard if protections is not None else None
    inner_guard = tools.place(guard, room / "tools") \
        if guard is not None and room is not None and uid >= 0 else None
    return Box(workdir=folder, writable=(folder,),
               readable=(*readable, *libraries,
                         *(p for p in installations if not in_system_dirs(p))),
               hidden=(*hidden, *package_dirs(), *((cache,) if cache is not None else ())),
               env=box_env(environ, extra, support, folder / BOX_TMP),
               gpu=gpu, uid=uid, gid=uid, support=support,
               disk_caps=what.disk_caps and room is not None, inner_guard=inner_guard)


# idrrun's own package, wherever it is installed (site-packages under /usr/local with pip): a box
# never sees it, nor the course it may carry.
_PACKAGE = Path(__file__).resolve().parents[1]


def package_dirs() -> tuple[Path, ...]:
    return (_PACKAGE,)


def library_path_dirs(env: Mapping[str, str]) -> tuple[Path, ...]:
    """The folders of LD_LIBRARY_PATH outside the system's folders (an offload GCC unpacked
    in /opt): a program needs them to start."""
    found: list[Path] = []
    for entry in env.get("LD_LIBRARY_PATH", "").split(":"):
        path = Path(entry)
        if entry and path.is_absolute() and path.is_dir() and not in_system_dirs(path) \
                and path not in found:
            found.append(path)
    return tuple(found)


def _inside(path: Path, roots: Iterable[str | Path]) -> bool:
    return any(path == Path(r) or Path(r) in path.parents for r in roots)


def passable(folder: Path) -> bool:
    """Whether any user can pass through every folder down to `folder`."""
    try:
        return all(os.stat(p).st_mode & 0o001 for p in (folder, *folder.parents))
    except OSError:
        return False


def in_system_dirs(path: Path) -> bool:
    return _inside(path, SYSTEM_DIRS)


def visible_secrets(paths: Iterable[Path], readable: Iterable[Path] = ()) -> tuple[Path, ...]:
    """Of the folders a box must not see, those a visible folder would show it."""
    roots: list[str | Path] = [*SYSTEM_DIRS, *readable]
    out: list[Path] = []
    for p in paths:
        try:
            real = p.resolve()
        except OSError:
            continue
        if real.exists() and _inside(real, roots) and real not in out:
            out.append(real)
    return tuple(out)


@dataclass(frozen=True)
class Found:
    """What a box's command line depends on in this machine's file system, looked up by `look`
    just before the run: the command's composer (compose.py) then reads no file itself."""

    system: tuple[tuple[str, str | None], ...] = ()  # SYSTEM_DIRS here: (folder, link target or None)
    etc: tuple[str, ...] = ()  # the names of ETC_ALLOWED that /etc holds
    hidden: tuple[Path, ...] = ()  # visible_secrets of the box's hidden folders
    gpu_devices: tuple[str, ...] = ()  # /dev/nvidia*, for a box with a GPU
    sys: bool = False  # whether /sys is there, for a box with a GPU
    setpriv: str | None = None  # setpriv's path, for a box of its own uid behind a launcher


def look(box: Box | None, outer: Sequence[str]) -> Found:
    """Look up what `bwrap_argv` and `drop_to` need for `box` (behind the launcher `outer`):
    only what this box's level and uid use."""
    if box is None:
        return Found()
    setpriv = shutil.which("setpriv") if outer and box.uid >= 0 else None
    if box.support.level != "namespaces":
        return Found(setpriv=setpriv)
    return Found(system=_system_dirs(),
                 etc=tuple(name for name in ETC_ALLOWED if os.path.lexists(f"/etc/{name}")),
                 hidden=visible_secrets(box.hidden, box.readable),
                 gpu_devices=tuple(sorted(glob.glob("/dev/nvidia*"))) if box.gpu else (),
                 sys=box.gpu and os.path.isdir("/sys"), setpriv=setpriv)


def _system_dirs() -> tuple[tuple[str, str | None], ...]:
    found: list[tuple[str, str | None]] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            found.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            found.append((d, None))
    return tuple(found)


def bwrap_argv(box: Box, guard: Path, inner_fd: int, found: Found) -> tuple[str, ...]:
    """bubblewrap's command line for `box`, ending with the inner guard (the program follows);
    `found`: what `look` saw of this machine."""
    assert box.support.bwrap is not None
    argv = [box.support.bwrap, "--unshare-all", "--die-with-parent",
            "--size", str(ROOT_SIZE), "--tmpfs", "/"]
    for d, target in found.system:
        # Merged /usr (/bin -> usr/bin): a symlink costs nothing, a bind mount ~2 ms.
        argv += ["--symlink", target, d] if target is not None else ["--ro-bind", d, d]
    argv += ["--dir", "/etc"]
    for name in found.etc:
        argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(box.tmp_size), "--tmpfs", "/tmp"]
    for h in found.hidden:
        argv += ["--size", str(ROOT_SIZE), "--tmpfs", str(h), "--remount-ro", str(h)]
    argv += ["--ro-bind", str(guard), str(guard)]
    for r in box.readable:
        # -try: under srun the box starts on a node, which may not see every folder this machine
        # does (a course in its /tmp): the compiler then says which header it cannot find.
        argv += ["--ro-bind-try", str(r), str(r)]
    for w in box.writable:
        argv += ["--bind", str(w), str(w)]
    if box.gpu:
        for dev in found.gpu_devices:
            argv += ["--dev-bind", dev, dev]
        if found.sys:
            argv += ["--ro-bind", "/sys", "/sys"]
    # Read-only once every mount point is made (bubblewrap's remount is not recursive: the
    # mounts below stay as they are); then /dev/shm, a tmpfs of its own with a size.
    argv += ["--remount-ro", "/dev", "--size", str(SHM_SIZE), "--tmpfs", "/dev/shm",
             "--remount-ro", "/"]
    argv += ["--chdir", str(box.workdir), "--", str(guard), f"--inner-status-fd={inner_fd}", "--"]
    return tuple(argv)


def env_argv(passed: Mapping[str, str], box_env: Mapping[str, str]) -> tuple[str, ...]:
    """`env -u K... K=V...`: on the node, the box's environment out of what a launcher passed
    on (`passed`) plus what the launcher added itself (srun's SLURM_*, PMI*: a rank needs them)."""
    def launchers(k: str) -> bool:  # srun sets these on the node: its values, not ours
        return k.startswith(("SLURM_", "PMI"))
    unset = (f"--unset={k}" for k in sorted(passed) if k not in box_env and not launchers(k))
    kept = (f"{k}={v}" for k, v in sorted(box_env.items()) if not launchers(k))
    return ("env", *unset, *kept)


def drop_to(box: Box, setpriv: str | None) -> tuple[str, ...] | None:
    """The prefix that takes the box's uid where the box starts, when a launcher (srun) stands
    between the guard and the box: the launcher runs as idrrun's user, whom the cluster knows.
    () when the box keeps idrrun's uid; None when setpriv (`look`) is missing."""
    if box.uid < 0:
        return ()
    if setpriv is None:
        return None
    return (setpriv, f"--reuid={box.uid}", f"--regid={box.gid}", "--clear-groups", "--")


def mounts_size(box: Box) -> int:
    """What the box's own tmpfs mounts may hold, all together (their sizes): 0 without
    namespaces, where the box has none."""
    if box.support.level != "namespaces":
        return 0
    return ROOT_SIZE + SHM_SIZE + box.tmp_size + ROOT_SIZE * len(box.hidden)


def over_disk_caps(box: Box) -> str | None:
    """Why the box's folders went past what its tmpfs mounts leave of DISK_CAP, or FILES_CAP,
    or None (boundary.usage: through descriptors, never following a link; the count stops as
    soon as a cap is passed)."""
    for top in box.writable:
        why = boundary.usage(top, DISK_CAP - mounts_size(box), FILES_CAP)
        if why is not None:
            return why
    return None


def readable_by_others(path: Path) -> bool:
    """Whether a user who is neither the owner nor in the group can read `path`: every folder
    above it passable by others, and the file (or folder) itself readable by them. At the
    "uid" level a box sees all such files."""
    try:
        if not os.stat(path).st_mode & 0o004:
            return False
        return all(os.stat(p).st_mode & 0o001 for p in path.parents)
    except OSError:
        return False


def end_uid(uid: int, seconds: float = 2.0) -> int:
    """At the "uid" level, after a box: SIGKILL every process still running as its uid (the
    guard does it too, unless it was itself killed at the run's deadline), until none is left:
    nothing of a box may outlive it to watch the next runs' command lines. Returns how many."""
    if uid < 0:
        return 0
    killed: set[int] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                # The status's uids, not the folder's owner: a process that made itself
                # undumpable has a /proc folder of root's. Zombies hold nothing: not counted.
                with open(f"/proc/{entry.name}/status", "rb") as fh:
                    fields = {line.split(b":")[0]: line.split()[1:] for line in fh}
                if str(uid).encode() not in fields.get(b"Uid", []) or \
                        fields.get(b"State", [b"?"])[0] in (b"Z", b"X"):
                    continue
                os.kill(int(entry.name), signal.SIGKILL)
                killed.add(int(entry.name))
                found += 1
            except (OSError, IndexError):
                continue
        if not found:
            break
        time.sleep(0.02)
    return len(killed)

