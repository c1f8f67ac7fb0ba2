"""The trace as Chrome trace-event JSON (trace.json), to zoom into with ui.perfetto.dev or
chrome://tracing: {"traceEvents": [...]} with one complete event (ph "X") per kernel, copy,
memset and host wait, ts and dur in microseconds from the tracer's start (or, for a trace that
does not say it, the first GPU operation), pid the traced process, tid one per row of the
timeline (the OpenACC queue or CUDA stream, then the host's waits), and "M" metadata events
that name the processes and rows and keep the rows in the timeline's order -- Google's "Trace
Event Format", which both viewers read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .model import Copy, Kernel, Memset, Sync, Trace
from .summary import queues, stream_names

# Rows: tid = CUDA stream id + 1 (0 for an unknown stream), fixed as soon as an operation is
# read, so that events can be formatted while the trace is still being written (Prepared);
# the rows' order is the timeline's, given by "thread_sort_index" metadata. The host's waits
# get the last possible tid (CUPTI numbers streams from 1 up).
HOST_WAITS_TID = 2**31 - 1


def _tid(stream: int) -> int:
    return stream + 1


def origin(trace: Trace) -> int:
    """Time 0 of the events: the tracer's start when the trace says it (known from the trace's
    first line), else the first GPU operation or wait."""
    if trace.started:
        return trace.started
    return min((e.start for e in (*trace.operations, *trace.syncs)), default=0)


def _other_data(trace: Trace) -> dict[str, str]:
    return {"producer": "idrrun",
            "time origin": "tracer start" if trace.started else "first GPU operation"}


def _rows(trace: Trace) -> list[dict[str, Any]]:
    """The metadata events: the processes' and rows' names, and the rows' order."""
    names = stream_names(trace)
    out: list[dict[str, Any]] = []
    processes = sorted({p for p, _ in queues(trace)} | {s.process for s in trace.syncs})
    for pid in processes:
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                    "args": {"name": f"GPU work of process {pid}"}})
    for index, key in enumerate(queues(trace), start=1):
        name, small = names[key]
        tid = _tid(key[1])
        out.append({"ph": "M", "name": "thread_name", "pid": key[0], "tid": tid,
                    "args": {"name": f"{name} ({small})" if small else name}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": key[0], "tid": tid,
                    "args": {"sort_index": index}})
    for pid in sorted({s.process for s in trace.syncs}):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": HOST_WAITS_TID,
                    "args": {"name": "host waits"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": HOST_WAITS_TID,
                    "args": {"sort_index": HOST_WAITS_TID}})
    return out


class Prepared:
    """Events formatted while the trace is read (tracefile.Follower calls add() after each
    piece, on its thread, while the program runs): text() then formats only what is left.
    Formatting 7000 operations took a third of --profile's time after the run (Jacobi,
    benchmarks/profile_cost.py). Given to text() only with the trace it was made from."""

    def __init__(self) -> None:
        self.origin = 0
        self.kernels: list[str] = []
        self.copies: list[str] = []
        self.memsets: list[str] = []
        self.syncs: list[str] = []
        self._strings: dict[str, str] = {}

    def add(self, started: int, kernels: Sequence[Kernel], copies: Sequence[Copy],
            memsets: Sequence[Memset], syncs: Sequence[Sync]) -> None:
        """The operations read so far (lists that only grow), the tracer's start: formats the
        new ones. Nothing before the start is known (the header is the file's first line)."""
        if not started:
            return
        if not self.origin:
            self.origin = started
        elif started != self.origin:
            return
        q, zero = self._strings, self.origin
        self.kernels += [_kernel(k, zero, q) for k in kernels[len(self.kernels):]]
        self.copies += [_copy(c, zero, q) for c in copies[len(self.copies):]]
        self.memsets += [_memset(m, zero) for m in memsets[len(self.memsets):]]
        self.syncs += [_sync(s, zero, q) for s in syncs[len(self.syncs):]]


def _q(strings: dict[str, str], value: str) -> str:
    """A JSON string, each distinct one encoded once."""
    found = strings.get(value)
    if found is None:
        found = strings[value] = json.dumps(value)
    return found


def _kernel(k: Kernel, zero: int, q: dict[str, str]) -> str:
    g, b = k.grid, k.block
    return (f'{{"ph":"X","name":{_q(q, k.name)},"cat":"kernel","pid":{k.process},'
            f'"tid":{_tid(k.stream)},"ts":{(k.start - zero) / 1000.0!r},'
            f'"dur":{k.ns / 1000.0!r},"args":{{"stream":{k.stream},"grid":[{g[0]},{g[1]},{g[2]}],'
            f'"block":[{b[0]},{b[1]},{b[2]}],"correlation":{k.correlation}}}}}')


def _copy(c: Copy, zero: int, q: dict[str, str]) -> str:
    rate = f',"GB/s":{round(c.bytes / c.ns, 3)!r}' if c.ns else ""
    return (f'{{"ph":"X","name":{_q(q, "copy " + c.direction)},"cat":"copy","pid":{c.process},'
            f'"tid":{_tid(c.stream)},"ts":{(c.start - zero) / 1000.0!r},'
            f'"dur":{c.ns / 1000.0!r},"args":{{"bytes":{c.bytes},"stream":{c.stream},'
            f'"src":{_q(q, c.src)},"dst":{_q(q, c.dst)},'
            f'"async":{"true" if c.asynchronous else "false"},'
            f'"correlation":{c.correlation}{rate}}}}}')


def _memset(m: Memset, zero: int) -> str:
    return (f'{{"ph":"X","name":"memset","cat":"memset","pid":{m.process},'
            f'"tid":{_tid(m.stream)},"ts":{(m.start - zero) / 1000.0!r},'
            f'"dur":{m.ns / 1000.0!r},"args":{{"bytes":{m.bytes},"stream":{m.stream}}}}}')


def _sync(s: Sync, zero: int, q: dict[str, str]) -> str:
    return (f'{{"ph":"X","name":{_q(q, f"wait ({s.kind})")},"cat":"wait","pid":{s.process},'
            f'"tid":{HOST_WAITS_TID},"ts":{(s.start - zero) / 1000.0!r},'
            f'"dur":{s.ns / 1000.0!r},"args":{{"stream":{s.stream}}}}}')


def text(trace: Trace, prepared: Prepared | None = None) -> str:
    """The trace-event document as compact JSON, formatted here operation by operation (building
    two dicts per operation and encoding them was slow; a test compares this with the readable
    definition of the document, tests/perfetto_oracle.py). prepared: the first
    operations of each kind, formatted already (Prepared, made while this trace was read)."""
    zero = origin(trace)
    if prepared is None or prepared.origin != zero:
        prepared = Prepared()
    q: dict[str, str] = {}
    parts = [json.dumps(m, separators=(",", ":")) for m in _rows(trace)]
    parts += prepared.kernels
    parts += [_kernel(k, zero, q) for k in trace.kernels[len(prepared.kernels):]]
    parts += prepared.copies
    parts += [_copy(c, zero, q) for c in trace.copies[len(prepared.copies):]]
    parts += prepared.memsets
    parts += [_memset(m, zero) for m in trace.memsets[len(prepared.memsets):]]
    parts += prepared.syncs
    parts += [_sync(s, zero, q) for s in trace.syncs[len(prepared.syncs):]]
    return ('{"traceEvents":[' + ",".join(parts) + '],"displayTimeUnit":"ns","otherData":'
            + json.dumps(_other_data(trace), separators=(",", ":")) + "}")


def write(trace: Trace, path: Path, prepared: Prepared | None = None) -> Path | str:
    """Write trace.json; its path, or why it could not be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text(trace, prepared), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        return f"no trace.json: cannot write {path}: {exc.strerror}"
    return path
