"""idrrun's own small programs (the run guard, the GPU tracer, the region counter): built once
into the cache, checked before every use, and placed where a box can run them.

A tool is compiled into CACHE/<kind>/<name> beside <name>.sha256, the digest of what was
built. Before each use the folder must be the grader's own (boundary.check_own), the file a
regular file of one link, owned by the grader and writable by nobody else, and its digest the
one recorded: a tool that changed since it was built (a poisoned cache) is built again, never
run. A box's own uid cannot reach the cache (0700): `place` copies a checked tool into a folder
of the request's room (0711, the copy 0755, named by its digest), which the box sees read-only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..files import temp_beside
from ..model import ProcResult
from . import boundary

DIGEST_SUFFIX = ".sha256"


def c_compiler(environ: Mapping[str, str] | None = None, cc: str | None = None) -> str | None:
    """The C compiler that builds idrrun's tools: `cc` when given, else cc or gcc on PATH."""
    search = (os.environ if environ is None else environ).get("PATH", os.defpath)
    return cc or shutil.which("cc", path=search) or shutil.which("gcc", path=search)


def digest_of(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


# The files this process has hashed and found as recorded, by what identifies their content
# without reading it: (device, inode, size, mtime, ctime) of the tool and of its digest file.
# No process sets a ctime (the kernel does, at any write, chmod or rename), and one that looks
# the same was hashed already. A file changed within the clock's tick of its last change could
# keep its ctime: files younger than FRESH seconds are hashed at every use.
_hashed: set[tuple[int, ...]] = set()
FRESH = 2.0


def identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def checked(target: Path) -> bool:
    """Whether `target` is a tool the grader built and nobody changed since."""
    try:
        boundary.check_own(target.parent)
        st = os.lstat(target)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid() or \
                st.st_mode & 0o022:
            return False
        recorded = target.with_name(target.name + DIGEST_SUFFIX)
        rst = os.lstat(recorded)
        if not stat.S_ISREG(rst.st_mode) or rst.st_uid != os.geteuid() or rst.st_mode & 0o022:
            return False
        seen = (*identity(st), *identity(rst))
        if seen in _hashed:
            return True
        if recorded.read_text().strip() != digest_of(target):
            return False
        if time.time() - max(st.st_ctime, rst.st_ctime) > FRESH:
            _hashed.add(seen)
        return True
    except (OSError, UnicodeDecodeError):
        return False


def build(target: Path, compile_to: Callable[[Path], ProcResult], what: str) -> tuple[Path | None, str]:
    """`target` if it is checked, else built again with compile_to(temporary path) and its
    digest recorded; (None, why) when it does not build. Its folder is made private (0700) to
    the grader, or refused when it is someone else's."""
    try:
        boundary.own_dir(target.parent, 0o700, parents=True)
    except OSError as exc:
        return None, f"{what}: {exc.strerror or exc}"
    if checked(target):
        return target, ""
    tmp = temp_beside(target)
    result = compile_to(tmp)
    if not result.ok or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        return None, (f"{what} did not build ({result.describe()}): "
                      f"{result.output.strip()[-400:]}")
    os.chmod(tmp, 0o755)
    recorded = target.with_name(target.name + DIGEST_SUFFIX)
    digest_tmp = temp_beside(recorded)
    digest_tmp.write_text(digest_of(tmp) + "\n")
    os.replace(digest_tmp, recorded)
    os.replace(tmp, target)
    return target, ""


def place(tool: Path, folder: Path) -> Path:
    """A copy of a checked tool in `folder` (a folder of the grader's own, passable by a box's
    uid), named by its digest: made once, checked again at every call."""
    boundary.own_dir(folder, 0o711)
    digest = digest_of(tool)
    target = folder / f"{digest[:16]}-{tool.name}"
    try:
        st = os.lstat(target)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022 \
                and st.st_nlink == 1 and digest_of(target) == digest:
            return target
        target.unlink()
    except FileNotFoundError:
        pass
    fd = boundary.open_dir(folder)
    try:
        name = temp_beside(target).name  # this thread's own: rows place tools at once
        boundary.put(fd, name, tool.read_bytes(), 0o755)
        os.replace(name, target.name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
    return target
