"""Nsight Systems for real: Debian's 2022.4 (`docker/install.sh nsys`, which CI runs) profiles host
runs here (tests named *_with_real_nsys, skipped only where nsys is missing), and what it wrote
(tests/data/nsys-2022.4/, record.py there) is read without it: its export into the same Trace as
the built-in tracer's, its stats CSV, its report names, its progress bars in the output.
Newer generations that cannot be installed here go through the fake (test_profile.py,
*_with_fake_nsys)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nsys_export
from conftest import PYTHONPATH, ROOT
from idrrun.profile import nsys as nsys_mod
from idrrun.profile import nsysdb, timeline
from idrrun.profile.hints import find_hints
from idrrun.profile.model import NO_GPU_ACTIVITY, ProfilePlan, Table, Trace
from idrrun.profile.rates import achieved_rates
from idrrun.profile.render import ProfileView
from idrrun.profile.running import ProfileSession
from idrrun.profile.stages import collect, plan
from idrrun.profile.summary import summarize
from idrrun.profile.tracefile import read_trace
from idrrun.model import ProcResult
from idrrun.run import proc

DATA = ROOT / "tests" / "data"
RECORDED = DATA / "nsys-2022.4"
H200 = DATA / "async_trace_h200.jsonl"  # the built-in tracer's, on an H200 (test_profile.py)

HOST_PROGRAM = (DATA / "acc_sum.c").read_text()  # sum = 499500


def _h200() -> Trace:
    trace = read_trace(H200)
    assert trace is not None
    return trace


# ---------------------------------------------------------------------------------------
# The export read into the built-in tracer's Trace (2022.4's tables, recorded)


@pytest.fixture
def h200_export(tmp_path: Path) -> Path:
    return nsys_export.write(_h200(), tmp_path / "report.sqlite")


def test_the_export_reads_back_the_tracers_operations(h200_export: Path) -> None:
    tracer = _h200()
    read = nsysdb.read_trace(h200_export)
    assert isinstance(read, Trace), read
    assert read.kernels == tracer.kernels
    assert read.syncs == tracer.syncs
    # the export does not say whether a copy was asynchronous
    assert read.copies == tuple(dataclasses.replace(c, asynchronous=False) for c in tracer.copies)
    assert {(c.direction, c.src, c.dst) for c in read.copies} == {("HtoD", "pageable", "device"),
                                                                   ("DtoH", "device", "pageable")}
    assert read.files == (h200_export,) and read.skipped == 0


def test_one_rendering_for_both_profilers(h200_export: Path, tmp_path: Path) -> None:
    from PIL import Image

    tracer = _h200()
    read = nsysdb.read_trace(h200_export)
    assert isinstance(read, Trace)
    # the export names no OpenACC queue: the tracer's trace without them draws the same picture
    unnamed = dataclasses.replace(tracer, stream_queues=())
    assert summarize(read) == summarize(tracer)
    pictures = [timeline.draw(t, tmp_path / f"{n}.png") for n, t in (("nsys", read), ("tracer", unnamed))]
    images = [Image.open(p).convert("RGB") for p in pictures]
    assert images[0].size == images[1].size and images[0].tobytes() == images[1].tobytes()
    rates = [achieved_rates(t, summarize(t), gpu="NVIDIA H200") for t in (read, unnamed)]
    assert rates[0] == rates[1]
    assert find_hints(read, summarize(read), rates[0]) == find_hints(unnamed, summarize(unnamed), rates[1])


def test_an_export_without_gpu_tables_is_an_empty_trace(tmp_path: Path) -> None:
    empty = nsys_export.write(Trace(), tmp_path / "host.sqlite")
    read = nsysdb.read_trace(empty)
    assert isinstance(read, Trace) and read.empty and read.devices == ()


def test_an_unreadable_export_says_why(tmp_path: Path) -> None:
    bad = tmp_path / "report.sqlite"
    bad.write_text("not a database")
    assert nsysdb.read_trace(bad) == f"{bad}: not a readable nsys export (file is not a database)"
    assert nsysdb.read_trace(tmp_path / "none.sqlite") == f"{tmp_path / 'none.sqlite'} is missing"


def test_enumerations_come_from_the_export_by_name(h200_export: Path) -> None:
    # Renumbered enumerations (a later nsys may) still read right: names, not numbers, count.
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(h200_export)) as db:
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = copyKind + 100")
        db.execute("UPDATE ENUM_CUDA_MEMCPY_OPER SET id = id + 100")
        db.commit()
    read = nsysdb.read_trace(h200_export)
    assert isinstance(read, Trace)
    assert [c.direction for c in read.copies] == [c.direction for c in _h200().copies]


GPU_RECORDED = RECORDED / "gpu_async.sql"


@pytest.mark.skipif(not GPU_RECORDED.is_file(),
                    reason="not recorded yet: benchmarks/nsys_check.py compare FOLDER --for-tests")
def test_recorded_gpu_run_agrees_with_the_tracer(tmp_path: Path) -> None:
    # nsys 2022.4 and the built-in tracer on the same program (async_matmul_solution, GCC) on an
    # H100, two runs (benchmarks/nsys_check.py gpu): the same operations and bytes, kernel times
    # within 5 %. The one 32 MB device->host copy to pageable memory took 19.0 ms in the tracer's
    # run and 26.1 ms in nsys's: first touches of pageable pages differ between runs, so that time
    # is held to the same order only.
    import sqlite3
    from contextlib import closing

    export = tmp_path / "report.sqlite"
    with closing(sqlite3.connect(export)) as db:
        db.executescript(GPU_RECORDED.read_text())
    read = nsysdb.read_trace(export)
    tracer = read_trace(RECORDED / "gpu_async.trace.jsonl")
    assert isinstance(read, Trace) and tracer is not None
    a, b = summarize(tracer), summarize(read)
    assert (b.kernel_count, b.h2d.count, b.h2d.bytes, b.d2h.count, b.d2h.bytes) == (
        a.kernel_count, a.h2d.count, a.h2d.bytes, a.d2h.count, a.d2h.bytes)
    assert b.kernel_ns == pytest.approx(a.kernel_ns, rel=0.05)
    assert b.d2h.total_ns == pytest.approx(a.d2h.total_ns, rel=0.5)
    assert [d.name for d in read.devices] == ["NVIDIA H100 80GB HBM3"]
    assert b.queues == a.queues  # the three async queues and the product's stream


# ---------------------------------------------------------------------------------------
# 2022.4's stats CSV, report names and output (recorded)


def test_2022_4_stats_csv_agree_with_the_export() -> None:
    tables = {}
    for ours, report in (("kernels", "gpukernsum"), ("copy_time", "gpumemtimesum"),
                         ("copy_size", "gpumemsizesum")):
        table = nsys_mod.parse_csv((RECORDED / f"{report}.csv").read_text(), report)
        assert table is not None
        tables[ours] = table
    assert tables["kernels"].header[-3:] == ("GridXYZ", "BlockXYZ", "Name")
    from_csv = nsys_mod.summary_from_tables(tables)
    from_trace = summarize(_h200())
    assert from_csv is not None
    assert (from_csv.kernel_ns, from_csv.kernel_count) == (from_trace.kernel_ns, from_trace.kernel_count)
    for direction in ("h2d", "d2h"):
        a, b = getattr(from_csv, direction), getattr(from_trace, direction)
        assert (a.count, a.total_ns) == (b.count, b.total_ns), direction
        assert a.bytes == pytest.approx(b.bytes, abs=0.5e3)  # the CSV rounds to 1 kB (0.001 MB)
    assert [k.name for k in from_csv.top_kernels] == [k.name for k in from_trace.top_kernels]



def test_summary_from_tables_reads_columns_by_name_and_units_from_the_header() -> None:
    """Each CSV generation's columns, found by name; units from the header; a cell that is not
    a number counts as nothing; the copy tables' counts: the time table's, else the size
    table's."""
    kernels = Table("cuda_gpu_kern_sum", "CUDA kernels",
                    ("Time (%)", "Total Time (us)", "Instances", "Max (us)", "Name"),
                    (("0.2", "1.5", "3", "0.75", "main_12_gpu"),
                     ("99.8", "1,000.25", "1", "1,000.25", "main_30_gpu"),
                     ("0", "n/a", "x", "", "broken")))
    times = Table("cuda_gpu_mem_time_sum", "times", ("Time (%)", "Total Time (ns)", "Count", "Operation"),
                  (("50", "2,000", "4", "[CUDA memcpy Host-to-Device]"),
                   ("10", "500", "2", "[CUDA memcpy DtoH]"),
                   ("5", "100", "1", "[CUDA memset]"),
                   ("1", "7", "1", "[CUDA something else]"),
                   ("1", "9", "1", "[CUDA memcpy Peer-to-Peer]")))
    sizes = Table("cuda_gpu_mem_size_sum", "sizes", ("Total (MB)", "Count", "Operation"),
                  (("8.0", "5", "[CUDA memcpy Host-to-Device]"),
                   ("0.004096", "1", "[CUDA memset]"),
                   ("1.0", "3", "[CUDA memcpy Device-to-Device]")))
    s = nsys_mod.summary_from_tables({"kernels": kernels, "copy_time": times, "copy_size": sizes},
                                     top=2, source_name="cell[3]")
    assert s is not None
    assert (s.kernel_ns, s.kernel_count) == (1_001_750, 4)
    assert [(k.name, k.where, k.calls, k.total_ns, k.max_ns, round(k.share, 4)) for k in s.top_kernels] == [
        ("main_30_gpu", "main, line 30 of cell[3]", 1, 1_000_250, 1_000_250, 0.9985),
        ("main_12_gpu", "main, line 12 of cell[3]", 3, 1_500, 750, 0.0015)]
    assert [(t.label, t.count, t.bytes, t.total_ns) for t in (s.h2d, s.d2h, s.d2d)] == [
        ("host → device", 4, 8_000_000, 2_000), ("device → host", 2, 0, 500),
        ("device → device", 3, 1_000_000, 0)]
    assert (s.memset_count, s.memset_bytes, s.memset_ns) == (1, 4096, 100)
    assert (s.span_ns, s.busy_ns, s.sync_count, s.queues) == (0, 0, 0, 0)


def test_summary_from_tables_needs_kernels_or_copy_times() -> None:
    sizes = Table("r", "r", ("Total (MB)", "Count", "Operation"), (("1.0", "1", "[CUDA memcpy HtoD]"),))
    assert nsys_mod.summary_from_tables({}) is None
    assert nsys_mod.summary_from_tables({"copy_size": sizes}) is None
    times = Table("r", "r", ("Total Time (ms)", "Operations", "Name"), (("2", "1", "[CUDA memcpy HtoD]"),))
    s = nsys_mod.summary_from_tables({"copy_time": times})
    assert s is not None and (s.kernel_count, s.top_kernels, s.h2d.total_ns) == (0, (), 2_000_000)
    nameless = Table("r", "r", ("Total Time", "Calls", "Maximum"), (("5", "2", "3"),))
    s = nsys_mod.summary_from_tables({"kernels": nameless})
    assert s is not None and [(k.name, k.calls, k.max_ns) for k in s.top_kernels] == [("?", 2, 3)]

def test_2022_4_report_names() -> None:
    names = nsys_mod.report_names((RECORDED / "help_reports.txt").read_text())
    assert names == {"kernels": "gpukernsum", "copy_time": "gpumemtimesum",
                     "copy_size": "gpumemsizesum", "openacc": "openaccsum"}
    assert nsys_mod.report_names("  cuda_gpu_kern_sum[:nvtx-name] -- CUDA GPU Kernel Summary\n"
                                 "  gpukernsum -- deprecated\n")["kernels"] == "cuda_gpu_kern_sum"


def _filtered(text: str, size: int) -> str:
    shown: list[str] = []
    sink = nsys_mod.OutputFilter(shown.append)
    for i in range(0, len(text), size):
        sink(text[i:i + size])
    sink.finish()
    return "".join(shown)


@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
def test_progress_bars_become_one_short_line(size: int) -> None:
    with open(RECORDED / "profile_output.txt", encoding="utf-8", newline="") as fh:
        recorded = fh.read()  # carriage returns kept
    assert recorded.count("\r[1/1] [") > 5 and "Generated:" in recorded
    assert _filtered(recorded, size) == "sum = 499500\n" + nsys_mod.WRITING


@pytest.mark.parametrize("size", [1, 5, 100_000])
def test_the_programs_output_and_nsys_errors_pass(size: int) -> None:
    program = "Gen\nGenerating 'x' is what I do\nprogress [1/1] [=\nno newline at the end"
    epilogue = ("\nGenerating '/tmp/nsys-report-1.qdstrm'\n\r[1/1] [==50%  ] report.nsys-rep"
                "\r[1/1] [100%] report.nsys-rep\nImporter error status: something\n"
                "Generated:\n    /tmp/r/report.nsys-rep\n")
    assert _filtered(program, size) == program
    assert _filtered(program + epilogue, size) == (program + "\n" + nsys_mod.WRITING
                                                  + "Importer error status: something\n")


class Shown(list[str]):
    """A run's output sink that keeps what it is given (ProfileSession.output_filter's)."""

    def __call__(self, text: str) -> None:
        self.append(text)

    def finish(self) -> None:
        pass


def test_the_filter_passes_everything_when_not_under_nsys(tmp_path: Path) -> None:
    shown = Shown()
    other = ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=tmp_path)
    sink = ProfileSession.start(other, follow=False, show_profile=True).output_filter(shown)
    sink("Generating '/tmp/a.qdstrm'\n\r[1/1] [=] x.nsys-rep\n")
    sink.finish()
    assert shown == ["Generating '/tmp/a.qdstrm'\n\r[1/1] [=] x.nsys-rep\n"]


# ---------------------------------------------------------------------------------------
# The real nsys (Debian's nsight-systems: docker/install.sh nsys)


@pytest.fixture(scope="module")
def nsys() -> str:
    found = shutil.which("nsys")
    if found is None:
        pytest.skip("nsys not installed: `docker/install.sh nsys` installs Debian's (CI does)")
    return found


@pytest.fixture(scope="module")
def host_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("host")
    (folder / "host_acc.c").write_text(HOST_PROGRAM)
    result = proc.run(["gcc", "-O1", "-fopenacc", "-foffload=disable", "-o", str(folder / "host_acc"),
                       str(folder / "host_acc.c")], what="compile", timeout=120)
    assert result.ok, result.output
    return folder / "host_acc"


def _under_real_nsys(p: ProfilePlan, program: Path, cwd: Path,
                     session: ProfileSession | None = None) -> tuple[ProcResult, Shown]:
    """argv run under real nsys, started once more where nsys ended before the program (its
    launch mark not made), as the pipeline does (ProfileSession.start_again: nsys
    2022.4 loses its daemon now and then with other sessions beside it, "Local Endpoint is not
    available", "End of file"); with `session`, what its output filter showed of the run that
    counts."""
    for attempt in (1, 2):
        shown = Shown()
        sink = session.output_filter(shown) if session is not None else None
        result = proc.run([*p.argv_prefix, str(program)], what="run", timeout=300, spec=proc.ProcSpec(
            cwd=cwd, env={**os.environ, **p.env}, on_output=sink, terminal=session is not None))
        if sink is not None:
            sink.finish()
        if result.ok or attempt == 2 or (p.run_dir / p.launched).exists():  # the program ran
            break
    return result, shown


def test_host_run_with_real_nsys(nsys: str, host_program: Path, tmp_path: Path) -> None:
    p = plan("nsys", tmp_path / "run", tmp_path / "cache")
    assert p.kind == "nsys" and p.argv_prefix[0] == nsys
    result, shown = _under_real_nsys(p, host_program, tmp_path,
                                     ProfileSession.start(p, follow=False, show_profile=True))
    assert result.ok, result.output
    assert "\r[1/1] [" in result.output  # what nsys printed ...
    assert "".join(shown) == "sum = 499500\n" + nsys_mod.WRITING  # ... and what was shown
    report = collect(p, timeout=300, source_name="host_acc.c")
    assert report.kind == "nsys" and report.report_file == tmp_path / "run" / "report.nsys-rep"
    assert report.report_file.is_file() and (tmp_path / "run" / "report.sqlite").is_file()
    assert report.notes == (), report.notes  # the export and the stats went through
    assert report.trace is not None and report.trace.empty
    assert report.message == NO_GPU_ACTIVITY and not (report.summary is not None and report.summary.kernel_count > 0)
    # nsys ran each report and skipped it: a host run has no GPU data
    assert report.tables == ()
    assert {f.name for f in (tmp_path / "run").glob("stats_*.csv")} == {
        f"stats_{name}.csv" for name in nsys_mod.report_names(
            proc.run([nsys, "stats", "--help-reports"], what="probe", timeout=60).output).values()}
    assert NO_GPU_ACTIVITY in str(ProfileView(report))


def test_stats_of_real_nsys_on_an_export_with_gpu_operations(nsys: str, h200_export: Path,
                                                             tmp_path: Path) -> None:
    names = nsys_mod.report_names(proc.run([nsys, "stats", "--help-reports"], what="probe",
                                           timeout=60).output)
    r = proc.run(nsys_mod.stats_argv(nsys, h200_export, names, tmp_path), what="profile stats",
                 timeout=300, spec=proc.ProcSpec(cwd=tmp_path))
    assert r.ok, r.output
    tables = nsys_mod.read_stats(tmp_path, names)
    assert set(tables) == {"kernels", "copy_time", "copy_size"}  # no OpenACC events: gcc's
    from_csv = nsys_mod.summary_from_tables(tables)
    from_trace = summarize(_h200())
    assert from_csv is not None
    assert (from_csv.kernel_ns, from_csv.h2d.total_ns, from_csv.d2h.total_ns) == (
        from_trace.kernel_ns, from_trace.h2d.total_ns, from_trace.d2h.total_ns)


def test_idrrun_run_profile_with_real_nsys_shows_one_line(nsys: str, tmp_path: Path) -> None:
    (tmp_path / "p.c").write_text(HOST_PROGRAM)
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "run", "-a", "--profile",
                        "--profiler", "nsys", "p.c"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, PYTHONPATH=PYTHONPATH))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sum = 499500" in r.stdout and nsys_mod.WRITING.strip() in r.stdout
    assert "\r" not in r.stdout and "[1/1]" not in r.stdout and "Generated:" not in r.stdout
    assert "GPU profile (Nsight Systems)" in r.stdout and NO_GPU_ACTIVITY in r.stdout


def test_real_nsys_stops_the_program_at_its_timeout(nsys: str, tmp_path: Path) -> None:
    """20 s asked under nsys, 80 s run, before: the profiler's grace was the program's too."""
    import time

    (tmp_path / "sleeper.c").write_text('#include <stdio.h>\n#include <unistd.h>\n'
                                        'int main(void) { puts("started"); fflush(stdout); '
                                        'for (;;) sleep(1); }\n')
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "run", "--profile", "--profiler", "nsys",
                        "--timeout", "3", "sleeper.c"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, PYTHONPATH=PYTHONPATH))
    took = time.monotonic() - started
    assert r.returncode == 124, r.stdout + r.stderr
    assert "run failed: timed out after 3 s" in r.stderr and "started" in r.stdout
    assert took < 40, took  # nsys starts and writes its report in a few seconds; the grace is 60
    assert "GPU profile (Nsight Systems)" in r.stdout  # the report was written and read


def test_nsys_failing_before_the_program_is_not_the_programs_failure(nsys: str, tmp_path: Path) -> None:
    """Real nsys that cannot start (a TMPDIR it cannot write, as a full disk does) ends with
    exit code 1 before the program runs: once a FAIL of "the program ended with exit code 1"
    and every output check, now a run that could not start, its checks not judged; a program
    that fails under nsys still fails, and no launch mark is left in the profile folder."""
    from idrrun.profile.running import NOT_LAUNCHED
    from idrrun.profile.stages import LAUNCHED_PREFIX

    (tmp_path / "p.c").write_text(HOST_PROGRAM)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, TMPDIR=str(tmp_path / "no-such-folder"))
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "run", "-a", "--profile",
                        "--profiler", "nsys", "p.c"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 3, r.stdout + r.stderr
    said = NOT_LAUNCHED.format(how="exit code 1")
    assert f"run failed: could not start: {said}" in r.stderr, r.stdout + r.stderr
    assert "sum = " not in r.stdout
    # The program itself failing under nsys is the program's failure, as before.
    (tmp_path / "q.c").write_text('#include <stdio.h>\nint main(void){puts("ran");return 3;}\n')
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "run", "--profile", "--profiler", "nsys",
                        "q.c"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=PYTHONPATH))
    assert r.returncode == 3 and "run failed: exit code 3" in r.stderr, r.stdout + r.stderr
    assert "ran" in r.stdout
    assert not list((tmp_path / "idrrun-profile").rglob(LAUNCHED_PREFIX + "*"))


def test_graded_under_nsys_in_the_box_nsys_failing_is_an_error_row(nsys: str, tmp_path: Path) -> None:
    """A notebook's `--profile` line graded in the box under real nsys: a program that exits 3
    fails as its own doing (the launch mark is made and read in the box's folder); nsys that
    cannot start (the teacher's profiler command with an option it does not know) makes an
    error row, "not graded", never the student's fail."""
    import nbformat

    from idrrun.profile.running import NOT_LAUNCHED

    solution = (ROOT / "examples" / "C" / "intro_saxpy_solution.c").read_text()
    assert "return 0;" in solution
    for name, text in (("ann", solution), ("cid", solution.replace("return 0;", "return 3;"))):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("%%idrrun -a --profile\n" + text)]
        nbformat.write(nb, str(tmp_path / f"{name}.ipynb"))
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ROOT / "examples"))

    def graded(*extra: str) -> dict[str, dict[str, object]]:
        r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "intro_saxpy", "ann.ipynb",
                            "cid.ipynb", "--json", "--fresh", *extra], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600, env=env)
        assert r.stdout.strip(), r.stderr
        rows = json.loads(r.stdout)["rows"]
        return {str(row["student"]): row for row in rows}

    not_launched = "not graded: the run could not start: " + NOT_LAUNCHED.split("(")[0]
    rows = graded()
    if any(str(row["reasons"]).startswith(not_launched) for row in rows.values()):
        # Real nsys 2022.4 now and then ends before the program with other nsys sessions
        # beside it, and the pipeline starts it once more: twice in a row, the row is the
        # error it must be, and the class is graded again, as a teacher would.
        print("nsys failed before the program; graded again:", {k: r["reasons"] for k, r in rows.items()})
        rows = graded()
    assert rows["ann"]["verdict"] in ("pass", "incomplete"), rows["ann"]
    assert rows["cid"]["verdict"] == "fail" and "exit code 3" in str(rows["cid"]["reasons"]), rows["cid"]
    assert not str(rows["cid"]["sandbox"]).startswith("none"), rows["cid"]
    (tmp_path / "teacher.toml").write_text('[profiler]\ncommand = ["nsys", "profile", "--no-such-option"]\n')
    rows = graded("--config", "teacher.toml")
    for row in rows.values():
        assert row["verdict"] == "error", row
        assert row["reasons"] == "not graded: the run could not start: " + \
            NOT_LAUNCHED.format(how="exit code 1"), row["reasons"]


@pytest.mark.parametrize("level", ["namespaces", "uid"])
def test_a_graded_report_is_exported_in_a_box_with_real_nsys(
        nsys: str, host_program: Path, tmp_path: Path, level: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """The report a graded run's box wrote is exported and summed up by nsys inside a box of
    its own (issue 33, part 7): the run's level and uid, a fresh folder of the room; what it
    wrote comes out through the boundary, counted against the row's ledger."""
    import logging
    import tempfile

    from idrrun.model import Limits, SandboxSupport
    from idrrun.profile.model import ExportBox
    from idrrun.run import boundary, isolation, sandbox
    from idrrun.run.allowance import Allowance, Ledger

    support = isolation.sandbox_support()
    if level == "namespaces" and support.level != "namespaces":
        pytest.skip("this machine cannot make namespaces (bubblewrap)")
    if level == "uid":
        if os.geteuid() != 0:
            pytest.skip("a box of its own uid needs root")
        support = SandboxSupport("uid", None, True, "test")
    p = plan("nsys", tmp_path / "run", tmp_path / "cache")
    result, _ = _under_real_nsys(p, host_program, tmp_path)
    assert result.ok, result.output
    base = Path(tempfile.mkdtemp(prefix="idrrun-export-", dir="/tmp"))  # passable by all
    os.chmod(base, 0o711)
    try:
        room = boundary.own_dir(base / "room", 0o711)
        uid = sandbox.fresh_uid() if os.geteuid() == 0 else -1
        boxed = ExportBox(room=room, support=support, uid=uid,
                          protections=isolation.probe(tmp_path / "cache"), limits=Limits(),
                          environ=dict(os.environ))
        with caplog.at_level(logging.INFO):
            report = collect(p, timeout=300, source_name="host_acc.c", boxed=boxed,
                             ledger=Ledger())
        assert report.kind == "nsys" and report.notes == (), report.notes
        assert report.trace is not None and report.message == NO_GPU_ACTIVITY
        assert (tmp_path / "run" / "report.sqlite").is_file()
        assert os.stat(tmp_path / "run" / "report.sqlite").st_uid == os.geteuid()  # our copy
        ran = [r.getMessage() for r in caplog.records]
        boxed_runs = [m for m in ran if m.startswith(("profile export:", "profile stats:"))
                      and (" export " in m or " --format " in m)]
        assert len(boxed_runs) == 2, ran
        for m in boxed_runs:
            assert ("bwrap" in m if level == "namespaces" else f"--uid={uid}" in m), m
        assert list(room.iterdir()) in ([], [room / "tools"])  # the export's folder removed
        # past the row's allowance nothing of nsys's output is used, and the ledger says why
        small = Ledger(Allowance(bytes=1024))
        refused = collect(p, timeout=300, source_name="host_acc.c", boxed=boxed, ledger=small)
        assert refused.trace is None and "past the 0 MiB of evidence" in refused.message
    finally:
        boundary.remove(base)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="graded boxes of their own uid need root")
def test_a_graded_line_keeping_real_nsys_is_graded_beside_an_honest_classmate(
        nsys: str, tmp_path: Path) -> None:
    """`--profiler nsys` kept on a graded line: its report exported in a box, the row graded
    as its classmate's is."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import evidence_cost

    course = tmp_path / "course"
    shutil.copytree(evidence_cost.COURSE, course)
    solution = (evidence_cost.COURSE / "C" / "secret_sum_solution.c").read_text()
    (tmp_path / "class" / "nina").mkdir(parents=True)
    (tmp_path / "class" / "nina" / "nina.ipynb").write_text(evidence_cost._notebook(
        solution, "%%idrrun --profiler nsys --check secret_sum"))
    (tmp_path / "class" / "hugo").mkdir()
    (tmp_path / "class" / "hugo" / "hugo.c").write_text(solution)
    rows, _, _ = evidence_cost.grade("secret_sum", [tmp_path / "class" / "hugo" / "hugo.c",
                                                    tmp_path / "class" / "nina" / "nina.ipynb"],
                                     tmp_path, course)
    assert rows == {"hugo": ("pass", ""), "nina": ("pass", "")}


def test_a_trace_for_the_checks_only_skips_nsys_stats(nsys: str, host_program: Path,
                                                      tmp_path: Path) -> None:
    """Where nsys is configured, a --check's quiet trace (drawn=False) is exported and read for
    the checks' figures; nsys stats (tables for a reader) is not run."""
    p = plan("nsys", tmp_path / "run", tmp_path / "cache", drawn=False)
    result, _ = _under_real_nsys(p, host_program, tmp_path)
    assert result.ok, result.output
    report = collect(p, timeout=300, source_name="host_acc.c")
    assert report.kind == "nsys" and report.trace is not None and report.trace.empty
    assert report.message == NO_GPU_ACTIVITY and report.timeline_png is None
    assert not list((tmp_path / "run").glob("stats_*.csv"))
