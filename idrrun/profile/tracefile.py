"""Reading the built-in tracer's files ("idrrun-trace" JSON lines, docs/profiling.md).

One JSON object per line, told apart by "type": header, kernel, memcpy, memset, sync, queue,
device, dropped, error, end. Unknown types and fields are ignored (newer tracers may add some);
version 1 files (no queue or device records) read the same. A line that is
not JSON -- the last one when the program was killed while the tracer wrote -- is counted in
Trace.skipped and otherwise ignored. A file without its "end" record makes Trace.complete False.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .model import Copy, Device, Kernel, Memset, StreamQueue, Sync, Trace

FORMAT = "idrrun-trace"
VERSION = 2


def _int(record: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = record.get(key, default)
    if type(value) is int:  # the usual case first: a trace has 300 000 of these (bool is not int)
        return value
    return int(value) if isinstance(value, float) else default


def _dim3(record: Mapping[str, Any], key: str) -> tuple[int, int, int]:
    value = record.get(key)
    if isinstance(value, list) and len(value) == 3:
        a, b, c = value  # (no generator: two of these per kernel record)
        if isinstance(a, int) and isinstance(b, int) and isinstance(c, int):
            return (a, b, c)
    return (0, 0, 0)


def trace_files(path: Path) -> list[Path]:
    """The trace file and those of other processes of the run (FILE.<pid>), in that order."""
    others = sorted(p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit())
    return ([path] if path.is_file() else []) + others


def _records(lines: Iterable[str]) -> list[object]:
    """The lines' JSON values, None for a line that is not JSON. The whole file is decoded as
    one array first (one call instead of one per line: a third of the reading time of a long
    trace); when that fails or gives another count of values, line by line. (Lines crafted to
    split and join values could still be read differently than one by one; the file is the
    traced program's own, so that gives it nothing it could not write plainly.)"""
    kept = [line for line in lines if line.strip()]
    try:
        values: list[object] = json.loads("[" + ",".join(kept) + "]")
        if len(values) == len(kept):  # a line holding "1,2" would make two
            return values
    except ValueError:
        pass
    out: list[object] = []
    for line in kept:
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append(None)
    return out


def parse_lines(lines: Iterable[str], process: int = 0) -> tuple[Trace, int]:
    """One file's lines -> (its trace, its pid from the header)."""
    kernels: list[Kernel] = []
    copies: list[Copy] = []
    memsets: list[Memset] = []
    syncs: list[Sync] = []
    queue_records: list[dict[str, Any]] = []
    devices: list[Device] = []
    errors: list[str] = []
    skipped = dropped = 0
    ended = False
    for record in _records(lines):
        if record is None:
            skipped += 1
            continue
        if not isinstance(record, dict):
            skipped += 1
            continue
        kind = record.get("type")
        if kind == "header":
            process = _int(record, "pid", process)
            continue
        if kind == "end":
            ended = True
            continue
        if kind == "dropped":
            dropped += _int(record, "count")
            continue
        if kind == "error":
            errors.append(f"{record.get('call', '?')}: {record.get('message', '?')}")
            continue
        if kind == "queue":
            queue_records.append(record)
            continue
        if kind == "device":
            devices.append(_device(record, process))
            continue
        start, end = _int(record, "start"), _int(record, "end")
        if kind in ("kernel", "memcpy", "memset", "sync") and (start <= 0 or end < start):
            skipped += 1  # CUPTI gives 0 when it could not time an operation
            continue
        stream = _int(record, "stream", -1)
        if kind == "kernel":
            kernels.append(Kernel(name=str(record.get("name", "?")), stream=stream,
                                  device=_int(record, "device"), context=_int(record, "context"),
                                  correlation=_int(record, "correlation"),
                                  grid=_dim3(record, "grid"), block=_dim3(record, "block"),
                                  start=start, end=end, process=process))
        elif kind == "memcpy":
            copies.append(Copy(direction=str(record.get("copy", "unknown")),
                               bytes=_int(record, "bytes"), stream=stream,
                               device=_int(record, "device"), context=_int(record, "context"),
                               correlation=_int(record, "correlation"),
                               src=str(record.get("src", "")), dst=str(record.get("dst", "")),
                               asynchronous=bool(record.get("async", False)), start=start, end=end, process=process))
        elif kind == "memset":
            memsets.append(Memset(bytes=_int(record, "bytes"), stream=stream,
                                  device=_int(record, "device"), context=_int(record, "context"),
                                  correlation=_int(record, "correlation"), start=start, end=end, process=process))
        elif kind == "sync":
            syncs.append(Sync(kind=str(record.get("sync", "unknown")), stream=stream,
                              context=_int(record, "context", -1), start=start, end=end, process=process))
    by_correlation: dict[int, int] = {}
    ops: list[Kernel | Copy | Memset] = [*kernels, *copies, *memsets]
    for op in ops:
        if op.correlation:
            by_correlation[op.correlation] = op.stream
    named = _stream_queues(queue_records, by_correlation, process)
    trace = Trace(kernels=tuple(kernels), copies=tuple(copies), memsets=tuple(memsets),
                  syncs=tuple(syncs), stream_queues=named,
                  devices=tuple(devices),
                  complete=ended, dropped=dropped, errors=tuple(errors), skipped=skipped)
    return trace, process


def _device(record: Mapping[str, Any], process: int) -> Device:
    cc = record.get("cc")
    capability = ((cc[0], cc[1]) if isinstance(cc, list) and len(cc) == 2
                  and all(isinstance(v, int) for v in cc) else (0, 0))
    return Device(id=_int(record, "device"), name=str(record.get("name", "")), process=process,
                  compute_capability=capability, sms=_int(record, "sms"),
                  memory=_int(record, "memory"),
                  memory_clock_khz=_int(record, "memory_clock_khz"),
                  memory_bus_bits=_int(record, "memory_bus_bits"))


def _stream_queues(records: Iterable[Mapping[str, Any]], by_correlation: Mapping[int, int],
                   process: int) -> tuple[StreamQueue, ...]:
    """Queue records -> one StreamQueue per stream. A record names its stream by CUPTI's id, or,
    when CUPTI could not give one (-1), by the correlation id of the call that first used the
    stream, which that call's kernel or copy record carries. The first record of a stream wins."""
    found: dict[int, StreamQueue] = {}
    for record in records:
        queue = record.get("queue")
        if not isinstance(queue, int) or isinstance(queue, bool) or queue < -2:
            continue
        stream = _int(record, "stream", -1)
        if stream < 0:
            stream = by_correlation.get(_int(record, "correlation"), -1)
        if stream < 0 or stream in found:
            continue
        found[stream] = StreamQueue(stream=stream, queue=queue, process=process,
                                    context=_int(record, "context"),
                                    runtime=str(record.get("runtime", "")))
    return tuple(found.values())


def merge(traces: Iterable[Trace], files: tuple[Path, ...] = ()) -> Trace:
    parts = list(traces)
    return Trace(
        kernels=tuple(k for t in parts for k in t.kernels),
        copies=tuple(c for t in parts for c in t.copies),
        memsets=tuple(m for t in parts for m in t.memsets),
        syncs=tuple(s for t in parts for s in t.syncs),
        stream_queues=tuple(q for t in parts for q in t.stream_queues),
        devices=tuple(d for t in parts for d in t.devices),
        complete=all(t.complete for t in parts),
        dropped=sum(t.dropped for t in parts),
        errors=tuple(dict.fromkeys(e for t in parts for e in t.errors)),
        skipped=sum(t.skipped for t in parts),
        files=files,
    )


def read_trace(path: Path) -> Trace | None:
    """The trace of a run (all its processes), or None when no process wrote one -- the
    program never initialised CUDA, so the driver never loaded the tracer."""
    files = trace_files(path)
    if not files:
        return None
    parts = []
    for index, file in enumerate(files):
        with open(file, encoding="utf-8", errors="replace") as fh:
            trace, _ = parse_lines(fh, process=index)
        parts.append(trace)
    return merge(parts, tuple(files))
