#!/usr/bin/env bash
# Issue 13 on a real GPU: the version-2 tracer (OpenACC queue and device records), the
# pixel-share timeline with its zoom, trace.json, hints and rates. From the project root:
#   source .gpu/activate.sh && bash benchmarks/profile_check_gpu.sh
# Needs Pillow there for the pictures (here: bash ../shared/gpu/pack.sh pillow).
# Builds with gcc -fopenacc -foffload=nvptx-none -foffload-options=nvptx-none="-misa=sm_80 -lm":
#   (a) examples/C/async_matmul_solution.c 2000: prints the stream -> queue records the tracer
#       wrote (expects async(1), async(2), async(3) and the synchronous product), the device
#       record, the report (hints, rates) and checks C[0] = 42;
#   (b) examples/C/data_laplace_solution.c "4096 1000" and data_laplace_exercise.c "4096 100":
#       the report with the exercise's bytes per iteration, for the docs pictures;
#   (c) overhead: data_laplace_solution "4096 1000", 3 runs without and 3 with the tracer.
# Writes to $OUT (or ./gpu-out): for each run NAME_timeline.png, NAME_trace.json,
# NAME_trace.jsonl; check_summary.txt; check.log. About 1 minute on an H100/H200.
# Dry run without a GPU (host builds, small sizes; checks the script, not the GPU):
#   IDRRUN_CHECK_DRY=1 bash benchmarks/profile_check_gpu.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/idrrun-gpu-cache}
work=$(mktemp -d /tmp/idrrun-check-XXXXXX)
export IDRRUN_CHECK_OUT=$out IDRRUN_CHECK_WORK=$work

python3 - <<'PY' 2>&1 | tee "$out/check.log"
"""Drives idrrun.profile directly: plan -> run (proc.run) -> collect."""
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from idrrun.run import proc
from idrrun.profile.session import collect, plan
from idrrun.profile.summary import trace_values

OUT = Path(os.environ["IDRRUN_CHECK_OUT"])
WORK = Path(os.environ["IDRRUN_CHECK_WORK"])
CACHE = Path(os.environ["XDG_CACHE_HOME"]) / "idrrun"
DRY = os.environ.get("IDRRUN_CHECK_DRY") == "1"
N = 256 if DRY else 4096
DIM = "200" if DRY else "2000"
failures: list[str] = []
summary: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    summary.append(line)


gpu = proc.capture(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version",
                    "--format=csv,noheader"], what="probe", timeout=20)
gpu_line = gpu.output.strip()
gpu_name = gpu_line.split(",")[0].strip() if gpu.ok and gpu_line else ""
say(f"GPU: {gpu_line or gpu.describe()}")
cc = proc.capture(["gcc", "--version"], what="probe")
say(f"gcc: {cc.output.splitlines()[0] if cc.output else cc.describe()}")
say(f"date: {time.strftime('%Y-%m-%d %H:%M')}")


def build(source: str, name: str) -> Path:
    (WORK / "bin").mkdir(exist_ok=True)
    exe = WORK / "bin" / name
    offload = (["-foffload=disable"] if DRY else
               ["-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80 -lm"])
    result = proc.run(["gcc", "-O2", "-fopenacc", *offload, source, "-o", str(exe), "-lm"],
                      what="compile", timeout=300)
    if not result.ok:
        print(result.output)
        sys.exit(f"build of {source} failed: {result.describe()}")
    return exe


def records(path: Path, kind: str) -> list[dict]:
    found = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == kind:
            found.append(record)
    return found


def profiled(exe: Path, args: list[str], label: str, **work):
    run_dir = WORK / label
    p = plan("builtin", run_dir, CACHE)
    if p.kind != "builtin":
        sys.exit(f"no built-in tracer: {p.notes}")
    start = time.monotonic()
    result = proc.run([str(exe), *args], what="run", timeout=300,
                      spec=proc.ProcSpec(cwd=run_dir, env={**os.environ, **p.env}))
    wall = time.monotonic() - start
    report = collect(p, source_name=label, gpu=gpu_name, **work)
    say(f"\n== {label} {' '.join(args)}: {result.describe()}, {wall:.2f} s wall")
    for line in result.output.strip().splitlines()[-4:]:
        say(f"   | {line}")
    if p.output is not None and p.output.is_file():
        for r in records(p.output, "device"):
            say(f"device record: {json.dumps(r)}")
        for r in records(p.output, "queue"):
            say(f"queue record: {json.dumps(r)}")
        for r in records(p.output, "error"):
            say(f"tracer error: {json.dumps(r)}")
        shutil.copyfile(p.output, OUT / f"{label}_trace.jsonl")
    say(str(report))
    say(f"values: {trace_values(report.trace)}")
    if report.timeline_png:
        shutil.copyfile(report.timeline_png, OUT / f"{label}_timeline.png")
    if report.trace_json:
        shutil.copyfile(report.trace_json, OUT / f"{label}_trace.json")
    return result, report


tracer_start = time.monotonic()
first = plan("builtin", WORK / "probe", CACHE)
say(f"tracer: {first.kind} {first.env.get('CUDA_INJECTION64_PATH', '')} "
    f"({time.monotonic() - tracer_start:.1f} s, {'; '.join(first.notes) or 'ok'})")

matmul = build("examples/C/async_matmul_solution.c", "async_matmul")
exercise = build("examples/C/data_laplace_exercise.c", "laplace_exercise")
solution = build("examples/C/data_laplace_solution.c", "laplace_solution")

# (a) the queue names
result, report = profiled(matmul, [DIM], "async")
if "C[0] = 42.000000" not in result.output:
    failures.append("(a) C[0] is not 42: the tracer changed the program's result")
t = report.trace
named = sorted((q.stream, q.label) for q in t.stream_queues) if t else []
say(f"(a) streams -> queues: {named or 'none'}")
labels = {label for _, label in named}
if not DRY and not {"async(1)", "async(2)", "async(3)"} <= labels:
    failures.append(f"(a) queues async(1..3) not all named: {named}")
if not DRY and "synchronous" not in labels:
    failures.append("(a) the product's default stream is not named synchronous (see notes)")
if not DRY and not (t and t.devices):
    failures.append("(a) no device record")
say(f"(a) hints: {[h.rule for h in report.hints]}")

# (b) data management: solution (kernels dominate at 1000 iterations) and start file
moved = 4 * 8 * (N - 2) ** 2  # per iteration: each kernel reads one array and writes the other
for exe, args, label in ((solution, [str(N), "1000"], "laplace_solution"),
                         (exercise, [str(N), "100"], "laplace_exercise")):
    iterations = int(args[1])
    result, report = profiled(exe, args, label, iterations=iterations,
                              bytes_per_iteration=float(moved))
    s = report.summary
    if s is not None and s.gpu_ns:
        say(f"(b) {label}: kernels {100 * s.kernel_ns / s.gpu_ns:.1f} %, h2d "
            f"{100 * s.h2d.total_ns / s.gpu_ns:.1f} %, d2h {100 * s.d2h.total_ns / s.gpu_ns:.1f} % "
            f"of GPU time; hints {[h.rule for h in report.hints]}")
    if not DRY and label == "laplace_exercise" and "data_region" not in {h.rule for h in report.hints}:
        failures.append("(b) the start file did not get the data_region hint")

# (c) overhead of the tracer (queue lookups included)
plain: list[float] = []
traced: list[float] = []
for i in range(3):
    start = time.monotonic()
    proc.run([str(solution), str(N), "1000"], what="run", timeout=300, spec=proc.ProcSpec(cwd=WORK))
    plain.append(time.monotonic() - start)
    p = plan("builtin", WORK / f"overhead{i}", CACHE)
    start = time.monotonic()
    proc.run([str(solution), str(N), "1000"], what="run", timeout=300,
             spec=proc.ProcSpec(cwd=p.run_dir, env={**os.environ, **p.env}))
    traced.append(time.monotonic() - start)
mp, mt = statistics.median(plain), statistics.median(traced)
say(f"\n(c) data_laplace_solution {N} 1000, wall seconds: without tracer {plain}, with {traced}")
say(f"(c) median without {mp:.3f} s, with {mt:.3f} s, overhead {100 * (mt - mp) / mp:+.1f}%")

say("\n" + ("FAIL:\n  " + "\n  ".join(failures) if failures else "ALL CHECKS PASSED"))
(OUT / "check_summary.txt").write_text("\n".join(summary) + "\n")
sys.exit(1 if failures else 0)
PY
status=${PIPESTATUS[0]}
rm -rf "$work"
ls -la "$out"
exit "$status"
