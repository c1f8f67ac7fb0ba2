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
   only, with no other name (a hard link to a file the box may not read is refused; a file
   left with no name once opened is nobody else's), owned by the box's uid or the grader, read
   with a size cap, and unchanged while it is read (its inode, size and times the same before
   and after: one state of it, never half of each of two). A name the box changed is the
   box's failure, never a path the grader follows. The exchange (grading/exchange.py) reads
   its own files by the same rule, through the same functions.
4. The grader never chowns, copies or removes by a path the box could change: a box's folder
   is removed (`remove`) once nothing of the box runs, by a walk through descriptors that
   never follows a link (shutil.rmtree's fd-based walk, which refuses a top that is a link).
5. The grader's own folders (cache, tools, scratch roots, share folders) are checked every
   time they are used (`own_dir`): a folder, not a link, owned by the grader's uid, writable
   by nobody else. One of a predictable name that someone else made first is refused, not
   used.

Everything here works on descriptors of folders the grader made, or on paths the grader owns
all the way down; nothing here starts a process (proc.py does). One module per part, each
importing only those above it:

    reading.py      names resolved beneath a folder's descriptor, files taken out (rule 3)
    watching.py     what the kernel saw made in a box's folder; writes to wake a reader on
    own_folders.py  the grader's own folders, checked, published, filled, removed (rules 2, 4, 5)
    copying.py      a tree nobody vouches for copied into the grader's own (rule 1)
    box_folders.py  a request's room: a box's fresh folder, the sealed executable (rules 1, 2)
"""

from __future__ import annotations

from . import box_folders, copying, own_folders, reading, watching
from .box_folders import box_folder, is_file, seal, sealed_folder
from .copying import Budget, Copied, copy_tree, walk
from .own_folders import (
    NotOwnFolder,
    check_own,
    fresh,
    hand_over,
    open_guarded,
    open_published,
    own_dir,
    own_dir_at,
    put,
    remove,
    remove_entry,
    way_refused,
)
from .reading import (
    DIR_FLAGS,
    READ_FLAGS,
    BoundaryError,
    Taken,
    discard,
    names,
    open_beneath,
    open_dir,
    open_folder,
    take,
    take_to,
    usage,
)
from .watching import drain, made, watch_made, watch_written

__all__ = [
    "BoundaryError", "Budget", "Copied", "DIR_FLAGS", "NotOwnFolder", "READ_FLAGS", "Taken",
    "box_folder", "box_folders", "check_own", "copy_tree", "copying", "discard", "drain", "fresh",
    "hand_over", "is_file", "made", "names", "open_beneath", "open_dir", "open_folder",
    "open_guarded", "open_published", "own_dir", "own_dir_at", "own_folders", "put", "reading",
    "remove", "remove_entry", "seal", "sealed_folder", "take", "take_to", "usage", "walk",
    "watch_made", "watch_written", "watching", "way_refused",
]
