"""The grader's own folders: checked every time they are used (a folder, not a link, owned by
the grader, writable by nobody else), made under names nobody could make first, published on a
way nobody else can change, filled, handed to a box's uid and removed through descriptors.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from .reading import DIR_FLAGS, BoundaryError, descend, open_dir, open_folder


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


def own_dir_at(parent: int, name: str, mode: int, uid: int = 0, gid: int = 0) -> int:
    """A descriptor of the folder `name` under the grader's folder `parent`, made if absent,
    owned uid:gid with `mode`; one that exists must already be so (a folder someone else made
    is never taken over): NotOwnFolder says why not."""
    try:
        os.mkdir(name, mode, dir_fd=parent)
        fd = open_folder(parent, name)
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    except FileExistsError:
        try:
            fd = open_folder(parent, name)
        except OSError as exc:
            raise NotOwnFolder(exc.errno or errno.EPERM,
                               f"not a folder of ours ({exc.strerror})") from None
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (uid, gid, mode):
        os.close(fd)
        raise NotOwnFolder(errno.EPERM, f"expected owner {uid}:{gid} and mode {mode:o}, found "
                                        f"{st.st_uid}:{st.st_gid} {stat.S_IMODE(st.st_mode):o}: "
                                        "not ours")
    return fd


def open_guarded(path: Path) -> int:
    """A descriptor of the folder `path` (not followed if a link) that nobody but root and the
    grader may write in, on a way nobody else can change (way_refused): a name the grader
    reads there is theirs (a folder handed to the grader, as a grading's feedback). Raises
    NotOwnFolder saying why, OSError when it cannot be opened."""
    way = way_refused(Path(os.path.abspath(path)).parent)
    if way:
        raise NotOwnFolder(errno.EPERM, f"the way to it is not safe: {way}")
    fd = open_dir(path)
    st = os.fstat(fd)
    if st.st_mode & 0o022 or st.st_uid not in (0, os.geteuid()):
        os.close(fd)
        raise NotOwnFolder(errno.EPERM, f"others may write in it (owner {st.st_uid}, "
                                        f"mode {stat.S_IMODE(st.st_mode):o})")
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
    with contextlib.closing(descend(dirfd)) as entries:
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
        fd = os.open(path, DIR_FLAGS)
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
        fd = os.open(name, DIR_FLAGS, dir_fd=dirfd)
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
                    below = os.open(name, DIR_FLAGS, dir_fd=fd)
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
            above = os.open("..", DIR_FLAGS, dir_fd=fd)
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
