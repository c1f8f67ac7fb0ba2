"""The readable definition of the trace-event document that idrrun/profile/perfetto.py formats
fast, operation by operation: the tests compare the two."""

from __future__ import annotations

from typing import Any

from idrrun.profile.model import Trace
from idrrun.profile.perfetto import HOST_WAITS_TID, _other_data, _rows, _tid, origin


def _us(ns: int) -> float:
    return ns / 1000.0


def events(trace: Trace) -> dict[str, Any]:
    """The trace-event document (what perfetto.write() writes, as data)."""
    zero = origin(trace)
    out = _rows(trace)

    def event(name: str, cat: str, pid: int, tid: int, start: int, ns: int,
              args: dict[str, Any]) -> None:
        out.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
                    "ts": _us(start - zero), "dur": _us(ns), "args": args})

    for k in trace.kernels:
        event(k.name, "kernel", k.process, _tid(k.stream), k.start, k.ns,
              {"stream": k.stream, "grid": list(k.grid), "block": list(k.block),
               "correlation": k.correlation})
    for c in trace.copies:
        args: dict[str, Any] = {"bytes": c.bytes, "stream": c.stream, "src": c.src, "dst": c.dst,
                                "async": c.asynchronous, "correlation": c.correlation}
        if c.ns:
            args["GB/s"] = round(c.bytes / c.ns, 3)
        event(f"copy {c.direction}", "copy", c.process, _tid(c.stream), c.start, c.ns, args)
    for m in trace.memsets:
        event("memset", "memset", m.process, _tid(m.stream), m.start, m.ns,
              {"bytes": m.bytes, "stream": m.stream})
    for s in trace.syncs:
        event(f"wait ({s.kind})", "wait", s.process, HOST_WAITS_TID, s.start, s.ns,
              {"stream": s.stream})
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": _other_data(trace)}
