"""Writing the grader's and the user's own files whole: a reader never sees half a file, and two
threads writing the same file never mix their bytes; reading them (and the kernel's control
files) whole. (What a box wrote is read through run/boundary.py, never here.)"""

from __future__ import annotations

import os
import secrets
import tempfile
import threading
from pathlib import Path


def read_whole(path: str | Path) -> bytes | None:
    """A file of the grader's own, or a kernel's control or status file (a cgroup's, /proc's),
    whole; None when it cannot be read. One open and plain reads: a file object's buffering
    and its probes of the file cost four or five system calls more, at every cell."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        parts = []
        while chunk := os.read(fd, 1 << 16):
            parts.append(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write via a temporary file and rename: a reader never sees half a file. MODE (else
    mkstemp's 0600) is set on the file before it takes its name: never a chmod by name after."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_atomic_at(dirfd: int, name: str, data: bytes, mode: int = 0o644, gid: int = -1) -> None:
    """`data` as the file `name` of the folder open as `dirfd`, written whole: a temporary file
    made there (O_EXCL, O_NOFOLLOW), given its group (gid, -1: left) and mode, then renamed onto
    `name` within the folder. For folders the grader holds by descriptor, never by name: the
    boards the hub serves (run/boundary.open_published), the class's exchange."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=dirfd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchown(fd, -1, gid)
            os.fchmod(fd, mode)  # after the group: a change of group may clear mode bits
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        os.unlink(tmp, dir_fd=dirfd)
        raise


def temp_beside(target: Path) -> Path:
    """A name beside `target` for a file written whole, then renamed onto it: its own for each
    process and each thread. (The threads of one grading or course check build the same tool at
    once; with the process id alone, one's rename could take another's half-written file.)"""
    return target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
