"""A request's room: the grader's own folder in which each of its boxes gets a fresh folder,
filled while only the grader can write there then handed over, and the sealed folder of what a
box may run but not change.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .copying import Budget, copy_tree, mkdirs
from .own_folders import check_own, fresh, hand_over, put
from .reading import DIR_FLAGS, READ_FLAGS, BoundaryError, copy_data, open_beneath, open_dir


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
                target = os.open(files_into, DIR_FLAGS, dir_fd=fd)
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
            mkdirs(fd, rel + "/")
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
    src = os.open(source, READ_FLAGS)
    try:
        fd = open_dir(folder)
        try:
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o700, dir_fd=fd)
        finally:
            os.close(fd)
        try:
            copy_data(src, out, os.fstat(src).st_size)
            if gid >= 0:
                os.fchown(out, -1, gid)
            os.fchmod(out, 0o750 if gid >= 0 else 0o700)
        finally:
            os.close(out)
    finally:
        os.close(src)
    return folder / name

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
