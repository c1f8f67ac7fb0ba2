"""Copying a tree nobody vouches for (a student's folder) into the grader's own: walked through
descriptors, nothing followed, bounded before a byte is written, each file read once.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .reading import (
    CHANGED,
    DIR_FLAGS,
    BoundaryError,
    copy_data,
    open_beneath,
    other_names,
    unchanged,
)


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
        top = os.open(source, DIR_FLAGS)
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
                mkdirs(dest_fd, rel)
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
                        stack.append((os.open(entry.name, DIR_FLAGS, dir_fd=fd), rel + "/", depth + 1))
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


def mkdirs(dest_fd: int, rel: str) -> None:
    current = dest_fd
    try:
        for part in rel.split("/")[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=current)
            except FileExistsError:
                pass
            following = os.open(part, DIR_FLAGS, dir_fd=current)
            if current != dest_fd:
                os.close(current)
            current = following
    finally:
        if current != dest_fd:
            os.close(current)


def _copy_one(source: Path, dest_fd: int, budget: Budget, mode: int) -> Copied:
    parent = os.open(source.parent, DIR_FLAGS)
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
        if single_link and other_names(st):
            raise BoundaryError(errno.EMLINK, "a file with other names (a hard link): not read",
                                rel)
        parent, _, name = rel.rpartition("/")
        target_dir = open_beneath(dest_fd, parent, DIR_FLAGS) if parent else os.dup(dest_fd)
        try:
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                          mode, dir_fd=target_dir)
        finally:
            os.close(target_dir)
        try:
            copy_data(src, out, min(st.st_size, cap))
            os.fchmod(out, mode)
        finally:
            os.close(out)
        if not unchanged(src, st):
            raise BoundaryError(errno.ESTALE, CHANGED, rel)
    finally:
        os.close(src)
