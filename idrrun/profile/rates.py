"""Achieved rates: each kernel's and each copy direction's share of the GPU time, copies in GB/s
against the host link's peak, the GPU's busy fraction, and -- when the exercise says how many
bytes its kernels must move per iteration -- the kernels' bandwidth against the device memory's.
Pure: a trace and a summary in, a Rates out.

Peaks are not measured here. They come from a small table keyed by the GPU's name (the figures
of NVIDIA's datasheets, each with its source below); a GPU the table does not know gets the
memory bandwidth its driver reports (memory clock x bus width, in the trace's device record)
and, for copies, the best rate a single large copy of the same run reached. Every Peak says
which of these it is.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from .model import DTOH, HTOD, Copy, CopyRate, Device, KernelRate, MemoryRate, Peak, Rates, Summary, Trace
from .summary import where

GB = 1e9
TB = 1e12


@dataclass(frozen=True)
class GpuPeaks:
    """What a GPU model can do, from its datasheet."""

    memory: float  # device memory, bytes/s
    memory_kind: str  # "HBM3e"
    link: float  # host <-> GPU, bytes/s in one direction
    link_kind: str  # "PCIe 5.0 x16"
    source: str
    practical_memory: float = 0.0  # a stream-like kernel's measured rate, where we have one
    practical_source: str = ""


# PCIe x16 per direction: 5.0 (32 GT/s) 64 GB/s, 4.0 32 GB/s, 3.0 16 GB/s, as the datasheets
# count them (their "128 GB/s" for PCIe 5.0 is both directions together); NVLink-C2C moves
# 900 GB/s in total, 450 GB/s each way. Real pinned copies reach about 80 % of these, pageable
# copies far less (they go through a staging buffer).
_PCIE5, _PCIE4, _PCIE3 = (64 * GB, "PCIe 5.0 x16"), (32 * GB, "PCIe 4.0 x16"), (16 * GB, "PCIe 3.0 x16")
_C2C = (450 * GB, "NVLink-C2C")

# (regex on the name the driver gives, peaks), the most specific first. Names as CUDA and
# nvidia-smi print them: "NVIDIA H200", "NVIDIA H100 80GB HBM3" (SXM), "NVIDIA H100 PCIe",
# "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "Tesla V100-SXM2-32GB", "NVIDIA GH200 480GB".
GPU_PEAKS: tuple[tuple[str, GpuPeaks], ...] = (
    # NVIDIA GH200 Grace Hopper Superchip datasheet: 4.9 TB/s with HBM3e, 4 TB/s with HBM3.
    (r"GH200.*(HBM3e|144G)", GpuPeaks(4.9 * TB, "HBM3e", *_C2C, "NVIDIA GH200 datasheet")),
    (r"GH200", GpuPeaks(4.0 * TB, "HBM3", *_C2C, "NVIDIA GH200 datasheet")),
    # NVIDIA H200 Tensor Core GPU datasheet (SXM and NVL): 4.8 TB/s HBM3e, PCIe Gen5. The
    # practical figure is issue 13's: ~4.3 TB/s for a stream-like copy kernel on the course's H200.
    (r"H200", GpuPeaks(4.8 * TB, "HBM3e", *_PCIE5, "NVIDIA H200 datasheet",
                       4.3 * TB, "stream-like kernel on an H200 (issue 13)")),
    # NVIDIA H100 Tensor Core GPU datasheet: SXM 3.35 TB/s, PCIe 2 TB/s, NVL 3.9 TB/s; PCIe Gen5.
    (r"H100.*PCIe", GpuPeaks(2.0 * TB, "HBM2e", *_PCIE5, "NVIDIA H100 datasheet (PCIe)")),
    (r"H100 NVL", GpuPeaks(3.9 * TB, "HBM3", *_PCIE5, "NVIDIA H100 datasheet (NVL)")),
    (r"H100", GpuPeaks(3.35 * TB, "HBM3", *_PCIE5, "NVIDIA H100 datasheet (SXM)")),
    # NVIDIA A100 Tensor Core GPU datasheet: 80 GB SXM 2,039 GB/s, 80 GB PCIe 1,935 GB/s,
    # 40 GB 1,555 GB/s; PCIe Gen4.
    (r"A100.*SXM.*80", GpuPeaks(2.039 * TB, "HBM2e", *_PCIE4, "NVIDIA A100 datasheet (80 GB SXM)")),
    (r"A100.*80", GpuPeaks(1.935 * TB, "HBM2e", *_PCIE4, "NVIDIA A100 datasheet (80 GB PCIe)")),
    (r"A100", GpuPeaks(1.555 * TB, "HBM2", *_PCIE4, "NVIDIA A100 datasheet (40 GB)")),
    # NVIDIA V100 Tensor Core GPU datasheet: 900 GB/s HBM2, PCIe Gen3.
    (r"V100", GpuPeaks(0.9 * TB, "HBM2", *_PCIE3, "NVIDIA V100 datasheet")),
)

# Copies smaller than this say more about their fixed cost than about the link: only larger
# ones count as "the best single copy" when no table entry gives the link's peak (then the same
# for both directions: PCIe and NVLink-C2C are as fast each way).
BEST_COPY_MIN_BYTES = 1 << 20


# Below 64 kB on average a copy's fixed cost (a few microseconds) outweighs its transfer time
# even over PCIe 3.0: comparing such copies with the link's peak would say nothing.
SMALL_COPY_BYTES = 64 * 1024


def gpu_peaks(name: str) -> GpuPeaks | None:
    """The table's entry for a GPU name, None when it has none."""
    for pattern, peaks in GPU_PEAKS:
        if re.search(pattern, name, re.IGNORECASE):
            return peaks
    return None


def _device(trace: Trace) -> Device | None:
    """The device of the first kernel (or of the first device record)."""
    if not trace.devices:
        return None
    first = min(trace.kernels, key=lambda k: k.start, default=None)
    if first is not None:
        for d in trace.devices:
            if d.id == first.device and d.process == first.process:
                return d
    return trace.devices[0]


def gpu_name(trace: Trace, given: str = "") -> str:
    """The GPU's name: the one given (the caller knows it, e.g. from nvidia-smi), else the trace's."""
    if given:
        return given
    device = _device(trace)
    return device.name if device is not None else ""


def _link_peak(name: str, copies: list[Copy]) -> Peak | None:
    """The host link's peak from the table; else the best large copy of the run in either
    direction, when there are at least two to choose from (a single copy would only be compared
    with itself)."""
    table = gpu_peaks(name) if name else None
    if table is not None:
        return Peak(table.link, table.link_kind, f"table: {table.source}")
    large = [c for c in copies if c.direction in (HTOD, DTOH) and c.bytes >= BEST_COPY_MIN_BYTES
             and c.ns > 0]
    if len(large) < 2:
        return None
    best = max(large, key=lambda c: c.bytes / c.ns)
    return Peak(best.bytes * 1e9 / best.ns, "", "the best single copy of this run")


def memory_peaks(trace: Trace, name: str) -> tuple[Peak | None, Peak | None]:
    """(spec peak, practical figure) of the device memory."""
    table = gpu_peaks(name) if name else None
    if table is not None:
        practical = (Peak(table.practical_memory, table.memory_kind, table.practical_source)
                     if table.practical_memory else None)
        return Peak(table.memory, table.memory_kind, f"table: {table.source}"), practical
    device = _device(trace)
    if device is not None and device.memory_bandwidth > 0:
        return Peak(device.memory_bandwidth, "device memory",
                    "the driver's memory clock x bus width"), None
    return None, None


def achieved_rates(trace: Trace, summary: Summary, *, gpu: str = "", source_name: str = "",
          bytes_per_iteration: float | None = None, iterations: int | None = None,
          top: int = 10) -> Rates:
    """Achieved rates of a run. bytes_per_iteration: the bytes the kernels must move in device
    memory per iteration (the exercise's figure), with the run's iteration count."""
    name = gpu_name(trace, gpu)
    whole = summary.gpu_ns
    per_kernel: dict[str, list[int]] = defaultdict(list)
    for k in trace.kernels:
        per_kernel[k.name].append(k.ns)
    ranked = sorted(per_kernel.items(), key=lambda item: (-sum(item[1]), item[0]))[:top]
    kernels = tuple(KernelRate(name=n, where=where(n, source_name), calls=len(times),
                               total_ns=sum(times), share=sum(times) / whole if whole else 0.0)
                    for n, times in ranked)
    copies = []
    for stat, direction in ((summary.h2d, HTOD), (summary.d2h, DTOH)):
        if not stat.count:
            continue
        copies.append(CopyRate(label=stat.label, direction=direction, count=stat.count,
                               bytes=stat.bytes, total_ns=stat.total_ns,
                               share=stat.total_ns / whole if whole else 0.0,
                               host_memory=stat.host_memory,
                               peak=_link_peak(name, list(trace.copies)),
                               latency_bound=stat.bytes < SMALL_COPY_BYTES * stat.count))
    memory = None
    if bytes_per_iteration and iterations and summary.kernel_ns > 0:
        peak, practical = memory_peaks(trace, name)
        memory = MemoryRate(bytes_per_iteration=bytes_per_iteration, iterations=iterations,
                            kernel_ns=summary.kernel_ns, peak=peak, practical=practical)
    # Several GPUs: each one's busy share is in the summary's per-GPU table, not one figure here.
    return Rates(gpu=name, span_ns=0 if summary.gpus else summary.span_ns,
                 busy_ns=summary.busy_ns, kernels=kernels,
                 copies=tuple(copies), memory=memory)
