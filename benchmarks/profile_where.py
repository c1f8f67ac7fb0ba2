"""Where a whole `idrrun run --profile` goes, in-process, under cProfile (issue 13: the profiler's
cost over the bare run beyond what profile_cost.py sees): idrrun's own functions by cumulative
time, the wait for the program left out.

    python benchmarks/profile_where.py [--source examples/C/data_laplace_solution.c]
                                       [--args "4096 1000"] [--top 40]

Runs the command once to fill the build cache, then once under cProfile.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idrrun import cli  # noqa: E402
from profile_cost import arguments  # noqa: E402  (this folder is sys.path[0])


def main() -> int:
    ap = arguments(rounds=None)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    argv = ["run", "-a", "--profile", "--cliopts", args.args, args.source]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        cli.run_in_process(argv)  # builds, makes the tracer, warms the caches
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        code = cli.run_in_process(argv)
        profiler.disable()
        wall = time.perf_counter() - start
    print(f"idrrun run --profile (in-process, under cProfile): {wall:.3f} s, exit {code}")
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(r"idrrun|PIL|subprocess|json", args.top)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
