"""The machine probe, remembered between `idrrun run` calls.

Probing runs a dozen short commands (every compiler's --version, nvidia-smi, mkoffload, ptxas):
0.1 to 0.5 s, as much as compiling a small program. What they answer changes only when a tool
is installed, updated or moved, or the GPUs or their driver change, so the answers are kept in
the cache under a key made of exactly that: the family, PATH, the configured commands, and the
identity (path, size, mtime) of every tool asked, of the driver and of the GPU device files.
A day-old entry is probed again anyway.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..files import temp_beside
from ..model import CompilerInfo, GpuInfo, Settings

MAX_AGE = 24 * 3600.0
# What an entry holds and how its answers were read: a change (a compiler's version taken from
# another line of its --version, offload targets that may be None) makes every entry stale.
FORMAT = "2"
_DRIVER = ("/proc/driver/nvidia/version", "/sys/module/nvidia/version")


def _identity(path: str | None) -> str:
    if path is None:
        return "-"
    try:
        st = os.stat(path)
        # nanoseconds and ctime: a tool rewritten within the same second, at the same size
        # (an upgrade from 12.2.0 to 13.1.0), is still a changed tool
        return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
    except OSError:
        return f"{path}:gone"


def key(family: str, commands: Iterable[str], settings: Settings) -> str:
    h = hashlib.sha256()
    parts = [FORMAT, family, os.environ.get("PATH", ""), json.dumps(settings.compilers, sort_keys=True,
                                                               default=str)]
    parts += [_identity(shutil.which(c)) for c in sorted(commands)]
    parts += [_identity(shutil.which(tool)) for tool in ("nvidia-smi", "ptxas")]
    for path in _DRIVER:
        try:
            parts.append(Path(path).read_text()[:400])
        except OSError:
            parts.append("-")
    parts.append(",".join(sorted(glob.glob("/dev/nvidia[0-9]*"))))
    for part in parts:
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()[:24]


def load(cache_dir: Path, digest: str) -> dict[str, Any] | None:
    path = cache_dir / "probe" / f"{digest}.json"
    try:
        if time.time() - path.stat().st_mtime > MAX_AGE:
            return None
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else None
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


def remembered(cache_dir: Path, digest: str,
               probe: Callable[[], tuple[tuple[CompilerInfo, ...], tuple[GpuInfo, ...], str | None,
                                         bool, tuple[int, ...] | None]]
               ) -> tuple[tuple[CompilerInfo, ...], tuple[GpuInfo, ...], str | None, bool,
                          tuple[int, ...] | None]:
    """(compilers, GPUs, GPU warning, offload, offload targets): from the cache, else probed
    (and remembered unless the GPU probe warned: a warning is worth asking again)."""
    data = load(cache_dir, digest)
    if data is not None:
        try:
            return (tuple(CompilerInfo(**c) for c in data["compilers"]),
                    tuple(GpuInfo(**g) for g in data["gpus"]), None, bool(data["offload"]),
                    None if data["targets"] is None else tuple(int(t) for t in data["targets"]))
        except (KeyError, TypeError, ValueError):
            pass
    compilers, gpus, warning, offload, targets = probe()
    if warning is None:
        save(cache_dir, digest, {
            "compilers": [c.__dict__ for c in compilers], "gpus": [g.__dict__ for g in gpus],
            "offload": offload, "targets": None if targets is None else list(targets)})
    return compilers, gpus, warning, offload, targets
