"""Where `--profile` (the built-in CUPTI tracer) spends its time, on a GPU machine (issue 13).

    python benchmarks/profile_cost.py [--source examples/C/data_laplace_solution.c]
                                      [--args "4096 1000"] [--rounds 5]

Builds the program once (gcc, nvptx offloading), then, interleaved rounds, medians:
- bare:        the program alone
- traced:      the program with the tracer injected (CUDA_INJECTION64_PATH, as idrrun sets it):
               CUPTI's cost inside the program, and the trace file written; once as before
               (flushed every 500 ms, nothing read during the run), once as idrrun does now
               (every 100 ms, read during the run by a tracefile.Follower)
and, after each followed run, what idrrun does after the run (session.collect with the
follower: the rest of the trace, summary, rates and hints, timeline PNG, Perfetto JSON with the
events formatted during the run); on the last trace, each step on the whole trace, as it was
before the follower.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idrrun.profile import perfetto, session  # noqa: E402
from idrrun.profile.model import Trace  # noqa: E402
from idrrun.profile.hints import find_hints  # noqa: E402
from idrrun.profile.rates import achieved_rates  # noqa: E402
from idrrun.profile.summary import summarize  # noqa: E402
from idrrun.profile.timeline import draw  # noqa: E402
from idrrun.profile.tracefile import Follower, read_trace  # noqa: E402


def build(source: Path, exe: Path) -> None:
    """The program with gcc's nvptx offloading, as a student's GPU build (timelines_gpu.py too)."""
    subprocess.run(["gcc", "-O2", "-fopenacc", "-foffload=nvptx-none",
                    "-foffload-options=nvptx-none=-misa=sm_80 -lm", "-o", str(exe), str(source),
                    "-lm"], check=True, stderr=subprocess.DEVNULL)


def timed(fn, rounds: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def arguments(rounds: int | None = 5) -> argparse.ArgumentParser:
    """The options of the benchmarks that time one program (this one, tracer_cost.py,
    profile_phases.py, profile_where.py): its source, its arguments, and the rounds."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=str(ROOT / "examples" / "C" / "data_laplace_solution.c"))
    ap.add_argument("--args", default="4096 1000")
    if rounds is not None:
        ap.add_argument("--rounds", type=int, default=rounds)
    return ap


def main() -> int:
    args = arguments().parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-profile-cost-"))
    exe = work / "prog"
    build(Path(args.source), exe)
    plan = session.plan("builtin", work / "profile", work / "cache")
    if plan.kind != "builtin":
        sys.exit(f"profile_cost: no built-in tracer here: {plan.notes}")
    argv = [str(exe), *shlex.split(args.args)]
    env = {**os.environ, **plan.env}
    unfollowed = {**env, "IDRRUN_TRACE_FLUSH_MS": "500"}  # as before the follower
    bare: list[float] = []
    alone: list[float] = []
    traced: list[float] = []
    collected: list[float] = []  # session.collect() after a followed run
    last: tuple[object, object] = (None, None)
    assert plan.output is not None
    for _ in range(args.rounds):
        for target, environment in ((bare, os.environ), (alone, unfollowed), (traced, env)):
            # one run's trace: a trace.jsonl left there makes the next run write trace.jsonl.PID
            # beside it (another process of the same run), and read_trace merges them all
            for old in plan.output.parent.glob(plan.output.name + "*"):
                old.unlink()
            follower = session.follower(plan) if target is traced else None
            start = time.perf_counter()
            with follower or contextlib.nullcontext():  # as idrrun reads it during the run
                subprocess.run(argv, env=environment, check=True, stdout=subprocess.DEVNULL)
            target.append(time.perf_counter() - start)
            if follower is not None:  # what idrrun does after the run, all of it
                start = time.perf_counter()
                report = session.collect(plan, followed=follower)
                collected.append(time.perf_counter() - start)
                last = (report.trace, follower)
    lines = sum(1 for _ in open(plan.output, encoding="utf-8"))
    t_read, trace = timed(lambda: read_trace(plan.output), args.rounds)
    assert trace is not None
    followed, follower = last
    assert isinstance(followed, Trace) and isinstance(follower, Follower) and follower.used
    t_prepared, _ = timed(lambda: perfetto.write(followed, work / "p.json", follower.prepared),
                          args.rounds)
    t_sum, summary = timed(lambda: summarize(trace), args.rounds)
    t_hints, _ = timed(lambda: find_hints(trace, summary, achieved_rates(trace, summary)),
                       args.rounds)
    t_png, _ = timed(lambda: draw(trace, work / "t.png", title="t"), args.rounds)
    t_json, _ = timed(lambda: perfetto.write(trace, work / "t.json"), args.rounds)
    b, t = statistics.median(bare), statistics.median(traced)
    after = t_read + t_sum + t_hints + t_png + t_json
    idrrun_after = statistics.median(collected)
    print(f"{Path(args.source).name} {args.args}: {args.rounds} rounds, medians; trace "
          f"{lines} lines, {len(trace.kernels)} kernels, {len(trace.copies)} copies")
    print(f"  bare program        {b:7.3f} s")
    a = statistics.median(alone)
    print(f"  traced, not read    {a:7.3f} s   (+{a - b:.3f} s, +{100 * (a - b) / b:.1f} %: "
          "flushed every 500 ms, read after the run)")
    print(f"  traced, followed    {t:7.3f} s   (+{t - b:.3f} s, +{100 * (t - b) / b:.1f} %: "
          "flushed every 100 ms, read meanwhile)")
    print("  each step on the whole trace, as if nothing had been done during the run:")
    for name, value in (("read trace", t_read), ("summary", t_sum), ("rates + hints", t_hints),
                        ("timeline PNG", t_png), ("Perfetto JSON", t_json)):
        print(f"  {name:18s}  {value:7.3f} s")
    print(f"  all                 {after:7.3f} s   (+{100 * after / b:.1f} % of the bare run)")
    print("  what the follower leaves after the run:")
    print(f"  Perfetto, prepared  {t_prepared:7.3f} s   (events formatted during the run)")
    print(f"  idrrun after run    {idrrun_after:7.3f} s   (+{100 * idrrun_after / b:.1f} % of the "
          "bare run: session.collect with the follower, read, summary, hints, PNG, Perfetto)")
    print(f"  traced+after        {t + idrrun_after:7.3f} s   (+{100 * (t + idrrun_after - b) / b:.1f} "
          "% over the bare run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
