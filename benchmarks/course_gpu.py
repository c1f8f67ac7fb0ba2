"""The course on a GPU: every exercise checked with its GPU arguments, what each solution gains on
the GPU over one host core, how GCC 12's nvptx code does on the course's two hot loops, and a
class graded in the sandbox with its GPU checks (issues 11, 13, 14).

    python3 benchmarks/course_gpu.py table [-j 4] [--exercise NAME]... [--timeout 540]
    python3 benchmarks/course_gpu.py versus-host [--host-jobs 14] [--timeout 150] [--exercise NAME]...
    python3 benchmarks/course_gpu.py variants [--peak-gbs GB/S] [--n 4096] [--iterations 1000]
    python3 benchmarks/course_gpu.py class

- table: `idrrun course check --json` (on a GPU machine the specs' GPU arguments, trace checks
  profiled): one row per exercise and language, the solution's and the start file's verdict,
  build and run seconds, the GPU checks' values (ran_on_gpu, queues, gpu_busy, data moved) and
  what did not pass. Every solution must pass and every start file fail. Timed checks such as
  gpu_busy need a GPU of their own: keep -j low (at -j 8 on an H100 profile_cg's missed it).
  Without a GPU it checks the course on the host, with the host arguments.
- versus-host: each solution with its GPU arguments through `idrrun run -a`, one at a time on the
  GPU, then the same on the host (IDRRUN_OFFLOAD=host, one core each, --host-jobs at once): the
  program's own seconds from its `exit 0 · X s` line. Where the GPU is not faster, the size is
  the lesson's (intro_saxpy: copies) or too small to pay for the GPU's start.
- variants: benchmarks/jacobi/jacobi_variants.c (the Jacobi iteration written six ways, each
  with GCC's default launch geometry and four GOMP_OPENACC_DIM settings: ms per iteration and %
  of the bandwidth floor at --peak-gbs), benchmarks/reduction/dot_variants.c (profile_cg's dot
  product written six ways: ms per call) and benchmarks/reduction/declare_probe.c (whether a
  `declare`d table reaches an `acc routine seq`: the values the device sees).
- class: four submissions of async_matmul graded in the sandbox with -j 2 (the C and Fortran
  solutions, the start file, the solution on one queue): each row's verdict, sandbox level,
  ran_on_gpu and queues as evaluated, run seconds.
Needs a GPU except `table` (and --host for the others, which builds for the host: a check of the
driver, not figures).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import bench

sys.path.insert(0, str(bench.ROOT))

from idrrun.checks import specs  # noqa: E402

PY = sys.executable
TRACE = (*specs.TRACE_KINDS, "GPU busy")  # the GPU checks, by the names of their kinds
_DONE = re.compile(r"^(exit 0|exit code \d+|killed by \S+|timed out) · ([\d.]+) s", re.MULTILINE)
_GEOMETRIES = ("", "528::128", "1056::128", "264::256", "132:4:32")  # GOMP_OPENACC_DIM


def idrrun(*args: str, timeout: float, host: bool = False, cwd: Path | None = None
           ) -> subprocess.CompletedProcess[str]:
    env = bench.idrrun_env(IDRRUN_EXAMPLES=str(bench.EXAMPLES), COLUMNS="200")
    if host:
        env["IDRRUN_OFFLOAD"] = "host"
    try:
        return subprocess.run([PY, "-m", "idrrun", *args], env=env, cwd=cwd, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as late:
        out = late.stdout.decode() if isinstance(late.stdout, bytes) else late.stdout or ""
        return subprocess.CompletedProcess(late.cmd, 124, out, f"timed out after {timeout:.0f} s")


# ---------------------------------------------------------------------------------------------
# table


def trace_values(row: dict[str, Any]) -> str:
    return "; ".join(f"{c['name']}={c['status']}({c.get('got', '')})" for c in row["checks"]
                     if any(t in c["name"] for t in TRACE))


def table(args: argparse.Namespace) -> tuple[list[str], bool]:
    picked = [a for name in args.exercise for a in ("--exercise", name)]
    start = time.monotonic()
    r = idrrun("course", "check", "-j", str(args.jobs), "--json", *picked, timeout=args.timeout)
    wall = time.monotonic() - start
    try:
        data = json.loads(r.stdout)
    except ValueError:
        return [f"course check: exit {r.returncode} after {wall:.0f} s, no JSON: "
                f"{(r.stdout + r.stderr).strip()[-800:]}"], False
    lines = [f"course check -j {args.jobs}: {data['passed']} right ({data['incomplete']} incomplete), "
             f"{data['failed']} wrong, {wall:.0f} s; {data['where']}",
             f"  {'exercise':18s} {'lang':8s} {'solution':10s} {'build s':>7s} {'run s':>7s}  "
             f"{'start':10s} {'run s':>7s}  GPU checks (solution) | not passed"]
    for row in data["rows"]:
        sol, st = row["solution"], row["start"]
        bad = [c["name"] for c in sol["checks"] if c["status"] != "pass"]
        lines.append(f"  {row['exercise']:18s} {row['language']:8s} {sol['verdict']:10s} "
                     f"{float(sol['build_seconds']):7.2f} {float(sol['run_seconds']):7.2f}  "
                     f"{st['verdict']:10s} {float(st['run_seconds']):7.2f}  "
                     f"{trace_values(sol)[:110]}{' | ' + ', '.join(bad)[:80] if bad else ''}")
    return lines, data["failed"] == 0 and r.returncode == 0


# ---------------------------------------------------------------------------------------------
# versus-host


def program_seconds(path: Path, program_args: tuple[str, ...], host: bool, timeout: float) -> str:
    r = idrrun("run", "-a", "--timeout", str(timeout), "--cliopts", " ".join(program_args), str(path),
               timeout=timeout + 120, host=host)
    m = _DONE.search(r.stdout)
    if not m:
        print(f"{path.name}: no exit line (rc {r.returncode}): {(r.stdout + r.stderr).strip()[-300:]}",
              file=sys.stderr, flush=True)
        return "build failed" if r.returncode == 1 else f"rc {r.returncode}"
    return f"{float(m.group(2)):.2f}" if m.group(1) == "exit 0" else m.group(1)


def versus_host(args: argparse.Namespace) -> list[str]:
    jobs = [(ex, lang, pair.solution) for ex in specs.all_exercises(bench.EXAMPLES)
            if not args.exercise or ex.name in args.exercise for lang, pair in ex.sources.items()]
    # each figure printed as soon as it is known: a run cut short keeps what it had
    gpu = []
    for ex, lang, path in jobs:
        gpu.append(program_seconds(path, ex.gpu_args, args.host, args.timeout))
        print(f"GPU  {ex.name} {lang}: {gpu[-1]}", flush=True)

    def on_host(job: tuple[specs.Exercise, str, Path]) -> str:
        result = program_seconds(job[2], job[0].gpu_args, True, args.timeout)
        print(f"host {job[0].name} {job[1]}: {result}", flush=True)
        return result

    with ThreadPoolExecutor(args.host_jobs) as pool:
        host = list(pool.map(on_host, jobs))
    lines = [f"each solution with its GPU arguments, program seconds; host: one core each, "
             f"{args.host_jobs} at once",
             f"  {'exercise':18s} {'language':9s} {'args':22s} {'GPU s':>10s} {'host s':>12s}"]
    for (ex, lang, _), g, h in zip(jobs, gpu, host):
        lines.append(f"  {ex.name:18s} {lang:9s} {' '.join(ex.gpu_args):22s} {g:>10s} {h:>12s}")
    return lines


# ---------------------------------------------------------------------------------------------
# variants


def variants(args: argparse.Namespace) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix="idrrun-variants-"))
    atexit.register(shutil.rmtree, work, True)
    gpu = bench.gpu_name()
    peak = args.peak_gbs or (3350.0 if "H100" in gpu else 4300.0)  # HBM3; stream-like on H200
    lines = [f"GCC 12 nvptx, {gpu or 'host build (--host)'}; Jacobi {args.n}^2 x {args.iterations}, "
             f"% of each variant's bandwidth floor at {peak:.0f} GB/s",
             f"  {'variant':8s} {'GOMP_OPENACC_DIM':16s} {'ms/iter':>10s} {'% floor':>8s}"]
    for v in range(1, 7):
        exe = work / f"jacobi{v}"
        bench.build_acc(bench.ROOT / "benchmarks" / "jacobi" / "jacobi_variants.c", exe, "-O3",
                        f"-DVARIANT={v}", gpu=not args.host)
        for dim in _GEOMETRIES:
            r = subprocess.run([str(exe), str(args.n), str(args.iterations)], capture_output=True, text=True,
                               env=dict(os.environ, GOMP_OPENACC_DIM=dim), timeout=120, check=False)
            last = (r.stdout.strip().splitlines() or [f"exit {r.returncode}"])[-1]
            ms = re.search(r"ms_per_iter ([\d.]+)", last)
            moved = re.search(r"bytes_per_iter ([\d.]+)", last)
            if ms and moved:
                floor = 100 * float(moved.group(1)) / (peak * 1e9) / (float(ms.group(1)) / 1e3)
                lines.append(f"  {v:<8d} {dim or 'default':16s} {float(ms.group(1)):10.4f} {floor:8.1f}")
            else:
                lines.append(f"  {v:<8d} {dim or 'default':16s} {last}")
    lines.append("dot product of 1025^2 doubles (profile_cg's), 50 calls:")
    for v in range(1, 7):
        exe = work / f"dot{v}"
        bench.build_acc(bench.ROOT / "benchmarks" / "reduction" / "dot_variants.c", exe, f"-DVARIANT={v}",
                        gpu=not args.host)
        r = subprocess.run([str(exe), "1050625", "50"], capture_output=True, text=True, timeout=60, check=False)
        lines.append("  " + (r.stdout.strip().splitlines() or [f"variant {v}: exit {r.returncode}"])[-1])
    lines.append("a declare'd table read in an acc routine seq (right: 0.25 ... 2):")
    for v in range(1, 6):
        exe = work / f"declare{v}"
        bench.build_acc(bench.ROOT / "benchmarks" / "reduction" / "declare_probe.c", exe,
                        "-O0" if v == 2 else "-O2", f"-DVARIANT={v}", gpu=not args.host)
        r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=20, check=False)
        lines.append("  " + (r.stdout.strip().splitlines() or [f"variant {v}: exit {r.returncode}"])[-1])
    return lines


# ---------------------------------------------------------------------------------------------
# class


def graded_class(args: argparse.Namespace) -> tuple[list[str], bool]:
    folder = Path(tempfile.mkdtemp(prefix="idrrun-async-class-"))
    atexit.register(shutil.rmtree, folder, True)
    solution = (bench.EXAMPLES / "C" / "async_matmul_solution.c").read_text()
    (folder / "ann.c").write_text(solution)
    (folder / "bob.f90").write_text((bench.EXAMPLES / "Fortran" / "async_matmul_solution.f90").read_text())
    (folder / "carl.c").write_text((bench.EXAMPLES / "C" / "async_matmul_exercise.c").read_text())
    one_queue = re.sub(r"wait\([\d, ]+\)", "wait(1)", re.sub(r"async\(\w+\)", "async(1)", solution))
    (folder / "dana.c").write_text(one_queue)
    report = folder / "report.json"
    start = time.monotonic()
    r = idrrun("grade", "async_matmul", "ann.c", "bob.f90", "carl.c", "dana.c", "-j", "2",
               "--report", str(report), timeout=args.timeout, host=args.host, cwd=folder)
    wall = time.monotonic() - start
    if not report.exists():
        return [f"grade: exit {r.returncode} after {wall:.0f} s, no report: "
                f"{(r.stdout + r.stderr).strip()[-800:]}"], False
    lines = [f"4 submissions of async_matmul graded -j 2: exit {r.returncode}, {wall:.0f} s"]
    for row in json.loads(report.read_text()):
        checks = {c["name"]: c["status"] + (f" ({c['got']})" if c.get("got") else "") for c in row["checks"]}
        lines.append(f"  {row['student']:5s} {row['verdict']:10s} sandbox={row['sandbox']} "
                     f"ran_on_gpu={checks.get('ran_on_gpu')} queues={checks.get('queues')} "
                     f"run={row['run_seconds']} s | {row['reasons'][:80]}")
    return lines, True


def main() -> int:
    p = bench.parser(__doc__, record=False)
    add = bench.subcommands(p)
    sub = add("table", "Every exercise checked (idrrun course check): verdicts, times, GPU checks.")
    sub.add_argument("-j", "--jobs", type=int, default=4, help="programs at once (default 4)")
    sub.add_argument("--exercise", action="append", default=[], help="only this one (repeat)")
    sub.add_argument("--timeout", type=float, default=540, help="for the whole check (default 540 s)")
    sub = add("versus-host", "Each solution with its GPU arguments, on the GPU and on one host core.")
    sub.add_argument("--host-jobs", type=int, default=14, help="host runs at once (default 14)")
    sub.add_argument("--timeout", type=float, default=150, help="per run (default 150 s)")
    sub.add_argument("--exercise", action="append", default=[], help="only this one (repeat)")
    sub.add_argument("--host", action="store_true", help="no GPU: both columns on the host")
    sub = add("variants", "GCC 12's nvptx code: Jacobi and dot-product variants, declare probe.")
    sub.add_argument("--peak-gbs", type=float, help="the device's memory bandwidth (default: "
                     "3350 on an H100, else 4300)")
    sub.add_argument("--n", type=int, default=4096, help="the Jacobi grid's side (default 4096)")
    sub.add_argument("--iterations", type=int, default=1000, help="Jacobi iterations (default 1000)")
    sub.add_argument("--host", action="store_true", help="host builds (checks the driver)")
    sub = add("class", "Four async_matmul submissions graded in the sandbox, GPU checks evaluated.")
    sub.add_argument("--timeout", type=float, default=300, help="for the grading (default 300 s)")
    sub.add_argument("--host", action="store_true", help="no GPU (checks the driver)")
    args = p.parse_args()
    if args.command != "table" and not args.host:
        bench.require_gpu(f"course_gpu.py {args.command}")
    ok = True
    if args.command == "table":
        lines, ok = table(args)
        bench.report("the course checked" + (" on the GPU" if bench.gpu_name() else " on the host"),
                     lines, record=args.record)
    elif args.command == "versus-host":
        bench.report("each solution on the GPU and on one host core", versus_host(args), record=args.record)
    elif args.command == "variants":
        bench.report("GCC 12 nvptx: Jacobi and dot-product variants", variants(args), record=args.record)
    else:
        lines, ok = graded_class(args)
        bench.report("a class of async_matmul graded on the GPU", lines, record=args.record)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
