"""The timelines issue 13 asks for, on a GPU machine: the data-management exercise (start file)
and solution at 100 and 1000 iterations, and the asynchronism solution, each under the built-in
tracer as `idrrun run --profile` runs it (the trace read during the run), with gcc offloading.

    python benchmarks/timelines_gpu.py OUT [--n 4096] [--docs docs/timelines]

For each run it prints the summary's share of GPU time per kind against the share of the
timeline's coloured area (first panel, every row), the hints, the milliseconds per iteration
(the program's wall time, and the GPU's span) and, for the Jacobi runs, the kernels' achieved
memory bandwidth against the device's peak (the bandwidth floor: 32 bytes per interior point and
iteration, two kernels each reading one array and writing the other); the pictures go to OUT and,
with --docs, to that folder as NAME_h100.png (or the GPU's short name).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idrrun.profile import session, timeline  # noqa: E402
from profile_cost import build  # noqa: E402  (this folder is sys.path[0])

KINDS = ("kernel", "h2d", "d2h", "memset")


def area_shares(png: Path, lay: timeline.Layout) -> dict[str, float]:
    """Each kind's share of the coloured (not idle) area of the first panel's bars."""
    from PIL import Image

    counts: collections.Counter[tuple[int, int, int]] = collections.Counter()
    with Image.open(png) as image:
        rgb = image.convert("RGB")
        for row, r in enumerate(lay.rows):
            if r.name == "host waits":
                continue
            x0, y0, x1, y1 = lay.bar_box(0, row)
            for n, colour in rgb.crop((x0, y0, x1 + 1, y1 + 1)).getcolors(1 << 16) or []:
                counts[colour] += n
    coloured = {k: counts[timeline.COLOURS[k]] for k in KINDS if k in timeline.COLOURS}
    total = sum(coloured.values())
    return {k: v / total for k, v in coloured.items()} if total else {}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--docs", type=Path)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    smi = shutil.which("nvidia-smi")
    gpu = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines() if smi else []
    gpu_name = gpu[0] if gpu else ""
    model = re.search(r"\b([A-Z]\d{2,3})\b", gpu_name)  # H100, H200, A100
    tag = model.group(1).lower() if model else "gpu"
    n = args.n
    floor_bytes = 32.0 * (n - 2) ** 2
    runs = [("laplace_exercise", "C/data_laplace_exercise.c", [str(n), "100"], 100),
            ("laplace_exercise", "C/data_laplace_exercise.c", [str(n), "1000"], 1000),
            ("laplace_solution", "C/data_laplace_solution.c", [str(n), "100"], 100),
            ("laplace_solution", "C/data_laplace_solution.c", [str(n), "1000"], 1000),
            ("async_solution", "C/async_matmul_solution.c", ["2000"], None)]
    print(f"GPU: {gpu_name}; n = {n}; gcc offloading; {time.strftime('%Y-%m-%d %H:%M')}")
    for label, source, argv, iterations in runs:
        exe = work / "bin" / label
        exe.parent.mkdir(exist_ok=True)
        if not exe.exists():
            build(ROOT / "examples" / source, exe)
        name = f"{label}_{iterations}" if iterations else label
        p = session.plan("builtin", work / name, work / "cache")
        if p.kind != "builtin":
            sys.exit(f"no built-in tracer: {p.notes}")
        followed = session.follower(p)
        start = time.monotonic()
        with followed or contextlib.nullcontext():
            done = subprocess.run([str(exe), *argv], env={**os.environ, **p.env}, cwd=work / name,
                                  capture_output=True, text=True, timeout=600)
        wall = time.monotonic() - start
        report = session.collect(p, source_name=source, gpu=gpu_name, iterations=iterations,
                                 bytes_per_iteration=floor_bytes if iterations else None,
                                 followed=followed)
        print(f"\n== {name}: {' '.join(argv)}, exit {done.returncode}, {wall:.2f} s wall")
        for line in done.stdout.strip().splitlines()[-2:]:
            print(f"   | {line}")
        s, trace = report.summary, report.trace
        if s is None or trace is None or report.timeline_png is None or not s.gpu_ns:
            print(f"   no profile: {report.message}")
            continue
        spent = {"kernel": s.kernel_ns, "h2d": s.h2d.total_ns, "d2h": s.d2h.total_ns,
                 "memset": s.memset_ns}
        area = area_shares(report.timeline_png, timeline.layout(trace))
        print("   share of GPU time (summary) vs of the timeline's coloured area:")
        for kind in KINDS:
            if spent.get(kind) or area.get(kind):
                summary_share = 100 * spent[kind] / s.gpu_ns
                print(f"     {kind:7s} {summary_share:6.1f} %   {100 * area.get(kind, 0.0):6.1f} %   "
                      f"(difference {100 * area.get(kind, 0.0) - summary_share:+.1f} points)")
        print(f"   hints: {[h.rule for h in report.hints]}")
        if iterations:
            print(f"   {1000 * wall / iterations:.3f} ms per iteration (program wall), "
                  f"{s.span_ns / 1e6 / iterations:.3f} ms (GPU span), GPU busy "
                  f"{100 * s.busy_ns / s.span_ns:.0f} % of the span")
            memory = report.rates.memory if report.rates else None
            if memory is not None and memory.peak is not None:
                floor_ms = floor_bytes / memory.peak.bytes_per_s * 1e3
                print(f"   kernels {memory.bytes_per_s / 1e9:.0f} GB/s = "
                      f"{100 * (memory.of_peak or 0):.0f} % of {memory.peak.what} "
                      f"({memory.peak.bytes_per_s / 1e9:.0f} GB/s); bandwidth floor "
                      f"{floor_ms:.3f} ms per iteration: the run reaches "
                      f"{100 * floor_ms / (s.span_ns / 1e6 / iterations):.0f} % of it")
        shutil.copyfile(report.timeline_png, out / f"{name}_timeline.png")
        if args.docs is not None:
            args.docs.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(report.timeline_png, args.docs / f"{name}_{tag}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
