"""Where a cached call's time goes (issue 37.1, analysis only): the cProfile of

- `idrrun run hello.c` with its build cached, in a warm process (what the resident server's
  worker runs: imports done), 10 calls after 3 warm-up calls;
- a cached `%%idrrun -a` cell of the same program in a real Jupyter kernel
  (tests/jupyter_kernel.py), 10 cells profiled inside the kernel after 3 warm-up cells.

Each gives its median wall time per call and the functions with the most cumulative time per
call (idrrun's own and the stdlib calls they make), to read what to remove first.

    python3 benchmarks/call_profile.py [--calls 10] [--top 25] [--record]
"""

from __future__ import annotations

import atexit
import contextlib
import cProfile
import io
import os
import pstats
import shutil
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


def main() -> int:
    p = bench.parser(__doc__)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-call-profile-"))
    atexit.register(shutil.rmtree, work, True)
    (work / "hello.c").write_text(HELLO)
    lines = [f"{len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}"]
    lines += cell(work, args.calls, args.top)
    lines += run_call(work, args.calls, args.top)
    bench.report("where a cached call goes (cProfile)", lines, record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
