"""Nsight Systems: the `nsys profile` command line, the export and the `nsys stats` reports,
their CSV, and nsys's own messages in the program's output.

    nsys profile --trace=openacc,cuda,osrt,nvtx --sample=none --cpuctxsw=none --duration=T --kill=sigkill --stats=false -o RUNDIR/report --force-overwrite=true PROGRAM ARGS
    nsys export --type sqlite --force-overwrite=true -o RUNDIR/report.sqlite RUNDIR/report.nsys-rep
    nsys stats --format csv --output RUNDIR/stats --report R1,R2,... RUNDIR/report.sqlite

The export holds every GPU operation: nsysdb.py reads it into the Trace that the timeline,
hints and rates use, as for the built-in tracer. The stats are nsys's own summary tables,
shown as they are. `nsys stats --output BASE --format csv` writes one file per report,
BASE_REPORT.csv; a report without data (openacc_sum for a gcc build) is skipped, its file empty
or missing. Report names changed in Nsight Systems 2023 (gpukernsum -> cuda_gpu_kern_sum, ...):
`nsys stats --help-reports` says which this nsys knows, and the old names are used when it lists
no new one.

CSV columns are read by name, not position, and their sets differ between the generations
(2022.4's gpukernsum has a row per kernel and launch shape, GridXYZ and BlockXYZ columns;
its operations are "[CUDA memcpy HtoD]", later "[CUDA memcpy Host-to-Device]"). Units come
from the header: "Total Time (ns)", "Bytes (MB)" (10^6 bytes), "Total (MB)"; numbers may carry
thousands separators.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .model import (
    DTOD,
    DTOH,
    HTOD,
    KernelStat,
    Summary,
    Table,
    TransferStat,
)
from .summary import where

DEFAULT_OPTIONS = ("--trace=openacc,cuda,osrt,nvtx",)
# Added unless the configured command says otherwise: idrrun reads neither CPU samples nor
# context switches, which cost time, and with them the agent of nsys 2022.4 (Debian's) never
# ends after the program on Linux 6 kernels.
QUIET_OPTIONS = {"--sample": "--sample=none", "--cpuctxsw": "--cpuctxsw=none"}
_SHORT_SPELLINGS = {"-s": "--sample"}
REPORT_BASENAME = "report"  # nsys adds .nsys-rep
STATS_BASENAME = "stats"

# Our name -> (current nsys name, name before 2023), in the order shown.
REPORTS: dict[str, tuple[str, str]] = {
    "kernels": ("cuda_gpu_kern_sum", "gpukernsum"),
    "copy_time": ("cuda_gpu_mem_time_sum", "gpumemtimesum"),
    "copy_size": ("cuda_gpu_mem_size_sum", "gpumemsizesum"),
    "openacc": ("openacc_sum", "openaccsum"),
}
TITLES = {
    "kernels": "CUDA kernels",
    "copy_time": "memory operations, by time",
    "copy_size": "memory operations, by size",
    "openacc": "OpenACC events",
}
SHOWN = ("kernels", "copy_time", "copy_size", "openacc")

# Options of ours that a configured command must not override: where the report goes, that
# stats are ours to run, and when nsys stops the program (its --timeout).
_OURS = {"-o", "--output", "-f", "--force-overwrite", "--stats", "-d", "--duration", "--kill"}
# How nsys stops a program at the end of its --duration: SIGKILL to its process group, as a
# timeout without a profiler ends (a program cannot ignore it). nsys then exits 128 + 9.
KILL = "sigkill"
KILLED_STATUS = 128 + 9
# nsys 2022.4 now and then fails before it starts the program when other sessions run beside
# it, its client losing its own daemon ("Local Endpoint is not available", "End of file": 4 of
# 52 loaded runs of the real-nsys tests); the same command started again works.
STARTED_AGAIN = "nsys ended before it started the program ({said}): started once more"


def started_again(output: str) -> str:
    """The note of a run started once more after nsys's failure, with what nsys said last."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    said = lines[-1][:160] if lines else "it said nothing"
    return STARTED_AGAIN.format(said=said)


def is_nsys(command: Sequence[str]) -> bool:
    return bool(command) and Path(command[0]).name.startswith("nsys")


def profile_argv(command: Sequence[str], run_dir: Path,
                 duration: int | None = None) -> tuple[str, ...]:
    """The prefix before the program. `command` is the configured profiler: ("nsys",), or
    ("nsys", "profile", OPTIONS...) whose options replace DEFAULT_OPTIONS. duration: the
    program's time limit in whole seconds; nsys stops it then (--duration, --kill) and still
    writes its report, so that the profiler's own time never lengthens the program's."""
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
    named = {_SHORT_SPELLINGS.get(w.split("=", 1)[0], w.split("=", 1)[0]) for w in options}
    quiet = [option for name, option in QUIET_OPTIONS.items() if name not in named]
    stop = (f"--duration={duration}", f"--kill={KILL}") if duration is not None else ()
    return (exe, "profile", *(options or DEFAULT_OPTIONS), *quiet, *stop, "--stats=false",
            "-o", str(run_dir / REPORT_BASENAME), "--force-overwrite=true")


def report_names(help_reports: str) -> dict[str, str]:
    """Our name -> this nsys's report name, from `nsys stats --help-reports`."""
    old = "cuda_gpu_kern_sum" not in help_reports and "gpukernsum" in help_reports
    return {ours: (names[1] if old else names[0]) for ours, names in REPORTS.items()}


def export_argv(exe: str, report_file: Path, database: Path) -> tuple[str, ...]:
    return (exe, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(database),
            str(report_file))


def stats_argv(exe: str, source: Path, names: Mapping[str, str],
               run_dir: Path) -> tuple[str, ...]:
    """Stats of the export (source: report.sqlite), or of the report itself, which nsys then
    exports on its own."""
    export = ("--force-export=true",) if source.suffix != ".sqlite" else ()
    return (exe, "stats", *export, "--format", "csv",
            "--output", str(run_dir / STATS_BASENAME),
            "--report", ",".join(names.values()), str(source))


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


# A kernel of the kernels report: (name, total ns, calls, longest ns).
_KernelRow = tuple[str, int, int, int]


def _kernel_rows(table: Table | None) -> list[_KernelRow]:
    if table is None:
        return []
    h = table.header
    tot_i, n_i = _column(h, "Total Time", "Total"), _column(h, "Instances", "Count", "Calls")
    max_i, name_i = _column(h, "Max", "Maximum"), _column(h, "Name")
    scale = _unit(h[tot_i], _TIME_UNITS, 1.0) if tot_i is not None else 1.0
    return [(row[name_i] if name_i is not None else "?", _get(row, tot_i, scale) or 0,
             _get(row, n_i) or 0, _get(row, max_i, scale) or 0) for row in table.rows]


def _copy_rows(table: Table | None, units: Mapping[str, float],
               default_unit: float) -> list[tuple[str, int, int]]:
    """(direction or "memset", count, total in ns or bytes) of each row of a memory operations
    report that names a kind of operation."""
    if table is None:
        return []
    h = table.header
    op_i = _column(h, "Operation", "Name")
    n_i = _column(h, "Count", "Operations", "Instances")
    tot_i = _column(h, "Total Time", "Total")
    if op_i is None:
        return []
    scale = _unit(h[tot_i], units, default_unit) if tot_i is not None else 1.0
    found = ((_direction(row[op_i]), row) for row in table.rows)
    return [(direction, _get(row, n_i) or 0, _get(row, tot_i, scale) or 0)
            for direction, row in found if direction is not None]


def _copy_totals(times: Table | None, sizes: Table | None) -> dict[str, list[int]]:
    """direction -> [count, ns, bytes]. The count is the time report's, else the size
    report's; sizes are in MB when the header names no unit."""
    per_op: dict[str, list[int]] = {}
    for direction, count, ns in _copy_rows(times, _TIME_UNITS, 1.0):
        entry = per_op.setdefault(direction, [0, 0, 0])
        entry[0] = count or entry[0]
        entry[1] = ns
    for direction, count, size in _copy_rows(sizes, _SIZE_UNITS, 1e6):
        entry = per_op.setdefault(direction, [0, 0, 0])
        entry[0] = entry[0] or count
        entry[2] = size
    return per_op


def _transfer(per_op: Mapping[str, list[int]], label: str, direction: str) -> TransferStat:
    count, ns, size = per_op.get(direction, [0, 0, 0])
    return TransferStat(label=label, count=count, bytes=size, total_ns=ns)


def _top_kernels(rows: list[_KernelRow], top: int, source_name: str) -> tuple[KernelStat, ...]:
    kernel_ns = sum(r[1] for r in rows)
    return tuple(
        KernelStat(name=name, where=where(name, source_name), calls=calls, total_ns=ns,
                   max_ns=longest, share=ns / kernel_ns if kernel_ns else 0.0)
        for name, ns, calls, longest in sorted(rows, key=lambda r: -r[1])[:top])


def summary_from_tables(tables: Mapping[str, Table], top: int = 10,
                        source_name: str = "") -> Summary | None:
    """Totals from the summary reports, when there is no GPU trace to compute them from."""
    if tables.get("kernels") is None and tables.get("copy_time") is None:
        return None
    kernels = _kernel_rows(tables.get("kernels"))
    per_op = _copy_totals(tables.get("copy_time"), tables.get("copy_size"))
    memset_count, memset_ns, memset_bytes = per_op.get("memset", [0, 0, 0])
    return Summary(
        span_ns=0, busy_ns=0, kernel_ns=sum(r[1] for r in kernels),
        kernel_count=sum(r[2] for r in kernels),
        h2d=_transfer(per_op, "host → device", HTOD), d2h=_transfer(per_op, "device → host", DTOH),
        d2d=_transfer(per_op, "device → device", DTOD),
        memset_ns=memset_ns, memset_count=memset_count, memset_bytes=memset_bytes,
        sync_ns=0, sync_count=0, queues=0, top_kernels=_top_kernels(kernels, top, source_name),
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


# ---------------------------------------------------------------------------------------
# nsys's messages in the program's output

# After the program, `nsys profile` says "Generating '/tmp/nsys-report-4f1a.qdstrm'", redraws
# progress bars with carriage returns ("[1/1] [====25%      ] report.nsys-rep", dozens of
# times), then "Generated:" and the report's path, indented. In a notebook each redraw is kept:
# a screenful of bars under the program's output.
_GENERATING = "Generating '"
_GENERATING_LINE = re.compile(r"^Generating '[^']*\.qdstrm'\s*$")
_PROGRESS = re.compile(r"^\[\d+/\d+\] \[")
_REPORT_PATH = re.compile(r"^\s+\S.*\.(?:nsys-rep|qdrep|sqlite)\s*$")
WRITING = "nsys: writing the report…\n"


class OutputFilter:
    """The sink of a run's output, with nsys's end-of-run messages (the "Generating" line, the
    progress bars, "Generated:" and the path) replaced by the one short line WRITING; the
    program's output and nsys's other messages (warnings, errors) pass as they come.

    Call it with each piece of output, then finish() once the run is over. Only a line that may
    become nsys's "Generating '" waits for its end; nothing is held once the program has ended.
    """

    def __init__(self, sink: Callable[[str], None]) -> None:
        self._sink = sink
        self._held = ""
        self._after_program = False  # nsys's "Generating" line was seen

    def __call__(self, text: str) -> None:
        if self._after_program:
            self._epilogue(text)
        else:
            self._program(text)

    def finish(self) -> None:
        held, self._held = self._held, ""
        if held and not (self._after_program and _PROGRESS.match(held)):
            self._emit(held)

    def _emit(self, text: str) -> None:
        if text:
            self._sink(text)

    def _program(self, text: str) -> None:
        data, self._held = self._held + text, ""
        start = 0
        while (end := data.find("\n", start)) >= 0:
            if _GENERATING_LINE.match(data[start:end]):
                self._emit(data[:start])
                self._emit(WRITING)
                self._after_program = True
                self._epilogue(data[end + 1:])
                return
            start = end + 1
        rest = data[start:]
        if rest and (_GENERATING.startswith(rest) or rest.startswith(_GENERATING)):
            self._emit(data[:start])
            self._held = rest
        else:
            self._emit(data)

    def _epilogue(self, text: str) -> None:
        data = self._held + text
        cut = max(data.rfind("\n"), data.rfind("\r")) + 1
        self._held = data[cut:]
        for piece in re.split(r"[\r\n]", data[:cut]):
            if not piece.strip() or _PROGRESS.match(piece) or piece.strip() == "Generated:" \
                    or _REPORT_PATH.match(piece):
                continue
            self._emit(piece + "\n")
