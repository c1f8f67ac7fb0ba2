"""Benchmark: grading 30 submissions with -j1 and -j2, against the bare compile-and-run (the
same compile, then the program with each argument set a grading runs: the host's and the hidden
ones).

    python benchmarks/grade_bench.py [--exercise NAME] [--count 30] [--cold]

Prints the wall times and two ratios: -j1/-j2 (target >= 1.8 on 2 cores) and idrrun -j2 over
`xargs -P2` running the same gcc command and program (target <= 1.15). Every submission differs
by a comment so no build is shared. Each grading starts without builds and without the
solution's outputs (idrrun builds and runs the solution again: its cost); the guard and the probe
of the machine's compilers are made once before the rounds, as on a course machine (vv_bench.py
does the same), or, with --cold, for every grading too (an empty cache each time).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = "grade-bench"


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
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
    ap = argparse.ArgumentParser()
    ap.add_argument("--exercise", default="data_laplace")
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians are printed")
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
    subs = work / "class"
    subs.mkdir()
    for i in range(args.count):
        (subs / f"student{i:02d}.c").write_text(f"/* submission {i} */\n" + solution)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, IDRRUN_EXAMPLES=str(ROOT / "examples"))
    files = sorted(str(p) for p in subs.iterdir())
    # The bare equivalent: the same compiler flags idrrun uses on this machine, then the program.
    flags = "-O2 -fopenacc -foffload=disable -fopt-info-optimized-omp"
    # Every argument set a grading runs: the host's, then the hidden ones (the solution's runs,
    # once per set for the whole class, are left to idrrun's side: they are its cost).
    runs = " && ".join("./prog " + " ".join(shlex.quote(a) for a in args) + " >/dev/null"
                       for args in (ex.host_args, *ex.hidden_args))
    script = (f'd=$(mktemp -d) && cd "$d" && cp "$0" s.c && gcc {flags} -o prog s.c -lm 2>/dev/null '
              f'&& {runs}; cd / && rm -rf "$d"')
    rounds: dict[str, list[float]] = {"idrrun -j1": [], "idrrun -j2": [], "bare xargs -P2": []}
    cache = work / "cache"
    if not args.cold:  # the guard and the probe, once
        env["IDRRUN_CACHE_DIR"] = str(cache)
        timed([sys.executable, "-m", "idrrun.cli", "grade", ex.name, *files[:1], "--seed", SEED,
               "--report", str(work / "warm-up.csv")], env, work)
    for r in range(args.repeat):  # interleaved, so machine noise hits all three alike
        for jobs in (1, 2):
            if args.cold:
                env["IDRRUN_CACHE_DIR"] = str(work / f"cache-{r}-j{jobs}")
            else:
                for emptied in ("builds", "solutions", "sources"):
                    shutil.rmtree(cache / emptied, ignore_errors=True)
            rounds[f"idrrun -j{jobs}"].append(timed(
                [sys.executable, "-m", "idrrun.cli", "grade", ex.name, *files, "-j", str(jobs),
                 "--seed", SEED, "--report", str(work / f"report-{r}-j{jobs}.csv")], env, work))
        start = time.monotonic()
        subprocess.run(["xargs", "-P2", "-n1", "sh", "-c", script], input="\n".join(files),
                       text=True, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rounds["bare xargs -P2"].append(time.monotonic() - start)
    results = {name: statistics.median(times) for name, times in rounds.items()}
    for name, times in rounds.items():
        print(f"{name:16s} median {results[name]:6.2f} s  rounds: {', '.join(f'{t:.2f}' for t in times)}")
    print(f"({args.count} submissions of {ex.name}, {args.repeat} rounds, "
          f"{'an empty cache each time' if args.cold else 'guard and probe made before the rounds'})")
    print(f"speed-up -j2 over -j1:      {results['idrrun -j1'] / results['idrrun -j2']:.2f}x  (target >= 1.8)")
    print(f"idrrun -j2 / bare xargs -P2: {results['idrrun -j2'] / results['bare xargs -P2']:.2f}x  (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
