"""Commands on PATH, looked up once while PATH and its folders stay as they are.

shutil.which tries every PATH folder for every command it is asked; the probe asks a dozen
commands at every call (13 lookups: ~6 ms of a cached call on the 2-core machine at load). A
View is one look at PATH: the identity of each folder (device, inode, mtime in ns) taken once,
and each command looked up at most once. A process keeps its views by PATH value (a kernel or
the resident server calls many times): the next view of the same PATH reuses the lookups while
no folder changed. A compiler installed, removed or renamed into a PATH folder changes that
folder's mtime, and a folder that appears or goes changes its identity: then it looks again.
A folder changed less than a second before the look may change again within the same tick of
the file system's clock, its mtime unmoved: such a view serves its call and is not kept (git's
"racily clean" files). What a view does not see: a file that was already in a folder and is made
executable in place (chmod +x adds no entry); the probe's day-long limit (probecache.MAX_AGE)
covers that.
"""

from __future__ import annotations

import os
import shutil
import time

# A folder's identity: (device, inode, mtime in ns), None where there is none.
Stamp = tuple[tuple[int, int, int] | None, ...]

_KEEP = 8  # views kept per process: a kernel rarely sees more PATH values than that
_RACY_NS = 1_000_000_000  # a folder changed this recently may change again unseen


class View:
    """PATH's folders as they were when it was taken, and the commands found there."""

    def __init__(self, search: str, stamp: Stamp) -> None:
        self.search = search
        self.stamp = stamp
        self._found: dict[str, str | None] = {}

    def which(self, command: str) -> str | None:
        """shutil.which(command) on this view's PATH, asked once per view (a command named by
        its path, a configured /opt/.../gcc, is looked at each time: its folder has no stamp)."""
        if os.sep in command:
            return shutil.which(command, path=self.search)
        try:
            return self._found[command]
        except KeyError:
            found = self._found[command] = shutil.which(command, path=self.search)
            return found


_views: dict[tuple[str, str], View] = {}


def _stamp(folder: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(folder or ".")
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def view(search: str | None = None) -> View:
    """PATH (or `search`) as it is now: the view kept for it while no folder has changed."""
    search = os.environ.get("PATH", os.defpath) if search is None else search
    folders = search.split(os.pathsep)
    # A relative folder ("", ".") is another folder in another working directory.
    try:
        key = (search, "" if all(os.path.isabs(f) for f in folders) else os.getcwd())
    except OSError:  # a working directory that is gone: nothing to keep it under
        key = None
    now = time.time_ns()
    stamp = tuple(_stamp(f) for f in dict.fromkeys(folders))  # a folder named twice: one look
    kept = _views.get(key) if key is not None else None
    if kept is not None and kept.stamp == stamp:
        return kept
    fresh = View(search, stamp)
    if key is not None and all(s is None or now - s[2] > _RACY_NS for s in stamp):
        if len(_views) >= _KEEP:
            _views.clear()
        _views[key] = fresh
    return fresh
