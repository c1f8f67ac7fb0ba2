"""Where GPU time went: run a program under a profiler, then read, sum up and draw what it did.

Two stages around the run, each a plain function:

    plan(choice, run_dir, cache_dir, nsys_command) -> ProfilePlan   # before: what to prefix, what env
    ... the caller runs (*launcher, *plan.argv_prefix, program, *args) with plan.env added ...
    collect(plan, timeout) -> ProfileReport                         # after: tables, summary, PNG

Between them the pipeline holds a running.ProfileSession (the plan, its follower, its folder):
what happens while the program runs, and which files of a box are the profile's, are its
methods, not calls back into this module.

Profilers (choice "auto" takes the first that applies):
- "nsys": Nsight Systems, when `nsys` is on PATH or configured (nsys_command). The program runs
  under `nsys profile`; collect() exports the report to SQLite (RUN_DIR/report.sqlite), read
  into the same Trace as the built-in tracer's (nsysdb.py), and runs `nsys stats` (CSV) for
  nsys's kernel, memory and OpenACC tables. The report RUN_DIR/report.nsys-rep is kept for
  nsys-ui. While the program runs, ProfileSession.output_filter() keeps nsys's progress bars out
  of its output.
- "builtin": a small CUPTI tracer (tracer.c), built on first use with the system C compiler
  against the CUDA toolkit's CUPTI and cached; the CUDA driver loads it into the program
  through CUDA_INJECTION64_PATH. It writes RUN_DIR/trace.jsonl ("idrrun-trace" JSON lines, see
  docs/profiling.md).
- A configured profiler that is not nsys (kind "command") runs, and nothing is read from it.
Expected problems (no CUPTI, no compiler, no nsys) give kind "none" with a note that says what to
install; nothing here raises for them.

What the student sees (ProfileReport renders itself: _repr_html_, __str__): time in kernels,
host→device and device→host copies with bytes, counts and achieved GB/s, the top kernels with
where they come from in the source when the name tells (nvc: main_42_gpu; gcc:
main$_omp_fn$0); hints (hints.py: what to change, with the figure that says so); achieved rates
(rates.py: GB/s against the link's and the device memory's peaks, the GPU's busy fraction); a
timeline PNG (RUN_DIR/timeline.png, timeline.py: one row per OpenACC queue or stream, each pixel
column showing the share of its time per kind of operation, and a zoom on a few iterations);
and the trace as Chrome/Perfetto trace events (RUN_DIR/trace.json, perfetto.py) to zoom into
with ui.perfetto.dev. A run without GPU work says NO_GPU_ACTIVITY.

For exercise checks: trace_values(report.trace, iterations) -> {"ran_on_gpu", "kernels",
"queues", "bytes_h2d", "bytes_d2h", "bytes_moved", "gpu_busy", "bytes_per_iteration", ...}.
"""

from __future__ import annotations

import dataclasses
import math
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model import ProcResult
from ..run import boundary, proc, sandbox
from ..run.allowance import Ledger
from . import nsys as _nsys
from . import nsysdb, perfetto
from .hints import find_hints
from .model import (
    CHOICES,
    EMPTY_SUMMARY,
    NO_GPU_ACTIVITY,
    ExportBox,
    Hint,
    ProfilePlan,
    ProfileReport,
    Rates,
    Summary,
    Table,
    Trace,
)
from .rates import achieved_rates
from .summary import summarize
from .timeline import draw as draw_timeline
from .render import fmt_bytes
from .tracefile import MAX_TRACE_BYTES, Follower, read_trace
from .tracer import build_tracer


TRACE_FILE = "trace.jsonl"
# nsys writes its report after the program ends: it may go on this long past the time limit
# (the program itself is stopped at its limit by nsys: --duration).
NSYS_GRACE = 60.0
# How often the tracer hands CUPTI's finished records over (its default 500): the follower
# reads them during the run, so a shorter period leaves less to read after it.
FLUSH_MS = 100
TIMELINE_FILE = "timeline.png"
TRACE_JSON_FILE = "trace.json"
NSYS_HINT = ("install Nsight Systems (it comes with the CUDA toolkit and the NVIDIA HPC SDK) or "
             "profile with the built-in tracer")


# Between nsys and the program: a shell that leaves a mark (an empty file named by
# LAUNCHED_VAR, in the profile's folder), then execs the program (same pid, which nsys follows).
# No mark after a failed run: nsys failed before it started the program
# (running.ProfileSession.stopped()).
LAUNCHED_VAR = "IDRRUN_LAUNCHED"
LAUNCHED_PREFIX = ".idrrun-launched-"
LAUNCH_MARK = ("/bin/sh", "-c", ': > "$IDRRUN_LAUNCHED"; exec "$0" "$@"')


def _clear(run_dir: Path) -> None:
    """Remove what a profiled run in this folder left before: a report must never show stale data."""
    report = run_dir / _nsys.REPORT_BASENAME
    stale = [*run_dir.glob(TRACE_FILE + "*"), *run_dir.glob(f"{_nsys.STATS_BASENAME}_*.csv"),
             report.with_suffix(".nsys-rep"), report.with_suffix(".sqlite"),
             run_dir / TIMELINE_FILE, run_dir / TRACE_JSON_FILE]
    for path in stale:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def _none(run_dir: Path, *notes: str) -> ProfilePlan:
    return ProfilePlan(kind="none", argv_prefix=(), env={}, run_dir=run_dir, notes=notes)


def plan(choice: str, run_dir: Path, cache_dir: Path, nsys_command: Sequence[str] = (), *,
         environ: Mapping[str, str] | None = None, cc: str | None = None,
         timeout: float | None = None, drawn: bool = True) -> ProfilePlan:
    """How to run the program under the profiler `choice` ("auto", "nsys", "builtin").

    nsys_command: the configured profiler ([profiler] command), e.g. ("nsys",) or ("nsys",
    "profile", "--trace=cuda,openacc") whose options replace the default ones; idrrun always
    sets -o, --force-overwrite and --stats itself, and, given the program's `timeout`,
    --duration and --kill: nsys stops the program at its time limit, then writes its report
    (NSYS_GRACE). May build the tracer (once; proc.run). drawn=False: the trace is for the
    checks only (ProfilePlan.drawn).
    """
    return dataclasses.replace(_plan(choice, run_dir, cache_dir, nsys_command, environ, cc,
                                     timeout), drawn=drawn)


def _plan(choice: str, run_dir: Path, cache_dir: Path, nsys_command: Sequence[str],
          environ: Mapping[str, str] | None, cc: str | None, timeout: float | None) -> ProfilePlan:
    env = os.environ if environ is None else environ
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _none(run_dir, f"cannot create the profile folder {run_dir}: {exc.strerror}")
    if choice not in CHOICES:
        return _none(run_dir, f"unknown profiler {choice!r}: choose one of {', '.join(CHOICES)}")
    _clear(run_dir)
    if choice in ("auto", "nsys"):
        command = tuple(nsys_command)
        if not command:
            found = shutil.which("nsys", path=env.get("PATH", os.defpath))
            command = (found,) if found else ()

        if command and not _nsys.is_nsys(command):
            if choice == "nsys":
                return _none(run_dir, f"the configured profiler {command[0]} is not nsys")
            return ProfilePlan(kind="command", argv_prefix=command, env={}, run_dir=run_dir,
                               notes=((f"profiling with the configured {Path(command[0]).name}; "
                                       "idrrun does not read its results"),))
        if command and "/" not in command[0]:
            # A bare name is looked up on PATH here: its installation (shown to a box) is where
            # the found executable lives, not a name beside the working folder.
            found = shutil.which(command[0], path=env.get("PATH", os.defpath))
            if found is None:
                return _none(run_dir, f"the configured profiler {command[0]} is not on PATH")
            command = (found, *command[1:])
        if command:
            report = run_dir / f"{_nsys.REPORT_BASENAME}.nsys-rep"
            duration = math.ceil(timeout) if timeout is not None else None
            # A name of its own per run: no mark of an earlier run is taken for this one's.
            mark = LAUNCHED_PREFIX + secrets.token_hex(8)
            return ProfilePlan(kind="nsys",
                               argv_prefix=(*_nsys.profile_argv(command, run_dir, duration),
                                            *LAUNCH_MARK),
                               env={LAUNCHED_VAR: str(run_dir / mark)}, run_dir=run_dir,
                               output=report, nsys=command[0], grace=NSYS_GRACE,
                               duration=duration, launched=mark,
                               installation=Path(command[0]).resolve().parent.parent)
        if choice == "nsys":
            return _none(run_dir, f"nsys is not on PATH: {NSYS_HINT}")
    library, why = build_tracer(cache_dir, cc, env)
    if library is None:
        return _none(run_dir, f"no GPU profile: {why}")
    trace = run_dir / TRACE_FILE
    notes = ("nsys is not on PATH: using the built-in CUPTI tracer",) if choice == "auto" else ()
    return ProfilePlan(kind="builtin", argv_prefix=(),
                       env={"CUDA_INJECTION64_PATH": str(library), "IDRRUN_TRACE_FILE": str(trace),
                            "IDRRUN_TRACE_FLUSH_MS": str(FLUSH_MS)},
                       run_dir=run_dir, notes=notes, output=trace,
                       libraries={"CUDA_INJECTION64_PATH": library})


@dataclass(frozen=True)
class Work:
    """What the caller knows about the run that the trace does not say."""

    gpu: str = ""  # the GPU's name (nvidia-smi's); "" -> the trace's device record, if any
    source_name: str = ""
    iterations: int | None = None  # the run's iteration count (parsed from its output)
    # The bytes the kernels must move in device memory per iteration (the exercise's figure).
    bytes_per_iteration: float | None = None
    # What the compiler's runtime adds to each launch (Family.launch_cost), "" when nothing known.
    launch_cost: str = ""


@dataclass(frozen=True)
class Drawn:
    """A trace's timeline picture and trace.json, each a path or None (then a note says why)."""

    png: Path | None = None
    trace_json: Path | None = None
    notes: tuple[str, ...] = ()


def _draw(plan: ProfilePlan, trace: Trace, prepared: perfetto.Prepared | None) -> Drawn:
    drawn = draw_timeline(trace, plan.run_dir / TIMELINE_FILE,
                          title=f"GPU timeline ({len(trace.kernels)} kernels, "
                                f"{len(trace.copies)} copies)")
    written = perfetto.write(trace, plan.run_dir / TRACE_JSON_FILE, prepared)
    return Drawn(png=drawn if isinstance(drawn, Path) else None,
                 trace_json=written if isinstance(written, Path) else None,
                 notes=tuple(n for n in (drawn, written) if isinstance(n, str)))


def _drawing(trace: Trace) -> tuple[object, ...]:
    """What the picture and trace.json are made of (timeline.py, perfetto.py): two traces
    alike in these draw the same, whatever else they say (devices, frees, the end record)."""
    return (trace.kernels, trace.copies, trace.memsets, trace.syncs, trace.stream_queues,
            trace.started)


# Complexity: each part of the report (trace, summary, tables, picture, notes) present or not,
# assembled once.
def _finish(plan: ProfilePlan, trace: Trace | None, summary: Summary | None,
            tables: tuple[Table, ...], report_file: Path | None, notes: list[str],
            work: Work, message: str = "",
            prepared: perfetto.Prepared | None = None, drawn: Drawn | None = None) -> ProfileReport:
    png: Path | None = None
    trace_json: Path | None = None
    found_rates: Rates | None = None
    found_hints: tuple[Hint, ...] = ()
    if trace is None or trace.empty:
        message = message or NO_GPU_ACTIVITY
        summary = summary or EMPTY_SUMMARY
        if trace is not None and trace.errors:
            notes.append("the tracer could not start: " + "; ".join(trace.errors[:3])
                         + ("; …" if len(trace.errors) > 3 else ""))
    elif plan.drawn:  # a trace for the checks only is read for its figures (trace_values)
        drawn = drawn or _draw(plan, trace, prepared)
        png, trace_json = drawn.png, drawn.trace_json
        notes.extend(drawn.notes)
        if summary is not None:
            found_rates = achieved_rates(trace, summary, gpu=work.gpu,
                                         source_name=work.source_name,
                                         bytes_per_iteration=work.bytes_per_iteration,
                                         iterations=work.iterations)
            found_hints = find_hints(trace, summary, found_rates, launch_cost=work.launch_cost)
    if trace is not None:
        if not trace.complete and plan.kind == "builtin" and trace.files and not trace.truncated:
            notes.append("the trace stops early: the program did not reach its normal end "
                         "(killed or timed out); what was recorded before is shown")
        if trace.truncated:
            notes.append(f"the trace is longer than the {fmt_bytes(MAX_TRACE_BYTES)} idrrun reads: "
                         "what is shown is its beginning")
        if trace.dropped:
            notes.append(f"{trace.dropped} GPU records were lost (the tracer's buffers were full)")
        if trace.skipped:
            notes.append(f"{trace.skipped} unreadable trace lines skipped")
    return ProfileReport(kind=plan.kind, trace=trace, summary=summary, tables=tables,
                         timeline_png=png, report_file=report_file, message=message,
                         notes=tuple(notes), hints=found_hints, rates=found_rates,
                         trace_json=trace_json)


def collect(plan: ProfilePlan, timeout: float = 120.0, *, source_name: str = "", gpu: str = "",
            iterations: int | None = None, bytes_per_iteration: float | None = None,
            follower: Follower | None = None, ledger: Ledger | None = None,
            boxed: ExportBox | None = None, launch_cost: str = "") -> ProfileReport:
    """After the run: read what the profiler left in plan.run_dir, sum it up, draw it, export
    it, and say what could be better.

    source_name (e.g. "cell[3]") is used to say where nvc's kernels come from. gpu: the GPU's
    name when the caller knows it (else the trace's, when the tracer recorded it), for the
    peaks the rates are compared with. iterations and bytes_per_iteration (the bytes the
    exercise's kernels must move in device memory per iteration) give the kernels' achieved
    memory bandwidth. follower: the session's (ProfileSession.follower), stopped, that read
    the trace during the run.
    ledger: a graded run's account of what is read of its box (run/allowance.py): past it,
    nothing of the profile is used (kind "none", saying why). boxed: for a graded run, the box
    nsys's export and stats run in (never outside a box on a report a box wrote).
    """
    work = Work(gpu=gpu, iterations=iterations, bytes_per_iteration=bytes_per_iteration,
                source_name=source_name, launch_cost=launch_cost)
    notes = list(plan.notes)
    if plan.kind == "none":
        return ProfileReport(kind="none", trace=None, summary=None,
                             message="no GPU profile: " + ("; ".join(notes) or "no profiler"))
    if plan.kind == "command":
        return ProfileReport(kind="command", trace=None, summary=None, notes=tuple(notes),
                             message=f"ran under {' '.join(plan.argv_prefix)}; see its output above")
    if plan.kind == "builtin":
        return _collect_builtin(plan, work, follower, ledger)
    return _collect_nsys(plan, timeout, notes, work, boxed, ledger)


def _collect_builtin(plan: ProfilePlan, work: Work, follower: Follower | None,
                     ledger: Ledger | None) -> ProfileReport:
    """The built-in tracer's files read (the follower's, given what it read during the run),
    and the report made, or taken from what the follower made of the same trace (Ahead)."""
    assert plan.output is not None
    trace = read_trace(plan.output, follower, ledger=ledger)
    if ledger is not None and ledger.refused:
        return _refused(ledger)
    if follower is None or not follower.used:  # (what was made during the run: not of this trace)
        return _builtin_report(plan, trace, work, None, None)
    ahead = follower.ahead
    if isinstance(ahead, Ahead) and trace is not None:
        made = ahead.report_of(plan, trace, work) if ledger is None else None
        return made or _builtin_report(plan, trace, work, follower.prepared,
                                       ahead.drawn_for(plan, trace))
    return _builtin_report(plan, trace, work, follower.prepared, None)


def _builtin_report(plan: ProfilePlan, trace: Trace | None, work: Work,
                    prepared: perfetto.Prepared | None, drawn: Drawn | None) -> ProfileReport:
    """The built-in tracer's report of `trace` (None: no process wrote one)."""
    summary = summarize(trace, source_name=work.source_name) if trace is not None else None
    report_file = trace.files[0] if trace is not None and trace.files else None
    return _finish(plan, trace, summary, (), report_file, list(plan.notes), work,
                   prepared=prepared, drawn=drawn)


class Ahead:
    """collect()'s report of a followed trace, made on the follower's thread as soon as the
    trace says it is whole (tracefile.Follower: the tracer's mark of its contexts' end, or its
    end record), while CUDA destroys the program's context and tears it down: on the H200 the
    Jacobi run's last records came 120-165 ms before its exit, and collect took 40-100 ms after
    it. collect() takes the report when it was made of the very trace it read (one process's
    file, nothing written after), for the same plan and work; else the picture and trace.json
    when the operations are the same (a device record or the frees came after the mark), and
    makes the rest.
    A class, not a stage: what was made ahead, written on the follower's thread, read on the
    caller's once the follower has stopped (Follower.finish joined it)."""

    def __init__(self, plan: ProfilePlan, work: Work,
                 prepared: perfetto.Prepared | None = None) -> None:
        self.plan = plan
        self.work = work
        self.prepared = prepared  # the follower's, which formats its events as they come
        self._drawn: tuple[tuple[object, ...], Drawn] | None = None
        self._made: ProfileReport | None = None

    def whole(self, trace: Trace) -> None:
        """On the follower's thread: the report of `trace`, the picture drawn again only when
        its operations changed since the last one."""
        try:
            drawn = self.drawn_for(self.plan, trace)
            if drawn is None and self.plan.drawn and not trace.empty:
                drawn = _draw(self.plan, trace, self.prepared)
                self._drawn = (_drawing(trace), drawn)
            self._made = _builtin_report(self.plan, trace, self.work, self.prepared, drawn)
        except Exception:  # noqa: BLE001 (a fault of ours shows where collect() makes it again)
            self._drawn = self._made = None

    def drawn_for(self, plan: ProfilePlan, trace: Trace) -> Drawn | None:
        """The picture and trace.json made ahead, if of these operations and this plan."""
        if self._drawn is None or plan != self.plan or self._drawn[0] != _drawing(trace):
            return None
        return self._drawn[1]

    def report_of(self, plan: ProfilePlan, trace: Trace, work: Work) -> ProfileReport | None:
        """The report made ahead, if of this very trace, plan and work."""
        made = self._made
        if made is None or plan != self.plan or work != self.work or made.trace != trace:
            return None
        return made


def _refused(ledger: Ledger) -> ProfileReport:
    return ProfileReport(kind="none", trace=None, summary=None,
                         message=f"no GPU profile: {ledger.refused}")


def _collect_nsys(plan: ProfilePlan, timeout: float,
                  notes: list[str], work: Work, boxed: ExportBox | None = None,
                  ledger: Ledger | None = None) -> ProfileReport:
    report = plan.output
    assert report is not None
    if not report.is_file():
        return ProfileReport(kind="nsys", trace=None, summary=None, notes=tuple(notes),
                             message=f"nsys wrote no report ({report} is missing): "
                                     "see its messages in the output above")
    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    def report_names() -> dict[str, str]:  # (reads no report: runs where idrrun runs)
        probe = proc.run((plan.nsys, "stats", "--help-reports"), what="profile stats",
                         timeout=min(30.0, left()), spec=proc.ProcSpec(max_output=256 * 1024))
        return _nsys.report_names(probe.output)

    if boxed is None and not plan.drawn:
        return _quiet_nsys(plan, notes, work, left)
    export, stats, names = _export_here(plan, report_names, left) if boxed is None else \
        _export_in_box(plan, report_names, left, boxed, ledger)
    database = report.with_suffix(".sqlite")
    if not export.ok or not database.is_file():
        notes.append(f"nsys export {export.describe()}: {_tail(export.output)}")
    if not stats.ok:
        notes.append(f"nsys stats {stats.describe()}: {_tail(stats.output)}")
    if ledger is not None and ledger.refused:
        return _refused(ledger)
    tables = _nsys.read_stats(plan.run_dir, names)
    read = nsysdb.read_trace(database) if database.is_file() else None
    if isinstance(read, str):
        notes.append(read)
    trace = read if isinstance(read, Trace) else None
    if ledger is not None and trace is not None and not ledger.records(
            "nsys's export", len(trace.kernels) + len(trace.copies) + len(trace.memsets)
            + len(trace.syncs)):
        return _refused(ledger)
    return _nsys_report(plan, trace, tables, stats.ok, notes, work)


def _quiet_nsys(plan: ProfilePlan, notes: list[str], work: Work,
                left: Callable[[], float]) -> ProfileReport:
    """A trace for the checks only (not drawn), on the user's own report: nsys's export alone
    gives its figures; nsys's own tables (nsys stats) are for a reader, and none reads them."""
    assert plan.output is not None
    database = plan.output.with_suffix(".sqlite")
    export = proc.run(_nsys.export_argv(plan.nsys, plan.output, database), what="profile export",
                      timeout=left(), spec=proc.ProcSpec(cwd=plan.run_dir, max_output=256 * 1024))
    if not export.ok or not database.is_file():
        notes.append(f"nsys export {export.describe()}: {_tail(export.output)}")
    read = nsysdb.read_trace(database) if database.is_file() else None
    if isinstance(read, str):
        notes.append(read)
    return _nsys_report(plan, read if isinstance(read, Trace) else None, {}, export.ok, notes, work)


def _nsys_report(plan: ProfilePlan, trace: Trace | None, tables: Mapping[str, Table],
                 stats_ok: bool, notes: list[str], work: Work) -> ProfileReport:
    """What nsys's export (`trace`) and stats (`tables`) say, as a report."""
    report = plan.output
    shown_tables = tuple(tables[k] for k in _nsys.SHOWN if k in tables)
    if trace is not None and not trace.empty:
        return _finish(plan, trace, summarize(trace, source_name=work.source_name), shown_tables,
                       report, notes, work)
    # No GPU operation in the export, or no export: nsys's own totals, if its tables have any.
    summary = _nsys.summary_from_tables(tables, source_name=work.source_name)
    if summary is not None and (summary.kernel_count or summary.h2d.count):
        return ProfileReport(kind="nsys", trace=None, summary=summary, tables=shown_tables,
                             report_file=report, notes=tuple(notes))
    if trace is None and not tables and not stats_ok:
        return ProfileReport(kind="nsys", trace=None, summary=None, report_file=report,
                             notes=tuple(notes),
                             message="no GPU profile: nsys could not read its report")
    return _finish(plan, trace, summary, shown_tables, report, notes, work)


Exported = tuple[ProcResult, ProcResult, Mapping[str, str]]  # export, stats, report names


def _export_here(plan: ProfilePlan, report_names: Callable[[], Mapping[str, str]],
                 left: Callable[[], float]) -> Exported:
    """nsys export, then nsys stats (of the reports `report_names()` names), on the user's own
    report, where it lies. The export first: the trace comes from it, and nsys stats reads it
    instead of exporting the report a second time."""
    assert plan.output is not None
    database = plan.output.with_suffix(".sqlite")
    export = proc.run(_nsys.export_argv(plan.nsys, plan.output, database), what="profile export",
                      timeout=left(), spec=proc.ProcSpec(cwd=plan.run_dir, max_output=256 * 1024))
    names = report_names()
    source = database if database.is_file() else plan.output
    stats = proc.run(_nsys.stats_argv(plan.nsys, source, names, plan.run_dir),
                     what="profile stats", timeout=left(), spec=proc.ProcSpec(cwd=plan.run_dir))
    return export, stats, names


# What is taken out of the export's box: the export and the stats' CSV, each at most this big
# (and all within the row's ledger).
EXPORT_CAP = 256 << 20


def _export_in_box(plan: ProfilePlan, report_names: Callable[[], Mapping[str, str]],
                   left: Callable[[], float], boxed: ExportBox,
                   ledger: Ledger | None) -> Exported:
    """nsys export, then nsys stats, on the report a graded run's box wrote, in a box of their
    own (the run's level, uid, guard and limits) in a fresh folder of the room holding a copy of
    the report; what they wrote is taken out (boundary.take_to: regular files of the box's uid,
    capped, counted against the row's ledger) into plan.run_dir, the grader's own folder, and
    the folder removed. A report crafted to make nsys misbehave can only do so in that box."""
    assert plan.output is not None
    folder = boundary.box_folder(boxed.room, "export-", boxed.uid, boxed.uid,
                                 files_from=plan.output, tmp=sandbox.own_tmp(boxed.support))
    try:
        spec = proc.ProcSpec(cwd=folder, max_output=256 * 1024, protections=boxed.protections,
                             limits=boxed.limits, box=_export_box(plan, boxed, folder))
        inside = folder / plan.output.name
        database = inside.with_suffix(".sqlite")
        export = proc.run(_nsys.export_argv(plan.nsys, inside, database),
                          what="profile export", timeout=left(), spec=spec)
        names = report_names()
        source = database if boundary.is_file(folder, database.name) else inside
        stats = proc.run(_nsys.stats_argv(plan.nsys, source, names, folder),
                         what="profile stats", timeout=left(), spec=spec)
        owners = (boxed.uid if boxed.uid >= 0 else os.geteuid(),)
        fd = boundary.open_dir(folder)
        try:
            for name in sorted(boundary.names(fd)):
                if name == database.name or (name.startswith(f"{_nsys.STATS_BASENAME}_")
                                             and name.endswith(".csv")):
                    boundary.take_to(fd, name, plan.run_dir / name, EXPORT_CAP, owners,
                                     ledger=ledger)
        finally:
            os.close(fd)
    finally:
        boundary.remove(folder)
    return export, stats, names


def _export_box(plan: ProfilePlan, boxed: ExportBox, folder: Path) -> sandbox.Box:
    """The export's box (sandbox.box, as every box): its folder read-write, nsys's
    installation read-only (when outside the system's folders), the run's box's hidden
    folders hidden, nothing else of the machine but the system's folders."""
    return sandbox.box("export", folder, boxed.support, boxed.uid, environ=boxed.environ,
                       installations=() if plan.installation is None else (plan.installation,),
                       hidden=boxed.hidden, room=boxed.room, protections=boxed.protections)


def _tail(output: str, lines: int = 5) -> str:
    return "\n".join(output.strip().splitlines()[-lines:])
