"""What a %%idrrun cell costs over a bare compile and run of the same command, in a real kernel.

    python3 benchmarks/cell_overhead.py [--rounds 20] [--against DIR]

One kernel (tests/jupyter_kernel.py, as the tests start it); for each program (hello; a
200-line C program with an OpenACC loop), interleaved rounds of three cells:
- bare:    a Python cell that runs the compiler command idrrun printed and the program
           (subprocess.run), as a notebook without idrrun would
- idrrun:  `%%idrrun -a --force` (compiled and run every time)
- cached:  `%%idrrun -a` (the build taken from the cache)
and an empty cell (`pass`), the kernel's own round trip.

Each figure is a cell's wall time as the client sees it (execute request to the shell's reply),
median over the rounds, ms; and its CPU time (`cpu`: the kernel's own and its children's,
getrusage read by a small cell before and after: what a shared machine's load hardly moves, read
it when the wall times spread). Reading them: `idrrun - bare` is what the magic adds to a cell that
compiles (issue 13's target: at most 5 ms); `cached` is a cell whose build is cached, all of it
(target: at most 10 ms), of which `empty cell` is the kernel's and the client's share. The
200-line program's compile alone spreads by tens of ms: its overhead is read from many rounds.
--against DIR: a second kernel runs the idrrun package in DIR (an earlier version: DIR/idrrun),
its two cells interleaved in the same rounds ("before" rows).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import bench

sys.path.insert(0, str(bench.ROOT / "tests"))
from jupyter_kernel import Kernel, started  # noqa: E402  (the tests' kernel helper)

HELLO = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


def two_hundred_lines() -> str:
    """A 200-line program: many small functions and an OpenACC loop."""
    funcs = "\n".join(
        f"static double f{i}(double x)\n{{\n    double y = x * {i + 1}.0 + {i}.5;\n"
        f"    return y > 100.0 ? y / 3.0 : y * 2.0;\n}}\n" for i in range(30))
    body = " + ".join(f"f{i}(a[i])" for i in range(30))
    return ("#include <stdio.h>\n#include <stdlib.h>\n" + funcs +
            "int main(void)\n{\n    static double a[100000];\n    double s = 0.0;\n"
            "    for (int i = 0; i < 100000; i++) a[i] = i * 1e-3;\n"
            "    #pragma acc parallel loop reduction(+:s) copyin(a)\n"
            f"    for (int i = 0; i < 100000; i++) s += {body};\n"
            '    printf("s = %.6e\\n", s);\n    return 0;\n}\n')


def seconds(kernel: Kernel, code: str) -> float:
    r = kernel.run(code)
    if r.status != "ok":
        sys.exit(f"cell_overhead: a cell failed: {code.splitlines()[0]}\n{r.stdout[-1000:]}{r.error_text}")
    return r.seconds


CPU = ("import resource as _r\n_s, _c = _r.getrusage(_r.RUSAGE_SELF), _r.getrusage(_r.RUSAGE_CHILDREN)\n"
       "print(_s.ru_utime + _s.ru_stime + _c.ru_utime + _c.ru_stime)\n")


def cpu_seconds(kernel: Kernel) -> float:
    """The kernel's CPU time so far, its children's included."""
    r = kernel.run(CPU)
    if r.status != "ok":
        sys.exit(f"cell_overhead: the CPU cell failed:\n{r.stdout[-1000:]}{r.error_text}")
    return float(r.stdout.split()[-1])


def timed(kernel: Kernel, code: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one cell."""
    before = cpu_seconds(kernel)
    wall = seconds(kernel, code)
    return wall, cpu_seconds(kernel) - before


def bare_cell(kernel: Kernel, code: str, folder: Path) -> str:
    """A Python cell that compiles `code` with the command `%%idrrun -a` printed, and runs it."""
    r = kernel.run("%%idrrun -a --force\n" + code)
    command = re.search(r"^\$ (.*)$", r.stdout, re.MULTILINE)
    if command is None:
        sys.exit(f"cell_overhead: no compile command in the cell's output:\n{r.stdout}{r.error_text}")
    folder.mkdir(exist_ok=True)
    (folder / "source.c").write_text("\n" + code)  # the cell's line numbers: after %%idrrun
    # the command as the student reads it (`-o cell7 cell[7]`): this folder's source.c and prog
    said = shlex.split(command.group(1))
    argv = [str(folder / "prog") if i and said[i - 1] == "-o"
            else str(folder / "source.c") if re.fullmatch(r"cell\[\d+\]", arg) else arg
            for i, arg in enumerate(said)]
    return ("import subprocess\n"
            f"subprocess.run({argv!r}, cwd={str(folder)!r}, capture_output=True, check=True)\n"
            f"print(subprocess.run(['./prog'], cwd={str(folder)!r}, capture_output=True, "
            "text=True).stdout, end='')\n")


def main() -> int:
    p = bench.parser(__doc__)
    p.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default 20)")
    p.add_argument("--against", type=Path, metavar="DIR",
                   help="also the cells of the idrrun package in DIR, in a second kernel")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-cell-bench-"))
    atexit.register(shutil.rmtree, work, True)
    lines = [f"{args.rounds} interleaved rounds, medians, ms; {len(os.sched_getaffinity(0))} cores, "
             f"load {os.getloadavg()[0]:.1f}"]
    with contextlib.ExitStack() as stack:
        kernels = {"": stack.enter_context(started(work, bench.idrrun_env()))}
        if args.against is not None:  # the earlier idrrun first on its kernel's path
            before = bench.idrrun_env()
            before["PYTHONPATH"] = os.pathsep.join([str(args.against.resolve()), before["PYTHONPATH"]])
            kernels["before "] = stack.enter_context(started(work, before))
        kernel = kernels[""]
        empty = [timed(kernel, "pass") for _ in range(args.rounds)]
        lines.append(f"{'empty cell':21s} {1000 * bench.median([e[0] for e in empty]):7.1f}  "
                     f"cpu {1000 * bench.median([e[1] for e in empty]):5.1f}")
        for label, code in (("hello", HELLO), ("200-line", two_hundred_lines())):
            lines += rows(kernels, label, code, bare_cell(kernel, code, work / label), args.rounds)
    bench.report("per-cell cost in a real kernel", lines, record=args.record)
    return 0


def rows(kernels: dict[str, Kernel], label: str, code: str, bare: str, rounds: int) -> list[str]:
    """One program's rounds: the bare cell, then each kernel's compiled and cached cells."""
    times: dict[str, list[tuple[float, float]]] = {"bare": []}
    for _ in range(rounds):
        times["bare"].append(timed(kernels[""], bare))
        for name, kernel in kernels.items():
            times.setdefault(name + "idrrun", []).append(timed(kernel, "%%idrrun -a --force\n" + code))
            times.setdefault(name + "cached", []).append(timed(kernel, "%%idrrun -a\n" + code))
    lines = []
    for i, what in enumerate(("", "cpu ")):
        med = {name: 1000 * bench.median([t[i] for t in ts]) for name, ts in times.items()}
        lines += [f"{(what + name + label):21s} bare {med['bare']:7.1f}  idrrun {med[name + 'idrrun']:7.1f}  "
                  f"overhead {med[name + 'idrrun'] - med['bare']:+6.1f}  cached cell {med[name + 'cached']:6.1f}"
                  for name in kernels]
    return lines


if __name__ == "__main__":
    sys.exit(main())
