#!/usr/bin/env bash
# The profiler on a real GPU (../shared/gpu/README.md), from the project root:
#   source .gpu/activate.sh && bash benchmarks/profile_capture.sh
# Needs Pillow there for the pictures: pack it first, here: bash ../shared/gpu/pack.sh pillow
# Builds the built-in CUPTI tracer, builds the examples with gcc offloading, and runs:
#   (a) examples/C/async_matmul_solution.c 2000 under the tracer: expects >= 3 queues;
#   (b) examples/C/data_laplace_{exercise,solution}.c "4096 100": copies dominate vs kernels dominate;
#   (c) overhead: data_laplace_solution "4096 1000", 3 runs without and 3 with the tracer;
#   (d) a run killed by its timeout (SIGTERM) leaves a partial trace that still reads.
# Writes to $OUT (or ./gpu-out), at most 6 files: async_trace.jsonl, async_timeline.png,
# laplace_exercise_timeline.png, laplace_solution_timeline.png, profile_summary.txt, capture.log.
# About 1 to 2 minutes on an H100/H200.
# Dry run on a machine without a GPU (host builds, small sizes; checks the script, not the GPU):
#   IDRRUN_CAPTURE_DRY=1 bash benchmarks/profile_capture.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/idrrun-gpu-cache}
work=$(mktemp -d /tmp/idrrun-profile-XXXXXX)
export IDRRUN_CAPTURE_OUT=$out IDRRUN_CAPTURE_WORK=$work

python3 - <<'PY' 2>&1 | tee "$out/capture.log"
"""Drives idrrun.profile directly: plan -> run (proc.run) -> collect."""
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from idrrun.run import proc
from idrrun.profile.session import collect, plan
from idrrun.profile.summary import trace_values

OUT = Path(os.environ["IDRRUN_CAPTURE_OUT"])
WORK = Path(os.environ["IDRRUN_CAPTURE_WORK"])
CACHE = Path(os.environ["XDG_CACHE_HOME"]) / "idrrun"
DRY = os.environ.get("IDRRUN_CAPTURE_DRY") == "1"
N = "256" if DRY else "4096"
DIM = "200" if DRY else "2000"
summary: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    summary.append(line)


gpu = proc.capture(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version",
                    "--format=csv,noheader"], what="probe", timeout=20)
say(f"GPU: {gpu.output.strip() or gpu.describe()}")
cc = proc.capture(["gcc", "--version"], what="probe")
say(f"gcc: {cc.output.splitlines()[0] if cc.output else cc.describe()}")
say(f"date: {time.strftime('%Y-%m-%d %H:%M')}")
try:
    import PIL
    say(f"pillow: {PIL.__version__}")
except ImportError:
    say("pillow: MISSING, no timeline pictures (here: bash ../shared/gpu/pack.sh pillow)")


def build(source: str, name: str) -> Path:
    (WORK / "bin").mkdir(exist_ok=True)
    exe = WORK / "bin" / name
    offload = (["-foffload=disable"] if DRY else
               ["-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80 -lm"])
    argv = ["gcc", "-O2", "-fopenacc", *offload, source, "-o", str(exe), "-lm"]
    result = proc.run(argv, what="compile", timeout=300)
    if not result.ok:
        print(result.output)
        sys.exit(f"build of {source} failed: {result.describe()}")
    return exe


def profiled(exe: Path, args: list[str], label: str, timeout: float = 300.0):
    run_dir = WORK / label
    p = plan("builtin", run_dir, CACHE)
    if p.kind != "builtin":
        sys.exit(f"no built-in tracer: {p.notes}")
    start = time.monotonic()
    result = proc.run([str(exe), *args], what="run", timeout=timeout,
                      spec=proc.ProcSpec(cwd=run_dir, env={**os.environ, **p.env}))
    wall = time.monotonic() - start
    report = collect(p, source_name=label)
    return result, report, wall


def show(label: str, result, report, wall: float) -> None:
    say(f"\n== {label}: {result.describe()}, {wall:.2f} s wall")
    for line in result.output.strip().splitlines()[-4:]:
        say(f"   | {line}")
    say(str(report))
    say(f"values: {trace_values(report.trace)}")


tracer_start = time.monotonic()
first = plan("builtin", WORK / "probe", CACHE)
say(f"tracer: {first.kind} {first.env.get('CUDA_INJECTION64_PATH', '')} "
    f"({time.monotonic() - tracer_start:.1f} s, {'; '.join(first.notes) or 'ok'})")

matmul = build("examples/C/async_matmul_solution.c", "async_matmul")
exercise = build("examples/C/data_laplace_exercise.c", "laplace_exercise")
solution = build("examples/C/data_laplace_solution.c", "laplace_solution")

# (a) async matmul: three queues
result, report, wall = profiled(matmul, [DIM], "async")
show(f"(a) async_matmul_solution {DIM}", result, report, wall)
queues = report.summary.queues if report.summary else 0
say(f"(a) queues with work: {queues} -> {'OK (>= 3)' if queues >= 3 else 'FAIL (< 3)'}")
if report.report_file:
    shutil.copyfile(report.report_file, OUT / "async_trace.jsonl")
if report.timeline_png:
    shutil.copyfile(report.timeline_png, OUT / "async_timeline.png")

# (b) data_laplace: copies dominate (exercise) vs kernels dominate (solution)
for exe, label in ((exercise, "laplace_exercise"), (solution, "laplace_solution")):
    result, report, wall = profiled(exe, [N, "100"], label)
    show(f"(b) {label} {N} 100", result, report, wall)
    s = report.summary
    if s is not None:
        copies = s.h2d.total_ns + s.d2h.total_ns
        verdict = "copies dominate" if copies > s.kernel_ns else "kernels dominate"
        say(f"(b) {label}: kernels {s.kernel_ns / 1e6:.1f} ms, copies {copies / 1e6:.1f} ms "
            f"-> {verdict}; bytes h2d {s.h2d.bytes}, d2h {s.d2h.bytes}")
    if report.timeline_png:
        shutil.copyfile(report.timeline_png, OUT / f"{label}_timeline.png")

# (c) overhead of the tracer
plain: list[float] = []
traced: list[float] = []
for i in range(3):
    for bucket, with_tracer in ((plain, False), (traced, True)):
        if with_tracer:
            result, report, wall = profiled(solution, [N, "1000"], f"overhead{i}")
        else:
            start = time.monotonic()
            result = proc.run([str(solution), N, "1000"], what="run", timeout=300,
                              spec=proc.ProcSpec(cwd=WORK))
            wall = time.monotonic() - start
        if not result.ok:
            say(f"(c) run failed: {result.describe()}: {result.output[-300:]}")
        bucket.append(wall)
mp, mt = statistics.median(plain), statistics.median(traced)
say(f"\n(c) data_laplace_solution {N} 1000, wall seconds: without tracer {plain}, with {traced}")
say(f"(c) median without {mp:.3f} s, with {mt:.3f} s, overhead {100 * (mt - mp) / mp:+.1f}%")

# (d) killed by a timeout: the trace is partial but readable
result, report, wall = profiled(solution, [N, "100000"], "killed", timeout=4.0)
t = report.trace
say(f"\n(d) killed run: {result.describe()} after {wall:.1f} s; trace complete={t.complete if t else None} "
    f"kernels={len(t.kernels) if t else 0} skipped_lines={t.skipped if t else None} "
    f"message={report.message!r} notes={list(report.notes)}")

(OUT / "profile_summary.txt").write_text("\n".join(summary) + "\n")
PY
status=${PIPESTATUS[0]}
rm -rf "$work"
ls -la "$out"
exit "$status"
