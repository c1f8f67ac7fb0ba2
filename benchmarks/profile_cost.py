"""The profiler on a GPU: what `--profile` (the built-in CUPTI tracer) costs, and what it shows
(issue 13: the profiler's cost at most 5 % of the whole run).

    python3 benchmarks/profile_cost.py steps     [--source FILE] [--args "4096 1000"] [--rounds 5]
    python3 benchmarks/profile_cost.py tracer    [...] [--rounds 7]
    python3 benchmarks/profile_cost.py phases    [...] [--rounds 5] [--checks] [--bare]
    python3 benchmarks/profile_cost.py where     [...] [--top 40]
    python3 benchmarks/profile_cost.py timelines [--n 4096] [--out DIR] [--docs DIR]
    python3 benchmarks/profile_cost.py after     [--trace FILE] [--rounds 9] [--run-ms 900] ...

The program is the Jacobi solution of data_laplace (4096 x 1000) unless --source/--args say
otherwise, built once with gcc's nvptx offloading. Rounds are interleaved; figures are medians.
Each command but `after` needs a GPU; --host builds for the host instead and runs without one, to
check the driver itself (its figures then measure nothing).
- steps: the program bare, traced with the trace read after the run (flushed every 500 ms) and
  traced with it followed during the run (every 100 ms, as idrrun does); then what idrrun does
  after a followed run (session.collect), and each step of it on the whole trace. Read
  "traced+after" against "bare": the profiler's whole cost.
- tracer: copies of idrrun/profile/tracer.c with one part taken out (synchronisation records,
  the driver-API callbacks naming streams, all but kernels; CUPTI's buffers of 256 KiB and 1 MiB
  instead of 4; and the full tracer never flushed, and flushed every 500 ms): which part of
  CUPTI's work in the program costs what, and how much of the trace is written while the program
  runs (what a follower can read before its end). Read each row against "alone".
- phases: the same `idrrun run` with and without --profile, in one process (cli.run_in_process),
  idrrun's stages timed with perf_counter (build, profile plan, the program's run, the follower's
  stop, collect's steps), and --profile with the trace not followed; with --bare also the
  program alone and traced outside idrrun. Read the column "profile - plain".
- where: one `idrrun run -a --profile` in-process under cProfile, idrrun's functions by
  cumulative time (the wait for the program included).
- timelines: the course's runs under the tracer as `--profile` runs them (the data-management
  start file and solution at 100 and 1000 iterations, the asynchronism solution) and a run
  killed by its timeout: per run the summary's share of GPU time per kind against the share of
  the timeline's coloured area, the hints, ms per iteration and the kernels' bandwidth against
  the device's peak; checks that the async solution's streams are named async(1..3) and
  synchronous, that the tracer wrote a device record, that the start file gets the data_region
  hint and that a killed run's partial trace still reads. Pictures, trace.json and trace.jsonl
  go to --out (default $OUT, else a temporary folder), and with --docs to that folder as
  NAME_h100.png (the GPU's short name). Exits 1 when a check fails.
- after: what the student waits for after the program's end, without a GPU: `idrrun run
  --profiler builtin` (in-process) of a stand-in program that writes a recorded trace (--trace,
  default a synthetic one of the Jacobi run's shape, 9000 lines) as the tracer does: in pieces
  every 100 ms over --run-ms, then its last records and the mark of its context's end, then
  --destroy-ms later (CUDA destroying the context) its end record, then --teardown-ms later
  (CUDA's teardown) it exits. The defaults are what the H200 showed for the Jacobi run (last
  records 122-165 ms before the exit, the end record 56-93 ms before it). Each round starts as
  a resident worker does, the fixed texts of the picture rendered, the others not. Prints
  "after the program's end: X ms before the text, Y ms before the picture" (medians), and the
  whole command after the end.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import functools
import io
import itertools
import json
import os
import pstats
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench

sys.path.insert(0, str(bench.ROOT))

from idrrun import build, cli, pipeline  # noqa: E402
from idrrun.display import TextReporter  # noqa: E402
from idrrun.profile import perfetto, running, stages as session, timeline, tracefile, tracer  # noqa: E402
from idrrun.profile.hints import find_hints  # noqa: E402
from idrrun.profile.model import ProfilePlan, Trace  # noqa: E402
from idrrun.profile.rates import achieved_rates  # noqa: E402
from idrrun.profile.summary import summarize  # noqa: E402
from idrrun.profile.timeline import draw  # noqa: E402
from idrrun.profile.tracefile import Follower, read_trace  # noqa: E402
from idrrun.run import proc  # noqa: E402

C = bench.EXAMPLES / "C"


def traced_plan(work: Path, label: str) -> ProfilePlan:
    p = session.plan("builtin", work / label, work / "cache")
    if p.kind != "builtin":
        sys.exit(f"profile_cost: no built-in tracer here: {p.notes}")
    return p


def program(args: argparse.Namespace, work: Path) -> list[str]:
    """The program built once (for the GPU unless --host), as argv with its arguments."""
    exe = work / "prog"
    bench.build_acc(args.source, exe, gpu=not args.host)
    return [str(exe), *shlex.split(args.args)]


# ---------------------------------------------------------------------------------------------
# steps


def steps(args: argparse.Namespace, work: Path) -> list[str]:
    argv = program(args, work)
    plan = traced_plan(work, "profile")
    assert plan.output is not None
    env = {**os.environ, **plan.env}
    unfollowed = {**env, "IDRRUN_TRACE_FLUSH_MS": "500"}  # as before the follower
    bare: list[float] = []
    alone: list[float] = []
    traced: list[float] = []
    collected: list[float] = []  # session.collect() after a followed run
    last: tuple[Trace | None, Follower | None] = (None, None)
    for _ in range(args.rounds):
        for target, environment in ((bare, dict(os.environ)), (alone, unfollowed), (traced, env)):
            # one run's trace: a trace.jsonl left there makes the next run write trace.jsonl.PID
            # beside it (another process of the same run), and read_trace merges them all
            for old in plan.output.parent.glob(plan.output.name + "*"):
                old.unlink()
            follower = running.ProfileSession.start(plan, follow=True, show_profile=True).follower \
                if target is traced else None
            start = time.perf_counter()
            with follower or contextlib.nullcontext():  # as idrrun reads it during the run
                subprocess.run(argv, env=environment, check=True, stdout=subprocess.DEVNULL)
            target.append(time.perf_counter() - start)
            if follower is not None:  # what idrrun does after the run, all of it
                start = time.perf_counter()
                report = session.collect(plan, follower=follower)
                collected.append(time.perf_counter() - start)
                last = (report.trace, follower)
    followed, follower = last
    if followed is None or follower is None or not plan.output.exists():
        sys.exit("profile_cost steps: the tracer wrote no trace (no GPU work?)")
    lines = sum(1 for _ in open(plan.output, encoding="utf-8"))
    t_read, trace = bench.timed(lambda: read_trace(plan.output), args.rounds)
    assert trace is not None
    t_prepared, _ = bench.timed(lambda: perfetto.write(followed, work / "p.json", follower.prepared),
                                args.rounds)
    t_sum, summary = bench.timed(lambda: summarize(trace), args.rounds)
    t_hints, _ = bench.timed(lambda: find_hints(trace, summary, achieved_rates(trace, summary)),
                             args.rounds)
    t_png, _ = bench.timed(lambda: draw(trace, work / "t.png", title="t"), args.rounds)
    t_json, _ = bench.timed(lambda: perfetto.write(trace, work / "t.json"), args.rounds)
    b, t, a = bench.median(bare), bench.median(traced), bench.median(alone)
    after = t_read + t_sum + t_hints + t_png + t_json
    idrrun_after = bench.median(collected)
    return [
        f"{args.source.name} {args.args}: {args.rounds} rounds, medians; trace {lines} lines, "
        f"{len(trace.kernels)} kernels, {len(trace.copies)} copies",
        f"  bare program        {b:7.3f} s",
        f"  traced, not read    {a:7.3f} s   (+{a - b:.3f} s, {100 * (a - b) / b:+.1f} %: "
        "flushed every 500 ms, read after the run)",
        f"  traced, followed    {t:7.3f} s   (+{t - b:.3f} s, {100 * (t - b) / b:+.1f} %: "
        "flushed every 100 ms, read meanwhile)",
        "  each step on the whole trace, as if nothing had been done during the run:",
        *(f"  {name:18s}  {value:7.3f} s" for name, value in (
            ("read trace", t_read), ("summary", t_sum), ("rates + hints", t_hints),
            ("timeline PNG", t_png), ("Perfetto JSON", t_json))),
        f"  all                 {after:7.3f} s   (+{100 * after / b:.1f} % of the bare run)",
        "  what the follower leaves after the run:",
        f"  Perfetto, prepared  {t_prepared:7.3f} s   (events formatted during the run)",
        f"  idrrun after run    {idrrun_after:7.3f} s   (+{100 * idrrun_after / b:.1f} % of the "
        "bare run: session.collect with the follower)",
        f"  traced+after        {t + idrrun_after:7.3f} s   "
        f"(+{100 * (t + idrrun_after - b) / b:.1f} % over the bare run)",
    ]


# ---------------------------------------------------------------------------------------------
# tracer

SYNC = '        {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "cuptiActivityEnable(SYNCHRONIZATION)"},\n'
COPIES = ('        {CUPTI_ACTIVITY_KIND_MEMCPY, "cuptiActivityEnable(MEMCPY)"},\n'
          '        {CUPTI_ACTIVITY_KIND_MEMSET, "cuptiActivityEnable(MEMSET)"},\n')
BUFFER = "#define BUFFER_SIZE ((size_t)4 << 20)\n"
HOOK = "            report(hooks[i].call, cuptiEnableCallback(1, subscriber, hooks[i].domain, hooks[i].id));\n"
NO_DRIVER_HOOK = ("            if (hooks[i].domain != CUPTI_CB_DOMAIN_DRIVER_API)\n"
                  "                report(hooks[i].call, cuptiEnableCallback(1, subscriber, "
                  "hooks[i].domain, hooks[i].id));\n")
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "full": [],
    "no sync": [(SYNC, "")],
    "no callbacks": [(HOOK, NO_DRIVER_HOOK)],
    "kernels only": [(SYNC, ""), (COPIES, ""), (HOOK, NO_DRIVER_HOOK)],
    # CUPTI's buffers: a flush without FORCED hands over the records completed so far
    "buffers 256K": [(BUFFER, "#define BUFFER_SIZE ((size_t)256 << 10)\n")],
    "buffers 1M": [(BUFFER, "#define BUFFER_SIZE ((size_t)1 << 20)\n")],
}


def build_variant(name: str, edits: list[tuple[str, str]], work: Path) -> Path:
    """A copy of tracer.c with `edits` made (the product's source is not changed), built."""
    text = tracer.TRACER_SOURCE.read_text()
    for old, new in edits:
        if old not in text:
            sys.exit(f"profile_cost tracer: {name}: tracer.c changed, {old.strip()!r} not found")
        text = text.replace(old, new)
    source = work / f"tracer-{name.replace(' ', '-')}.c"
    source.write_text(text)
    cupti = tracer.find_cupti(os.environ)
    if isinstance(cupti, str):
        sys.exit(f"profile_cost tracer: {cupti}")
    library = work / f"{source.stem}.so"
    argv = list(tracer.build_command("gcc", cupti, library))
    argv[argv.index(str(tracer.TRACER_SOURCE))] = str(source)
    subprocess.run(argv, check=True)
    return library


def tracer_parts(args: argparse.Namespace, work: Path) -> list[str]:
    argv = program(args, work)
    libraries = {name: build_variant(name, edits, work) for name, edits in VARIANTS.items()}
    runs: dict[str, dict[str, str]] = {"alone": {}}
    for name, library in libraries.items():
        runs[name] = {"CUDA_INJECTION64_PATH": str(library), "IDRRUN_TRACE_FLUSH_MS": "100"}
    runs["not flushed"] = {"CUDA_INJECTION64_PATH": str(libraries["full"]), "IDRRUN_TRACE_FLUSH_MS": "0"}
    runs["flushed 500 ms"] = {"CUDA_INJECTION64_PATH": str(libraries["full"]), "IDRRUN_TRACE_FLUSH_MS": "500"}
    times: dict[str, list[float]] = {name: [] for name in runs}
    lines: dict[str, int] = {}
    during: dict[str, list[float]] = {name: [] for name in runs}  # the share written before the end
    for _ in range(args.rounds + 1):  # the first round warms the GPU and the files up
        for name, extra in runs.items():
            trace = work / "trace.jsonl"
            trace.unlink(missing_ok=True)
            env = {**os.environ, **extra, "IDRRUN_TRACE_FILE": str(trace)}
            start = time.perf_counter()
            child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
            sizes = [(0.0, 0)]  # the trace's size while the program runs, every 10 ms
            while child.poll() is None:
                with contextlib.suppress(OSError):
                    sizes.append((time.perf_counter(), trace.stat().st_size))
                time.sleep(0.01)
            end = time.perf_counter()
            times[name].append(end - start)
            data = trace.read_bytes() if trace.exists() else b""
            lines[name] = len(data.splitlines())
            # what a follower could have read 100 ms before the end (the program's exit flushes
            # the rest, and CUDA's teardown takes a while after)
            early = max(size for t, size in sizes if t <= end - 0.1)
            during[name].append(early / len(data) if data else 0.0)
    alone = bench.median(times["alone"][1:])
    out = [f"{args.source.name} {args.args}, {args.rounds} rounds, medians; "
           f"{len(os.sched_getaffinity(0))} cores"]
    for name, ts in times.items():
        t = bench.median(ts[1:])
        out.append(f"  {name:14s} {t:7.3f} s  {100 * (t - alone) / alone:+6.1f} %  "
                   f"({lines[name]} trace lines, {100 * bench.median(during[name][1:]):.0f} % "
                   f"of its bytes there 100 ms before the end)  rounds {bench.spread(ts[1:], digits=3)}")
    return out


# ---------------------------------------------------------------------------------------------
# phases

spent: dict[str, float] = defaultdict(float)
kept: dict[str, Any] = {}  # the last result of the stages timed with keep=True


def time_stage(owner: Any, name: str, label: str | Callable[..., str], keep: bool = False) -> bool:
    """Wraps owner.name with a timer adding to spent[label]; False when idrrun has no such stage
    any more (the table then has no row for it)."""
    original = getattr(owner, name, None)
    if original is None:
        print(f"profile_cost phases: {getattr(owner, '__name__', owner)}.{name} not found: not timed")
        return False

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            result = original(*args, **kwargs)
            if keep:
                kept[name] = result
            return result
        finally:
            key = label(*args, **kwargs) if callable(label) else label
            spent[key] += time.perf_counter() - start

    setattr(owner, name, wrapper)
    return True


def phases(args: argparse.Namespace, work: Path) -> list[str]:
    plain = ["run", *(["-a"] if args.checks else []), "--cliopts", args.args, str(args.source)]
    profiled = plain[:1] + (["--profiler", args.profiler] if args.profiler else ["--profile"]) + plain[1:]
    time_stage(build, "build", "build", keep=True)  # the executable and the tracer's
    time_stage(session, "plan", "profile plan", keep=True)  # environment, for the bare runs
    time_stage(proc, "run", lambda *a, **k: "program run" if k.get("what") == "run" else
               f"proc.run {k.get('what')}")
    time_stage(tracefile.Follower, "__exit__", "follower stop")
    time_stage(session, "read_trace", "collect: read the rest")
    time_stage(session, "summarize", "collect: summary")
    time_stage(session, "draw_timeline", "collect: timeline PNG")
    time_stage(session.perfetto, "write", "collect: Perfetto JSON")
    time_stage(session, "achieved_rates", "collect: rates")
    time_stage(session, "find_hints", "collect: hints")
    time_stage(session, "collect", "collect (all)")
    time_stage(TextReporter, "profile", "profile text")
    time_stage(pipeline, "execute", "pipeline.execute")
    session_start = running.ProfileSession.__dict__["start"]  # the classmethod, as declared

    def unfollowed(plan: Any, **kw: Any) -> running.ProfileSession:
        return session_start.__func__(running.ProfileSession, plan, **{**kw, "follow": False})
    modes = ("plain", "profile", "not followed")
    rows: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in (*modes, "bare")}
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        cli.run_in_process(plain)
        cli.run_in_process(profiled)
        exe = kept["build"].executable
        tracer_env = {**os.environ, **kept["plan"].env}
        argv = [str(exe), *shlex.split(args.args)]
        for _ in range(args.rounds):
            for mode in modes:
                spent.clear()
                setattr(running.ProfileSession, "start",
                        staticmethod(unfollowed) if mode == "not followed" else session_start)
                start = time.perf_counter()
                cli.run_in_process(plain if mode == "plain" else profiled)
                spent["whole command"] = time.perf_counter() - start
                for key, value in spent.items():
                    rows[mode][key].append(value)
            if args.bare:
                for name, env in (("program alone", dict(os.environ)), ("program traced", tracer_env)):
                    start = time.perf_counter()
                    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, check=False)
                    rows["bare"][name].append(time.perf_counter() - start)
    setattr(running.ProfileSession, "start", start)

    def med(mode: str, key: str) -> float:
        return 1000 * bench.median(rows[mode][key]) if rows[mode][key] else 0.0

    out = [f"{args.source.name} {args.args}, {args.rounds} rounds, medians (ms), "
           f"{os.cpu_count()} cores visible, affinity {len(os.sched_getaffinity(0))}",
           f"  {'':28s} " + " ".join(f"{m:>12s}" for m in modes) + "   profile - plain"]
    for key in dict.fromkeys([*rows["profile"], *rows["plain"]]):
        out.append(f"  {key:28s} " + " ".join(f"{med(m, key):12.1f}" for m in modes) +
                   f"   {med('profile', key) - med('plain', key):+8.1f}")
    for name in rows["bare"]:
        out.append(f"  {name:28s} {med('bare', name):12.1f}")
    for mode in modes:
        out.append(f"  {mode} rounds: " + " ".join(f"{1000 * w:.0f}" for w in rows[mode]["whole command"]))
    return out


# ---------------------------------------------------------------------------------------------
# where


def where(args: argparse.Namespace, work: Path) -> list[str]:
    argv = ["run", "-a", "--profile", "--cliopts", args.args, str(args.source)]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        cli.run_in_process(argv)  # builds, makes the tracer, warms the caches
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        code = cli.run_in_process(argv)
        profiler.disable()
        wall = time.perf_counter() - start
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(
        r"idrrun|PIL|subprocess|json", args.top)
    print(out.getvalue())
    rows = [line for line in out.getvalue().splitlines() if re.match(r"\s*\d+(/\d+)?\s+\d+\.\d+", line)]
    return [f"idrrun run -a --profile {args.source.name} {args.args} (in-process, under cProfile): "
            f"{wall:.3f} s, exit {code}; idrrun's functions by cumulative time:",
            "    ncalls  tottime  percall  cumtime  percall filename:lineno(function)", *rows[:15]]


# ---------------------------------------------------------------------------------------------
# after

STAND_IN = r"""
/* Stands in for a GPU program under the built-in tracer (profile_cost.py after; no GPU needed):
   writes the trace argv[1] to IDRRUN_TRACE_FILE as the tracer does -- its header, then its
   records in pieces every 100 ms for argv[2] ms, then the mark of its context's end (when the
   trace has one), argv[3] ms later the rest (its end record), argv[4] ms later it says when it
   ended and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}
int main(int argc, char **argv)
{
    const char *path = getenv("IDRRUN_TRACE_FILE");
    FILE *in = argc == 5 ? fopen(argv[1], "rb") : NULL;
    if (path == NULL || in == NULL)
        return 2;
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *text = malloc(n + 1);
    if (text == NULL || fread(text, 1, n, in) != (size_t)n)
        return 2;
    text[n] = 0;
    long run = atol(argv[2]), destroy = atol(argv[3]), teardown = atol(argv[4]);
    char *mark = strstr(text, "{\"type\":\"context_end\"");
    char *end = strstr(text, "{\"type\":\"end\"");
    long head = strchr(text, '\n') - text + 1;
    long last = mark != NULL ? mark - text : end != NULL ? end - text : n;
    long marked = mark != NULL ? strchr(mark, '\n') - text + 1 : last;
    FILE *out = fopen(path, "wb");
    fwrite(text, 1, head, out);
    fflush(out);
    long pieces = run / 100 > 0 ? run / 100 : 1;
    for (long i = 0; i < pieces; i++) {
        long a = head + (last - head) * i / pieces, b = head + (last - head) * (i + 1) / pieces;
        pause_ms(run / pieces);
        fwrite(text + a, 1, b - a, out);
        fflush(out);
    }
    fwrite(text + last, 1, marked - last, out);
    fflush(out);
    pause_ms(destroy);
    fwrite(text + marked, 1, n - marked, out);
    fclose(out);
    pause_ms(teardown);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    printf("ended at %lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    return 0;
}
"""


def jacobi_trace(iterations: int = 1000) -> list[str]:
    """A trace of the Jacobi solution's shape (4096² on an H200 with GCC, as tests/
    test_profile_views.py's jacobi_solution): A in and out once, per iteration four small
    argument copies, two kernels each waited for, the reduction's 8 bytes back; the mark of the
    context's end after the last record, then the frees, the device and the end record."""
    t = 1_000_000_000_000
    records: list[dict[str, Any]] = [
        {"type": "header", "format": "idrrun-trace", "version": 3, "pid": 4242,
         "cupti_api": 130001, "start": t - 300_000_000},
        {"type": "queue", "context": 1, "stream": 7, "correlation": 1, "queue": -2,
         "runtime": "libgomp"}]
    correlation = itertools.count(1)
    block = 4096 * 4096 * 8

    def op(kind: str, ns: int, gap: int, **fields: Any) -> None:
        nonlocal t
        records.append({"type": kind, "start": t, "end": t + ns, "device": 0, "context": 1,
                        "stream": 7, "correlation": next(correlation), **fields})
        t += ns + gap

    def copy(direction: str, size: int, ns: int, gap: int) -> None:
        src, dst = ("pageable", "device") if direction == "HtoD" else ("device", "pageable")
        op("memcpy", ns, gap, bytes=size, copy=direction, src=src, dst=dst, **{"async": 0})

    def kernel(name: str) -> None:
        nonlocal t
        op("kernel", 110_500, 0, grid=[4096, 1, 1], block=[128, 1, 1], name=name)
        records.append({"type": "sync", "start": t - 110_500, "end": t + 1_000, "context": 1,
                        "stream": 7, "correlation": next(correlation), "sync": "stream"})
        t += 10_000

    for _ in range(2):
        records.append({"type": "alloc", "at": t, "device": 0, "context": 1, "op": "alloc",
                        "bytes": block, "memory": "device"})
    copy("HtoD", block, 16_500_000, 20_000)
    for _ in range(iterations):
        for _ in range(4):
            copy("HtoD", 24, 500, 8_000)
        kernel("main$_omp_fn$0")
        copy("DtoH", 8, 2_800, 8_000)
        kernel("main$_omp_fn$1")
    copy("DtoH", block, 5_900_000, 0)
    records.append({"type": "context_end", "context": 1})
    for _ in range(2):
        records.append({"type": "alloc", "at": t, "device": 0, "context": 1, "op": "free",
                        "bytes": block, "memory": "device"})
    records.append({"type": "device", "device": 0, "name": "NVIDIA H200", "cc": [9, 0],
                    "sms": 132, "memory": 150_000_000_000, "memory_clock_khz": 2_619_000,
                    "memory_bus_bits": 6144, "integrated": 0})
    records.append({"type": "end", "records": len(records) - 1, "dropped": 0})
    return [json.dumps(r, separators=(",", ":")) + "\n" for r in records]


class Clocked(io.TextIOBase):
    """A stdout that notes when each piece of text was written (time.monotonic_ns: the clock
    the stand-in's CLOCK_MONOTONIC reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[int, str]] = []

    def write(self, text: str) -> int:
        self.writes.append((time.monotonic_ns(), text))
        return len(text)

    def first(self, needle: str) -> int | None:
        return next((at for at, text in self.writes if needle in text), None)


def after(args: argparse.Namespace, work: Path) -> list[str]:
    lines = args.trace.read_text().splitlines(keepends=True) if args.trace else jacobi_trace()
    trace, unmarked = work / "stand-in.jsonl", work / "unmarked.jsonl"
    trace.write_text("".join(lines))
    unmarked.write_text("".join(line for line in lines if '"type":"context_end"' not in line))
    source = work / "stand_in.c"
    source.write_text(STAND_IN)
    placeholder = work / "no-tracer.so"  # (no CUPTI needed: the stand-in writes the trace)
    placeholder.touch()
    session.build_tracer = lambda *a, **k: (placeholder, "")  # type: ignore[assignment]
    # (its trace, from its last records to its end record, from that to its exit)
    cases = {"as on the H200": (trace, args.destroy_ms, args.teardown_ms),
             "no mark of the context's end (an older tracer)": (unmarked, args.destroy_ms,
                                                                 args.teardown_ms),
             "no teardown": (trace, 0, 0)}
    found: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in cases}
    for round_ in range(args.rounds + 1):  # the first builds the stand-in and warms up
        for name, (written, destroy, teardown) in cases.items():
            argv = ["run", "--profiler", "builtin", "--cliopts",
                    f"{written} {args.run_ms} {destroy} {teardown}", str(source)]
            # As a resident worker starts: the fixed texts of the picture rendered, no others.
            timeline._lettering.cache_clear()
            timeline.warm()
            out = Clocked()
            with contextlib.redirect_stdout(out):
                code = cli.run_in_process(argv)
            done = time.monotonic_ns()
            said = "".join(text for _, text in out.writes)
            ended = re.search(r"ended at (\d+)", said)
            text_at, picture_at = out.first("GPU profile"), out.first("timeline: ")
            if code != 0 or ended is None or text_at is None or picture_at is None:
                sys.exit(f"profile_cost after: exit {code}, no profile or no picture:\n{said[-3000:]}")
            if round_:
                end = int(ended.group(1))
                for key, at in (("text", text_at), ("picture", picture_at), ("done", done)):
                    found[name][key].append((at - end) / 1e6)
    out_lines = [f"{args.trace.name if args.trace else 'a synthetic Jacobi trace'}: {len(lines)} "
                 f"lines; the stand-in writes them over {args.run_ms} ms; {args.rounds} rounds, "
                 "medians (ms after the program's end)"]
    for name, (_, destroy, teardown) in cases.items():
        got = {key: bench.median(values) for key, values in found[name].items()}
        out_lines += [
            f"  {name} (its end record {destroy} ms after its last records, its exit "
            f"{teardown} ms after that):",
            f"    after the program's end: {got['text']:.1f} ms before the text, "
            f"{got['picture']:.1f} ms before the picture; the command returns after "
            f"{got['done']:.1f} ms",
            f"    rounds (text): {bench.spread(found[name]['text'], digits=1)}"]
    return out_lines


# ---------------------------------------------------------------------------------------------
# timelines

KINDS = ("kernel", "h2d", "d2h", "memset")


def area_shares(png: Path, lay: timeline.Layout) -> dict[str, float]:
    """Each kind's share of the coloured (not idle) area of the first panel's bars."""
    from PIL import Image

    counts: collections.Counter[object] = collections.Counter()
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


def records(path: Path, kind: str) -> list[dict[str, Any]]:
    """The tracer's records of one type in a trace.jsonl."""
    found = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == kind:
            found.append(record)
    return found


class Timelines:
    """The course's runs under the tracer, what each shows, and the checks of what it must."""

    def __init__(self, args: argparse.Namespace, work: Path, out: Path) -> None:
        self.args, self.work, self.out = args, work, out
        self.gpu = bench.gpu_name().split(",")[0]
        model = re.search(r"\b([A-Z]\d{2,3})\b", self.gpu)  # H100, H200, A100
        self.tag = model.group(1).lower() if model else "gpu"
        self.floor_bytes = 32.0 * (args.n - 2) ** 2  # two kernels, each reads one array, writes one
        self.lines: list[str] = []
        self.failures: list[str] = []

    def say(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)

    def run(self, name: str, source: str, argv: list[str], iterations: int | None,
            timeout: float = 600) -> tuple[str, Any]:
        exe = self.work / "bin" / Path(source).stem
        exe.parent.mkdir(exist_ok=True)
        if not exe.exists():
            bench.build_acc(bench.EXAMPLES / source, exe, gpu=not self.args.host)
        p = traced_plan(self.work, name)
        follower = running.ProfileSession.start(p, follow=True, show_profile=True).follower
        start = time.monotonic()
        with follower or contextlib.nullcontext():  # proc.run: SIGTERM first, as idrrun stops a run
            done = proc.run([str(exe), *argv], what="run", timeout=timeout, spec=proc.ProcSpec(cwd=p.run_dir, env={**os.environ, **p.env}))
        wall = time.monotonic() - start
        report = session.collect(p, source_name=source, gpu=self.gpu, iterations=iterations,
                                 bytes_per_iteration=self.floor_bytes if iterations else None,
                                 follower=follower)
        self.say(f"{name}: {' '.join(argv)}, {done.describe()}, {wall:.2f} s wall")
        if p.output is not None and p.output.is_file():
            shutil.copyfile(p.output, self.out / f"{name}_trace.jsonl")
        if report.trace_json:
            shutil.copyfile(report.trace_json, self.out / f"{name}_trace.json")
        if report.timeline_png:
            shutil.copyfile(report.timeline_png, self.out / f"{name}_timeline.png")
            if self.args.docs is not None:
                self.args.docs.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(report.timeline_png, self.args.docs / f"{name}_{self.tag}.png")
        self.shares(report, wall, iterations)
        return done.output, report

    def shares(self, report: Any, wall: float, iterations: int | None) -> None:
        s, trace = report.summary, report.trace
        if s is None or trace is None or report.timeline_png is None or not s.gpu_ns:
            self.say(f"  no profile: {report.message}")
            return
        spent = {"kernel": s.kernel_ns, "h2d": s.h2d.total_ns, "d2h": s.d2h.total_ns,
                 "memset": s.memset_ns}
        area = area_shares(report.timeline_png, timeline.layout(trace))
        shown = [f"{kind} {100 * spent[kind] / s.gpu_ns:.1f}/{100 * area.get(kind, 0.0):.1f}"
                 for kind in KINDS if spent.get(kind) or area.get(kind)]
        self.say(f"  % of GPU time, summary/timeline area: {', '.join(shown)}; "
                 f"hints {[h.rule for h in report.hints]}")
        if iterations:
            memory = report.rates.memory if report.rates else None
            rate = ""
            if memory is not None and memory.peak is not None:
                floor_ms = self.floor_bytes / memory.peak.bytes_per_s * 1e3
                rate = (f"; kernels {memory.bytes_per_s / 1e9:.0f} GB/s = {100 * (memory.of_peak or 0):.0f} % "
                        f"of {memory.peak.what}, {100 * floor_ms / (s.span_ns / 1e6 / iterations):.0f} % "
                        "of the bandwidth floor")
            self.say(f"  {1000 * wall / iterations:.3f} ms per iteration (wall), "
                     f"{s.span_ns / 1e6 / iterations:.3f} ms (GPU span), GPU busy "
                     f"{100 * s.busy_ns / s.span_ns:.0f} %{rate}")

    def check(self, ok: bool, failure: str) -> None:
        if not ok and not self.args.host:
            self.failures.append(failure)

    def all(self) -> list[str]:
        n = str(self.args.n)
        self.say(f"GPU {self.gpu or 'none (--host)'}; n = {n}; gcc offloading; built-in tracer, followed")
        for iterations in (100, 1000):
            _, report = self.run(f"laplace_exercise_{iterations}", "C/data_laplace_exercise.c",
                                 [n, str(iterations)], iterations)
            if iterations == 100:
                self.check("data_region" in {h.rule for h in report.hints},
                           "the start file did not get the data_region hint")
        for iterations in (100, 1000):
            self.run(f"laplace_solution_{iterations}", "C/data_laplace_solution.c", [n, str(iterations)],
                     iterations)
        output, report = self.run("async_solution", "C/async_matmul_solution.c", ["2000"], None)
        self.check("C[0] = 42.000000" in output, "async: C[0] is not 42 (the tracer changed the result)")
        t = report.trace
        named = sorted((q.stream, q.label) for q in t.stream_queues) if t else []
        labels = {label for _, label in named}
        self.say(f"  streams -> queues: {named or 'none'}; device records: "
                 f"{len(t.devices) if t else 0}")
        self.check({"async(1)", "async(2)", "async(3)", "synchronous"} <= labels,
                   f"async: the queues are not all named: {named}")
        self.check(bool(t and t.devices), "async: no device record")
        _, report = self.run("killed", "C/data_laplace_solution.c", [n, "100000"], 100000, timeout=4)
        t = report.trace
        self.say(f"  trace complete={t.complete if t else None} kernels={len(t.kernels) if t else 0} "
                 f"notes={list(report.notes)}")
        self.check(t is not None and not t.complete and bool(t.kernels),
                   "a run killed by its timeout left no readable partial trace")
        self.say("FAIL: " + "; ".join(self.failures) if self.failures else "every check passed")
        return self.lines


def main() -> int:
    p = bench.parser(__doc__, record=False)
    add = bench.subcommands(p)
    subs = {
        "steps": add("steps", "Bare, traced, followed; what idrrun does after the run, step by step."),
        "tracer": add("tracer", "What each part of the tracer costs inside the program."),
        "phases": add("phases", "`idrrun run` with and without --profile, stage by stage."),
        "where": add("where", "`idrrun run --profile` in-process under cProfile."),
        "timelines": add("timelines", "The course's runs under the tracer: shares, hints, checks."),
        "after": add("after", "What the student waits for after the program's end (no GPU needed)."),
    }
    for name, sub in subs.items():
        if name == "after":
            continue
        sub.add_argument("--host", action="store_true",
                         help="build for the host, no GPU needed (checks the driver, measures nothing)")
        if name != "timelines":
            bench.program_options(sub, rounds={"steps": 5, "tracer": 7, "phases": 5}.get(name))
    subs["phases"].add_argument("--checks", action="store_true", help="with -a (the exercise's checks)")
    subs["phases"].add_argument("--bare", action="store_true", help="also the program alone, and traced")
    subs["phases"].add_argument("--profiler", default="", help="auto, nsys, builtin (default: --profile's)")
    subs["where"].add_argument("--top", type=int, default=40, help="rows of the profile (default 40)")
    subs["timelines"].add_argument("--n", type=int, default=4096, help="the grid's side (default 4096)")
    subs["timelines"].add_argument("--out", type=Path, help="where the pictures and traces go")
    subs["timelines"].add_argument("--docs", type=Path, help="also the pictures, as NAME_h100.png")
    subs["after"].add_argument("--trace", type=Path,
                               help="a recorded trace.jsonl (default: a synthetic Jacobi trace)")
    subs["after"].add_argument("--rounds", type=int, default=9, help="rounds (default 9)")
    subs["after"].add_argument("--run-ms", type=int, default=900,
                               help="how long the stand-in writes its records (default 900)")
    subs["after"].add_argument("--destroy-ms", type=int, default=65,
                               help="from its last records to its end record (default 65)")
    subs["after"].add_argument("--teardown-ms", type=int, default=60,
                               help="from its end record to its exit (default 60)")
    args = p.parse_args()
    if args.command != "after" and not args.host:
        bench.require_gpu(f"profile_cost.py {args.command}")
    work = Path(tempfile.mkdtemp(prefix=f"idrrun-profile-{args.command}-"))
    for name in ("source", "out", "docs"):  # before the chdir below
        if getattr(args, name, None) is not None:
            setattr(args, name, getattr(args, name).resolve())
    here = os.getcwd()
    os.chdir(work)  # where an in-process `idrrun run --profile` leaves its idrrun-profile/
    status = 0
    if args.command == "steps":
        bench.report("where --profile's time goes", steps(args, work), record=args.record)
    elif args.command == "tracer":
        bench.report("the tracer's parts inside the program", tracer_parts(args, work), record=args.record)
    elif args.command == "phases":
        bench.report("idrrun run --profile against idrrun run, phase by phase", phases(args, work),
                     record=args.record)
    elif args.command == "where":
        bench.report("idrrun run --profile under cProfile", where(args, work), record=args.record)
    elif args.command == "after":
        bench.report("what the student waits for after the program's end", after(args, work),
                     record=args.record)
    else:
        out = args.out or Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="idrrun-timelines-"))
        out.mkdir(parents=True, exist_ok=True)
        runs = Timelines(args, work, out)
        bench.report("the course's runs under the tracer", runs.all(), record=args.record)
        print(f"pictures and traces in {out}")
        status = 1 if runs.failures else 0
    os.chdir(here)
    shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
