"""What a box of the "uid" level leaves behind it on the machine, found and removed after its run.

Without namespaces a box shares the machine's IPC objects and world-writable folders: SysV
shared memory segments (3 x 256 MiB a class, kept by the kernel until removed), message
queues and semaphore sets outlived every run, as did its files in /run/lock and in the
grader's TMPDIR. Once every process of the box's uid is gone (the guard's sweep), the grader
removes:
- the SysV IPC objects the uid owns or created, found in /proc/sysvipc/{shm,msg,sem} and
  removed by id with ipcrm (`ipcrm_argv`; proc.py runs it, as it runs every process);
- the entries of WORLD_WRITABLE (and the grader's TMPDIR) the uid owns: looked at through the
  folder's descriptor without following a link (fstatat AT_SYMLINK_NOFOLLOW), a file or link
  unlinked by unlinkat, a folder emptied through descriptors (boundary.remove_entry).
A box's uid is fresh and far above any real account (sandbox.UID_BASE): nothing else owns it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import boundary

WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
SYSVIPC = Path("/proc/sysvipc")
# The kinds of SysV IPC object: the file of /proc/sysvipc that lists them, its id column, and
# ipcrm's option that removes one by id.
IPC_KINDS = (("shm", "shmid", "-m"), ("msg", "msqid", "-q"), ("sem", "semid", "-s"))


@dataclass(frozen=True)
class IpcObject:
    kind: str  # "shm", "msg", "sem"
    id: int


def parse_sysvipc(text: str, id_column: str, kind: str, uid: int) -> list[IpcObject]:
    """The objects of one /proc/sysvipc file that `uid` owns or created (pure)."""
    lines = text.splitlines()
    if not lines:
        return []
    columns = lines[0].split()
    try:
        at_id, at_uid, at_cuid = (columns.index(c) for c in (id_column, "uid", "cuid"))
    except ValueError:
        return []
    found = []
    for line in lines[1:]:
        words = line.split()
        try:
            if uid in (int(words[at_uid]), int(words[at_cuid])):
                found.append(IpcObject(kind, int(words[at_id])))
        except (IndexError, ValueError):
            continue
    return found


def ipc_objects(uid: int, root: Path = SYSVIPC) -> list[IpcObject]:
    """The SysV IPC objects of `uid` on this machine (its IPC namespace)."""
    found: list[IpcObject] = []
    for kind, id_column, _ in IPC_KINDS:
        try:
            text = (root / kind).read_text()
        except OSError:
            continue
        found += parse_sysvipc(text, id_column, kind, uid)
    return found


def ipcrm_argv(objects: list[IpcObject]) -> tuple[str, ...]:
    """ipcrm's command line that removes `objects` by id; () when there are none."""
    options = {kind: option for kind, _, option in IPC_KINDS}
    words = [w for o in objects for w in (options[o.kind], str(o.id))]
    return ("ipcrm", *words) if words else ()


def folders() -> tuple[str, ...]:
    """The world-writable folders a box of the uid level may have written in: the system's and
    the grader's TMPDIR."""
    ours = tempfile.gettempdir()
    return WORLD_WRITABLE + ((ours,) if ours not in WORLD_WRITABLE else ())


def remove_files(uid: int, where: tuple[str, ...] | None = None) -> list[str]:
    """Remove what `uid` owns at the top of each folder of `where` (default: `folders()`),
    through the folder's descriptor; the notes say what went."""
    notes = []
    for folder in folders() if where is None else where:
        try:
            fd = boundary.open_dir(Path(folder))
        except OSError:
            continue
        try:
            for name in boundary.names(fd):
                if boundary.remove_entry(fd, name, uid):
                    notes.append(f"removed {os.path.join(folder, name)}, left by the program")
        except OSError:
            continue
        finally:
            os.close(fd)
    return notes
