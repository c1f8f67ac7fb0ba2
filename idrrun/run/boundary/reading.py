"""Reading what a box could write, through descriptors: a name resolved beneath a folder's
descriptor without following a link (openat2, else one component at a time), a file taken out
whole and capped, the names and the usage of a box's folder.

The primitives the other parts of the boundary build on (the flags, `open_dir`, `descend`,
`copy_data`) live here too: this module imports no other part of the package.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from ..allowance import Ledger

# openat2(2) (Linux 5.6): struct open_how and its RESOLVE_* flags, from <linux/openat2.h>. The
# system call has the same number on every architecture (it came after the tables merged).
_SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
# None until tried: whether this kernel (and its seccomp filter: Docker's answers ENOSYS or
# EPERM for calls it does not know) lets us call openat2.
_openat2_works: bool | None = None

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class BoundaryError(OSError):
    """A path the grader refuses to follow: a link, a '..', a name out of bounds."""


def _components(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or not parts or ".." in parts:
        raise BoundaryError(errno.EXDEV, f"not a name inside the folder: {rel!r}")
    return parts


def _openat2(dirfd: int, rel: str, flags: int) -> int | None:
    """openat2 beneath dirfd without following any link; None when the kernel has none."""
    global _openat2_works
    if _openat2_works is False:
        return None
    how = _OpenHow(flags, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(_SYS_OPENAT2, dirfd, os.fsencode(rel), ctypes.byref(how),
                       ctypes.sizeof(how))
    if fd >= 0:
        _openat2_works = True
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and _openat2_works is None:
        _openat2_works = False
        return None
    if err == errno.EAGAIN:  # a rename raced the lookup (RESOLVE_BENEATH): the box's doing
        err = errno.EXDEV
    raise OSError(err, os.strerror(err), rel)


def open_beneath(dirfd: int, rel: str, flags: int = READ_FLAGS) -> int:
    """A descriptor of `rel` under the folder `dirfd`, no component of it a link, never above
    the folder. Raises OSError (ELOOP for a link, EXDEV for a way out, ENOENT...)."""
    parts = _components(rel)
    fd = _openat2(dirfd, "/".join(parts), flags | os.O_NOFOLLOW)
    if fd is not None:
        return fd
    # Without openat2: one component at a time, each a folder opened O_NOFOLLOW.
    current = dirfd
    try:
        for part in parts[:-1]:
            following = os.open(part, DIR_FLAGS, dir_fd=current)
            if current != dirfd:
                os.close(current)
            current = following
        return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=current)
    finally:
        if current != dirfd:
            os.close(current)


@dataclass(frozen=True)
class Taken:
    """A file taken out of a box: its bytes, or why the grader did not read it."""

    data: bytes | None
    why: str = ""  # "absent", "a link", "not a regular file", "more than N bytes", ...

    @property
    def text(self) -> str | None:
        return None if self.data is None else self.data.decode("utf-8", errors="replace")


# What tells one state of a file from the next without reading it: a write moves its size or
# its times (mtime; ctime too, as a rename, a link, a chmod or a removal does), and the inode
# is the file itself. Two writes within one tick of the kernel's clock may leave both times
# alike: the size read is compared too.
CHANGED = "changed while it was read: not used"


def _state(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def unchanged(fd: int, before: os.stat_result) -> bool:
    """Whether the file `fd`, once read, is as `before` (its fstat when opened) found it: what
    was read is then one state of it, never half of each of two versions."""
    return _state(os.fstat(fd)) == _state(before)


def take(dirfd: int, rel: str, cap: int, owners: tuple[int, ...] = (),
         ledger: Ledger | None = None) -> Taken:
    """Read `rel` out of the box folder `dirfd`: a regular file with no other name (_refused),
    owned by one of `owners` (any when empty), of at most `cap` bytes, counted against the
    row's `ledger` (run/allowance.py) before it is read, and unchanged while it is read (CHANGED).
    Never raises for what the box did: the reason is in Taken.why."""
    try:
        fd = open_beneath(dirfd, rel)
    except FileNotFoundError:
        return Taken(None, "absent")
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            return Taken(None, "a link, or a name leading out of its folder: not followed")
        if exc.errno == errno.ENOTDIR:
            return Taken(None, "absent")
        return Taken(None, f"cannot open it ({exc.strerror})")
    try:
        st = os.fstat(fd)
        problem = _refused(st, cap, owners, ledger, rel)
        if problem:
            return Taken(None, problem)
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) != st.st_size or not unchanged(fd, st):
            return Taken(None, CHANGED)
        return Taken(data)
    except OSError as exc:
        return Taken(None, f"cannot read it ({exc.strerror})")
    finally:
        os.close(fd)


def _refused(st: os.stat_result, cap: int, owners: tuple[int, ...],
             ledger: Ledger | None = None, rel: str = "") -> str:
    """Why the file opened (its fstat `st`) is not read, or ''. The rule of links, for every
    reader: a file with another name is refused (other_names); one left with no name was
    removed, or replaced by a rename, once opened (a release published again while a receiver
    reads it), is nobody else's, and is read as it was opened, if it does not change."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if other_names(st):
        return "a file with other names (a hard link): not read"
    if owners and st.st_uid not in owners:
        return "a file the box did not write: not read"
    if st.st_size > cap:
        return f"{st.st_size} bytes, more than the {cap} bytes read"
    if ledger is not None and not ledger.file(rel, st.st_size):
        return ledger.refused
    return ""


def other_names(st: os.stat_result) -> bool:
    """Whether the file has a name besides the one it was opened by: a hard link the writer
    made to a file it may not read itself (the file of another user, of root), which the
    grader would read for it."""
    return st.st_nlink > 1


def take_to(dirfd: int, rel: str, dest: Path, cap: int, owners: tuple[int, ...] = (),
            mode: int = 0o644, ledger: Ledger | None = None) -> str:
    """Copy `rel` out of the box folder `dirfd` into `dest` (a new name in a folder the grader
    owns; streamed, at most `cap` bytes, holes kept, counted against the row's `ledger` first;
    as take reads, a file that changes while it is copied leaves no copy); "" when done, else
    why not."""
    try:
        fd = open_beneath(dirfd, rel)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            return "a link, or a name leading out of its folder: not followed"
        return "absent" if exc.errno == errno.ENOTDIR else f"cannot open it ({exc.strerror})"
    try:
        st = os.fstat(fd)
        problem = _refused(st, cap, owners, ledger, rel)
        if problem:
            return problem
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      mode)
        try:
            copy_data(fd, out, min(st.st_size, cap))
            os.fchmod(out, mode)
            changed = not unchanged(fd, st)
        except BaseException:
            os.close(out)
            os.unlink(dest)
            raise
        os.close(out)
        if changed:
            os.unlink(dest)
            return CHANGED
        return ""
    except OSError as exc:
        return f"cannot copy it ({exc.strerror})"
    finally:
        os.close(fd)


def discard(dirfd: int, name: str) -> None:
    """Remove the entry `name` (one component, not followed: a link goes, not its target) from
    the box folder `dirfd`, if it is not a folder; silently when it is gone or cannot go."""
    if not name or "/" in name or name in (".", ".."):
        raise BoundaryError(errno.EXDEV, f"not a name inside the folder: {name!r}")
    try:
        os.unlink(name, dir_fd=dirfd)
    except OSError:
        pass


def names(dirfd: int) -> list[str]:
    """The names in a box folder (not followed, not read)."""
    with os.scandir(dirfd) as it:  # (scandir reads through a copy of the descriptor)
        return [e.name for e in it]


def usage(folder: Path, max_bytes: int, max_files: int) -> str | None:
    """Why the box folder `folder` holds more than max_bytes (blocks really used) or max_files
    entries, or None. Through descriptors, never following a link; stops counting as soon as a
    bound is passed, so that 100 000 files do not cost the grader a full walk."""
    size = files = 0
    try:
        top = open_dir(folder)
    except OSError:
        return None
    try:
        with contextlib.closing(descend(top)) as entries:
            for _, entry in entries:
                files += 1
                if files > max_files:
                    return f"more than {max_files} files"
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    size += st.st_blocks * 512
                if size > max_bytes:
                    return f"more than {max_bytes >> 20} MiB of files"
    finally:
        os.close(top)
    return None


def descend(dirfd: int) -> Generator[tuple[int, os.DirEntry[str]], None, None]:
    """Every entry below the folder `dirfd` (which stays the caller's), through descriptors,
    never following a link: (the descriptor of its folder, open while the entry is handled,
    the entry)."""
    stack = [os.dup(dirfd)]
    try:
        while stack:
            fd = stack.pop()
            try:
                with os.scandir(fd) as it:
                    entries = list(it)
                for entry in entries:
                    yield fd, entry
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(os.open(entry.name, DIR_FLAGS, dir_fd=fd))
                    except OSError:
                        continue
            finally:
                os.close(fd)
    finally:
        for fd in stack:
            os.close(fd)

def open_dir(path: Path) -> int:
    """A descriptor of a folder the grader made (not followed if it became a link)."""
    return os.open(path, DIR_FLAGS)


def open_folder(dirfd: int, rel: str) -> int:
    """A descriptor of the folder `rel` under the folder `dirfd` (open_beneath: no component
    of it a link, never above the folder)."""
    return open_beneath(dirfd, rel, DIR_FLAGS)

def copy_data(src: int, out: int, size: int) -> None:
    offset = 0
    while offset < size:
        try:
            data_at = os.lseek(src, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: only a hole is left
            break
        if data_at >= size:
            break
        # (Never past `size`: the file may have grown since it was measured.)
        hole_at = min(os.lseek(src, data_at, os.SEEK_HOLE), size)
        os.lseek(src, data_at, os.SEEK_SET)
        os.lseek(out, data_at, os.SEEK_SET)
        left = hole_at - data_at
        while left > 0:
            chunk = os.read(src, min(left, 1 << 20))
            if not chunk:
                break
            os.write(out, chunk)
            left -= len(chunk)
        offset = hole_at
    os.ftruncate(out, size)
