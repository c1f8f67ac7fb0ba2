"""Hints: rules over a trace that say, like an expert looking over the student's shoulder, what
holds the GPU back and what to change in the OpenACC code (in the spirit of the expert rules of
Nsight Systems' `nsys analyze`: GPU gaps, GPU utilisation, synchronous and pageable copies).

Each rule is a plain function (Facts) -> Hint | None. A hint names the problem and the fix in the
course's terms, and carries the figure that made it fire. The thresholds are named constants
below, each with the reason for its value. Pure: no processes, no files.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .model import DTOH, HTOD, Copy, Hint, Rates, Summary, Trace
from .render import fmt_bytes, fmt_ns
from .summary import queues, stream_names

# -- thresholds ------------------------------------------------------------------------------

# Copies "dominate" from half of the GPU time on: the GPU then moves data more than it computes.
COPY_SHARE = 0.5
# An array moved at every compute construct (no data region) shows as the same large block
# crossing the bus again and again. "Large": 1 MB and more -- scalars, reduction results and the
# runtime's argument blocks are bytes to kilobytes. "Again": 3 times or more -- a block may
# legitimately go in once and come back once.
BLOCK_BYTES = 1 << 20
BLOCK_REPEATS = 3
# ... and the copies must weigh: without a data region they are the bulk of the GPU time (99.8 %
# in the course's Jacobi exercise on an H200), while a pipeline that streams distinct blocks of
# the same size (which the trace cannot tell from one array sent again: it has no addresses)
# keeps them to a fraction.
REPEATED_COPY_SHARE = 0.4
# Pageable copies are worth pinning when they take a fifth of the GPU time and move enough data
# (16 MB) for the link's speed, not the copy's fixed cost, to rule.
PAGEABLE_SHARE = 0.2
PAGEABLE_MIN_BYTES = 16 * 10**6
# The GPU idles a third of the time or more between its first and last operation. Runs shorter
# than a millisecond are all start-up and are left alone.
IDLE_SHARE = 0.3
MIN_SPAN_NS = 1_000_000
# Host waits are a pattern from 20 kernels on (a loop, not a handful of regions), when there
# is about one wait for every two kernels or more and the GPU idles a tenth of the time.
MIN_KERNELS = 20
WAITS_PER_KERNEL = 0.5
WAIT_IDLE_SHARE = 0.1
# Launching a compute region costs the host a few microseconds in the CUDA driver plus the
# OpenACC runtime's own work (arguments, present table): about 10 us in all. A kernel that
# runs for less than that costs more to launch than to run.
LAUNCH_NS = 10_000
# One queue could be several when copies and kernels both weigh (15 % of the GPU time each)
# and the data moves in several large blocks (pipelining needs more than one block).
ONE_QUEUE_SHARE = 0.15
ONE_QUEUE_BLOCKS = 2

_DIRECTION_WORDS = {HTOD: "host→device", DTOH: "device→host"}


@dataclass(frozen=True)
class Facts:
    """What the rules look at, computed once."""

    trace: Trace
    summary: Summary
    rates: Rates | None
    launch_cost: str = ""  # what the compiler's runtime adds to each launch (Family.launch_cost)

    @property
    def gpu_ns(self) -> int:
        return self.summary.gpu_ns

    @property
    def copy_ns(self) -> int:
        return self.summary.h2d.total_ns + self.summary.d2h.total_ns

    def share(self, ns: int) -> float:
        return ns / self.gpu_ns if self.gpu_ns else 0.0

    def host_copies(self) -> list[Copy]:
        return [c for c in self.trace.copies if c.direction in (HTOD, DTOH)]

    def gaps(self) -> list[int]:
        """Idle intervals of the GPU between its first and last operation, in ns."""
        merged = self.trace.busy
        return [b[0] - a[1] for a, b in zip(merged, merged[1:]) if b[0] > a[1]]

    @property
    def idle(self) -> float:
        s = self.summary
        return 1.0 - s.busy_ns / s.span_ns if s.span_ns else 0.0


def _copies(n: int) -> str:
    return f"{n} copy" if n == 1 else f"{n} copies"


def _pct(x: float) -> str:
    """Whole percents, with a decimal where rounding would say 0 or 100 of something that is not."""
    if 0 < x < 0.01 or 0.995 <= x < 1:
        return f"{100 * x:.1f} %"
    return f"{100 * x:.0f} %"


def _copies_figure(f: Facts) -> str:
    """ "device→host copies take 62 % of GPU time (4.3 GB in 2000 copies)", naming the direction
    when one has most of the copy time."""
    s = f.summary
    for stat, direction in ((s.h2d, HTOD), (s.d2h, DTOH)):
        if f.copy_ns and stat.total_ns >= 0.8 * f.copy_ns:
            return (f"{_DIRECTION_WORDS[direction]} copies take {_pct(f.share(stat.total_ns))} of "
                    f"GPU time ({fmt_bytes(stat.bytes)} in {_copies(stat.count)})")
    return (f"copies take {_pct(f.share(f.copy_ns))} of GPU time "
            f"({fmt_bytes(s.h2d.bytes + s.d2h.bytes)} in {_copies(s.h2d.count + s.d2h.count)})")


def _repeated_block(f: Facts) -> tuple[str, int, int] | None:
    """(direction, bytes, times) of the large block that crosses most often."""
    counts = Counter((c.direction, c.bytes) for c in f.host_copies() if c.bytes >= BLOCK_BYTES)
    if not counts:
        return None
    (direction, size), times = max(counts.items(), key=lambda item: (item[1], item[0][1]))
    return direction, size, times


# -- the rules -------------------------------------------------------------------------------


def data_region(f: Facts) -> Hint | None:
    block = _repeated_block(f)
    if block is None or block[2] < BLOCK_REPEATS or f.share(f.copy_ns) < REPEATED_COPY_SHARE:
        return None
    direction, size, times = block
    return Hint(
        "data_region", "warning",
        "the arrays cross between host and GPU again and again, at every compute region: open "
        "a data region around the loop (acc data copy(...) create(...), or enter data / exit "
        "data) so that they stay on the GPU, and bring back only what the host needs, when it "
        "needs it (update self)",
        f"{_copies_figure(f)}; a block of {fmt_bytes(size)} went "
        f"{_DIRECTION_WORDS.get(direction, direction)} {times} times")


def copies_dominate(f: Facts) -> Hint | None:
    if f.share(f.copy_ns) < COPY_SHARE or data_region(f) is not None:
        return None
    return Hint(
        "copies_dominate", "info",
        "the GPU spends more time moving data than computing: move only what the kernels need "
        "(copyin for inputs, copyout for results, create for scratch arrays) and keep arrays on "
        "the GPU from one region to the next; a short run pays its one-time copies in full, a "
        "longer one spreads them over more work",
        f"{_copies_figure(f)}, kernels {_pct(f.share(f.summary.kernel_ns))}")


def pageable_copies(f: Facts) -> Hint | None:
    pageable = [c for c in f.host_copies() if c.host_memory == "pageable"]
    ns = sum(c.ns for c in pageable)
    size = sum(c.bytes for c in pageable)
    # Copies that a data region removes are not worth pinning first.
    if size < PAGEABLE_MIN_BYTES or f.share(ns) < PAGEABLE_SHARE or data_region(f) is not None:
        return None
    rate = size / ns if ns else 0.0  # bytes per ns = GB/s
    figure = (f"{fmt_ns(ns)} of copies ({_pct(f.share(ns))} of GPU time) from or to pageable "
              f"host memory, at {rate:.1f} GB/s")
    peaks = [c.peak for c in (f.rates.copies if f.rates else ()) if c.peak is not None]
    if peaks and peaks[0].source.startswith("table"):
        figure += f" (the {peaks[0].what} link: {peaks[0].bytes_per_s / 1e9:.0f} GB/s each way)"
    return Hint(
        "pageable_copies", "info",
        "pageable host memory is copied through a staging buffer, at a fraction of the link's "
        "speed, and such copies cannot overlap kernels: use pinned (page-locked) host memory -- "
        "nvc/nvfortran: -gpu=pinned (idrrun: --accopts pinned); gcc: allocate the large arrays "
        "with cudaMallocHost, or pin them with cudaHostRegister",
        figure)


def gpu_idle(f: Facts) -> Hint | None:
    s = f.summary
    gaps = f.gaps()
    if s.span_ns < MIN_SPAN_NS or f.idle < IDLE_SHARE or not gaps:
        return None
    return Hint(
        "gpu_idle", "warning" if f.idle >= 0.5 else "info",
        "the GPU waits for the host between its operations (host code between the compute "
        "regions, regions launched one by one and waited for): move that host work onto the "
        "GPU, merge small regions, and launch with async so that the next operation is queued "
        "before the GPU runs dry",
        f"the GPU is idle {_pct(f.idle)} of the {fmt_ns(s.span_ns)} between its first and last "
        f"operation ({len(gaps)} gaps, median {fmt_ns(statistics.median(gaps))})")


def host_waits(f: Facts) -> Hint | None:
    s = f.summary
    kernels = s.kernel_count
    if (kernels < MIN_KERNELS or s.sync_count < WAITS_PER_KERNEL * kernels
            or f.idle < WAIT_IDLE_SHARE):
        return None
    return Hint(
        "host_waits", "info",
        "without async, every compute region ends with the host waiting for the GPU, and the "
        "GPU then waits for the next launch: put the loop's regions on a queue (async(1)) and "
        "wait once (acc wait(1), or a wait clause) where the host needs the results -- e.g. test "
        "the convergence every few iterations rather than at each one",
        f"the host waited for the GPU {s.sync_count} times for {kernels} kernels "
        f"({fmt_ns(s.sync_ns)}), and the GPU is idle {_pct(f.idle)} of the time")


def tiny_kernels(f: Facts) -> Hint | None:
    times = [k.ns for k in f.trace.kernels]
    if len(times) < MIN_KERNELS:
        return None
    median = statistics.median(times)
    if median > LAUNCH_NS:
        return None
    tiny = sum(1 for t in times if t <= LAUNCH_NS)
    return Hint(
        "tiny_kernels", "warning",
        "the kernels are too small to pay for their launch: give each more work -- collapse "
        "nested loops (collapse(2)), put the loop inside the compute region rather than the "
        "region inside the loop, and fuse consecutive loops into one region",
        f"{tiny} of {len(times)} kernels run for less than {fmt_ns(LAUNCH_NS)} "
        f"(median {fmt_ns(median)}), about what launching one costs")


def one_queue(f: Facts) -> Hint | None:
    streams = queues(f.trace)
    if len(streams) != 1:
        return None
    large = sum(1 for c in f.host_copies() if c.bytes >= BLOCK_BYTES)
    copy_share, kernel_share = f.share(f.copy_ns), f.share(f.summary.kernel_ns)
    if large < ONE_QUEUE_BLOCKS or copy_share < ONE_QUEUE_SHARE or kernel_share < ONE_QUEUE_SHARE:
        return None
    name = stream_names(f.trace)[streams[0]][0]
    return Hint(
        "one_queue", "info",
        "copies and kernels on one queue wait for each other: independent pieces of work "
        "(blocks of an array, separate matrices) can go on separate queues -- async(1), "
        "async(2)... -- so that the copies of one overlap the kernels of another, joined by a "
        "wait where their results meet (copies overlap kernels only from pinned host memory)",
        f"all {f.summary.kernel_count} kernels and {_copies(len(f.host_copies()))} ran one after "
        f"the other on one queue ({name}): copies {_pct(copy_share)}, kernels "
        f"{_pct(kernel_share)} of GPU time")


def compiler_launches(f: Facts) -> Hint | None:
    """Where the compiler's runtime is known to add work to every launch (GCC 12's argument
    table: the Jacobi solution on an H200, 0.63 ms per iteration of which its kernels 0.22), a
    GPU idle between many kernels is in part the compiler's: said as the compiler's, not the
    student's, with what makes it weigh less."""
    s = f.summary
    gaps = f.gaps()
    if not f.launch_cost or s.kernel_count < MIN_KERNELS or f.idle < IDLE_SHARE or not gaps:
        return None
    return Hint(
        "compiler_launches", "info",
        "part of the GPU's idle time between kernels is the compiler's, not your code's: "
        f"{f.launch_cost}; fewer, larger kernels (collapse, fused loops) pay it less often",
        f"{s.kernel_count} kernels, the GPU idle {_pct(f.idle)} of the time between its first "
        f"and last operation (median gap {fmt_ns(statistics.median(gaps))})")


Rule = Callable[[Facts], "Hint | None"]
RULES: tuple[Rule, ...] = (data_region, copies_dominate, pageable_copies, tiny_kernels, gpu_idle,
                           host_waits, one_queue, compiler_launches)
_ORDER = {"warning": 0, "info": 1}


def find_hints(trace: Trace, summary: Summary, rates: Rates | None = None,
               launch_cost: str = "") -> tuple[Hint, ...]:
    """The hints that apply to a run: warnings first, then the rest, each in RULES order."""
    facts = Facts(trace, summary, rates, launch_cost)
    found = [h for h in (rule(facts) for rule in RULES) if h is not None]
    return tuple(sorted(found, key=lambda h: _ORDER[h.severity]))
