"""What the kernel saw made in a box's folder (inotify): a box can remove a file it made, never
the event. A watch is set before anything of the box runs, and read once after it. And the
writes into a folder, for a reader to wake on (profile/tracefile.Follower) rather than poll.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)

_IN_MODIFY = 0x02
_IN_CLOSE_WRITE = 0x08
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_Q_OVERFLOW = 0x4000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)


def watch_made(folder: Path) -> int | None:
    """A watch (an inotify descriptor) of the names made in `folder`, set before anything of a
    box runs there; None where the kernel gives none. made() reads it once."""
    return _watch(folder, _IN_CREATE | _IN_MOVED_TO)


def watch_written(folder: Path) -> int | None:
    """A watch (an inotify descriptor, non-blocking) of the files written, closed or made in
    `folder`, to wait on with select(); None where the kernel gives none. drain() empties it."""
    return _watch(folder, _IN_MODIFY | _IN_CLOSE_WRITE | _IN_CREATE | _IN_MOVED_TO)


def _watch(folder: Path, events: int) -> int | None:
    """A non-blocking inotify descriptor watching `events` in the folder itself (never through
    a link to another), or None."""
    fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return None
    if _libc.inotify_add_watch(fd, os.fsencode(folder), events | _IN_ONLYDIR | _IN_DONT_FOLLOW) < 0:
        os.close(fd)
        return None
    return int(fd)


def drain(watch: int) -> None:
    """The watch's events read away (what they were does not matter: something was written)."""
    try:
        while os.read(watch, 1 << 16):
            pass
    except (BlockingIOError, OSError):
        pass


def made(watch: int, name: str) -> bool:
    """Whether `name` was made in the watched folder since the watch was set, whatever became of
    it since (removed, renamed); True also when the kernel's queue overflowed (it can no longer
    tell, and only what ran in the box filled it). Closes the watch."""
    wanted = os.fsencode(name)
    try:
        while True:
            try:
                data = os.read(watch, 1 << 16)
            except BlockingIOError:
                return False
            at = 0
            while at + _EVENT.size <= len(data):
                _, mask, _, length = _EVENT.unpack_from(data, at)
                seen = data[at + _EVENT.size:at + _EVENT.size + length].rstrip(b"\0")
                at += _EVENT.size + length
                if mask & _IN_Q_OVERFLOW or seen == wanted:
                    return True
    finally:
        os.close(watch)
