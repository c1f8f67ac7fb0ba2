"""Where `idrrun run --profile` spends its wall time against `idrrun run`, phase by phase, in
one process (issue 13: the profiler's cost over the whole run, target <= 5 %).

    python benchmarks/profile_phases.py [--source examples/C/data_laplace_solution.c]
                                        [--args "4096 1000"] [--rounds 5] [--checks]

Interleaved rounds of the same command without and with --profile (in-process: cli's
run_in_process; the build cached by a first call of each), and --profile with the trace not
followed during the run (read whole after it, as before the follower). idrrun's stages are
wrapped with timers (perf_counter, no profiler): the build, the profile plan, the program's run
(proc.run, which includes the follower reading the trace beside it), the follower's stop, and
collect's steps. With --bare, also the program alone and the program with the tracer injected
(subprocess.run of the cached executable, the tracer's environment as idrrun sets it): the
tracer's own cost. Medians over the rounds, ms. Without --checks, -a is left out.
"""

from __future__ import annotations

import contextlib
import functools
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idrrun import build, cli, pipeline  # noqa: E402
from idrrun.display import TextReporter  # noqa: E402
from idrrun.profile import session, tracefile  # noqa: E402
from idrrun.run import proc  # noqa: E402
from profile_cost import arguments  # noqa: E402  (this folder is sys.path[0])

spent: dict[str, float] = defaultdict(float)
kept: dict[str, Any] = {}  # the last result of the stages timed with keep=True


def timed(owner: Any, name: str, label: str | Callable[..., str], keep: bool = False) -> None:
    original = getattr(owner, name)

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


def main() -> int:
    ap = arguments(rounds=5)
    ap.add_argument("--checks", action="store_true", help="with -a (the exercise's checks)")
    ap.add_argument("--bare", action="store_true", help="also the program alone, and traced")
    ap.add_argument("--profiler", default="", help="auto, nsys, builtin (default: --profile's)")
    args = ap.parse_args()
    plain = ["run", *(["-a"] if args.checks else []), "--cliopts", args.args, args.source]
    profiled = plain[:1] + (["--profiler", args.profiler] if args.profiler else ["--profile"]) + \
        plain[1:]

    timed(build, "build", "build", keep=True)  # the executable and the tracer's environment,
    timed(session, "plan", "profile plan", keep=True)  # for the bare runs
    timed(proc, "run", lambda *a, **k: "program run" if k.get("what") == "run" else
          f"proc.run {k.get('what')}")
    timed(tracefile.Follower, "__exit__", "follower stop")
    timed(session, "read_trace", "collect: read the rest")
    timed(session, "summarize", "collect: summary")
    timed(session, "draw_timeline", "collect: timeline PNG")
    timed(session.perfetto, "write", "collect: Perfetto JSON")
    timed(session, "achieved_rates", "collect: rates")
    timed(session, "find_hints", "collect: hints")
    timed(session, "collect", "collect (all)")
    timed(TextReporter, "profile", "profile text")
    timed(pipeline, "execute", "pipeline.execute")

    follower = session.follower
    modes = ("plain", "profile", "not followed")
    rows: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in (*modes, "bare")}
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        cli.run_in_process(plain)
        cli.run_in_process(profiled)
        exe = kept["build"].executable
        tracer_env = {**os.environ, **kept["plan"].env}
        program = [str(exe), *args.args.split()]
        for _ in range(args.rounds):
            for mode in modes:
                spent.clear()
                session.follower = (lambda plan: None) if mode == "not followed" else follower
                start = time.perf_counter()
                cli.run_in_process(plain if mode == "plain" else profiled)
                spent["whole command"] = time.perf_counter() - start
                for key, value in spent.items():
                    rows[mode][key].append(value)
            if args.bare:
                for name, env in (("program alone", os.environ), ("program traced", tracer_env)):
                    start = time.perf_counter()
                    subprocess.run(program, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, check=False)
                    rows["bare"][name].append(time.perf_counter() - start)
    keys = list(dict.fromkeys([*rows["profile"], *rows["plain"]]))
    print(f"{Path(args.source).name} {args.args}, {args.rounds} rounds, medians (ms), "
          f"{os.cpu_count()} cores visible, affinity {len(os.sched_getaffinity(0))}")
    print(f"  {'':28s} " + " ".join(f"{m:>12s}" for m in modes) + "   profile - plain")

    def med(mode: str, key: str) -> float:
        return 1000 * statistics.median(rows[mode][key]) if rows[mode][key] else 0.0

    for key in keys:
        print(f"  {key:28s} " + " ".join(f"{med(m, key):12.1f}" for m in modes) +
              f"   {med('profile', key) - med('plain', key):+8.1f}")
    for name, values in rows["bare"].items():
        print(f"  {name:28s} {med('bare', name):12.1f}")
    for mode in modes:
        print(f"  {mode} rounds: " + " ".join(f"{1000 * w:.0f}" for w in rows[mode]["whole command"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
