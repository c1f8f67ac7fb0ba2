"""Where a grader keeps its rooms: one folder of its own per graded request (run/boundary.py),
all under this process's scratch folder, and what killed graders left.

    /tmp/idrrun-grading-UID/          the grader's own (0711); refused if someone else made it
        lanes/                        the GPU lanes' lock files (0700, run/lanes.py)
        PID/                          this grader's scratch folder (0711): removed when PID is gone
            idrrun-grade-XXXX/        a submission's room (0711)
                src/                  the grader's copy of what was handed in (0700)
                build-XXXX/ run-XXXX/ fresh box folders, given to the box's uid
                bin-XXXX/             the executable, sealed (0710 to the box's group)
                builds/ tools/ out-XXXX/  the grader's own
            idrrun-solution-XXXX/     the solution's room, made once per grading
            idrrun-intake-XXXX/       what the class handed in, read once (0700, grading/discover.py)

With srun the scratch folder is on the file system the nodes share (the cache:
CACHE/scratch/HOST-PID), since a login node's /tmp is its own.
"""

from __future__ import annotations

import atexit
import os
import re
import socket
import tempfile
import threading
from pathlib import Path

from ..errors import UsageError
from ..model import Settings
from . import boundary, jail, launch, sandbox

_lock = threading.RLock()
_fallback: dict[str, Path] = {}  # base -> this process's own folder, when the base was not ours


def _base() -> Path:
    return Path(tempfile.gettempdir()) / f"idrrun-grading-{os.geteuid()}"


def scratch_root(settings: Settings) -> Path:
    """This grader's scratch folder (made once, checked at every call)."""
    shared = launch.scratch_root(settings)
    if shared is not None:
        if os.geteuid() == 0 and not sandbox.passable(shared):
            raise UsageError(unreachable_cache(shared))
        return remember(boundary.own_dir(shared / f"{socket.gethostname()}-{os.getpid()}", 0o711))
    base = _base()
    with _lock:
        if str(base) in _fallback:
            return boundary.own_dir(_fallback[str(base)], 0o711)
        try:
            boundary.own_dir(base, 0o711)
        except boundary.NotOwnFolder:
            # Someone else made the shared name first: a folder of this process's own instead
            # (a killed grader's leftovers then cannot be found by the next one).
            _fallback[str(base)] = Path(tempfile.mkdtemp(prefix=f"idrrun-grading-{os.getpid()}-"))
            return remember(boundary.own_dir(_fallback[str(base)], 0o711))
    return remember(boundary.own_dir(base / str(os.getpid()), 0o711))


# Grading through srun as root: every build and run is a job step on a node, as a user of its
# own (run/sandbox.py), in the cache's scratch folder; a folder on the way that this user cannot
# pass through (root's 0700 home, where ~/.cache is) would fail every row on its node. (Whether
# the nodes see the cache at all, a job step tells: grading/session.py, cache_on_the_nodes.)
UNREACHABLE_CACHE = (
    "grading through srun as root: each build and run is a job step on a node, as a user of "
    "its own, in {scratch}, and {closed} (mode {mode:o}) lets no other user pass: set "
    "IDRRUN_CACHE_DIR to a folder on the file system the nodes share, every folder above it "
    "open to pass (o+x), e.g. IDRRUN_CACHE_DIR=/opt/idrrun/grader-cache (docs/teachers-day.md), "
    "or cache_dir in the file given with --config")


def unreachable_cache(scratch: Path) -> str:
    """The refusal, naming the first folder from / down that others cannot pass through."""
    closed = next((p for p in reversed((scratch, *scratch.parents)) if not sandbox.passable(p)),
                  scratch)
    try:
        mode = closed.stat().st_mode & 0o7777
    except OSError:
        mode = 0
    return UNREACHABLE_CACHE.format(scratch=scratch, closed=closed, mode=mode)


def lanes_folder() -> Path:
    """The GPU lanes' lock files (run/lanes.py), beside the scratch folders of this user's
    graders. Shared by every grading of this user on this machine, which is the point: two
    gradings at once take the same lanes. Nobody else's: a folder other users could write would
    let any of them hold a GPU's lock for ever or swap its files, so own_dir refuses one (two
    users grading on one GPU machine do not see each other's timed runs: grade as one account).
    No box reaches it (0700, and the lock descriptors close on exec). NotOwnFolder when the base
    is someone else's."""
    base = boundary.own_dir(_base(), 0o711)
    return boundary.own_dir(base / "lanes", 0o700)


def new_room(settings: Settings, prefix: str) -> Path:
    """A fresh room in this grader's scratch folder."""
    return boundary.fresh(scratch_root(settings), prefix, 0o711)


def intake_room(settings: Settings) -> Path:
    """A fresh folder of this grader's, private (0700), for the copies of what a class handed
    in (grading/discover.py reads each submission once, into it)."""
    return boundary.fresh(scratch_root(settings), "idrrun-intake-", 0o700)


def source_folder(room: Path) -> Path:
    """The room's copy of what was handed in (the grader's only)."""
    return boundary.own_dir(room / "src", 0o700)


def remove_orphans(settings: Settings) -> list[str]:
    """What killed gradings left: their scratch folders (their grader's pid is gone) and empty
    run cgroups. Called when a grading starts."""
    removed = []
    roots = [_base()]
    shared = launch.scratch_root(settings)
    if shared is not None:
        roots.append(shared)
    host = socket.gethostname()
    for root in roots:
        try:
            boundary.check_own(root)
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            pid = entry.name if root == _base() else _local_pid(entry.name, host)
            if pid and _gone(pid) and entry.is_dir(follow_symlinks=False):
                boundary.remove(Path(entry.path))
                removed.append(entry.path)
    removed += jail.remove_orphan_cgroups()
    return removed


def _local_pid(name: str, host: str) -> str:
    """The pid in a shared scratch folder's name HOST-PID, when HOST is this machine."""
    m = re.fullmatch(r"(.+)-(\d+)", name)
    return m.group(2) if m and m.group(1) == host else ""


def _gone(pid: str) -> bool:
    """Whether `pid` names a process that no longer runs."""
    return pid.isdigit() and not Path(f"/proc/{pid}").exists()


_made: set[Path] = set()


def _at_exit() -> None:
    for root in _made:
        boundary.remove(root)


def remember(root: Path) -> Path:
    """`root` is removed when this process ends (the solutions' rooms live until then)."""
    with _lock:
        if not _made:
            atexit.register(_at_exit)
        _made.add(root)
    return root
