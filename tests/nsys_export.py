"""Writes a Trace into a database laid out as Nsight Systems' SQLite export, for the tests.

The layout is never made up here: it comes from a real export, either the tables' definitions
and enumerations recorded from Nsight Systems 2022.4 (tests/data/nsys-2022.4/schema.sql, see
record.py there) or a whole export that a real nsys just wrote (`nsys export --lazy=false`).
Only the rows are ours: those of a trace the built-in tracer recorded, so that what nsys's
path reads can be compared with what the tracer's path reads, operation by operation.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from idrrun.profile.model import Trace

SCHEMA_2022_4 = Path(__file__).resolve().parent / "data" / "nsys-2022.4" / "schema.sql"

# our copy directions and sync kinds -> the export's enumeration symbols
_COPY_SYMBOLS = {"HtoD": "CUDA_MEMCPY_KIND_HTOD", "DtoH": "CUDA_MEMCPY_KIND_DTOH",
                 "DtoD": "CUDA_MEMCPY_KIND_DTOD", "HtoH": "CUDA_MEMCPY_KIND_HTOH",
                 "PtoP": "CUDA_MEMCPY_KIND_PTOP", "unknown": "CUDA_MEMCPY_KIND_UNKNOWN"}
# CUPTI's numbers: the export of 2022.4 leaves ENUM_CUPTI_SYNC_TYPE empty and stores these.
_SYNC_TYPES = {"unknown": 0, "event": 1, "stream_wait_event": 2, "stream": 3, "context": 4}
_INVALID = 0xFFFFFFFF


def _insert(db: sqlite3.Connection, table: str, **values: object) -> None:
    """One row; the NOT NULL columns not given get 0, as nsys writes for what did not apply."""
    row: dict[str, object] = {}
    for _, name, _, notnull, _, _ in db.execute(f"PRAGMA table_info({table})"):
        row[name] = values.get(name, 0 if notnull else None)
    unknown = set(values) - set(row)
    assert not unknown, f"{table} has no columns {unknown}"
    db.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
               list(row.values()))


def _ids(db: sqlite3.Connection, table: str) -> dict[str, int]:
    return {str(name): int(i) for i, name in db.execute(f"SELECT id, name FROM {table}")}


def write(trace: Trace, out: Path, base: Path = SCHEMA_2022_4) -> Path:
    """`out`: the tables of `base` (a .sql schema or an export to copy) holding the trace's
    operations. Process ids go into globalPid as nsys packs them (pid << 24)."""
    out.unlink(missing_ok=True)
    if base.suffix == ".sql":
        with closing(sqlite3.connect(out)) as db:
            db.executescript(base.read_text())
    else:
        shutil.copyfile(base, out)
    with closing(sqlite3.connect(out)) as db:
        copy_kinds = _ids(db, "ENUM_CUDA_MEMCPY_OPER")
        memory_kinds = _ids(db, "ENUM_CUDA_MEM_KIND")
        memory = {name.split("MEMORY_KIND_", 1)[1].lower(): i for name, i in memory_kinds.items()}
        names: dict[str, int] = {}
        for kernel in trace.kernels:
            if kernel.name not in names:
                names[kernel.name] = 1000 + len(names)
                _insert(db, "StringIds", id=names[kernel.name], value=kernel.name)
        for device in trace.devices:
            _insert(db, "TARGET_INFO_GPU", vmId=0, id=device.id, name=device.name,
                    computeMajor=device.compute_capability[0],
                    computeMinor=device.compute_capability[1], smCount=device.sms,
                    totalMemory=device.memory)
        for n, k in enumerate(trace.kernels):
            _insert(db, "CUPTI_ACTIVITY_KIND_KERNEL", start=k.start, end=k.end, deviceId=k.device,
                    contextId=k.context, streamId=k.stream, correlationId=k.correlation,
                    globalPid=k.process << 24, demangledName=names[k.name],
                    shortName=names[k.name], gridX=k.grid[0], gridY=k.grid[1], gridZ=k.grid[2],
                    blockX=k.block[0], blockY=k.block[1], blockZ=k.block[2], gridId=n + 1)
        for c in trace.copies:
            _insert(db, "CUPTI_ACTIVITY_KIND_MEMCPY", start=c.start, end=c.end, deviceId=c.device,
                    contextId=c.context, streamId=c.stream, correlationId=c.correlation,
                    globalPid=c.process << 24, bytes=c.bytes,
                    copyKind=copy_kinds[_COPY_SYMBOLS[c.direction]],
                    srcKind=memory.get(c.src), dstKind=memory.get(c.dst))
        for m in trace.memsets:
            _insert(db, "CUPTI_ACTIVITY_KIND_MEMSET", start=m.start, end=m.end, deviceId=m.device,
                    contextId=m.context, streamId=m.stream, correlationId=m.correlation,
                    globalPid=m.process << 24, bytes=m.bytes, memKind=memory["device"])
        for s in trace.syncs:
            _insert(db, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", start=s.start, end=s.end,
                    deviceId=0, contextId=_INVALID if s.context < 0 else s.context,
                    streamId=_INVALID if s.stream < 0 else s.stream, globalPid=s.process << 24,
                    syncType=_SYNC_TYPES[s.kind], eventId=0)
        db.commit()
    return out
