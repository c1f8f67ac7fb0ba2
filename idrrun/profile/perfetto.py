"""The trace as Chrome trace-event JSON (trace.json), to zoom into with ui.perfetto.dev or
chrome://tracing: {"traceEvents": [...]} with one complete event (ph "X") per kernel, copy,
memset and host wait, ts and dur in microseconds from the first GPU operation, pid the traced
process, tid one per row of the timeline (the OpenACC queue or CUDA stream, then the host's
waits), and "M" metadata events that name the processes and rows and keep the rows in the
timeline's order -- Google's "Trace Event Format", which both viewers read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import Trace
from .summary import queues, stream_names

HOST_WAITS_TID = 10_000  # after every stream's row


def _us(ns: int) -> float:
    return ns / 1000.0


OTHER_DATA = {"producer": "idrrun", "time origin": "first GPU operation"}


def _rows(trace: Trace) -> tuple[int, dict[tuple[int, int], int], list[dict[str, Any]]]:
    """The time origin, each (process, stream)'s tid, and the metadata events."""
    origin = min((e.start for e in (*trace.operations, *trace.syncs)), default=0)
    names = stream_names(trace)
    tids: dict[tuple[int, int], int] = {}
    out: list[dict[str, Any]] = []
    processes = sorted({p for p, _ in queues(trace)} | {s.process for s in trace.syncs})
    for pid in processes:
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                    "args": {"name": f"GPU work of process {pid}"}})
    for index, key in enumerate(queues(trace), start=1):
        tids[key] = index
        name, small = names[key]
        out.append({"ph": "M", "name": "thread_name", "pid": key[0], "tid": index,
                    "args": {"name": f"{name} ({small})" if small else name}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": key[0], "tid": index,
                    "args": {"sort_index": index}})
    for pid in sorted({s.process for s in trace.syncs}):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": HOST_WAITS_TID,
                    "args": {"name": "host waits"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": HOST_WAITS_TID,
                    "args": {"sort_index": HOST_WAITS_TID}})
    return origin, tids, out


def events(trace: Trace) -> dict[str, Any]:
    """The trace-event document (what write() writes, as data)."""
    origin, tids, out = _rows(trace)

    def event(name: str, cat: str, pid: int, tid: int, start: int, ns: int,
              args: dict[str, Any]) -> None:
        out.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
                    "ts": _us(start - origin), "dur": _us(ns), "args": args})

    for k in trace.kernels:
        event(k.name, "kernel", k.process, tids[(k.process, k.stream)], k.start, k.ns,
              {"stream": k.stream, "grid": list(k.grid), "block": list(k.block),
               "correlation": k.correlation})
    for c in trace.copies:
        args: dict[str, Any] = {"bytes": c.bytes, "stream": c.stream, "src": c.src, "dst": c.dst,
                                "async": c.asynchronous, "correlation": c.correlation}
        if c.ns:
            args["GB/s"] = round(c.bytes / c.ns, 3)
        event(f"copy {c.direction}", "copy", c.process, tids[(c.process, c.stream)], c.start,
              c.ns, args)
    for m in trace.memsets:
        event("memset", "memset", m.process, tids[(m.process, m.stream)], m.start, m.ns,
              {"bytes": m.bytes, "stream": m.stream})
    for s in trace.syncs:
        event(f"wait ({s.kind})", "wait", s.process, HOST_WAITS_TID, s.start, s.ns,
              {"stream": s.stream})
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": OTHER_DATA}


def text(trace: Trace) -> str:
    """events(trace) as compact JSON, formatted here operation by operation: building two dicts
    per operation and encoding them took a third of --profile's time after the run (Jacobi,
    7000 operations: benchmarks/profile_cost.py). A test compares the two."""
    origin, tids, meta = _rows(trace)
    strings: dict[str, str] = {}

    def q(value: str) -> str:  # a JSON string, each distinct one encoded once
        found = strings.get(value)
        if found is None:
            found = strings[value] = json.dumps(value)
        return found

    parts = [json.dumps(m, separators=(",", ":")) for m in meta]
    add = parts.append
    for k in trace.kernels:
        g, b = k.grid, k.block
        add(f'{{"ph":"X","name":{q(k.name)},"cat":"kernel","pid":{k.process},'
            f'"tid":{tids[(k.process, k.stream)]},"ts":{(k.start - origin) / 1000.0!r},'
            f'"dur":{k.ns / 1000.0!r},"args":{{"stream":{k.stream},"grid":[{g[0]},{g[1]},{g[2]}],'
            f'"block":[{b[0]},{b[1]},{b[2]}],"correlation":{k.correlation}}}}}')
    for c in trace.copies:
        rate = f',"GB/s":{round(c.bytes / c.ns, 3)!r}' if c.ns else ""
        add(f'{{"ph":"X","name":{q("copy " + c.direction)},"cat":"copy","pid":{c.process},'
            f'"tid":{tids[(c.process, c.stream)]},"ts":{(c.start - origin) / 1000.0!r},'
            f'"dur":{c.ns / 1000.0!r},"args":{{"bytes":{c.bytes},"stream":{c.stream},'
            f'"src":{q(c.src)},"dst":{q(c.dst)},"async":{"true" if c.asynchronous else "false"},'
            f'"correlation":{c.correlation}{rate}}}}}')
    for m in trace.memsets:
        add(f'{{"ph":"X","name":"memset","cat":"memset","pid":{m.process},'
            f'"tid":{tids[(m.process, m.stream)]},"ts":{(m.start - origin) / 1000.0!r},'
            f'"dur":{m.ns / 1000.0!r},"args":{{"bytes":{m.bytes},"stream":{m.stream}}}}}')
    for s in trace.syncs:
        add(f'{{"ph":"X","name":{q(f"wait ({s.kind})")},"cat":"wait","pid":{s.process},'
            f'"tid":{HOST_WAITS_TID},"ts":{(s.start - origin) / 1000.0!r},'
            f'"dur":{s.ns / 1000.0!r},"args":{{"stream":{s.stream}}}}}')
    return ('{"traceEvents":[' + ",".join(parts) + '],"displayTimeUnit":"ns","otherData":'
            + json.dumps(OTHER_DATA, separators=(",", ":")) + "}")


def write(trace: Trace, path: Path) -> Path | str:
    """Write trace.json; its path, or why it could not be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text(trace), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        return f"no trace.json: cannot write {path}: {exc.strerror}"
    return path
