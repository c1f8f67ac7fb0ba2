"""The boundary between the grader and a box: the only code that touches what a box can write.

Theory of operation
-------------------
A box (run/sandbox.py) holds untrusted code: a student's compile or run. The grader around it
may run as root. Whatever a box can write it can also replace, at any moment while one of its
processes lives, by a symbolic link, a FIFO, a hard link to a file it cannot read, a sparse
file of 4 GB or a folder a thousand levels deep. The rules, after isolate's `isolate.c` and
DOMjudge's runguard:

1. What the grader puts into a box goes where the box cannot write: the executable and the
   tools the box runs (guard, tracer, profiling library) lie in folders the grader owns (0711,
   files 0755), bound read-only; the student's sources are a grader-owned copy, read-only to
   the box (`copy_tree`).
2. Every compile and every run starts from a fresh writable folder (`fresh`: mkdtemp, a name
   nobody can guess or make first), filled by the grader while nothing else can write there
   (files created O_EXCL through the folder's descriptor), then handed to the box's uid
   through descriptors (`hand_over`), never by name.
3. What comes out of a box is opened only through the descriptor the grader kept of a folder
   it made (`take`): openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
   where the kernel has it, else one component at a time with O_NOFOLLOW; a regular file
   only, with one link, owned by the box's uid or the grader, read with a size cap. A name the
   box changed is the box's failure, never a path the grader follows.
4. The grader never chowns, copies or removes by a path the box could change: a box's folder
   is removed (`remove`) once nothing of the box runs, by a walk through descriptors that
   never follows a link (shutil.rmtree's fd-based walk, which refuses a top that is a link).
5. The grader's own folders (cache, tools, scratch roots, share folders) are checked every
   time they are used (`own_dir`): a folder, not a link, owned by the grader's uid, writable
   by nobody else. One of a predictable name that someone else made first is refused, not
   used.

Everything here works on descriptors of folders the grader made, or on paths the grader owns
all the way down; nothing here starts a process (proc.py does).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import struct
import tempfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from .evidence import Ledger

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

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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


def open_beneath(dirfd: int, rel: str, flags: int = _READ_FLAGS) -> int:
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
            following = os.open(part, _DIR_FLAGS, dir_fd=current)
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


def take(dirfd: int, rel: str, cap: int, owners: tuple[int, ...] = (),
         ledger: Ledger | None = None) -> Taken:
    """Read `rel` out of the box folder `dirfd`: a regular file with one link (a hard link to a
    file the box may not read is refused), owned by one of `owners` (any when empty), of at
    most `cap` bytes, counted against the row's `ledger` (evidence.py) before it is read.
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
        return Taken(b"".join(chunks))
    except OSError as exc:
        return Taken(None, f"cannot read it ({exc.strerror})")
    finally:
        os.close(fd)


def _refused(st: os.stat_result, cap: int, owners: tuple[int, ...],
             ledger: Ledger | None = None, rel: str = "") -> str:
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink != 1:
        return "a file with other names (a hard link): not read"
    if owners and st.st_uid not in owners:
        return "a file the box did not write: not read"
    if st.st_size > cap:
        return f"{st.st_size} bytes, more than the {cap} bytes read"
    if ledger is not None and not ledger.file(rel, st.st_size):
        return ledger.refused
    return ""


def take_to(dirfd: int, rel: str, dest: Path, cap: int, owners: tuple[int, ...] = (),
            mode: int = 0o644, ledger: Ledger | None = None) -> str:
    """Copy `rel` out of the box folder `dirfd` into `dest` (a new name in a folder the grader
    owns; streamed, at most `cap` bytes, holes kept, counted against the row's `ledger` first);
    "" when done, else why not."""
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
            _copy_data(fd, out, min(st.st_size, cap))
            os.fchmod(out, mode)
        except BaseException:
            os.close(out)
            os.unlink(dest)
            raise
        os.close(out)
        return ""
    except OSError as exc:
        return f"cannot copy it ({exc.strerror})"
    finally:
        os.close(fd)


def is_file(folder: Path, rel: str) -> bool:
    """Whether a box folder of the grader's room holds `rel` as a regular file (no link
    followed)."""
    try:
        check_own(folder.parent)
        fd = open_dir(folder)
    except OSError:
        return False
    try:
        inner = open_beneath(fd, rel)
        try:
            return stat.S_ISREG(os.fstat(inner).st_mode)
        finally:
            os.close(inner)
    except OSError:
        return False
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
        with contextlib.closing(_descend(top)) as entries:
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


def _descend(dirfd: int) -> Generator[tuple[int, os.DirEntry[str]], None, None]:
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
                            stack.append(os.open(entry.name, _DIR_FLAGS, dir_fd=fd))
                    except OSError:
                        continue
            finally:
                os.close(fd)
    finally:
        for fd in stack:
            os.close(fd)


# ---------------------------------------------------------------------------------------------
# What the kernel saw made in a box's folder: a box can remove a file it made, never the event


_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_Q_OVERFLOW = 0x4000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)


def watch_made(folder: Path) -> int | None:
    """A watch (an inotify descriptor) of the names made in `folder`, set before anything of a
    box runs there; None where the kernel gives none. made() reads it once."""
    fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return None
    mask = _IN_CREATE | _IN_MOVED_TO | _IN_ONLYDIR | _IN_DONT_FOLLOW
    if _libc.inotify_add_watch(fd, os.fsencode(folder), mask) < 0:
        os.close(fd)
        return None
    return int(fd)


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


# ---------------------------------------------------------------------------------------------
# The grader's own folders


class NotOwnFolder(OSError):
    """A folder the grader would use that is not its own (someone else made it, a link...)."""


def check_own(path: Path, private: bool = False) -> os.stat_result:
    """`path` is a folder, not a link, owned by the grader's uid, writable by nobody else (and,
    private, not readable by anyone else either). Raises NotOwnFolder saying why."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise NotOwnFolder(exc.errno or errno.ENOENT, f"{path}: {exc.strerror}") from None
    why = ""
    if stat.S_ISLNK(st.st_mode):
        why = "is a link"
    elif not stat.S_ISDIR(st.st_mode):
        why = "is not a folder"
    elif st.st_uid != os.geteuid():
        why = f"belongs to uid {st.st_uid}, not to this grader (uid {os.geteuid()})"
    elif st.st_mode & 0o022:
        why = f"is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    elif private and st.st_mode & 0o077:
        why = f"is open to others (mode {stat.S_IMODE(st.st_mode):o})"
    if why:
        raise NotOwnFolder(errno.EPERM, f"{path} {why}: refused")
    return st


def _changeable(st: os.stat_result) -> str:
    """Why a folder on the way to one the grader publishes in could be changed by someone else
    ('' when it cannot): owned by another uid than root and the grader, or writable by others
    without the sticky bit (in /tmp others may add names, not rename or remove ours)."""
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid not in (0, os.geteuid()):
        return f"belongs to uid {st.st_uid}"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return f"is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


def way_refused(folder: Path) -> str:
    """'' when nobody but root and the grader can change the way to `folder`: each folder as
    typed (a link there is the folder it names, and nobody else can replace the link) and each
    folder of its real path (where the links lead); else which one could, and why."""
    real = Path(os.path.realpath(folder))
    for each in (folder, *folder.parents, real, *real.parents):
        try:
            why = _changeable(os.stat(each))
        except OSError as exc:
            why = exc.strerror or "cannot be read"
        if why:
            return f"{each} {why}"
    return ""


def open_published(path: Path, mode: int = 0o755) -> int:
    """A descriptor of `path`, a folder where the grader writes files for others to read (the
    times boards the hub serves), made with its missing parents when missing: the way to it
    can be changed by nobody but root and the grader (way_refused), so that no one else can
    redirect it (a parent folder of theirs renamed, a link put in its place), and the folder
    passes check_own. Files are then written through the descriptor, never by name. Raises
    NotOwnFolder saying why."""
    path = Path(os.path.abspath(path))
    existing = path.parent
    while not os.path.lexists(existing):  # made below only inside a folder that passed
        existing = existing.parent
    why = way_refused(existing)
    if not why:
        path.mkdir(mode=mode, parents=True, exist_ok=True)
        why = way_refused(path.parent)
    if why:
        raise NotOwnFolder(errno.EPERM, f"{path}: the way to it is not safe: {why}: refused")
    st = check_own(path)
    fd = open_dir(path)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise NotOwnFolder(errno.EPERM, f"{path} was replaced while it was checked: refused")
    return fd


def own_dir(path: Path, mode: int = 0o700, parents: bool = False) -> Path:
    """Make `path` (mode `mode`), or take it if it exists and passes check_own; its mode is
    then set to `mode`. Raises NotOwnFolder for a folder that is not the grader's own."""
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    check_own(path)
    fd = open_dir(path)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return path


def fresh(parent: Path, prefix: str, mode: int = 0o700) -> Path:
    """A new folder in the grader's own `parent`, under a name nobody could make first."""
    check_own(parent)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(path, mode)
    return path


def open_dir(path: Path) -> int:
    """A descriptor of a folder the grader made (not followed if it became a link)."""
    return os.open(path, _DIR_FLAGS)


def put(dirfd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """A new file in a folder the grader is filling (before any box sees it)."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode, dir_fd=dirfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def hand_over(dirfd: int, uid: int, gid: int) -> None:
    """Give a fresh folder the grader filled, and everything in it, to the box's uid, through
    descriptors (the folder and its content are the grader's own until this returns)."""
    with contextlib.closing(_descend(dirfd)) as entries:
        for parent, entry in entries:
            os.chown(entry.name, uid, gid, dir_fd=parent, follow_symlinks=False)
    os.fchown(dirfd, uid, gid)


def remove(path: Path) -> None:
    """Remove a folder a box wrote in, once nothing of the box runs. The top is the grader's own
    path; below it, the walk goes through descriptors and never follows a link, one folder
    open at a time, climbing back through "..", checked against the folder it came from: a
    tree a box made 10 000 folders deep costs neither Python's stack (shutil.rmtree recurses)
    nor 10 000 descriptors. What cannot be removed is left, never followed."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)  # a link or a file where a folder was: the name itself goes
        return
    _empty(fd)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def remove_entry(dirfd: int, name: str, uid: int) -> bool:
    """Remove the entry `name` of the folder `dirfd` (one component, never followed) if it
    belongs to `uid`: a file or a link goes by unlinkat, a folder is emptied through
    descriptors (as `remove`) then removed. Whether it was removed."""
    if not name or "/" in name or name in (".", ".."):
        raise BoundaryError(errno.EXDEV, f"not a name inside the folder: {name!r}")
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        if st.st_uid != uid:
            return False
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dirfd)
            return True
        fd = os.open(name, _DIR_FLAGS, dir_fd=dirfd)
    except OSError:
        return False
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino, opened.st_uid) != (st.st_dev, st.st_ino, uid):
        os.close(fd)
        return False  # replaced between the look and the open: left alone
    _empty(fd)
    try:
        os.rmdir(name, dir_fd=dirfd)
        return True
    except OSError:
        return False


def _empty(fd: int) -> None:
    """Remove everything below the folder `fd` (closed here), never following a link."""
    names: list[str] = []  # the way down from the top, and each folder's (device, inode)
    ids: list[tuple[int, int]] = []
    stuck: list[set[str]] = [set()]  # per level, what could not be removed
    try:
        while True:
            entry = _first(fd, stuck[-1])
            if entry is not None:
                name, is_dir = entry
                try:
                    if not is_dir:
                        os.unlink(name, dir_fd=fd)
                        continue
                    below = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    stuck[-1].add(name)
                    continue
                st = os.fstat(fd)
                ids.append((st.st_dev, st.st_ino))
                names.append(name)
                stuck.append(set())
                os.close(fd)
                fd = below
                continue
            if not names:
                break
            above = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = above
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != ids.pop():
                return  # the tree moved under us: stop, follow nothing
            name = names.pop()
            left = stuck.pop()
            try:
                if left:
                    raise OSError(errno.ENOTEMPTY, "not empty")
                os.rmdir(name, dir_fd=fd)
            except OSError:
                stuck[-1].add(name)
    finally:
        os.close(fd)


def _first(fd: int, skip: set[str]) -> tuple[str, bool] | None:
    """The first entry of a folder not in `skip`: (name, whether it is a folder, not a link)."""
    with os.scandir(fd) as it:
        for entry in it:
            if entry.name not in skip:
                try:
                    return entry.name, entry.is_dir(follow_symlinks=False)
                except OSError:
                    return entry.name, False
    return None


# ---------------------------------------------------------------------------------------------
# A request's room: the grader's own folder in which each of its boxes gets a fresh folder


def box_folder(room: Path, prefix: str, uid: int, gid: int, files_from: Path | None = None,
               files_into: str = "", put_files: tuple[tuple[str, bytes], ...] = (),
               tmp: str = "", make_dirs: tuple[str, ...] = ()) -> Path:
    """A fresh folder for one box in the grader's own `room`: filled while only the grader can
    write there (a copy of the grader's folder `files_from` into the subfolder `files_into`,
    then `put_files`, the folders `make_dirs`, an empty `tmp` folder when named), then handed
    to the box's uid (-1: the grader's own user runs the box, nothing to hand over)."""
    folder = fresh(room, prefix, 0o700)
    fd = open_dir(folder)
    try:
        if files_from is not None:
            target = fd
            if files_into:
                os.mkdir(files_into, 0o755, dir_fd=fd)
                target = os.open(files_into, _DIR_FLAGS, dir_fd=fd)
            try:
                copied = copy_tree(files_from, target, Budget(size=1 << 40, entries=1 << 20,
                                                              depth=1 << 10))
            finally:
                if target != fd:
                    os.close(target)
            if copied.refused:
                raise BoundaryError(errno.EFBIG, copied.refused)
        for name, data in put_files:
            put(fd, name, data)
        for rel in make_dirs:
            _mkdirs(fd, rel + "/")
        if tmp:
            os.mkdir(tmp, 0o700, dir_fd=fd)
        if uid >= 0:
            hand_over(fd, uid, gid)
    finally:
        os.close(fd)
    return folder


def sealed_folder(room: Path, prefix: str, gid: int) -> Path:
    """A fresh folder for what one box may read and run but not change (its executable): the
    grader's own, passable and readable by the box's group only (gid -1: by the grader's own
    user only, who runs the box)."""
    folder = fresh(room, prefix, 0o710 if gid >= 0 else 0o700)
    if gid >= 0:
        os.chown(folder, -1, gid, follow_symlinks=False)
    return folder


def seal(source: Path, folder: Path, name: str, gid: int) -> Path:
    """Copy the grader's own file `source` into the sealed folder as `name`: 0750 to the box's
    group (0700 with gid -1), the grader's own. Streamed, holes kept."""
    src = os.open(source, _READ_FLAGS)
    try:
        fd = open_dir(folder)
        try:
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o700, dir_fd=fd)
        finally:
            os.close(fd)
        try:
            _copy_data(src, out, os.fstat(src).st_size)
            if gid >= 0:
                os.fchown(out, -1, gid)
            os.fchmod(out, 0o750 if gid >= 0 else 0o700)
        finally:
            os.close(out)
    finally:
        os.close(src)
    return folder / name


# ---------------------------------------------------------------------------------------------
# Copying a tree nobody vouches for (a student's folder) into the grader's own


@dataclass(frozen=True)
class Budget:
    """How much of an untrusted tree the grader copies: the apparent size of its files (a
    sparse file counts for what it claims), its entries and its depth."""

    size: int = 64 << 20
    entries: int = 2000
    depth: int = 16


@dataclass(frozen=True)
class Copied:
    files: tuple[str, ...]  # relative paths copied
    skipped: tuple[str, ...]  # "name: why" for what was left out (links, devices...)
    refused: str = ""  # why nothing was copied (a bound passed); "" when copied


def copy_tree(source: Path, dest_fd: int, budget: Budget = Budget(), mode: int = 0o644,
              single_link: bool = False) -> Copied:
    """Copy the regular files under `source` (a folder, or one file) into the grader's empty
    folder `dest_fd`: links, FIFOs and devices are left out (said in `skipped`), nothing is
    followed, bounds are checked before a byte is written (all or nothing), holes stay holes.
    Each file is read once, through a descriptor, and no further than the size the walk saw:
    a file its owner swaps for a bigger one meanwhile is cut there, never read past the budget.
    single_link: a file with other names (a hard link to a file its owner may not read) is
    refused, as take() refuses it."""
    try:
        top = os.open(source, _DIR_FLAGS)
    except NotADirectoryError:
        return _copy_one(source, dest_fd, budget, mode)
    except OSError as exc:
        return Copied((), (), f"cannot open {source} ({exc.strerror})")
    try:
        skipped: list[str] = []
        plan: list[tuple[str, int]] = []
        total = 0
        try:
            for rel, st in walk(top, budget, skipped):
                total += st.st_size
                if total > budget.size:
                    return Copied((), (), f"more than {budget.size >> 20} MiB of files "
                                          f"(sizes as the files claim them, holes included)")
                plan.append((rel, st.st_size))
        except BoundaryError as exc:
            return Copied((), (), str(exc.strerror))
        try:
            for rel, size in plan:
                _mkdirs(dest_fd, rel)
                _copy_file(top, rel, dest_fd, mode, size, single_link)
        except OSError as exc:
            return Copied((), (), f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
        return Copied(tuple(r for r, _ in plan), tuple(skipped))
    finally:
        os.close(top)


def walk(dirfd: int, budget: Budget, skipped: list[str] | None = None,
         ) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of the regular files under a folder, through descriptors, never
    following a link, within the budget's depth and entries (BoundaryError past them); what is
    neither a regular file nor a folder is noted in `skipped`."""
    seen = 0
    stack: list[tuple[int, str, int]] = [(os.dup(dirfd), "", 0)]
    try:
        while stack:
            fd, prefix, depth = stack.pop()
            try:
                with os.scandir(fd) as it:
                    entries = sorted(it, key=lambda e: e.name)
                for entry in entries:
                    seen += 1
                    if seen > budget.entries:
                        raise BoundaryError(errno.EFBIG, f"more than {budget.entries} files and folders")
                    st = entry.stat(follow_symlinks=False)
                    rel = prefix + entry.name
                    if stat.S_ISDIR(st.st_mode):
                        if depth + 1 > budget.depth:
                            raise BoundaryError(errno.ELOOP, f"folders more than {budget.depth} deep")
                        stack.append((os.open(entry.name, _DIR_FLAGS, dir_fd=fd), rel + "/", depth + 1))
                    elif stat.S_ISREG(st.st_mode):
                        yield rel, st
                    elif skipped is not None:
                        kind = "a link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
                        skipped.append(f"{rel}: {kind}, not copied")
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _mkdirs(dest_fd: int, rel: str) -> None:
    current = dest_fd
    try:
        for part in rel.split("/")[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=current)
            except FileExistsError:
                pass
            following = os.open(part, _DIR_FLAGS, dir_fd=current)
            if current != dest_fd:
                os.close(current)
            current = following
    finally:
        if current != dest_fd:
            os.close(current)


def _copy_one(source: Path, dest_fd: int, budget: Budget, mode: int) -> Copied:
    parent = os.open(source.parent, _DIR_FLAGS)
    try:
        try:
            st = os.stat(source.name, dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            return Copied((), (), f"cannot read {source} ({exc.strerror})")
        if not stat.S_ISREG(st.st_mode):
            return Copied((), (), f"{source.name}: not a regular file (a link?)")
        if st.st_size > budget.size:
            return Copied((), (), f"{st.st_size} bytes, more than the {budget.size >> 20} MiB "
                                  "a submission may have")
        try:
            _copy_file(parent, source.name, dest_fd, mode, st.st_size, single_link=False)
        except OSError as exc:
            return Copied((), (), f"{source.name}: {exc.strerror or exc}")
        return Copied((source.name,), ())
    finally:
        os.close(parent)


def _copy_file(src_dir: int, rel: str, dest_fd: int, mode: int, cap: int,
               single_link: bool) -> None:
    """One regular file, read through the source folder's descriptor (never a link), at most
    `cap` bytes of it, written new in the destination; holes are skipped (SEEK_DATA), so a
    sparse file stays sparse."""
    src = open_beneath(src_dir, rel)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise BoundaryError(errno.EINVAL, "not a regular file", rel)
        if single_link and st.st_nlink != 1:
            raise BoundaryError(errno.EMLINK, "a file with other names (a hard link): not read",
                                rel)
        parent, _, name = rel.rpartition("/")
        target_dir = open_beneath(dest_fd, parent, _DIR_FLAGS) if parent else os.dup(dest_fd)
        try:
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                          mode, dir_fd=target_dir)
        finally:
            os.close(target_dir)
        try:
            _copy_data(src, out, min(st.st_size, cap))
            os.fchmod(out, mode)
        finally:
            os.close(out)
    finally:
        os.close(src)


def _copy_data(src: int, out: int, size: int) -> None:
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
