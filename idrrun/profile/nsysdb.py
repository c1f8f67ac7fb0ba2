"""Nsight Systems' SQLite export (`nsys export --type sqlite`) read into the profile's Trace.

The same Trace as the built-in tracer's (tracefile.py), so that summary, timeline, hints, rates
and the Perfetto export are one code for both profilers. Read with the stdlib's sqlite3: the
export is nsys's documented, stable form of a report, unlike the .nsys-rep itself.

Tables and columns read, by name (a table exists only when the run had such activity; the
export of Nsight Systems 2022.4 and later ones name them alike):

    CUPTI_ACTIVITY_KIND_KERNEL           start end deviceId contextId streamId correlationId
                                         globalPid demangledName|shortName (-> StringIds)
                                         gridX gridY gridZ blockX blockY blockZ
    CUPTI_ACTIVITY_KIND_MEMCPY           ... bytes copyKind (-> ENUM_CUDA_MEMCPY_OPER)
                                         srcKind dstKind (-> ENUM_CUDA_MEM_KIND)
    CUPTI_ACTIVITY_KIND_MEMSET           ... bytes
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION  ... syncType (-> ENUM_CUPTI_SYNC_TYPE)
    TARGET_INFO_GPU                      id name smCount totalMemory computeMajor computeMinor

Enumerations are read from the export's own ENUM_ tables, by symbol name; where a table is
missing or empty (ENUM_CUPTI_SYNC_TYPE in 2022.4), CUPTI's numbering is used. Times are
nanoseconds from the session's start, the process is the pid inside globalPid.

Not in the export, hence never in an nsys trace: the OpenACC queue each stream served (the
timeline names rows by stream) and whether a copy was asynchronous.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from contextlib import closing
from pathlib import Path

from .model import Copy, Device, Kernel, Memset, Sync, Trace

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
COPIES = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSETS = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNCS = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
GPUS = "TARGET_INFO_GPU"

# CUPTI's numbering (cupti_activity.h), used when the export has no names for an enumeration.
_COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
               7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
_SYNC_KINDS = {0: "unknown", 1: "event", 2: "stream_wait_event", 3: "stream", 4: "context"}
# nsys's own numbering of memory kinds (ENUM_CUDA_MEM_KIND, 2022.4), not CUPTI's.
_MEMORY_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed",
                 5: "device_static", 6: "managed_static", 7: "unknown"}


def _copy_kind(symbol: str) -> str:
    """CUDA_MEMCPY_KIND_HTOD -> HtoD, as CUPTI and the built-in tracer name it; the unified
    memory kinds (CUDA_MEMCPY_KIND_UVM_HTOD) are copies of the same direction."""
    code = symbol.rsplit("_", 1)[-1].upper()
    if len(code) == 4 and code[1:3] == "TO":
        return code[0] + "to" + code[3]
    return "unknown"


def _sync_kind(symbol: str) -> str:
    """CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE -> stream."""
    for suffix, kind in (("STREAM_WAIT_EVENT", "stream_wait_event"),
                         ("EVENT_SYNCHRONIZE", "event"), ("STREAM_SYNCHRONIZE", "stream"),
                         ("CONTEXT_SYNCHRONIZE", "context")):
        if symbol.upper().endswith(suffix):
            return kind
    return "unknown"


def _memory_kind(symbol: str) -> str:
    """CUDA_MEMOPR_MEMORY_KIND_PAGEABLE -> pageable."""
    return symbol.upper().split("MEMORY_KIND_", 1)[-1].lower() or "unknown"


class _Database:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self.db = connection
        self.tables = {row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}

    def rows(self, table: str, wanted: tuple[str, ...]) -> list[dict[str, object]]:
        """Every row of table with the wanted columns it has (None for the others)."""
        if table not in self.tables:
            return []
        have = self.columns(table)
        picked = [c for c in wanted if c in have]
        cursor = self.db.execute(f"SELECT {', '.join(picked)} FROM {table}")
        return [{**dict.fromkeys(wanted), **dict(zip(picked, row))} for row in cursor]

    def enum(self, table: str, fallback: Mapping[int, str],
             convert: Callable[[str], str]) -> dict[int, str]:
        """id -> our name, from an ENUM_ table of the export, else the fallback numbering."""
        if table in self.tables and {"id", "name"} <= self.columns(table):
            found = {int(i): convert(str(n)) for i, n in
                     self.db.execute(f"SELECT id, name FROM {table}") if n is not None}
            if found:
                return found
        return dict(fallback)

    def strings(self) -> dict[int, str]:
        if "StringIds" not in self.tables:
            return {}
        return {int(i): str(v) for i, v in self.db.execute("SELECT id, value FROM StringIds")}


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) else default


def _pid(global_pid: object) -> int:
    """nsys's globalPid packs hardware, VM and process ids: the pid is bits 24 to 47."""
    return (global_pid >> 24) & 0xFFFFFF if isinstance(global_pid, int) else 0


_COMMON = ("start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid")


def _trace(db: _Database, path: Path) -> Trace:
    strings = db.strings()
    copy_kinds = db.enum("ENUM_CUDA_MEMCPY_OPER", _COPY_KINDS, _copy_kind)
    memory_kinds = db.enum("ENUM_CUDA_MEM_KIND", _MEMORY_KINDS, _memory_kind)
    sync_kinds = db.enum("ENUM_CUPTI_SYNC_TYPE", _SYNC_KINDS, _sync_kind)
    skipped = 0

    def timed(row: Mapping[str, object]) -> tuple[int, int] | None:
        start, end = row["start"], row["end"]
        if not isinstance(start, int) or not isinstance(end, int) or end < start:
            return None
        return start, end

    kernels: list[Kernel] = []
    for row in db.rows(KERNELS, (*_COMMON, "demangledName", "shortName", "mangledName",
                                 "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")):
        span = timed(row)
        if span is None:
            skipped += 1
            continue
        name = next((strings[i] for i in (row["demangledName"], row["shortName"], row["mangledName"])
                     if isinstance(i, int) and i in strings), "?")
        kernels.append(Kernel(
            name=name, start=span[0], end=span[1], stream=_int(row["streamId"], -1),
            device=_int(row["deviceId"]), context=_int(row["contextId"]),
            correlation=_int(row["correlationId"]),
            grid=(_int(row["gridX"]), _int(row["gridY"]), _int(row["gridZ"])),
            block=(_int(row["blockX"]), _int(row["blockY"]), _int(row["blockZ"])),
            process=_pid(row["globalPid"])))
    copies: list[Copy] = []
    for row in db.rows(COPIES, (*_COMMON, "bytes", "copyKind", "srcKind", "dstKind")):
        span = timed(row)
        if span is None:
            skipped += 1
            continue
        copies.append(Copy(
            direction=copy_kinds.get(_int(row["copyKind"], -1), "unknown"), bytes=_int(row["bytes"]),
            start=span[0], end=span[1], stream=_int(row["streamId"], -1), device=_int(row["deviceId"]),
            context=_int(row["contextId"]), correlation=_int(row["correlationId"]),
            src=memory_kinds.get(_int(row["srcKind"], -1), ""),
            dst=memory_kinds.get(_int(row["dstKind"], -1), ""), process=_pid(row["globalPid"])))
    memsets: list[Memset] = []
    for row in db.rows(MEMSETS, (*_COMMON, "bytes")):
        span = timed(row)
        if span is None:
            skipped += 1
            continue
        memsets.append(Memset(
            bytes=_int(row["bytes"]), start=span[0], end=span[1], stream=_int(row["streamId"], -1),
            device=_int(row["deviceId"]), context=_int(row["contextId"]),
            correlation=_int(row["correlationId"]), process=_pid(row["globalPid"])))
    syncs: list[Sync] = []
    for row in db.rows(SYNCS, (*_COMMON, "syncType")):
        span = timed(row)
        if span is None:
            skipped += 1
            continue
        # CUPTI's invalid id (0xffffffff) for a wait not tied to a stream or context
        stream, context = _int(row["streamId"], -1), _int(row["contextId"], -1)
        syncs.append(Sync(
            kind=sync_kinds.get(_int(row["syncType"], -1), "unknown"), start=span[0], end=span[1],
            stream=-1 if stream == 0xFFFFFFFF else stream,
            context=-1 if context == 0xFFFFFFFF else context, process=_pid(row["globalPid"])))
    devices = [Device(id=_int(row["id"]), name=str(row["name"] or ""),
                      compute_capability=(_int(row["computeMajor"]), _int(row["computeMinor"])),
                      sms=_int(row["smCount"]), memory=_int(row["totalMemory"]))
               for row in db.rows(GPUS, ("id", "name", "computeMajor", "computeMinor", "smCount",
                                         "totalMemory"))]
    return Trace(kernels=tuple(kernels), copies=tuple(copies), memsets=tuple(memsets),
                 syncs=tuple(syncs), devices=tuple(devices), skipped=skipped, files=(path,))


def read_trace(path: Path) -> Trace | str:
    """The GPU activity of an nsys export, or why it cannot be read. An export without any of
    the activity tables is a run without GPU work: an empty Trace."""
    if not path.is_file():
        return f"{path} is missing"
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
            return _trace(_Database(connection), path)
    except sqlite3.DatabaseError as exc:
        return f"{path}: not a readable nsys export ({exc})"
