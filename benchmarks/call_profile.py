"""Where a cached call's time goes (issue 37.1, analysis only): the cProfile of

- `idrrun run hello.c` with its build cached, in a warm process (what the resident server's
  worker runs: imports done), 10 calls after 3 warm-up calls;
- a cached `%%idrrun -a` cell of the same program in a real Jupyter kernel
  (tests/jupyter_kernel.py), 10 cells profiled inside the kernel after 3 warm-up cells.

Each gives its median wall time per call and the functions with the most cumulative time per
call (idrrun's own and the stdlib calls they make), to read what to remove first.

    python3 benchmarks/call_profile.py [--calls 10] [--top 25] [--record]
    python3 benchmarks/call_profile.py --against DIR [--rounds 5] [--calls 20] [--record]

--against DIR: no profile; this checkout's idrrun against the one in DIR (an earlier version:
DIR/idrrun), each in a fresh warm process per round (rounds interleaved), `idrrun run hello.c`
in-process, cached and compiled (--force): the median wall time and the process's own CPU time
per call (what a loaded machine hardly moves; the compiler's and the program's are not in it).
"""

from __future__ import annotations

import atexit
import contextlib
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench

sys.path.insert(0, str(bench.ROOT / "tests"))
from jupyter_kernel import started  # noqa: E402  (the tests' kernel helper)

HELLO = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'
MARK = "=== profile ==="


def _top(stats: pstats.Stats, calls: int, top: int) -> list[str]:
    """The `top` functions by cumulative time, in ms per call."""
    rows = []
    for (path, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(path).name}:{line}({name})" if line else name
        rows.append((cumtime, tottime, ncalls, where))
    rows.sort(reverse=True)
    out = [f"  {'cum ms':>8} {'own ms':>8} {'calls':>6}  function (per call of the command)"]
    out += [f"  {1000 * c / calls:8.2f} {1000 * t / calls:8.2f} {n / calls:6.1f}  {w}"
            for c, t, n, w in rows[:top]]
    return out


def run_call(work: Path, calls: int, top: int) -> list[str]:
    os.environ["IDRRUN_RESIDENT"] = "0"
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    os.chdir(work)
    from idrrun import cli

    def once() -> None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cli.run_in_process(["run", "hello.c"])

    for _ in range(3):
        once()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        once()
    profiler.disable()
    return [f"`idrrun run hello.c`, build cached, warm process: median {1000 * bench.median(times):.1f} ms "
            f"per call (min {1000 * min(times):.1f}); under cProfile:",
            *_top(pstats.Stats(profiler), calls, top)]


def cell(work: Path, calls: int, top: int) -> list[str]:
    code = (f"import cProfile, io, pstats, time\n_src = {HELLO!r}\n"
            "for _ in range(3): get_ipython().run_cell_magic('idrrun', '-a', _src)\n"
            "_t = []\n"
            f"for _ in range({calls}):\n"
            "    _s = time.perf_counter(); get_ipython().run_cell_magic('idrrun', '-a', _src)\n"
            "    _t.append(time.perf_counter() - _s)\n"
            "_p = cProfile.Profile(); _p.enable()\n"
            f"for _ in range({calls}): get_ipython().run_cell_magic('idrrun', '-a', _src)\n"
            "_p.disable(); _p.dump_stats('cell.prof')\n"
            f"print({MARK!r}, sorted(_t)[len(_t) // 2], min(_t))\n")
    with started(work, bench.idrrun_env()) as kernel:
        r = kernel.run(code, timeout=300)
    if r.status != "ok" or MARK not in r.stdout:
        sys.exit(f"call_profile: the cell failed:\n{r.stdout[-2000:]}{r.error_text}")
    median, least = (float(x) for x in r.stdout.split(MARK, 1)[1].split()[:2])
    return [f"a cached `%%idrrun -a` cell (hello.c) in a real kernel, magic only: median "
            f"{1000 * median:.1f} ms per cell (min {1000 * least:.1f}); under cProfile:",
            *_top(pstats.Stats(str(work / "cell.prof")), calls, top)]


# One warm process's calls: python -c WARM CALLS FLAG... prints "wall_ms cpu_ms" per call.
WARM = """
import contextlib, io, os, sys, time
os.environ["IDRRUN_RESIDENT"] = "0"
from idrrun import cli
argv = ["run", *sys.argv[2:], "hello.c"]
def once():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cli.run_in_process(argv)
for _ in range(3):
    once()
for _ in range(int(sys.argv[1])):
    wall, cpu = time.perf_counter(), time.process_time()
    once()
    print(1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu))
"""


def against(work: Path, other: Path, rounds: int, calls: int) -> list[str]:
    """Warm in-process calls of this checkout's idrrun and of DIR's, interleaved by round."""
    packages = {"this checkout": str(bench.ROOT), f"{other}": str(other.resolve())}
    kinds = {"cached": [], "compiled": ["--force"]}
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for kind, flags in kinds.items():
            for name, path in packages.items():
                env = bench.idrrun_env(XDG_CACHE_HOME=str(work / "cache"))
                env["PYTHONPATH"] = os.pathsep.join([path, env["PYTHONPATH"]])
                r = subprocess.run([sys.executable, "-c", WARM, str(calls), *flags], cwd=work, env=env,
                                   capture_output=True, text=True, check=True)
                got.setdefault((kind, name), []).extend(
                    (float(w), float(c)) for w, c in (line.split() for line in r.stdout.splitlines()))
    lines = [f"`idrrun run hello.c` in a warm process (IDRRUN_RESIDENT=0), {rounds} rounds of {calls} "
             f"calls, medians (min), ms; {len(os.sched_getaffinity(0))} cores, load "
             f"{os.getloadavg()[0]:.1f}"]
    for (kind, name), values in got.items():
        walls, cpus = [v[0] for v in values], [v[1] for v in values]
        lines.append(f"  {kind:9s} {name:28s} wall {bench.median(walls):6.2f} ({min(walls):5.2f})  "
                     f"own CPU {bench.median(cpus):5.2f} ({min(cpus):5.2f})")
    return lines


def main() -> int:
    p = bench.parser(__doc__)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--against", type=Path, metavar="DIR",
                   help="no profile: this checkout's warm calls against those of the idrrun in DIR")
    p.add_argument("--rounds", type=int, default=5, help="with --against: interleaved rounds")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-call-profile-"))
    atexit.register(shutil.rmtree, work, True)
    (work / "hello.c").write_text(HELLO)
    if args.against is not None:
        bench.report("a warm call, this checkout against an earlier idrrun",
                     against(work, args.against, args.rounds, args.calls), record=args.record)
        return 0
    lines = [f"{len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}"]
    lines += cell(work, args.calls, args.top)
    lines += run_call(work, args.calls, args.top)
    bench.report("where a cached call goes (cProfile)", lines, record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
