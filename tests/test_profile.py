"""The profiler (idrrun/profile): the CUPTI tracer built here, the trace parser, summary and
timeline on a recorded trace, nsys through a fake (tests named *_with_fake_nsys), and a real
host OpenACC run under the tracer (no GPU here: it must say so, not crash)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from idrrun.profile import nsys as nsys_mod
from idrrun.profile import perfetto, timeline, tracefile, tracer
from idrrun.profile.model import (HTOD, NO_GPU_ACTIVITY, Copy, Device, Kernel, Memset, ProfilePlan,
                                  StreamQueue, Sync, Trace)
from idrrun.profile.render import ProfileView
from idrrun.profile.stages import LAUNCH_MARK, LAUNCHED_PREFIX, LAUNCHED_VAR, collect, plan
from idrrun.profile.summary import summarize, trace_values, where
from idrrun.profile.tracefile import read_trace
from idrrun.profile.tracer import find_cupti
from idrrun.files import temp_beside
from idrrun.run import proc

import perfetto_oracle

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FAKES = ROOT / "tests" / "fakes"
SYNTHETIC = DATA / "async_trace_synthetic.jsonl"
HAS_CUDA = (Path("/usr/local/cuda/include/cupti.h").is_file()
            or os.environ.get("CUDA_HOME") is not None)
needs_cupti = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA toolkit with CUPTI here")



def _labels(trace: Trace) -> list[str]:
    """The timeline's rows, top to bottom."""
    return [r.name for r in timeline.rows(trace)]


def _size(trace: Trace) -> tuple[int, int]:
    return timeline.layout(trace).size


HOST_PROGRAM = (DATA / "acc_sum.c").read_text()  # sum = 499500

# Stands in for the CUDA driver: loads the tracer and calls InitializeInjection, as the driver
# does when CUDA_INJECTION64_PATH is set. Here there is no driver at all.
INJECTOR = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
    if (!init) return 3;
    printf("init=%d\n", init());
    return 0;
}
"""


def _path_without(*names: str) -> str:
    """PATH with the folders that hold any of these programs left out."""
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not any((Path(d) / n).exists() for n in names)]
    return os.pathsep.join(keep)


def _gcc(source: str, out: Path, *flags: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    result = proc.run(["gcc", *flags, "-o", str(out), str(src)], what="compile", timeout=120)
    assert result.ok, result.output
    return out


@pytest.fixture(scope="module")
def tracer_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HAS_CUDA:
        pytest.skip("no CUDA toolkit with CUPTI here")
    lib, why = tracer.build_tracer(tmp_path_factory.mktemp("cache"))
    assert lib is not None, why
    return lib


# The host program has no offloaded code: on a machine with a GPU, libgomp would pick the GPU
# for its regions ("target function wasn't mapped") unless told to stay on the host.
ON_THE_HOST = {"ACC_DEVICE_TYPE": "host"}


@pytest.fixture(scope="module")
def host_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _gcc(HOST_PROGRAM, tmp_path_factory.mktemp("host") / "host_acc",
                "-O1", "-fopenacc", "-foffload=disable")


def _synthetic_run(tmp_path: Path, text: str | None = None) -> ProfilePlan:
    run = tmp_path / "run"
    run.mkdir()
    trace = run / "trace.jsonl"
    trace.write_text(SYNTHETIC.read_text() if text is None else text)
    return ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=run, output=trace)


# ---------------------------------------------------------------------------------------
# The tracer library


@needs_cupti
def test_tracer_builds_here_and_exports_initialize_injection(tracer_lib: Path) -> None:
    assert tracer_lib.is_file() and tracer_lib.suffix == ".so"
    symbols = proc.run(["nm", "-D", "--defined-only", str(tracer_lib)], what="probe", timeout=30)
    assert symbols.ok, symbols.output
    assert any(line.split()[-1] == "InitializeInjection" and line.split()[-2] == "T"
               for line in symbols.output.splitlines() if line.strip())


@needs_cupti
def test_tracer_is_built_once_per_source_and_cupti(tmp_path: Path) -> None:
    first, _ = tracer.build_tracer(tmp_path)
    assert first is not None
    stamp = first.stat().st_mtime_ns
    second, _ = tracer.build_tracer(tmp_path)
    assert second == first and first.stat().st_mtime_ns == stamp
    cupti = find_cupti()
    assert not isinstance(cupti, str)
    assert first.name == f"idrrun-tracer-{tracer.tracer_key(cupti)}.so"


def test_files_written_then_renamed_have_a_name_per_thread(tmp_path: Path) -> None:
    # The threads of one course check built the tracer at once under one temporary name: one
    # thread's rename could take the file another was still writing (a GPU row came out
    # "incomplete" under course check -j 4, its tracer unloadable).
    target = tmp_path / "tool.so"
    together = threading.Barrier(4)  # four threads at once, as a course check's workers

    def name(_: int) -> Path:
        together.wait(timeout=10)
        return temp_beside(target)

    with ThreadPoolExecutor(4) as pool:
        names = set(pool.map(name, range(4)))
    assert len(names) == 4 and all(n.parent == tmp_path and n.name.startswith(".tool.so.") for n in names)


@needs_cupti
def test_tracer_built_by_four_threads_at_once_is_whole(tmp_path: Path) -> None:
    with ThreadPoolExecutor(4) as pool:
        built = list(pool.map(lambda _: tracer.build_tracer(tmp_path), range(4)))
    paths = {lib for lib, _ in built}
    assert len(paths) == 1 and None not in paths, built
    lib = paths.pop()
    assert lib is not None
    symbols = proc.capture(["nm", "-D", "--defined-only", str(lib)], what="nm")
    assert symbols.ok and "InitializeInjection" in symbols.output
    assert not [p for p in lib.parent.iterdir() if p.name.startswith(".")]  # no leftovers


@needs_cupti
def test_plan_builtin_points_cuda_injection_at_the_tracer(tmp_path: Path, tracer_lib: Path) -> None:
    cache = tracer_lib.parent.parent
    p = plan("builtin", tmp_path / "run", cache)
    assert p.kind == "builtin" and p.argv_prefix == ()
    assert p.env["CUDA_INJECTION64_PATH"] == str(tracer_lib)
    assert p.env["IDRRUN_TRACE_FILE"] == str(tmp_path / "run" / "trace.jsonl")
    assert p.output == tmp_path / "run" / "trace.jsonl"


@needs_cupti
def test_plan_auto_without_nsys_uses_the_builtin_tracer(tmp_path: Path, tracer_lib: Path) -> None:
    env = {**os.environ, "PATH": _path_without("nsys")}
    p = plan("auto", tmp_path / "run", tracer_lib.parent.parent, environ=env)
    assert p.kind == "builtin"
    assert any("built-in" in n for n in p.notes)


def test_plan_without_cupti_gives_none_with_what_to_install(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from idrrun.profile import tracer
    monkeypatch.setattr(tracer, "_from_wheels", lambda paths: None)  # idrrun[gpu] not installed
    empty = tmp_path / "empty-cuda"
    empty.mkdir()
    env = {"CUDA_HOME": str(empty), "PATH": _path_without("nvcc", "nsys")}
    p = plan("builtin", tmp_path / "run", tmp_path / "cache", environ=env)
    assert p.kind == "none" and p.env == {} and p.argv_prefix == ()
    assert "CUPTI" in p.notes[0] and "install" in p.notes[0] and str(empty) in p.notes[0]
    report = collect(p)
    assert report.kind == "none" and report.message.startswith("no GPU profile:")


def test_find_cupti_through_an_nvcc_wrapper_script(tmp_path: Path) -> None:
    cuda = tmp_path / "cuda-13.0"
    (cuda / "include").mkdir(parents=True)
    (cuda / "include" / "cupti.h").write_text("")
    (cuda / "lib64").mkdir()
    (cuda / "lib64" / "libcupti.so").write_text("")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvcc").write_text(f"#!/bin/sh\nexec {cuda}/bin/nvcc \"$@\"\n")
    (bindir / "nvcc").chmod(0o755)
    found = find_cupti({"PATH": str(bindir)})
    assert not isinstance(found, str)
    assert found.root == cuda and found.include == cuda / "include" and found.lib == cuda / "lib64"


def test_find_cupti_in_an_hpc_sdk_cuda_folder(tmp_path: Path) -> None:
    cuda = tmp_path / "Linux_x86_64" / "24.3" / "cuda"
    for version in ("11.8", "12.3"):
        (cuda / version / "extras" / "CUPTI" / "include").mkdir(parents=True)
        (cuda / version / "extras" / "CUPTI" / "include" / "cupti.h").write_text("")
        (cuda / version / "extras" / "CUPTI" / "lib64").mkdir(parents=True)
        (cuda / version / "extras" / "CUPTI" / "lib64" / "libcupti.so").write_text("")
    found = find_cupti({"CUDA_HOME": str(cuda), "PATH": ""})
    assert not isinstance(found, str)
    assert found.root == cuda / "12.3"
    assert found.lib == cuda / "12.3" / "extras" / "CUPTI" / "lib64"


@needs_cupti
def test_injected_tracer_does_not_crash_or_hang_without_a_gpu(tmp_path: Path, tracer_lib: Path) -> None:
    injector = _gcc(INJECTOR, tmp_path / "injector", "-O1", "-ldl")
    run = tmp_path / "run"
    run.mkdir()
    trace = run / "trace.jsonl"
    result = proc.run([str(injector), str(tracer_lib)], what="run", timeout=30,
                      spec=proc.ProcSpec(env={**os.environ, "IDRRUN_TRACE_FILE": str(trace)}))
    assert result.ok and "init=1" in result.output, result.output
    assert result.seconds < 10
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert records[0]["type"] == "header" and records[0]["format"] == "idrrun-trace"
    assert records[-1]["type"] == "end"
    report = collect(ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=run, output=trace))
    assert report.message == NO_GPU_ACTIVITY
    assert report.timeline_png is None
    if any(r["type"] == "error" for r in records):
        assert any(n.startswith("the tracer could not start: cupti") for n in report.notes)


@needs_cupti
def test_host_openacc_run_under_the_tracer_says_no_gpu_activity(
        tmp_path: Path, tracer_lib: Path, host_program: Path) -> None:
    p = plan("builtin", tmp_path / "run", tracer_lib.parent.parent)
    result = proc.run([*p.argv_prefix, str(host_program)], what="run", timeout=60,
                      spec=proc.ProcSpec(cwd=tmp_path, env={**os.environ, **p.env, **ON_THE_HOST}))
    assert result.ok and "sum = 499500" in result.output, result.output
    report = collect(p, source_name="cell[1]")
    assert report.message == NO_GPU_ACTIVITY
    assert (report.summary is None or report.summary.kernel_count == 0) and report.timeline_png is None
    assert NO_GPU_ACTIVITY in str(ProfileView(report)) and NO_GPU_ACTIVITY in ProfileView(report)._repr_html_()
    assert trace_values(report.trace)["ran_on_gpu"] == 0.0


# ---------------------------------------------------------------------------------------
# Trace file, summary, values, timeline (on the synthetic async matmul trace)


def test_parse_the_recorded_trace() -> None:
    trace = read_trace(SYNTHETIC)
    assert trace is not None and trace.complete and trace.skipped == 0 and not trace.errors
    assert (len(trace.kernels), len(trace.copies), len(trace.memsets), len(trace.syncs)) == (4, 3, 1, 2)
    k = min(trace.kernels, key=lambda k: k.start)
    assert (k.name, k.stream, k.grid, k.block, k.process) == ("init_mat$_omp_fn$0", 15, (2000, 1, 1),
                                                              (32, 1, 1), 4242)
    pinned = [c for c in trace.copies if c.src == "pinned"]
    assert len(pinned) == 1 and pinned[0].host_memory == "pinned" and pinned[0].asynchronous
    assert {s.kind for s in trace.syncs} == {"stream", "context"}


def test_summary_numbers_are_exact_on_the_recorded_trace() -> None:
    trace = read_trace(SYNTHETIC)
    assert trace is not None
    s = summarize(trace)
    assert (s.kernel_ns, s.kernel_count) == (21_500_000, 4)
    assert (s.h2d.count, s.h2d.bytes, s.h2d.total_ns) == (2, 64_000_000, 4_800_000)
    assert s.h2d.host_memory == "pageable and pinned"
    assert s.h2d.gb_per_s == pytest.approx(13.3333333)
    assert (s.d2h.count, s.d2h.bytes, s.d2h.total_ns, s.d2h.gb_per_s) == (1, 32_000_000, 3_200_000, 10.0)
    assert (s.memset_count, s.memset_bytes, s.memset_ns) == (1, 4096, 10_000)
    assert (s.sync_count, s.sync_ns) == (2, 3_460_000)
    assert (s.span_ns, s.busy_ns, s.queues) == (27_300_000, 26_900_000, 4)
    top = s.top_kernels
    assert [(k.name, k.calls, k.total_ns) for k in top] == [("main$_omp_fn$0", 1, 20_000_000),
                                                            ("init_mat$_omp_fn$0", 3, 1_500_000)]
    assert top[0].share == pytest.approx(20 / 21.5)
    assert top[0].where == "main, gcc's region 0"


def test_trace_values_for_the_exercise_checks() -> None:
    trace = read_trace(SYNTHETIC)
    values = trace_values(trace, iterations=2)
    busy = values.pop("gpu_busy")
    assert busy == pytest.approx(26.9 / 27.3)  # busy_ns / span_ns of the summary test below
    assert values == {"ran_on_gpu": 1.0, "kernels": 4.0, "queues": 4.0, "bytes_h2d": 64e6,
                      "bytes_d2h": 32e6, "bytes_moved": 96e6, "kernel_ns": 21.5e6,
                      "copy_ns": 8e6, "bytes_per_iteration": 48e6,
                      "gpu_span_s": pytest.approx(27.3e-3),  # the span of the busy figure
                      "gpu_span_at_least_s": pytest.approx(27.3e-3)}  # (no tick: the same)
    assert "bytes_per_iteration" not in trace_values(trace)
    assert trace_values(None) == {"ran_on_gpu": 0.0, "kernels": 0.0, "queues": 0.0, "bytes_h2d": 0.0,
                                  "bytes_d2h": 0.0, "bytes_moved": 0.0, "kernel_ns": 0.0,
                                  "copy_ns": 0.0, "gpu_span_s": 0.0, "gpu_span_at_least_s": 0.0,
                                  "gpu_busy": 0.0}


def test_a_cut_last_line_is_accepted(tmp_path: Path) -> None:
    lines = SYNTHETIC.read_text().splitlines(keepends=True)[:-1]  # no "end" record: killed
    cut = "".join(lines) + '{"type":"kernel","start":5030000000,"end":503'
    report = collect(_synthetic_run(tmp_path, cut))
    assert report.trace is not None and not report.trace.complete and report.trace.skipped == 1
    assert len(report.trace.kernels) == 4 and report.summary is not None
    assert report.summary.kernel_ns == 21_500_000
    assert any("the trace stops early" in n for n in report.notes)
    assert report.timeline_png is not None and report.timeline_png.is_file()


def test_timeline_png_rows_size_and_colours(tmp_path: Path) -> None:
    from PIL import Image

    report = collect(_synthetic_run(tmp_path))
    assert report.timeline_png == tmp_path / "run" / "timeline.png"
    assert report.trace is not None
    assert list(_labels(report.trace)) == ["stream 13", "stream 14", "stream 15",
                                                       "stream 7", "host waits"]
    with Image.open(report.timeline_png) as image:
        assert image.format == "PNG"
        assert image.size == _size(report.trace)
        colours = {c for _, c in image.convert("RGB").getcolors(maxcolors=1 << 16) or []}
    for kind in ("kernel", "h2d", "d2h", "memset", "sync"):
        assert timeline.COLOURS[kind] in colours, kind
    assert timeline.IDLE in colours
    assert report.trace_json == tmp_path / "run" / "trace.json" and report.trace_json.is_file()


def test_report_text_and_html(tmp_path: Path) -> None:
    report = collect(_synthetic_run(tmp_path), source_name="cell[2]")
    text = str(ProfileView(report))
    assert text.splitlines()[0].startswith("GPU profile (built-in CUPTI tracer): 4 queues, 27.300 ms")
    assert "host → device" in text and "64.0 MB" in text and "13.3 GB/s (pageable and pinned)" in text
    assert "device → host" in text and "10.0 GB/s (pageable)" in text
    assert "main$_omp_fn$0" in text and "main, gcc's region 0" in text
    assert "the host waited for the GPU 3.460 ms in 2 synchronisations" in text
    assert f"report: {tmp_path / 'run' / 'trace.jsonl'}" in text
    page = ProfileView(report)._repr_html_()
    assert "data:image/png;base64," in page and "main$_omp_fn$0" in page
    assert str(tmp_path / "run" / "trace.jsonl") in page


@pytest.mark.parametrize(("name", "source", "expected"), [
    ("main_42_gpu", "", "main, line 42"),
    ("main_42_gpu__red", "cell[3]", "main, line 42 of cell[3]"),
    ("laplace_17_gpu", "", "laplace, line 17"),
    ("nvkernel_advance_w_F1L1308_2", "", "advance_w, line 1308"),
    ("main$_omp_fn$0", "", "main, gcc's region 0"),
    ("MAIN__$_omp_fn$1", "", "the main program, gcc's region 1"),
    ("__laplace_mod_MOD_step$_omp_fn$0", "", "step (module laplace_mod), gcc's region 0"),
    ("_Z6kernelPdi", "", ""),
])
def test_kernel_names_map_back_to_the_source(name: str, source: str, expected: str) -> None:
    assert where(name, source) == expected


# ---------------------------------------------------------------------------------------
# nsys (fake)


@pytest.fixture
def fake_nsys_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "nsys-argv.jsonl"
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    for var in ("FAKE_NSYS_OLD", "FAKE_NSYS_SKIP", "FAKE_NSYS_DATA", "FAKE_NSYS_EXPORT_FAILS",
                "FAKE_NSYS_UNREACHABLE"):
        monkeypatch.delenv(var, raising=False)
    return log


def _run_under(p: ProfilePlan, program: Path) -> None:
    result = proc.run([*p.argv_prefix, str(program)], what="run", timeout=60,
                      spec=proc.ProcSpec(cwd=p.run_dir.parent,
                                         env={**os.environ, **p.env, **ON_THE_HOST}))
    assert result.ok and "sum = 499500" in result.output, result.output


def _logged(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_nsys_command_line_with_fake_nsys(tmp_path: Path, fake_nsys_env: Path,
                                          host_program: Path) -> None:
    run = tmp_path / "run"
    p = plan("auto", run, tmp_path / "cache")
    # Between nsys and the program, the launch mark (session.LAUNCH_MARK): its own name per run.
    assert p.kind == "nsys" and p.launched.startswith(LAUNCHED_PREFIX)
    assert p.env == {LAUNCHED_VAR: str(run / p.launched)}
    assert p.argv_prefix == (str(FAKES / "nsys"), "profile", "--trace=openacc,cuda,osrt,nvtx",
                             "--sample=none", "--cpuctxsw=none", "--stats=false",
                             "-o", str(run / "report"), "--force-overwrite=true", *LAUNCH_MARK)
    _run_under(p, host_program)
    assert (run / p.launched).is_file()  # the launch left its mark; stopped() takes it away
    report = collect(p, source_name="cell[1]")
    calls = _logged(fake_nsys_env)
    assert calls[0][1:] == [*p.argv_prefix[1:], str(host_program)]
    assert calls[1][1:] == ["export", "--type", "sqlite", "--force-overwrite=true",
                            "-o", str(run / "report.sqlite"), str(run / "report.nsys-rep")]
    assert calls[2][1:] == ["stats", "--help-reports"]
    assert calls[3][1:] == ["stats", "--format", "csv", "--output", str(run / "stats"), "--report",
                            "cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,openacc_sum",
                            str(run / "report.sqlite")]
    assert report.kind == "nsys" and report.report_file == run / "report.nsys-rep"
    assert report.report_file.is_file()
    assert [t.report for t in report.tables] == ["cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum",
                                                 "cuda_gpu_mem_size_sum", "openacc_sum"]
    kern = report.tables[0]
    assert kern.header[-1] == "Name" and kern.rows[0][-1] == "main$_omp_fn$0"


@pytest.mark.parametrize("failures", [1, 2])
def test_nsys_that_cannot_reach_its_daemon_is_started_once_more_with_fake_nsys(
        tmp_path: Path, fake_nsys_env: Path, monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
    """nsys 2022.4 now and then fails before the program ("Local Endpoint is not available",
    "End of file") when other sessions run beside it (4 of 52 loaded runs of the real-nsys
    tests): the run is started once more, said in a note; a second failure is the run's (it
    could not start), and nsys is not started a third time."""
    from conftest import PYTHONPATH

    counter = tmp_path / "unreachable"
    counter.write_text(str(failures))
    monkeypatch.setenv("FAKE_NSYS_UNREACHABLE", str(counter))
    (tmp_path / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("it ran"); return 0; }\n')
    r = subprocess.run([sys.executable, "-m", "idrrun", "run", "-c", "gcc", "--profile", "--profiler",
                        "nsys", "hello.c"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": PYTHONPATH})
    profiled = [c for c in _logged(fake_nsys_env) if c[1] == "profile"]
    assert len(profiled) == 2, profiled
    assert "Local Endpoint is not available.): started once more" in r.stdout + r.stderr
    if failures == 1:
        assert r.returncode == 0 and "it ran" in r.stdout, r.stdout + r.stderr
    else:
        assert r.returncode != 0 and "before it started the program" in r.stderr, r.stdout + r.stderr
        assert "it ran" not in r.stdout


def test_nsys_is_not_started_again_where_the_kernel_did_not_watch_its_launch_mark_with_fake_nsys(
        tmp_path: Path, fake_nsys_env: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without the kernel's watch of the profile's folder, a launch mark not found is a name the
    program could have removed after it ran: nsys failing before the program is then the run's
    failure, never a second start (which would find what a first run left)."""
    from idrrun import cli
    from idrrun.run import boundary

    counter = tmp_path / "unreachable"
    counter.write_text("1")
    monkeypatch.setenv("FAKE_NSYS_UNREACHABLE", str(counter))
    monkeypatch.setenv("IDRRUN_RESIDENT", "0")
    monkeypatch.setattr(boundary, "watch_made", lambda folder: None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("it ran"); return 0; }\n')
    code = cli.main(["run", "-c", "gcc", "--profile", "--profiler", "nsys", "hello.c"])
    out = capsys.readouterr()
    assert code != 0 and "before it started the program" in out.err, out
    assert "started once more" not in out.out + out.err and "it ran" not in out.out
    assert len([c for c in _logged(fake_nsys_env) if c[1] == "profile"]) == 1


def test_a_program_saying_nsys_daemon_words_is_not_started_again_with_fake_nsys(
        tmp_path: Path, fake_nsys_env: Path) -> None:
    """A program that nsys started (its launch mark made) and that prints nsys's message and
    fails is the program's failure: it is run once."""
    from conftest import PYTHONPATH

    (tmp_path / "liar.c").write_text('#include <stdio.h>\nint main(void) { '
                                     'puts("Local Endpoint is not available."); return 1; }\n')
    r = subprocess.run([sys.executable, "-m", "idrrun", "run", "-c", "gcc", "--profile", "--profiler",
                        "nsys", "liar.c"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": PYTHONPATH})
    assert r.returncode != 0 and "exit code 1" in r.stderr, r.stdout + r.stderr
    assert len([c for c in _logged(fake_nsys_env) if c[1] == "profile"]) == 1
    assert "started once more" not in r.stdout + r.stderr


SLEEPER = r"""#include <stdio.h>
#include <unistd.h>
int main(void) { puts("started"); fflush(stdout); for (;;) sleep(1); }
"""


def test_nsys_stops_the_program_at_its_timeout_with_fake_nsys(tmp_path: Path,
                                                              fake_nsys_env: Path) -> None:
    # A 2 s --timeout under nsys: nsys stops the program at 2 s (--duration, --kill) and then
    # writes its report; its 60 s of grace are for that only. Before, the program itself ran
    # until the grace was over too (20 s asked, 80 s run).
    from conftest import PYTHONPATH

    (tmp_path / "sleeper.c").write_text(SLEEPER)
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "idrrun", "run", "-c", "gcc", "--profile",
                        "--profiler", "nsys", "--timeout", "2", "sleeper.c"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": PYTHONPATH})
    took = time.monotonic() - started
    assert r.returncode == 124, r.stdout + r.stderr
    assert "run failed: timed out after 2 s" in r.stderr and "started" in r.stdout
    assert took < 30, took
    [profile_call] = [c for c in _logged(fake_nsys_env) if c[1] == "profile"]
    assert "--duration=2" in profile_call and "--kill=sigkill" in profile_call
    assert plan("nsys", tmp_path / "run", tmp_path / "cache", timeout=2.5).duration == 3
    # A configured command cannot take the program's time limit away
    p = plan("nsys", tmp_path / "run", tmp_path / "cache", ("nsys", "profile", "-d", "999",
                                                             "--kill=none"), timeout=5)
    assert "--duration=5" in p.argv_prefix and "--kill=sigkill" in p.argv_prefix
    assert "999" not in p.argv_prefix and "--kill=none" not in p.argv_prefix


def test_nsys_tables_and_summary_with_fake_nsys(tmp_path: Path, fake_nsys_env: Path,
                                                host_program: Path) -> None:
    p = plan("nsys", tmp_path / "run", tmp_path / "cache")
    _run_under(p, host_program)
    report = collect(p)
    s = report.summary
    assert s is not None and report.trace is not None
    assert (s.kernel_count, s.kernel_ns) == (2, 700_000)
    assert (s.h2d.count, s.h2d.bytes, s.h2d.total_ns, s.h2d.gb_per_s) == (2, 256_000_000, 25_600_000, 10.0)
    assert s.h2d.host_memory == "pageable"
    assert (s.d2h.count, s.d2h.bytes, s.d2h.total_ns) == (2, 256_000_000, 24_000_000)
    assert (s.memset_count, s.memset_bytes, s.memset_ns) == (1, 4000, 5000)
    assert (s.span_ns, s.queues) == (50_905_000, 1)
    assert [k.name for k in s.top_kernels] == ["main$_omp_fn$0", "main$_omp_fn$1"]
    assert report.timeline_png is not None and report.timeline_png.is_file()
    text = str(ProfileView(report))
    assert "GPU profile (Nsight Systems)" in text and "OpenACC events (openacc_sum):" in text
    assert "Enter Data@data_laplace_exercise.c:52" in text
    assert f"report: {tmp_path / 'run' / 'report.nsys-rep'}" in text
    assert "<table>" in ProfileView(report)._repr_html_()


def test_nsys_summary_from_tables_when_the_export_fails_with_fake_nsys(
        tmp_path: Path, fake_nsys_env: Path, host_program: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NSYS_EXPORT_FAILS", "1")
    p = plan("nsys", tmp_path / "run", tmp_path / "cache")
    _run_under(p, host_program)
    report = collect(p)
    # nsys stats then exports the report itself
    assert _logged(fake_nsys_env)[-1][1:3] == ["stats", "--force-export=true"]
    assert any(n.startswith("nsys export exit code 1: Error: the export failed")
               for n in report.notes), report.notes
    s = report.summary
    assert s is not None and report.trace is None and report.timeline_png is None
    assert (s.kernel_count, s.kernel_ns) == (2, 700_000)
    assert (s.h2d.count, s.h2d.bytes, s.h2d.total_ns) == (2, 256_000_000, 25_600_000)
    assert (s.d2h.count, s.d2h.bytes, s.d2h.total_ns) == (2, 256_000_000, 24_000_000)
    assert (s.memset_count, s.memset_bytes) == (1, 4000)


def test_nsys_old_report_names_with_fake_nsys(tmp_path: Path, fake_nsys_env: Path,
                                              host_program: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NSYS_OLD", "1")
    p = plan("auto", tmp_path / "run", tmp_path / "cache")
    _run_under(p, host_program)
    report = collect(p)
    stats = _logged(fake_nsys_env)[-1]
    assert "gpukernsum,gpumemtimesum,gpumemsizesum,openaccsum" in stats
    assert [t.report for t in report.tables] == ["gpukernsum", "gpumemtimesum", "gpumemsizesum",
                                                 "openaccsum"]
    assert report.summary is not None and report.summary.kernel_count == 2


def test_nsys_host_run_says_no_gpu_activity_with_fake_nsys(
        tmp_path: Path, fake_nsys_env: Path, host_program: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NSYS_DATA", str(tmp_path / "no-data"))
    p = plan("nsys", tmp_path / "run", tmp_path / "cache")
    _run_under(p, host_program)
    report = collect(p)
    assert report.message == NO_GPU_ACTIVITY and report.tables == ()
    assert report.report_file == tmp_path / "run" / "report.nsys-rep"


def test_configured_nsys_options_replace_the_defaults_with_fake_nsys(
        tmp_path: Path, fake_nsys_env: Path) -> None:
    command = (str(FAKES / "nsys"), "profile", "--trace=cuda,openacc", "-o", "elsewhere",
               "--stats=true", "--sample=none")
    p = plan("auto", tmp_path / "run", tmp_path / "cache", nsys_command=command)
    # the sampling given stays; context switches stay off (nsys.QUIET_OPTIONS)
    assert p.argv_prefix == (str(FAKES / "nsys"), "profile", "--trace=cuda,openacc",
                             "--sample=none", "--cpuctxsw=none", "--stats=false",
                             "-o", str(tmp_path / "run" / "report"), "--force-overwrite=true",
                             *LAUNCH_MARK)


def test_nsys_chosen_but_missing_gives_none(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_without("nsys")}
    p = plan("nsys", tmp_path / "run", tmp_path / "cache", environ=env)
    assert p.kind == "none" and "nsys is not on PATH" in p.notes[0]


def test_a_configured_profiler_that_is_not_nsys_just_runs(tmp_path: Path) -> None:
    p = plan("auto", tmp_path / "run", tmp_path / "cache", nsys_command=("ncu", "--set", "full"))
    assert p.kind == "command" and p.argv_prefix == ("ncu", "--set", "full")
    assert collect(p).message == "ran under ncu --set full; see its output above"


def test_unknown_choice_gives_none(tmp_path: Path) -> None:
    assert plan("vtune", tmp_path / "run", tmp_path / "cache").kind == "none"


def test_stats_csv_with_a_preamble_and_thousands_separators() -> None:
    text = ("Generating SQLite file report.sqlite from report.nsys-rep\n"
            "Processing [report.sqlite] with [cuda_gpu_kern_sum.py]...\n\n"
            '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Name"\n'
            '90.0,"1,234,567",3,"411,522.3","void k(double*, int)"\n')
    table = nsys_mod.parse_csv(text, "cuda_gpu_kern_sum")
    assert table is not None and table.header[1] == "Total Time (ns)"
    assert table.rows == (("90.0", "1,234,567", "3", "411,522.3", "void k(double*, int)"),)
    s = nsys_mod.summary_from_tables({"kernels": table})
    assert s is not None and (s.kernel_ns, s.kernel_count) == (1_234_567, 3)


def test_no_trace_file_means_the_program_never_used_cuda(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    p = ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=run, output=run / "trace.jsonl")
    report = collect(p)
    assert report.trace is None and report.message == NO_GPU_ACTIVITY and report.report_file is None


def test_traces_of_several_processes_are_merged(tmp_path: Path) -> None:
    p = _synthetic_run(tmp_path)
    assert p.output is not None
    p.output.with_name("trace.jsonl.4243").write_text(
        SYNTHETIC.read_text().replace('"pid":4242', '"pid":4243'))
    report = collect(p)
    assert report.trace is not None and len(report.trace.kernels) == 8
    assert report.summary is not None and report.summary.queues == 8
    assert _labels(report.trace)[:2] == ["pid 4242 stream 13", "pid 4243 stream 13"]



def test_merge_joins_the_operations_and_the_bookkeeping() -> None:
    """Operations concatenated process after process; complete only when every file is; counts
    added; each error once; the earliest start that is known; cut when any file was."""
    one = Trace(kernels=(Kernel("a", 10, 20, 1),), copies=(Copy(HTOD, 8, 5, 9, 1),),
                syncs=(Sync("stream", 20, 30),), stream_queues=(StreamQueue(1, 2),),
                devices=(Device(0, "gpu"),), dropped=1, errors=("cupti: x", "cupti: y"), skipped=2,
                started=0)
    two = Trace(kernels=(Kernel("b", 1, 2, 3, process=7),), memsets=(Memset(4, 3, 4, 3),),
                complete=False, dropped=2, errors=("cupti: y", "cupti: z"), skipped=1, started=50,
                truncated=True)
    three = Trace(started=40)
    merged = tracefile.merge([one, two, three], (Path("a"), Path("b"), Path("c")))
    assert merged == Trace(
        kernels=one.kernels + two.kernels, copies=one.copies, memsets=two.memsets, syncs=one.syncs,
        stream_queues=one.stream_queues, devices=one.devices, complete=False, dropped=3,
        errors=("cupti: x", "cupti: y", "cupti: z"), skipped=3,
        files=(Path("a"), Path("b"), Path("c")), started=40, truncated=True)
    assert tracefile.merge([one, three]).complete and not tracefile.merge([one]).truncated
    assert tracefile.merge([]) == Trace()


def test_every_kind_of_record_is_read() -> None:
    """What each record type gives; untimed operations, values that are not objects and unknown
    types are counted as skipped or passed over, and the pid of the header names the process
    of the records after it."""
    records = [
        {"type": "kernel", "name": "before", "start": 1, "end": 2, "stream": 3},
        {"type": "header", "format": "idrrun-trace", "pid": 99, "start": 5},
        {"type": "header", "pid": 98, "start": 6},
        {"type": "kernel", "name": "k", "start": 10, "end": 20, "stream": 3, "device": 1,
         "context": 2, "correlation": 4, "grid": [8, 1, 1], "block": [128, 1, 1]},
        {"type": "memcpy", "copy": "HtoD", "bytes": 64, "start": 21, "end": 25, "stream": 3,
         "src": "pageable", "dst": "device", "async": True, "correlation": 5},
        {"type": "memset", "bytes": 16, "start": 26, "end": 27},
        {"type": "sync", "sync": "stream", "start": 28, "end": 30, "stream": 3, "context": 2},
        {"type": "kernel", "name": "untimed", "start": 0, "end": 0},
        {"type": "memcpy", "start": 50, "end": 40},
        {"type": "queue", "queue": 1, "stream": 3},
        {"type": "device", "device": 1, "name": "NVIDIA H200", "cc": [9, 0], "sms": 132},
        {"type": "dropped", "count": 7},
        {"type": "error", "call": "cuptiActivityFlushAll", "message": "CUPTI_ERROR_UNKNOWN"},
        {"type": "newer", "start": 1, "end": 2}, {"type": ["kernel"], "start": 1, "end": 2},
        {"type": {"a": 1}}, {"name": "no type"},
        [1, 2], "text", 3,
        {"type": "end"},
    ]
    lines = [json.dumps(r) for r in records] + ["not json"]
    trace, pid = tracefile.parse_lines(lines)
    assert pid == 98 and trace.started == 5 and trace.complete
    assert trace.kernels == (Kernel("before", 1, 2, 3),
                             Kernel("k", 10, 20, 3, device=1, context=2, correlation=4,
                                    grid=(8, 1, 1), block=(128, 1, 1), process=98))
    assert trace.copies == (Copy(HTOD, 64, 21, 25, 3, correlation=5, src="pageable", dst="device",
                                 asynchronous=True, process=98),)
    assert trace.memsets == (Memset(16, 26, 27, -1, process=98),)
    assert trace.syncs == (Sync("stream", 28, 30, 3, 2, process=98),)
    assert trace.stream_queues == (StreamQueue(3, 1, process=98),)
    assert trace.devices == (Device(1, "NVIDIA H200", 98, (9, 0), 132),)
    assert (trace.dropped, trace.errors) == (7, ("cuptiActivityFlushAll: CUPTI_ERROR_UNKNOWN",))
    assert trace.skipped == 6  # two untimed operations, three values that are not objects, a bad line

def test_a_second_run_in_the_same_folder_shows_no_stale_data_with_fake_nsys(
        tmp_path: Path, fake_nsys_env: Path, host_program: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    first = plan("nsys", tmp_path / "run", tmp_path / "cache")
    _run_under(first, host_program)
    assert collect(first).timeline_png is not None
    monkeypatch.setenv("FAKE_NSYS_DATA", str(tmp_path / "no-data"))
    again = plan("nsys", tmp_path / "run", tmp_path / "cache")
    assert not list((tmp_path / "run").glob("stats_*.csv"))
    assert not (tmp_path / "run" / "timeline.png").exists()
    _run_under(again, host_program)
    assert collect(again).message == NO_GPU_ACTIVITY


# -- the real trace, recorded on an NVIDIA H200 (2026-11-21) with the built-in tracer: the
# course's async_matmul C solution, dim 2000, built by GCC 12 with nvptx offloading.
REAL = DATA / "async_trace_h200.jsonl"


def test_a_queue_with_copies_only_is_not_a_queue_of_work() -> None:
    """gfortran's `enter data create(a) async(q)` copies a's descriptor on q: a Fortran port of
    async_matmul with every kernel on one queue still showed 3 queues with work on the H100 and
    passed its queues check. The check counts the queues that ran kernels; the stream table
    still shows every stream."""
    from idrrun.profile.summary import queues
    trace = read_trace(REAL)
    moved = dataclasses.replace(trace.copies[0], stream=9999)
    more = dataclasses.replace(trace, copies=(*trace.copies, moved))
    assert len(queues(more)) == len(queues(trace)) + 1
    assert trace_values(more)["queues"] == trace_values(trace)["queues"] == 4


def test_real_h200_trace_shows_the_three_queues(tmp_path: Path) -> None:
    trace = read_trace(REAL)
    values = trace_values(trace)
    assert values["ran_on_gpu"] == 1 and values["kernels"] == 4
    assert values["queues"] == 4  # async(1), async(2), async(3) and the product's stream
    assert values["bytes_d2h"] == 2000 * 2000 * 8  # C copied out once by exit data
    summary = summarize(trace)
    assert summary.kernel_count == 4 and summary.queues == 4
    assert summary.d2h.bytes == 32_000_000
    names = [k.name for k in summary.top_kernels]
    assert names[0] == "main$_omp_fn$0" and "init_mat$_omp_fn$0" in names


def test_real_h200_trace_timeline(tmp_path: Path) -> None:
    from PIL import Image

    trace = read_trace(REAL)
    png = timeline.draw(trace, tmp_path / "t.png")
    assert list(_labels(trace)) == ["stream 13", "stream 14", "stream 15", "stream 7",
                                               "host waits"]
    with Image.open(png) as image:
        assert image.size == _size(trace)
        colours = {c for _, c in image.convert("RGB").getcolors(maxcolors=1 << 16) or []}
    for kind in ("kernel", "h2d", "d2h"):
        assert timeline.COLOURS[kind] in colours, kind


@pytest.mark.slow
def test_tracer_builds_against_cupti_from_nvidia_wheels(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # `pip install idrrun[gpu]` on a machine with only the NVIDIA driver: no toolkit anywhere
    # (candidate_roots finds none), CUPTI and cuda.h from NVIDIA's wheels on PyPI.
    import sys
    import zipfile

    wheels = tmp_path / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary=:all:", "-d", str(wheels), "nvidia-cuda-cupti-cu12>=12.4",
                        "nvidia-cuda-runtime-cu12>=12.4"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    site = tmp_path / "site"
    for wheel in wheels.glob("*.whl"):
        zipfile.ZipFile(wheel).extractall(site)
    monkeypatch.setattr(tracer, "candidate_roots", lambda environ: [])
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    found = find_cupti({"PATH": "/usr/bin:/bin"})
    assert not isinstance(found, str) and found.root == site / "nvidia" and found.library is not None
    lib, why = tracer.build_tracer(tmp_path / "cache", environ={"PATH": "/usr/bin:/bin"})
    assert lib is not None, why
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True)
    assert "InitializeInjection" in symbols.stdout
    linked = subprocess.run(["ldd", str(lib)], capture_output=True, text=True).stdout
    assert str(site / "nvidia" / "cuda_cupti" / "lib" / "libcupti.so.12") in linked


def test_a_line_holding_two_records_is_one_bad_line(tmp_path: Path) -> None:
    """The file is decoded as one JSON array first (speed); a line that would add values to that
    array (two records, "1,2") is still one unreadable line, as when lines are read one by one."""
    lines = SYNTHETIC.read_text().splitlines(keepends=True)
    kernel = next(line for line in lines if '"type":"kernel"' in line).strip()
    bad = lines[:1] + [f"{kernel},{kernel}\n", "3,4\n"] + lines[1:]
    trace = tracefile.parse_lines(bad)[0]
    good = tracefile.parse_lines(lines)[0]
    assert trace.skipped == 2 and len(trace.kernels) == len(good.kernels)


def _awkward_trace() -> bytes:
    """The recorded H200 trace with what a reader must take as text mode does: a \\r\\n line
    end, a blank line, bytes that are not UTF-8 in a kernel's name, a line that is not JSON,
    and a last line without its end (a program killed while the tracer wrote)."""
    lines = (DATA / "async_trace_h200.jsonl").read_bytes().splitlines(keepends=True)
    kernel = next(i for i, line in enumerate(lines) if b'"type":"kernel"' in line)
    lines[kernel] = lines[kernel].replace(b'"name":"', b'"name":"\xff\xfe')
    lines[2] = lines[2].rstrip(b"\n") + b"\r\n"
    lines.insert(3, b"\n")
    lines.insert(5, b"not json\n")
    return b"".join(lines) + b'{"type":"kernel","start":1'


def test_the_follower_reads_the_trace_as_it_grows_and_gives_what_a_reread_gives(tmp_path: Path) -> None:
    data = _awkward_trace()
    path = tmp_path / "trace.jsonl"
    follower = tracefile.Follower(path, perfetto.Prepared())
    follower.poll()  # no file yet: nothing, no error
    assert follower.read_bytes == 0
    cuts = [0, 1, 150, 151, 700, 1601, 2500, 3333, len(data)]  # mid-line, mid-character
    with open(path, "wb") as out:
        for a, b in zip(cuts, cuts[1:]):
            out.write(data[a:b])
            out.flush()
            follower.poll()
            assert follower.read_bytes == b  # all there is, every time
    followed = read_trace(path, follower)
    again = read_trace(path)
    assert followed == again and again is not None
    recorded = read_trace(DATA / "async_trace_h200.jsonl")
    assert recorded is not None and len(again.kernels) == len(recorded.kernels) == 4
    assert again.skipped == 2  # "not json" and the unfinished line
    assert any("\ufffd" in k.name for k in again.kernels)
    # the Perfetto events it formatted as it read: the same document as formatted at the end
    assert follower.used and follower.prepared is not None
    assert len(follower.prepared.kernels) == len(again.kernels)
    assert perfetto.text(again, follower.prepared) == perfetto.text(again) == json.dumps(
        perfetto_oracle.events(again), separators=(",", ":"))
    follower.prepared.kernels[0] = '{"ph":"X","name":"formatted during the run"}'
    assert "formatted during the run" in perfetto.text(again, follower.prepared)  # it is used


def test_events_formatted_during_the_run_are_used_only_for_their_own_trace(tmp_path: Path) -> None:
    """Prepared events of one trace given with another (another start, a process whose tracer
    started earlier): ignored, the document is formatted whole; a part of the trace prepared:
    the rest is formatted."""
    lines = (DATA / "async_trace_h200.jsonl").read_text().splitlines(keepends=True)
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(lines[:12]))
    follower = tracefile.Follower(path, perfetto.Prepared())
    follower.poll()
    prepared = follower.prepared
    assert prepared is not None and 0 < len(prepared.copies)
    with open(path, "a") as out:
        out.write("".join(lines[12:]))
    whole = read_trace(path)
    assert whole is not None
    assert perfetto.text(whole, prepared) == perfetto.text(whole)  # 12 lines done, the rest not
    header = json.loads(lines[0])
    earlier = tmp_path / "trace.jsonl.4242"  # another process of the run, started earlier
    earlier.write_text(json.dumps({**header, "pid": 4242, "start": header["start"] - 1000}) + "\n"
                       + "".join(lines[1:]))
    merged = read_trace(path)
    assert merged is not None and merged.started == header["start"] - 1000
    assert perfetto.text(merged, prepared) == perfetto.text(merged) == json.dumps(
        perfetto_oracle.events(merged), separators=(",", ":"))


def test_the_follower_thread_reads_during_the_run(tmp_path: Path) -> None:
    lines = (DATA / "async_trace_h200.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "trace.jsonl"
    half = b"".join(lines[: len(lines) // 2])
    with tracefile.Follower(path) as follower:
        with open(path, "wb") as out:
            out.write(half)
            out.flush()
            deadline = 50
            while follower.read_bytes < len(half) and deadline:
                threading.Event().wait(0.05)
                deadline -= 1
            assert follower.read_bytes == len(half), "the thread did not read during the run"
            out.write(b"".join(lines[len(lines) // 2:]))
    assert read_trace(path, follower) == read_trace(path)


@pytest.mark.parametrize("change", ["replaced", "truncated"])
def test_a_trace_file_changed_behind_the_follower_is_read_again(tmp_path: Path, change: str) -> None:
    lines = (DATA / "async_trace_h200.jsonl").read_bytes().splitlines(keepends=True)
    synthetic = SYNTHETIC.read_bytes()
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"".join(lines))
    follower = tracefile.Follower(path)
    follower.poll()
    assert follower.read_bytes == path.stat().st_size
    if change == "replaced":
        other = tmp_path / "other.jsonl"
        other.write_bytes(synthetic)
        os.replace(other, path)
    else:
        with open(path, "r+b") as out:
            out.truncate(0)
        follower.poll()
        with open(path, "ab") as out:
            out.write(synthetic)
    followed = read_trace(path, follower)
    alone = read_trace(SYNTHETIC)
    assert alone is not None
    assert followed == read_trace(path) == dataclasses.replace(alone, files=(path,))


def test_a_fifo_or_a_link_in_place_of_a_trace_file_is_left_out_without_blocking(tmp_path: Path) -> None:
    """The run's folder is the traced program's to write: a FIFO as the trace file (or as another
    process's) would block its reader for good, a link could lead anywhere; both are left out,
    what the tracer wrote is read."""
    path = tmp_path / "trace.jsonl"
    os.mkfifo(path)
    os.mkfifo(tmp_path / "trace.jsonl.77")
    (tmp_path / "trace.jsonl.78").symlink_to("/etc/passwd")
    (tmp_path / "trace.jsonl.79").write_text(SYNTHETIC.read_text())
    found: list[object] = []

    def read() -> None:
        with tracefile.Follower(path, perfetto.Prepared()) as follower:
            threading.Event().wait(0.3)  # a few polls
        found.append(read_trace(path, follower))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive(), "reading the trace blocked on a FIFO"
    trace = found[0]
    assert isinstance(trace, Trace) and trace.files == (tmp_path / "trace.jsonl.79",)
    alone = read_trace(SYNTHETIC)
    assert alone is not None and trace.kernels == alone.kernels


WRITES_ITS_OWN_TRACE = r"""
/* Stands in for a GPU program under the built-in tracer (no GPU here): writes a recorded trace
   to IDRRUN_TRACE_FILE in pieces, cut mid-line, as the tracer's flushes do during a run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *path = getenv("IDRRUN_TRACE_FILE");
    FILE *in = fopen(argv[1], "rb");
    if (path == NULL || in == NULL) return 2;
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text, in);
    FILE *out = fopen(path, "wb");
    for (size_t at = 0; at < n; at += 700) {
        fwrite(text + at, 1, n - at < 700 ? n - at : 700, out);
        fflush(out);
        usleep(150000);
    }
    fclose(out);
    puts("done");
    return 0;
}
"""


def run_writer(tmp_path: Path, work: Path, program: str,
               recorded: Path) -> subprocess.CompletedProcess[str]:
    """`idrrun run --profiler builtin writer.c` in `work` of a program that writes its own
    trace (`program`, the recorded trace `recorded` its argument), in a fresh process; it must
    succeed."""
    from conftest import PYTHONPATH

    work.mkdir()
    (work / "writer.c").write_text(program)
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "IDRRUN_RESIDENT": "0", "IDRRUN_OFFLOAD": "host", "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "idrrun", "run", "--profiler", "builtin",
                           "--cliopts", str(recorded), "writer.c"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@needs_cupti
def test_idrrun_run_profile_reads_a_trace_written_during_the_run_by_a_program_that_writes_its_own_trace(
        tmp_path: Path) -> None:
    """`idrrun run --profiler builtin` end to end (the pipeline runs the program inside the
    follower): the report and trace.json are those of the trace the program wrote."""
    work = tmp_path / "work"
    recorded = DATA / "async_trace_h200.jsonl"
    done = run_writer(tmp_path, work, WRITES_ITS_OWN_TRACE, recorded)
    assert "done" in done.stdout
    expected = read_trace(recorded)
    assert expected is not None
    assert "GPU profile (built-in CUPTI tracer): 4 queues" in done.stdout, done.stdout
    assert re.search(rf"kernels +[\d.]+ ms +[\d.]+% +{len(expected.kernels)}\n", done.stdout)
    [exported] = list((work / "idrrun-profile").glob("*/trace.json"))
    [trace_file] = list((work / "idrrun-profile").glob("*/trace.jsonl"))
    written = read_trace(trace_file)
    assert written is not None and written.kernels == expected.kernels
    assert exported.read_text() == perfetto.text(written)


def test_a_trace_longer_than_the_limit_is_cut_and_says_so(tmp_path: Path) -> None:
    """The files are the program's to write: at most tracefile.MAX_TRACE_BYTES of them are read
    (here a smaller limit), whole lines only, and the report says the trace was cut. The
    follower stops at the same place and gives the same trace."""
    lines = (DATA / "async_trace_h200.jsonl").read_text().splitlines(keepends=True)
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(lines))
    limit = len("".join(lines[:10])) + 30  # ten lines and a piece of the eleventh
    cut = read_trace(path, limit=limit)
    first_ten, _ = tracefile.parse_lines(lines[:10])
    assert cut is not None and cut.truncated and not first_ten.truncated
    assert cut.kernels == first_ten.kernels and cut.copies == first_ten.copies
    assert cut.skipped == 0  # the piece of a line is not a bad line of the program's
    follower = tracefile.Follower(path, perfetto.Prepared(), limit=limit)
    follower.poll()
    follower.poll()
    assert follower.read_bytes == limit
    assert read_trace(path, follower, limit=limit) == cut
    whole = read_trace(path)
    assert whole is not None and not whole.truncated and len(whole.kernels) > len(cut.kernels)
    # the budget is for all the files of a run: another process's file gets what is left
    (tmp_path / "trace.jsonl.99").write_text("".join(lines))
    both = read_trace(path, limit=len("".join(lines)) + limit)
    assert both is not None and both.truncated
    assert len(both.kernels) == len(whole.kernels) + len(first_ten.kernels)
    report = collect(ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=tmp_path,
                                 output=path))
    assert not any("longer than" in n for n in report.notes)


def test_collect_says_when_the_trace_was_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from idrrun.profile import stages as session_mod

    monkeypatch.setattr(session_mod, "MAX_TRACE_BYTES", 2000)  # the limit the note names
    run = tmp_path / "run"
    run.mkdir()
    (run / "trace.jsonl").write_text((DATA / "async_trace_h200.jsonl").read_text())
    plan_ = ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=run,
                        output=run / "trace.jsonl")
    follower = tracefile.Follower(plan_.output, perfetto.Prepared(), limit=2000)
    with follower:
        pass
    report = collect(plan_, follower=follower)
    assert report.trace is not None and report.trace.truncated
    assert report.notes == ("the trace is longer than the 2.0 kB idrrun reads: what is shown is "
                            "its beginning",)  # (and not that the program stopped early)


def test_reading_a_small_trace_takes_memory_in_proportion_to_it(tmp_path: Path) -> None:
    """read(n) makes a buffer of n bytes before it reads: asking for the whole limit (256 MiB)
    for a trace of a few kilobytes made every read, and every poll of the follower, take that
    much (tracemalloc: 268 MB for a 1.5 MB trace)."""
    import tracemalloc

    path = tmp_path / "trace.jsonl"
    path.write_text((DATA / "async_trace_h200.jsonl").read_text() * 40)
    size = path.stat().st_size
    for read in (lambda: read_trace(path),
                 lambda: read_trace(path, tracefile.Follower(path, perfetto.Prepared()))):
        tracemalloc.start()
        try:
            assert read() is not None
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 100 * size, (peak, size)
