"""Where one per-file `idrrun run` goes (issue 13: idrrun run <= 1.15x bare over many small
programs), on the machine at hand:

    python benchmarks/call_where.py [--rounds 8]

With a small OpenACC program and an empty build cache each time, medians of interleaved rounds:
- bare:          the compiler and the program, as vv_bench.py runs them
- python:        `python -c pass` (the interpreter's start)
- caller:        `python -c 'import idrrun.run.resident'` plus its key (what the resident caller
                 does before it asks the server)
- resident call: `python -m idrrun run -a FILE` by the resident server
- warm loop:     run_in_process in one process, second and later calls
- forked first:  a fork of a warmed process (as the server's worker), its first call; then its
                 cProfile by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = r"""#include <stdio.h>
int main(void) { long n = 100000; double s = 0.0;
  #pragma acc parallel loop reduction(+:s)
  for (long i = 1; i <= n; i++) s += (double)i * 3;
  double want = 3.0 * n * (n + 1) / 2.0;
  int bad = s != want; printf("%s\n", bad ? "FAIL" : "PASS"); return bad; }
"""


def wall(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-call-where-"))
    (work / "p.c").write_text(PROGRAM)
    builds = work / "cache" / "idrrun" / "builds"
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "IDRRUN_OFFLOAD": "host",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    py = sys.executable
    bare = ["gcc", "-O2", "-fopenacc", "-foffload=disable", "-o", str(work / "bare"), "p.c"]
    for _ in range(2):  # the second call starts the server
        wall([py, "-m", "idrrun", "run", "-a", "p.c"], env, work)
    time.sleep(2)
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        start = time.perf_counter()
        subprocess.run(bare, cwd=work, check=True)
        subprocess.run([str(work / "bare")], stdout=subprocess.DEVNULL)
        rows.setdefault("bare", []).append(time.perf_counter() - start)
        rows.setdefault("python", []).append(wall([py, "-c", "pass"], env, work))
        rows.setdefault("caller", []).append(wall(
            [py, "-c", "from idrrun.run import resident; resident.key()"], env, work))
        shutil.rmtree(builds, ignore_errors=True)
        rows.setdefault("resident call", []).append(
            wall([py, "-m", "idrrun", "run", "-a", "p.c"], env, work))
    os.environ.update(env)
    os.chdir(work)
    sys.path.insert(0, str(ROOT))
    from idrrun.cli import run_in_process

    sink = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1), os.dup(2)

    def one() -> float:
        shutil.rmtree(builds, ignore_errors=True)
        os.dup2(sink, 1)
        os.dup2(sink, 2)
        try:
            start = time.perf_counter()
            run_in_process(["run", "-a", "p.c"])
            return time.perf_counter() - start
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)

    one()
    rows["warm loop"] = [one() for _ in range(args.rounds)]
    firsts, profile = [], ""
    for i in range(args.rounds):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            profiler = cProfile.Profile() if i == 0 else None
            if profiler is not None:
                profiler.enable()
            took = one()
            text = ""
            if profiler is not None:
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
                text = out.getvalue()
            os.write(w, f"{took}\n{text}".encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        head, _, rest = data.decode().partition("\n")
        if i == 0:
            profile = rest  # (the profiled call itself is not counted)
        else:
            firsts.append(float(head))
    rows["forked first"] = firsts
    print(f"{args.rounds} rounds, medians (ms); {os.cpu_count()} cores")
    for name, values in rows.items():
        print(f"  {name:14s} {1000 * statistics.median(values):8.1f}")
    print("forked worker's first call, by own time:")
    print(profile)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
