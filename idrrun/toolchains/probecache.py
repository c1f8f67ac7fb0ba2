"""The machine probe, remembered between `idrrun run` calls.

Probing runs a dozen short commands (every compiler's --version, nvidia-smi, mkoffload, ptxas):
0.1 to 0.5 s, as much as compiling a small program. What they answer changes only when a tool
is installed, updated or moved, or the GPUs or their driver change, so the answers are kept in
the cache under a key made of exactly that: the family, PATH, the configured commands, and the
identity (path, size, mtime) of every tool asked, of the driver and of the GPU device files.
A day-old entry is probed again anyway.

A process that probes many times (a kernel, the resident server's workers, a grader) keeps the
answers it read by key too: a call then costs the key (a stat of each PATH folder and of each
tool, onpath.py) and no file read.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..files import temp_beside
from ..model import CompilerInfo, GpuInfo, Settings
from ..run import jail
from . import onpath

MAX_AGE = 24 * 3600.0
# What an entry holds and how its answers were read: a change (a compiler's version taken from
# another line of its --version, offload targets that may be None) makes every entry stale.
FORMAT = "3"
_DRIVER = ("/proc/driver/nvidia/version", "/sys/module/nvidia/version")


Answers = tuple[tuple[CompilerInfo, ...], tuple[GpuInfo, ...], str | None, bool,
                tuple[int, ...] | None]


def _identity(path: str | None) -> str:
    if path is None:
        return "-"
    try:
        # the file the name leads to (stat follows links: device and inode name it), and
        # nanoseconds and ctime: a tool rewritten within the same second, at the same size (an
        # upgrade from 12.2.0 to 13.1.0), is still a changed tool
        st = os.stat(path)
        return f"{path}:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    except OSError:
        return f"{path}:gone"


# /dev's identity (device, inode, mtime) when its GPU files were last listed, and those files
_devices: tuple[tuple[int, int, int] | None, list[str]] = (None, [])


def _gpu_devices() -> list[str]:
    """/dev/nvidia0, /dev/nvidia1, ...: listed again when /dev has changed (a device file made
    or removed changes its mtime); a name test, where glob's pattern cost ~0.7 ms."""
    global _devices
    try:
        st = os.stat("/dev")
        stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
        if stamp != _devices[0]:
            with os.scandir("/dev") as entries:
                _devices = stamp, sorted(e.path for e in entries
                                         if e.name.startswith("nvidia") and e.name[6:7].isdigit())
    except OSError:
        return []
    return _devices[1]


def key(family: str, commands: Iterable[str], settings: Settings,
        view: onpath.View | None = None) -> str:
    view = onpath.view() if view is None else view
    h = hashlib.sha256()
    parts = [FORMAT, family, view.search, json.dumps(settings.compilers, sort_keys=True, default=str)]
    parts += [_identity(view.which(c)) for c in sorted(commands)]
    parts += [_identity(view.which(tool)) for tool in ("nvidia-smi", "ptxas")]
    # (an empty file is as good as none: a driver's version is never empty)
    parts += [jail.read(path)[:400] or "-" for path in _DRIVER]
    parts.append(",".join(_gpu_devices()))
    for part in parts:
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()[:24]


def load(cache_dir: Path, digest: str) -> tuple[dict[str, Any], float] | None:
    """The entry and when it was probed (its mtime); None when there is none or it is old."""
    path = cache_dir / "probe" / f"{digest}.json"
    try:
        probed = path.stat().st_mtime
        if time.time() - probed > MAX_AGE:
            return None
        data = json.loads(path.read_text())
        return (data, probed) if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def save(cache_dir: Path, digest: str, data: dict[str, Any]) -> None:
    path = cache_dir / "probe" / f"{digest}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_beside(path)
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs the next probe


# What this process read or probed, by (cache folder, key): (when, the answers).
_held: dict[tuple[Path, str], tuple[float, Answers]] = {}


def _read(cache_dir: Path, digest: str) -> tuple[float, Answers] | None:
    """(when it was probed, the answers) of the cache's entry."""
    entry = load(cache_dir, digest)
    if entry is None:
        return None
    data, probed = entry
    try:
        return probed, (tuple(CompilerInfo(**c) for c in data["compilers"]),
                        tuple(GpuInfo(**g) for g in data["gpus"]), None, bool(data["offload"]),
                        None if data["targets"] is None else tuple(int(t) for t in data["targets"]))
    except (KeyError, TypeError, ValueError):
        return None


def remembered(cache_dir: Path, digest: str, probe: Callable[[], Answers]) -> Answers:
    """(compilers, GPUs, GPU warning, offload, offload targets): from this process's memory,
    else from the cache, else probed (and remembered unless the GPU probe warned: a warning is
    worth asking again)."""
    held = _held.get((cache_dir, digest))
    if held is not None and time.time() - held[0] <= MAX_AGE:
        return held[1]
    held = _read(cache_dir, digest)
    if held is None:
        answers = probe()
        compilers, gpus, warning, offload, targets = answers
        if warning is not None:
            return answers
        save(cache_dir, digest, {
            "compilers": [c.__dict__ for c in compilers], "gpus": [g.__dict__ for g in gpus],
            "offload": offload, "targets": None if targets is None else list(targets)})
        held = time.time(), answers
    if len(_held) >= 64:  # keys of tools since changed
        _held.clear()
    _held[(cache_dir, digest)] = held
    return held[1]
