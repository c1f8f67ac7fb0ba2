"""Nsight Systems: the `nsys profile` command line, the `nsys stats` reports, their CSV.

    nsys profile --trace=openacc,cuda,osrt,nvtx --stats=false -o RUNDIR/report --force-overwrite=true PROGRAM ARGS
    nsys stats --force-export=true --format csv --output RUNDIR/stats --report R1,R2,... RUNDIR/report.nsys-rep

`nsys stats --output BASE --format csv` writes one file per report, BASE_REPORT.csv; a report
without data (openacc_sum for a CUDA-only program) is skipped and writes none. Report names
changed in Nsight Systems 2023 (gpukernsum -> cuda_gpu_kern_sum, ...): `nsys stats
--help-reports` says which this nsys knows, and the old names are used when it lists no new one.

CSV columns are read by name, not position. Units come from the header: "Total Time (ns)",
"Bytes (MB)" (10^6 bytes), "Total (MB)"; numbers may carry thousands separators.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from .model import (
    DTOD,
    DTOH,
    HTOD,
    Copy,
    Device,
    Kernel,
    KernelStat,
    Memset,
    Summary,
    Table,
    Trace,
    TransferStat,
)
from .summary import where

DEFAULT_OPTIONS = ("--trace=openacc,cuda,osrt,nvtx",)
REPORT_BASENAME = "report"  # nsys adds .nsys-rep
STATS_BASENAME = "stats"

# Our name -> (current nsys name, name before 2023), in the order shown.
REPORTS: dict[str, tuple[str, str]] = {
    "kernels": ("cuda_gpu_kern_sum", "gpukernsum"),
    "copy_time": ("cuda_gpu_mem_time_sum", "gpumemtimesum"),
    "copy_size": ("cuda_gpu_mem_size_sum", "gpumemsizesum"),
    "openacc": ("openacc_sum", "openaccsum"),
    "gpu_trace": ("cuda_gpu_trace", "gputrace"),
}
TITLES = {
    "kernels": "CUDA kernels",
    "copy_time": "memory operations, by time",
    "copy_size": "memory operations, by size",
    "openacc": "OpenACC events",
    "gpu_trace": "GPU trace",
}
SHOWN = ("kernels", "copy_time", "copy_size", "openacc")  # gpu_trace feeds the timeline only

# Options of ours that a configured command must not override: where the report goes, and
# that stats are ours to run.
_OURS = {"-o", "--output", "-f", "--force-overwrite", "--stats"}


def is_nsys(command: Sequence[str]) -> bool:
    return bool(command) and Path(command[0]).name.startswith("nsys")


def profile_argv(command: Sequence[str], run_dir: Path) -> tuple[str, ...]:
    """The prefix before the program. `command` is the configured profiler: ("nsys",), or
    ("nsys", "profile", OPTIONS...) whose options replace DEFAULT_OPTIONS."""
    exe = command[0]
    given = list(command[2:]) if len(command) > 1 and command[1] == "profile" else list(command[1:])
    options: list[str] = []
    skip_value = False
    for word in given:
        if skip_value:
            skip_value = False
            continue
        name = word.split("=", 1)[0]
        if name in _OURS:
            skip_value = "=" not in word
            continue
        options.append(word)
    return (exe, "profile", *(options or DEFAULT_OPTIONS), "--stats=false",
            "-o", str(run_dir / REPORT_BASENAME), "--force-overwrite=true")


def report_names(help_reports: str) -> dict[str, str]:
    """Our name -> this nsys's report name, from `nsys stats --help-reports`."""
    old = "cuda_gpu_kern_sum" not in help_reports and "gpukernsum" in help_reports
    return {ours: (names[1] if old else names[0]) for ours, names in REPORTS.items()}


def stats_argv(exe: str, report_file: Path, names: Mapping[str, str],
               run_dir: Path) -> tuple[str, ...]:
    return (exe, "stats", "--force-export=true", "--format", "csv",
            "--output", str(run_dir / STATS_BASENAME),
            "--report", ",".join(names.values()), str(report_file))


def stats_file(run_dir: Path, report: str) -> Path:
    return run_dir / f"{STATS_BASENAME}_{report}.csv"


# ---------------------------------------------------------------------------------------
# CSV


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
        return True
    except ValueError:
        return False


def parse_csv(text: str, report: str = "", title: str = "") -> Table | None:
    """A stats CSV -> Table; whatever nsys printed before the header is skipped (the header is
    the first line of three or more fields none of which is a number)."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    for i, row in enumerate(rows):
        if len(row) >= 3 and not any(_is_number(c) for c in row if c.strip()):
            header = tuple(c.strip() for c in row)
            body = tuple(tuple(c.strip() for c in r) for r in rows[i + 1:]
                         if len(r) == len(header))
            return Table(report=report, title=title or report, header=header, rows=body)
    return None


def _column(header: Sequence[str], *names: str) -> int | None:
    """Index of the first column whose name (units in parentheses dropped) is one of names."""
    bare = [re.sub(r"\s*\(.*?\)\s*$", "", h).strip().lower() for h in header]
    for name in names:
        if name.lower() in bare:
            return bare.index(name.lower())
    return None


_TIME_UNITS = {"ns": 1.0, "us": 1e3, "μs": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_SIZE_UNITS = {"b": 1.0, "byte": 1.0, "bytes": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9,
               "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3}


def _unit(header: str, table: Mapping[str, float], default: float) -> float:
    m = re.search(r"\(([^)]*)\)\s*$", header)
    return table.get(m.group(1).strip().lower(), default) if m else default


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _get(row: Sequence[str], index: int | None, scale: float = 1.0) -> int | None:
    if index is None or index >= len(row):
        return None
    value = _number(row[index])
    return None if value is None else round(value * scale)


def _direction(operation: str) -> str | None:
    """[CUDA memcpy Host-to-Device] (current) or [CUDA memcpy HtoD] (older) -> HtoD."""
    op = operation.lower()
    if "memset" in op:
        return "memset"
    for words, direction in ((("host-to-device", "htod"), HTOD), (("device-to-host", "dtoh"), DTOH),
                             (("device-to-device", "dtod"), DTOD), (("peer-to-peer", "ptop"), "PtoP"),
                             (("host-to-host", "htoh"), "HtoH")):
        if any(w in op for w in words):
            return direction
    return "unknown" if "memcpy" in op else None


def _memory_kind(text: str) -> str:
    return text.strip().lower()


def trace_from_gpu_trace(table: Table) -> Trace:
    """cuda_gpu_trace rows (one per kernel, copy or memset) -> Trace."""
    h = table.header
    start_i, dur_i = _column(h, "Start"), _column(h, "Duration")
    name_i, strm_i = _column(h, "Name"), _column(h, "Strm", "Stream")
    ctx_i, dev_i, corr_i = _column(h, "Ctx", "Context"), _column(h, "Device"), _column(h, "CorrId")
    bytes_i = _column(h, "Bytes")
    src_i, dst_i = _column(h, "SrcMemKd"), _column(h, "DstMemKd")
    grid_i = [_column(h, n) for n in ("GrdX", "GrdY", "GrdZ")]
    block_i = [_column(h, n) for n in ("BlkX", "BlkY", "BlkZ")]
    if start_i is None or dur_i is None or name_i is None:
        return Trace(skipped=len(table.rows))
    t_scale = _unit(h[start_i], _TIME_UNITS, 1.0)
    d_scale = _unit(h[dur_i], _TIME_UNITS, 1.0)
    b_scale = _unit(h[bytes_i], _SIZE_UNITS, 1e6) if bytes_i is not None else 1.0
    kernels: list[Kernel] = []
    copies: list[Copy] = []
    memsets: list[Memset] = []
    devices: dict[int, str] = {}  # "NVIDIA H100 80GB HBM3 (0)" -> 0: "NVIDIA H100 80GB HBM3"
    skipped = 0
    for row in table.rows:
        start, duration = _get(row, start_i, t_scale), _get(row, dur_i, d_scale)
        if start is None or duration is None:
            skipped += 1
            continue
        end = start + duration
        name = row[name_i]
        stream = _get(row, strm_i) or 0
        context = _get(row, ctx_i) or 0
        device_text = row[dev_i] if dev_i is not None and dev_i < len(row) else ""
        found = re.search(r"\((\d+)\)\s*$", device_text)
        device = int(found.group(1)) if found else 0
        if found and device not in devices:
            devices[device] = device_text[:found.start()].strip()
        correlation = _get(row, corr_i) or 0
        direction = _direction(name) if name.startswith("[") else None
        size = _get(row, bytes_i, b_scale) or 0
        if direction == "memset":
            memsets.append(Memset(bytes=size, start=start, end=end, stream=stream, device=device,
                                  context=context, correlation=correlation))
        elif direction is not None:
            copies.append(Copy(
                direction=direction, bytes=size, start=start, end=end, stream=stream,
                device=device, context=context, correlation=correlation,
                src=_memory_kind(row[src_i]) if src_i is not None and src_i < len(row) else "",
                dst=_memory_kind(row[dst_i]) if dst_i is not None and dst_i < len(row) else ""))
        else:
            grid = tuple(_get(row, i) or 0 for i in grid_i)
            block = tuple(_get(row, i) or 0 for i in block_i)
            kernels.append(Kernel(name=name, start=start, end=end, stream=stream, device=device,
                                  context=context, correlation=correlation,
                                  grid=(grid[0], grid[1], grid[2]),
                                  block=(block[0], block[1], block[2])))
    return Trace(kernels=tuple(kernels), copies=tuple(copies), memsets=tuple(memsets),
                 devices=tuple(Device(id=i, name=n) for i, n in sorted(devices.items()) if n),
                 skipped=skipped)


def summary_from_tables(tables: Mapping[str, Table], top: int = 10,
                        source_name: str = "") -> Summary | None:
    """Totals from the summary reports, when there is no GPU trace to compute them from."""
    kern = tables.get("kernels")
    times = tables.get("copy_time")
    sizes = tables.get("copy_size")
    if kern is None and times is None:
        return None
    kernel_rows: list[tuple[str, int, int, int]] = []
    if kern is not None:
        h = kern.header
        tot_i, n_i = _column(h, "Total Time", "Total"), _column(h, "Instances", "Count", "Calls")
        max_i, name_i = _column(h, "Max", "Maximum"), _column(h, "Name")
        scale = _unit(h[tot_i], _TIME_UNITS, 1.0) if tot_i is not None else 1.0
        for row in kern.rows:
            name = row[name_i] if name_i is not None else "?"
            kernel_rows.append((name, _get(row, tot_i, scale) or 0, _get(row, n_i) or 0,
                                _get(row, max_i, scale) or 0))
    kernel_ns = sum(r[1] for r in kernel_rows)
    per_op: dict[str, list[int]] = {}  # direction -> [count, ns, bytes]
    for table, what in ((times, "time"), (sizes, "size")):
        if table is None:
            continue
        h = table.header
        op_i = _column(h, "Operation", "Name")
        n_i = _column(h, "Count", "Operations", "Instances")
        tot_i = _column(h, "Total Time", "Total")
        scale = (_unit(h[tot_i], _TIME_UNITS if what == "time" else _SIZE_UNITS,
                       1.0 if what == "time" else 1e6) if tot_i is not None else 1.0)
        for row in table.rows:
            direction = _direction(row[op_i]) if op_i is not None else None
            if direction is None:
                continue
            entry = per_op.setdefault(direction, [0, 0, 0])
            if what == "time":
                entry[0] = _get(row, n_i) or entry[0]
                entry[1] = _get(row, tot_i, scale) or 0
            else:
                entry[0] = entry[0] or (_get(row, n_i) or 0)
                entry[2] = _get(row, tot_i, scale) or 0

    def transfer(label: str, direction: str) -> TransferStat:
        count, ns, size = per_op.get(direction, [0, 0, 0])
        return TransferStat(label=label, count=count, bytes=size, total_ns=ns)

    memset = per_op.get("memset", [0, 0, 0])
    return Summary(
        span_ns=0, busy_ns=0, kernel_ns=kernel_ns, kernel_count=sum(r[2] for r in kernel_rows),
        h2d=transfer("host → device", HTOD), d2h=transfer("device → host", DTOH),
        d2d=transfer("device → device", DTOD),
        memset_ns=memset[1], memset_count=memset[0], memset_bytes=memset[2],
        sync_ns=0, sync_count=0, queues=0,
        top_kernels=tuple(
            KernelStat(name=name, where=where(name, source_name), calls=calls, total_ns=ns,
                       max_ns=longest, share=ns / kernel_ns if kernel_ns else 0.0)
            for name, ns, calls, longest in sorted(kernel_rows, key=lambda r: -r[1])[:top]),
    )


def read_stats(run_dir: Path, names: Mapping[str, str]) -> dict[str, Table]:
    """Our name -> Table for each report nsys wrote."""
    found: dict[str, Table] = {}
    for ours, report in names.items():
        path = stats_file(run_dir, report)
        if not path.is_file():
            continue
        table = parse_csv(path.read_text(encoding="utf-8", errors="replace"), report,
                          TITLES.get(ours, report))
        if table is not None:
            found[ours] = table
    return found
