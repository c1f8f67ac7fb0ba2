"""Grading throughput: a class of submissions graded with -j1 and -j2, against the bare compile
and run of every submission (issue 11: -j2 at least 1.8x -j1 on 2 cores; -j2 at most 1.2x bare).

    python3 benchmarks/grade_bench.py [--exercise data_laplace] [--count 30] [--repeat 3] [--cold]

The class: COUNT copies of the exercise's C solution, each differing by a comment so that no
build is shared, graded by `idrrun grade` with the seed "grade-bench". The bare side is
`xargs -P2` running, for each submission, the compiler command `idrrun run -a` prints and the
program with every argument set the grading runs (the host's and the hidden ones drawn with that
seed); the solution's own runs, once per set for the whole class, are left to idrrun's side:
they are its cost. Host builds on both sides (IDRRUN_OFFLOAD=host): the figures are the
grader's, not the GPU's.

Each grading starts without builds and without the solution's outputs; the guard and the probe
of the machine's compilers are made once before the rounds, as on a course machine, or, with
--cold, for every grading too (an empty cache each time). Rounds are interleaved; figures are
medians, then the two ratios against their targets.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench

ROOT = bench.ROOT
SEED = "grade-bench"


def grading(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall time of a grading; a grading that did not grade every row stops the benchmark (its
    time would measure a failure)."""
    start = time.monotonic()
    r = subprocess.run(argv, env=env, cwd=cwd, check=False, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if r.returncode != 0 or " 0 errors" not in r.stdout:
        sys.exit(f"grade_bench: the grading failed (exit {r.returncode}):\n"
                 + "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:]))
    return elapsed


def main() -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--exercise", default="data_laplace", help="the exercise (default data_laplace)")
    ap.add_argument("--count", type=int, default=30, help="submissions in the class (default 30)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--cold", action="store_true",
                    help="an empty cache for every grading (the guard and the probe made again)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from idrrun.checks import draw, specs

    # The hidden sets a grading with the seed SEED draws, run by the bare side too.
    ex = specs.load(ROOT / "examples" / f"{args.exercise}.toml")
    ex = draw.drawn(ex, SEED) if ex.draw is not None else ex
    solution = ex.sources["c"].solution.read_text()
    work = Path(tempfile.mkdtemp(prefix="idrrun-bench-"))
    atexit.register(shutil.rmtree, work, True)  # also after a failed grading's sys.exit
    subs = work / "class"
    subs.mkdir()
    for i in range(args.count):
        (subs / f"student{i:02d}.c").write_text(f"/* submission {i} */\n" + solution)
    env = bench.idrrun_env(IDRRUN_EXAMPLES=str(ROOT / "examples"), IDRRUN_OFFLOAD="host",
                           IDRRUN_GRADING_SEED=SEED)
    files = sorted(str(p) for p in subs.iterdir())
    # The bare equivalent: the compiler command idrrun uses on this machine, then the program.
    compile_argv = bench.compile_command(ex.sources["c"].solution, env).of(Path("s.c"), Path("prog"))
    # Every argument set a grading runs: the host's, then the hidden ones (the solution's runs,
    # once per set for the whole class, are left to idrrun's side: they are its cost).
    runs = " && ".join("./prog " + " ".join(shlex.quote(a) for a in args) + " >/dev/null"
                       for args in (ex.host_args, *ex.hidden_args))
    script = (f'd=$(mktemp -d) && cd "$d" && cp "$0" s.c && {shlex.join(compile_argv)} 2>/dev/null '
              f'&& {runs}; cd / && rm -rf "$d"')
    rounds: dict[str, list[float]] = {"idrrun -j1": [], "idrrun -j2": [], "bare xargs -P2": []}
    cache = work / "cache"
    if not args.cold:  # the guard and the probe, once
        env["IDRRUN_CACHE_DIR"] = str(cache)
        grading([sys.executable, "-m", "idrrun.cli", "grade", ex.name, *files[:1],
               "--report", str(work / "warm-up.csv")], env, work)
    for r in range(args.repeat):  # interleaved, so machine noise hits all three alike
        for jobs in (1, 2):
            if args.cold:
                env["IDRRUN_CACHE_DIR"] = str(work / f"cache-{r}-j{jobs}")
            else:
                for emptied in ("builds", "solutions", "sources"):
                    shutil.rmtree(cache / emptied, ignore_errors=True)
            rounds[f"idrrun -j{jobs}"].append(grading(
                [sys.executable, "-m", "idrrun.cli", "grade", ex.name, *files, "-j", str(jobs),
                 "--report", str(work / f"report-{r}-j{jobs}.csv")], env, work))
        start = time.monotonic()
        subprocess.run(["xargs", "-P2", "-n1", "sh", "-c", script], input="\n".join(files),
                       text=True, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rounds["bare xargs -P2"].append(time.monotonic() - start)
    results = {name: statistics.median(times) for name, times in rounds.items()}
    lines = [f"{args.count} submissions of {ex.name}, host builds, {args.repeat} rounds, "
             f"{'an empty cache each time' if args.cold else 'guard and probe made before the rounds'}; "
             f"{len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}"]
    for name, times in rounds.items():
        lines.append(f"  {name:16s} median {results[name]:6.2f} s  rounds {bench.spread(times)}")
    lines.append(f"  speed-up -j2 over -j1:       {results['idrrun -j1'] / results['idrrun -j2']:.2f}x  "
                 "(target >= 1.8)")
    lines.append(f"  idrrun -j2 / bare xargs -P2: {results['idrrun -j2'] / results['bare xargs -P2']:.2f}x  "
                 "(target <= 1.2)")
    bench.report("grading throughput", lines, record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
