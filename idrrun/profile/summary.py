"""A trace turned into totals, top kernels and values for the exercise checks. Pure."""

from __future__ import annotations

import re
from collections import defaultdict

from .model import DTOD, DTOH, HTOD, Copy, GpuShare, KernelStat, Summary, Trace, TransferStat

# nvc/nvfortran name a compute region's kernel FUNCTION_LINE_gpu (main_42_gpu; with a
# reduction, a second kernel main_42_gpu__red). The line is that of the directive in the
# compiled file, which for a cell is the cell's line (build.py pads the source). Recent
# releases also write nvkernel_FUNCTION_F1L42_1 (file 1, line 42, kernel 1).
_NVHPC = (re.compile(r"^(?P<func>.+?)_(?P<line>\d+)_gpu(?:__\w+)?$"),
          re.compile(r"^nvkernel_(?P<func>.+?)_F\d+L(?P<line>\d+)_\d+$"))
# GCC outlines the N-th offloaded region of a function as FUNCTION$_omp_fn$N (C: main; Fortran:
# MAIN__ for the main program, name_ for a procedure, __mod_MOD_name in a module).
_GCC = re.compile(r"^(?P<func>.+?)\$_omp_fn\$(?P<n>\d+)$")
_GFORTRAN_MODULE = re.compile(r"^__(?P<module>\w+?)_MOD_(?P<name>\w+)$")


def _function(name: str) -> str:
    if name == "MAIN__":
        return "the main program"
    module = _GFORTRAN_MODULE.match(name)
    if module:
        return f"{module['name']} (module {module['module']})"
    return name


def where(kernel_name: str, source_name: str = "") -> str:
    """Where in the source a kernel comes from, when its name tells: "main, line 42 of cell[3]"."""
    for pattern in _NVHPC:
        m = pattern.match(kernel_name)
        if m:
            place = f"{_function(m['func'])}, line {m['line']}"
            return f"{place} of {source_name}" if source_name else place
    m = _GCC.match(kernel_name)
    if m:
        # GCC numbers the regions of a function in the order it outlines them, which is not
        # always the order of the source: say the function, and the number as gcc gives it.
        return f"{_function(m['func'])}, gcc's region {m['n']}"
    return ""


def _transfer(label: str, copies: list[Copy]) -> TransferStat:
    kinds = sorted({c.host_memory for c in copies if c.host_memory})
    return TransferStat(label=label, count=len(copies), bytes=sum(c.bytes for c in copies),
                        total_ns=sum(c.ns for c in copies), host_memory=" and ".join(kinds))


def queues(trace: Trace) -> list[tuple[int, int]]:
    """(process, stream) of every stream that had work, in order of its first operation."""
    return list(trace.streams)


def stream_names(trace: Trace) -> dict[tuple[int, int], tuple[str, str]]:
    """(process, stream) -> (name, small print) for every stream with work: the OpenACC queue
    when the runtime told ("async(1)", "stream 13"), else CUDA's stream ("stream 13", "").
    With several processes, the name starts with the pid."""
    keys = queues(trace)
    several = len({p for p, _ in keys}) > 1
    told = {(q.process, q.stream): q for q in trace.stream_queues}
    names: dict[tuple[int, int], tuple[str, str]] = {}
    for process, stream in keys:
        prefix = f"pid {process} " if several else ""
        known = told.get((process, stream))
        if known is not None:
            names[(process, stream)] = (prefix + known.label, f"stream {stream}")
        else:
            names[(process, stream)] = (f"{prefix}stream {stream}", "")
    return names


def gpu_share(trace: Trace, device: int) -> GpuShare:
    """One GPU's figures in a run on several."""
    mine = trace.on_gpu(device)
    names = sorted({d.name for d in mine.devices if d.name})
    return GpuShare(
        device=device, name=" / ".join(names),
        processes=tuple(sorted({e.process for e in mine.operations})),
        span_ns=mine.finish - mine.origin if mine.operations else 0,
        busy_ns=sum(end - start for start, end in mine.busy),
        kernel_ns=sum(k.ns for k in mine.kernels), kernel_count=len(mine.kernels),
        bytes_h2d=sum(c.bytes for c in mine.copies if c.direction == HTOD),
        bytes_d2h=sum(c.bytes for c in mine.copies if c.direction == DTOH),
        queues=len(mine.streams))


def gpu_shares(trace: Trace) -> tuple[GpuShare, ...]:
    """Each GPU's figures when the run used several, else none."""
    return tuple(gpu_share(trace, d) for d in trace.gpus) if len(trace.gpus) > 1 else ()


def summarize(trace: Trace, top: int = 10, source_name: str = "") -> Summary:
    per_kernel: dict[str, list[int]] = defaultdict(list)
    for k in trace.kernels:
        per_kernel[k.name].append(k.ns)
    kernel_ns = sum(sum(v) for v in per_kernel.values())
    ranked = sorted(per_kernel.items(), key=lambda item: (-sum(item[1]), item[0]))
    top_kernels = tuple(
        KernelStat(name=name, where=where(name, source_name), calls=len(times),
                   total_ns=sum(times), max_ns=max(times),
                   share=sum(times) / kernel_ns if kernel_ns else 0.0)
        for name, times in ranked[:top])
    return Summary(
        span_ns=trace.finish - trace.origin if trace.operations else 0,
        busy_ns=sum(end - start for start, end in trace.busy),
        kernel_ns=kernel_ns,
        kernel_count=len(trace.kernels),
        h2d=_transfer("host → device", [c for c in trace.copies if c.direction == HTOD]),
        d2h=_transfer("device → host", [c for c in trace.copies if c.direction == DTOH]),
        d2d=_transfer("device → device", [c for c in trace.copies if c.direction == DTOD]),
        memset_ns=sum(m.ns for m in trace.memsets),
        memset_count=len(trace.memsets),
        memset_bytes=sum(m.bytes for m in trace.memsets),
        sync_ns=sum(s.ns for s in trace.syncs),
        sync_count=len(trace.syncs),
        queues=len(queues(trace)),
        top_kernels=top_kernels,
        gpus=gpu_shares(trace),
    )


def trace_values(trace: Trace | None, iterations: int | None = None) -> dict[str, float]:
    """What the exercise checks compare (specs.py: ran_on_gpu, queues, data_moved).

    kernels: kernel launches; ran_on_gpu: 1.0 when at least one kernel ran; queues: streams
    with work; bytes_h2d, bytes_d2h, bytes_moved (both directions); gpu_busy: the fraction of
    the time from the first GPU operation to the last with work on the GPU (0..1); with an
    iteration count, bytes_per_iteration = bytes_moved / iterations. No trace (the program
    never used the GPU) gives zeros.

    A run on several GPUs: gpu_busy is the least busy GPU's, each over its own first to last
    operation (each GPU must meet a gpu_busy bound; the GPUs' spans summed as one would
    count one GPU's idle time as the other's work), with gpus (how many) and least_busy_gpu
    (its device id); the data and kernel figures are the run's totals over its GPUs (a copy
    concerns one GPU: spreading the work over several must not loosen a data bound).
    """
    t = trace if trace is not None else Trace()
    h2d = sum(c.bytes for c in t.copies if c.direction == HTOD)
    d2h = sum(c.bytes for c in t.copies if c.direction == DTOH)
    busy = t.busy
    span = t.finish - t.origin if busy else 0
    values = {
        "ran_on_gpu": 1.0 if t.kernels else 0.0,
        "kernels": float(len(t.kernels)),
        # Queues that ran kernels: the work an async exercise overlaps. A queue with copies
        # only does not count (gfortran's `enter data create(a) async(q)` copies a's array
        # descriptor on q: the one-queue port of async_matmul in Fortran had "3 queues").
        "queues": float(len({(k.process, k.stream) for k in t.kernels})),
        "bytes_h2d": float(h2d),
        "bytes_d2h": float(d2h),
        "bytes_moved": float(h2d + d2h),
        "kernel_ns": float(sum(k.ns for k in t.kernels)),
        "copy_ns": float(sum(c.ns for c in t.copies)),
        # From the first GPU operation to the last (a speed check's `measure = "gpu"`), and at
        # least until the GPU is known to have had work (a run stopped in a kernel: the tick).
        "gpu_span_s": span / 1e9,
        "gpu_span_at_least_s": max(span, t.busy_after - t.origin if busy and t.busy_after
                                   else 0) / 1e9,
        "gpu_busy": sum(end - start for start, end in busy) / span if span > 0 else 0.0,
    }
    shares = gpu_shares(t)
    if shares:
        least = min(shares, key=lambda g: (g.busy, g.device))
        values.update(gpu_busy=least.busy, gpus=float(len(shares)),
                      least_busy_gpu=float(least.device))
    if iterations:
        values["bytes_per_iteration"] = (h2d + d2h) / iterations
    return values
