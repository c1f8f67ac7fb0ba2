"""The profiler's values, as frozen dataclasses (stdlib only).

    ProfilePlan (before the run) -> Trace, Table (after it) -> Summary -> ProfileReport

Times are integers in nanoseconds on the GPU's clock (CUPTI's or nsys's); only differences
between them mean anything. Bytes are integers.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..model import Limits, Protections, SandboxSupport

# "command": a configured profiler that is not nsys; it runs, idrrun reads nothing from it.
ProfileKind = Literal["nsys", "builtin", "command", "none"]
CHOICES = ("auto", "nsys", "builtin")

NO_GPU_ACTIVITY = "no GPU activity: the OpenACC regions ran on the host"


@dataclass(frozen=True)
class ProfilePlan:
    """How to run the program under the profiler; build it with profile.session.plan()."""

    kind: ProfileKind
    argv_prefix: tuple[str, ...]  # before the program's argv (after a launcher such as mpirun)
    env: Mapping[str, str]  # to add to the program's environment
    run_dir: Path  # where the report, the trace and the timeline are written
    notes: tuple[str, ...] = ()  # why this kind, or why profiling is unavailable
    output: Path | None = None  # nsys: the .nsys-rep it will write; builtin: the trace file
    nsys: str = ""  # the nsys executable, for `nsys stats`
    # Libraries of idrrun's own the program loads, by the variable of `env` that names them
    # (the built-in tracer: CUDA_INJECTION64_PATH): a box shows them read-only.
    libraries: Mapping[str, Path] = field(default_factory=dict)
    # How long the profiler may go on after the program's time limit (nsys writes its report
    # after the program ends).
    grace: float = 0.0
    # The program's time limit as the profiler enforces it (nsys --duration, whole seconds):
    # the program is stopped then, and only the profiler's report takes the grace.
    duration: int | None = None
    # The profiler's own installation, when it runs in front of the program (nsys in an SDK):
    # a box shows it read-only.
    installation: Path | None = None
    # nsys: the name, in run_dir, of the mark the program's launch leaves (LAUNCH_MARK), which
    # tells nsys failing before the program from the program failing; "": none.
    launched: str = ""
    # False: the trace is read for the checks only (a --check without --profile): no timeline
    # and no Perfetto export are made of it.
    drawn: bool = True


@dataclass(frozen=True)
class ExportBox:
    """Where a graded run's nsys report is exported and summed up: a box as the run's own (its
    level, its uid, its guard and limits), in a fresh folder of the request's room; nsys never
    reads a report a box wrote outside a box."""

    room: Path  # the request's room (the grader's own folder)
    support: SandboxSupport
    uid: int  # the box's user (the run's); -1: idrrun's own
    protections: Protections | None
    limits: Limits
    environ: Mapping[str, str]  # what the box's environment is made from (sandbox.box_env)
    hidden: tuple[Path, ...] = ()  # what the box must not see (as the run's box: the course...)


# ---------------------------------------------------------------------------------------
# What the GPU did


@dataclass(frozen=True)
class Kernel:
    name: str
    start: int
    end: int
    stream: int
    device: int = 0
    context: int = 0
    correlation: int = 0
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)
    process: int = 0  # pid of the traced process (several with MPI)

    @property
    def ns(self) -> int:
        ns = self.end - self.start  # (no max(): read for every operation, many times)
        return ns if ns > 0 else 0


# Copy directions, as CUPTI names them (H host, D device, A CUDA array, P peer device).
HTOD, DTOH, DTOD = "HtoD", "DtoH", "DtoD"


@dataclass(frozen=True)
class Copy:
    direction: str  # HtoD, DtoH, DtoD, HtoH, PtoP, ... or "unknown"
    bytes: int
    start: int
    end: int
    stream: int
    device: int = 0
    context: int = 0
    correlation: int = 0
    src: str = ""  # memory kind: pageable, pinned, device, managed, ... ("" when unknown)
    dst: str = ""
    asynchronous: bool = False
    process: int = 0

    @property
    def ns(self) -> int:
        ns = self.end - self.start  # (no max(): read for every operation, many times)
        return ns if ns > 0 else 0

    @property
    def host_memory(self) -> str:
        """pageable or pinned for a host<->device copy: pinned memory copies faster."""
        if self.direction == HTOD:
            return self.src
        if self.direction == DTOH:
            return self.dst
        return ""


@dataclass(frozen=True)
class Memset:
    bytes: int
    start: int
    end: int
    stream: int
    device: int = 0
    context: int = 0
    correlation: int = 0
    process: int = 0

    @property
    def ns(self) -> int:
        ns = self.end - self.start  # (no max(): read for every operation, many times)
        return ns if ns > 0 else 0


@dataclass(frozen=True)
class Sync:
    """The host waited for the GPU (stream, context or event synchronisation)."""

    kind: str  # stream, context, event, stream_wait_event, unknown
    start: int
    end: int
    stream: int = -1  # -1: not tied to a stream
    context: int = -1
    process: int = 0

    @property
    def ns(self) -> int:
        ns = self.end - self.start  # (no max(): read for every operation, many times)
        return ns if ns > 0 else 0


@dataclass(frozen=True)
class Allocation:
    """The device memory a runtime took or gave back (cuMemAlloc, cuMemFree): a moment, no
    duration (CUPTI's memory records have one timestamp); the GPU waits for the host meanwhile."""

    kind: str  # "alloc" or "free"
    bytes: int
    at: int
    device: int = 0
    process: int = 0


# OpenACC's async values, the same in GCC's and the NVIDIA HPC SDK's openacc.h.
ASYNC_NOVAL = -1  # `async` without a queue number
ASYNC_SYNC = -2  # no async clause: the host waits at the end of the construct


@dataclass(frozen=True)
class StreamQueue:
    """The OpenACC queue a CUDA stream served, as the OpenACC runtime told the tracer."""

    stream: int
    queue: int  # async(queue), or ASYNC_NOVAL, ASYNC_SYNC
    process: int = 0
    context: int = 0
    runtime: str = ""  # which runtime answered: "libgomp"

    @property
    def label(self) -> str:
        """The queue as the student wrote it: async(1), async, synchronous."""
        if self.queue == ASYNC_SYNC:
            return "synchronous"
        if self.queue == ASYNC_NOVAL:
            return "async"
        return f"async({self.queue})"


@dataclass(frozen=True)
class Device:
    """A GPU the run used, as its driver describes it."""

    id: int
    name: str  # "NVIDIA H200"
    process: int = 0
    compute_capability: tuple[int, int] = (0, 0)
    sms: int = 0
    memory: int = 0  # bytes
    memory_clock_khz: int = 0  # peak memory clock, as the driver reports it
    memory_bus_bits: int = 0

    @property
    def memory_bandwidth(self) -> float:
        """Theoretical peak in bytes/s: two transfers per clock on the whole bus (the way
        CUDA's bandwidthTest sample computes it); 0.0 when the driver did not say."""
        return 2.0 * self.memory_clock_khz * 1e3 * self.memory_bus_bits / 8


def busy_intervals(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of intervals, as sorted disjoint intervals."""
    merged: list[tuple[int, int]] = []
    ordered = iter(sorted(intervals))
    first = next(ordered, None)
    if first is None:
        return merged
    low, high = first  # the interval being grown (locals: once per GPU operation)
    for start, end in ordered:
        if start <= high:
            if end > high:
                high = end
        else:
            merged.append((low, high))
            low, high = start, end
    merged.append((low, high))
    return merged


@dataclass(frozen=True)
class Trace:
    """Every GPU operation of a run, in no particular order."""

    kernels: tuple[Kernel, ...] = ()
    copies: tuple[Copy, ...] = ()
    memsets: tuple[Memset, ...] = ()
    syncs: tuple[Sync, ...] = ()
    stream_queues: tuple[StreamQueue, ...] = ()  # which OpenACC queue each stream served
    devices: tuple[Device, ...] = ()
    complete: bool = True  # False: the program did not reach its normal end (signal, timeout)
    dropped: int = 0  # records the tracer reported lost
    errors: tuple[str, ...] = ()  # what the tracer could not do ("cuptiSubscribe: CUPTI_ERROR_...")
    skipped: int = 0  # lines or rows that could not be read (a cut last line, ...)
    files: tuple[Path, ...] = ()
    started: int = 0  # when the built-in tracer started (its header's clock), 0: not known
    truncated: bool = False  # longer than idrrun reads (tracefile.MAX_TRACE_BYTES): cut there
    # Device allocations and frees, where the tracer recorded them (its `alloc` records).
    allocations: tuple[Allocation, ...] = ()
    # A time (the tracer's clock) when the GPU still had work this trace holds no record of: a
    # kernel launched before the tracer's last tick never recorded (a run stopped in a kernel);
    # 0: none known.
    busy_after: int = 0

    @property
    def empty(self) -> bool:
        """No work on the GPU (waits alone do not count)."""
        return not (self.kernels or self.copies or self.memsets)

    # Cached (the instance's __dict__, not a field: equality and replace() ignore them): the
    # summary, the hints, the timeline and the export each asked for these again.
    @functools.cached_property
    def operations(self) -> tuple[Kernel | Copy | Memset, ...]:
        """The GPU's work: kernels, copies, memsets."""
        return (*self.kernels, *self.copies, *self.memsets)

    @functools.cached_property
    def busy(self) -> tuple[tuple[int, int], ...]:
        """When the GPU had work: the union of its operations, as sorted disjoint intervals."""
        return tuple(busy_intervals((e.start, e.end) for e in self.operations))

    @functools.cached_property
    def streams(self) -> tuple[tuple[int, int], ...]:
        """(process, stream) of every stream that had work, in order of its first operation."""
        first: dict[tuple[int, int], int] = {}
        for e in self.operations:
            key = (e.process, e.stream)
            known = first.get(key)
            if known is None or e.start < known:
                first[key] = e.start
        return tuple(sorted(first, key=lambda k: (first[k], k)))

    @functools.cached_property
    def gpus(self) -> tuple[int, ...]:
        """The GPUs that had work, by the device id the tracer recorded (CUDA's ordinal in the
        process: ranks that each see one GPU through CUDA_VISIBLE_DEVICES all say 0)."""
        return tuple(sorted({e.device for e in self.operations}))

    def on_gpu(self, device: int) -> Trace:
        """What one GPU did: its operations, the host's waits of the (process, context) pairs
        that used it, the queues of its streams, its description."""
        kernels = tuple(k for k in self.kernels if k.device == device)
        copies = tuple(c for c in self.copies if c.device == device)
        memsets = tuple(m for m in self.memsets if m.device == device)
        ops: tuple[Kernel | Copy | Memset, ...] = (*kernels, *copies, *memsets)
        contexts = {(e.process, e.context) for e in ops}
        streams = {(e.process, e.stream) for e in ops}
        return dataclasses.replace(
            self, kernels=kernels, copies=copies, memsets=memsets,
            syncs=tuple(s for s in self.syncs if (s.process, s.context) in contexts),
            stream_queues=tuple(q for q in self.stream_queues if (q.process, q.stream) in streams),
            devices=tuple(d for d in self.devices if d.id == device),
            allocations=tuple(a for a in self.allocations if a.device == device))

    @property
    def origin(self) -> int:
        """Start of the first GPU operation."""
        return self.busy[0][0] if self.busy else 0

    @property
    def finish(self) -> int:
        """End of the last GPU operation."""
        return self.busy[-1][1] if self.busy else 0


# ---------------------------------------------------------------------------------------
# What the student sees


@dataclass(frozen=True)
class Table:
    """One report of `nsys stats`, as its CSV says it."""

    report: str  # cuda_gpu_kern_sum, ...
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class KernelStat:
    name: str
    where: str  # "main, line 42" or "" when the name does not tell
    calls: int
    total_ns: int
    max_ns: int
    share: float  # of all kernel time, 0..1

    @property
    def avg_ns(self) -> float:
        return self.total_ns / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class TransferStat:
    label: str  # "host → device"
    count: int = 0
    bytes: int = 0
    total_ns: int = 0
    host_memory: str = ""  # pageable, pinned, "pageable and pinned", "" (unknown or n/a)

    @property
    def gb_per_s(self) -> float | None:
        """Achieved bandwidth in GB/s (10^9 bytes per second), None without timing."""
        return self.bytes / self.total_ns if self.total_ns > 0 else None


@dataclass(frozen=True)
class GpuShare:
    """One GPU's part of a run on several: the figures of its own operations."""

    device: int  # the device id the tracer recorded
    name: str  # "NVIDIA H100 80GB HBM3", "" when the trace does not say
    processes: tuple[int, ...]  # pids that used it (one per MPI rank)
    span_ns: int  # its first operation's start to its last one's end
    busy_ns: int
    kernel_ns: int
    kernel_count: int
    bytes_h2d: int
    bytes_d2h: int
    queues: int

    @property
    def busy(self) -> float:
        """Fraction of its own span with work on it."""
        return self.busy_ns / self.span_ns if self.span_ns else 0.0


@dataclass(frozen=True)
class Summary:
    """Totals in the spirit of PGI_ACC_TIME: where the GPU time went."""

    span_ns: int  # first GPU operation's start to the last one's end
    busy_ns: int  # time with at least one operation on the GPU
    kernel_ns: int
    kernel_count: int
    h2d: TransferStat
    d2h: TransferStat
    d2d: TransferStat
    memset_ns: int
    memset_count: int
    memset_bytes: int
    sync_ns: int
    sync_count: int
    queues: int  # streams that had work
    top_kernels: tuple[KernelStat, ...]
    # A run on several GPUs: each one's figures (the totals above sum them; busy_ns and span_ns
    # then mix GPUs and say little). Empty for one GPU.
    gpus: tuple[GpuShare, ...] = ()

    @property
    def gpu_ns(self) -> int:
        """Kernels + copies + memsets (overlapping work counts twice, as in PGI_ACC_TIME)."""
        return (self.kernel_ns + self.h2d.total_ns + self.d2h.total_ns + self.d2d.total_ns
                + self.memset_ns)


EMPTY_SUMMARY = Summary(
    span_ns=0, busy_ns=0, kernel_ns=0, kernel_count=0,
    h2d=TransferStat("host → device"), d2h=TransferStat("device → host"),
    d2d=TransferStat("device → device"), memset_ns=0, memset_count=0, memset_bytes=0,
    sync_ns=0, sync_count=0, queues=0, top_kernels=(),
)


Severity = Literal["warning", "info"]


@dataclass(frozen=True)
class Hint:
    """What an expert looking over the student's shoulder would say about the trace."""

    rule: str  # which rule fired: data_region, pageable_copies, ... (hints.RULES)
    severity: Severity  # warning: the first thing to fix; info: worth knowing
    message: str  # the problem and the fix, in the terms of the course
    figure: str  # the measurement that triggered it


@dataclass(frozen=True)
class Peak:
    """A ceiling a rate is compared with, and where the figure comes from."""

    bytes_per_s: float
    what: str  # "PCIe 5.0 x16", "HBM3e", "" (the best copy of the run)
    source: str  # "table: NVIDIA H200 datasheet", "best single copy of this run"


@dataclass(frozen=True)
class KernelRate:
    name: str
    where: str
    calls: int
    total_ns: int
    share: float  # of GPU time (kernels + copies + memsets), 0..1

    @property
    def avg_ns(self) -> float:
        return self.total_ns / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class CopyRate:
    label: str  # "host → device"
    direction: str  # HtoD, DtoH
    count: int
    bytes: int
    total_ns: int
    share: float  # of GPU time, 0..1
    host_memory: str  # pageable, pinned, "pageable and pinned", ""
    peak: Peak | None  # the link's, None when nothing says
    latency_bound: bool = False  # copies so small that their fixed cost, not the link, sets the rate

    @property
    def bytes_per_s(self) -> float:
        return self.bytes * 1e9 / self.total_ns if self.total_ns > 0 else 0.0

    @property
    def of_peak(self) -> float | None:
        return self.bytes_per_s / self.peak.bytes_per_s if self.peak else None


@dataclass(frozen=True)
class MemoryRate:
    """What the kernels achieved against the device memory, from the bytes the exercise says
    they must move per iteration."""

    bytes_per_iteration: float
    iterations: int
    kernel_ns: int
    peak: Peak | None  # the device's spec
    practical: Peak | None = None  # what a stream-like kernel reaches, where measured

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_per_iteration * self.iterations * 1e9 / self.kernel_ns if self.kernel_ns else 0.0

    @property
    def of_peak(self) -> float | None:
        return self.bytes_per_s / self.peak.bytes_per_s if self.peak else None


@dataclass(frozen=True)
class Rates:
    """Achieved rates: where the time went and how fast the data moved."""

    gpu: str  # the GPU's name, "" when unknown
    span_ns: int
    busy_ns: int  # union of the GPU's operations
    kernels: tuple[KernelRate, ...]
    copies: tuple[CopyRate, ...]
    memory: MemoryRate | None = None

    @property
    def busy(self) -> float:
        """Fraction of the span (first to last GPU operation) with work on the GPU."""
        return self.busy_ns / self.span_ns if self.span_ns else 0.0


@dataclass(frozen=True)
class KernelShape:
    """One kernel of a run, all its launches together: what the solution's run is compared by."""

    name: str
    calls: int
    total_ns: int
    grid: tuple[int, int, int] = (0, 0, 0)  # its most frequent launch configuration
    block: tuple[int, int, int] = (0, 0, 0)

    @property
    def gangs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def lanes(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class RunShape:
    """A run's GPU time in a few figures (diagnose.run_shape): small enough to keep beside the
    solution's cached output, enough to say what a fixed kernel or copy would take."""

    span_ns: int = 0  # first GPU operation to the last
    busy_ns: int = 0
    kernel_ns: int = 0
    h2d_ns: int = 0
    d2h_ns: int = 0
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    queues: int = 0
    kernels: tuple[KernelShape, ...] = ()

    def kernel(self, name: str) -> KernelShape | None:
        return next((k for k in self.kernels if k.name == name), None)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunShape | None:
        """What as_dict kept; None when it is not that (a cache of another version)."""
        try:
            kernels = tuple(KernelShape(str(k["name"]), int(k["calls"]), int(k["total_ns"]),
                                        _dim3(k["grid"]), _dim3(k["block"]))
                            for k in data.get("kernels") or ())
            return cls(span_ns=int(data["span_ns"]), busy_ns=int(data["busy_ns"]),
                       kernel_ns=int(data["kernel_ns"]), h2d_ns=int(data["h2d_ns"]),
                       d2h_ns=int(data["d2h_ns"]), h2d_bytes=int(data["h2d_bytes"]),
                       d2h_bytes=int(data["d2h_bytes"]), queues=int(data["queues"]),
                       kernels=kernels)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _dim3(value: object) -> tuple[int, int, int]:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ValueError("not three sizes")
    return int(value[0]), int(value[1]), int(value[2])


@dataclass(frozen=True)
class Gain:
    """What fixing a cause would save, from the measurement: a range of nanoseconds of the
    run's GPU span, and what it is reckoned from."""

    low_ns: int
    high_ns: int
    basis: str  # "the 2000 copies' time", "the kernel's time at the solution's 8000 gangs"
    span_ns: int  # the run's GPU span it is a part of
    # What the solution's run says of the same part (its kernel's time, its copies), when it
    # was measured beside this run: "" when not.
    solution: str = ""

    @property
    def mid_ns(self) -> float:
        """The range's geometric middle (the figure a factor of two is judged on)."""
        return float((max(self.low_ns, 1) * max(self.high_ns, 1)) ** 0.5)


@dataclass(frozen=True)
class Cause:
    """Why a run is slow, as a teacher would name it, on the line responsible (diagnose.py)."""

    rule: str  # diagnose.RULES: copies_in_loop, update_in_loop, host_work, few_gangs, ...
    line: int  # the directive or loop responsible, as the student counts
    title: str  # the cause, in a few words: "too few gangs for the GPU"
    evidence: str  # what shows it: the trace's figures, the compiler's words, the source
    fix: str  # one sentence: what to change
    gain: Gain | None = None  # None: not measured (no GPU trace, or no figure for it)
    lines: tuple[int, ...] = ()  # other lines it concerns (a second region, the update)
    matters: str = ""  # when it would matter, if it costs little here ("with more iterations")


@dataclass(frozen=True)
class ProfileReport:
    """What one profiled run produced; render.ProfileView shows it in a notebook and a terminal."""

    kind: ProfileKind
    trace: Trace | None
    summary: Summary | None
    tables: tuple[Table, ...] = ()
    timeline_png: Path | None = None
    report_file: Path | None = None  # the .nsys-rep, or the trace file
    message: str = ""  # the one line that matters most, e.g. NO_GPU_ACTIVITY
    notes: tuple[str, ...] = field(default=())
    hints: tuple[Hint, ...] = ()
    rates: Rates | None = None
    trace_json: Path | None = None  # the trace as Chrome/Perfetto trace events
    # Why the run is slow, on its lines (diagnose.py; a checked run: checking.py adds them).
    causes: tuple[Cause, ...] = ()
