"""What `idrrun run` costs over the bare compile and run of the same program (issue 13: at most
1.15x bare per file, within 5 % on the Jacobi solution).

    python3 benchmarks/run_overhead.py files [--programs 240] [--rounds 3] [--in-process]
                                             [--against DIR] [--python PYTHON]
    python3 benchmarks/run_overhead.py jacobi [--args "4096 1000"] [--rounds 5] [--profile]
                                              [--version] [--against DIR] [--python PYTHON]
    python3 benchmarks/run_overhead.py where [--rounds 8]

The bare side always runs the compiler command `idrrun run -a` prints on this machine (GPU flags
where it builds for the GPU), so both sides compile alike. Rounds are interleaved: machine noise
hits every row alike. Figures are medians.
- files: a suite of many small self-checking OpenACC programs (C and Fortran, like the OpenACC
  validation suites), host builds, an empty build cache each round. Read `idrrun each` (one call
  per file, through the resident server) against `bare`: the per-file target is 1.15x;
  `idrrun batch` is one call for the whole suite. --against DIR: also `idrrun each` of the
  idrrun package in DIR (an earlier version: DIR/idrrun), in the same rounds. --python: the
  interpreter of the idrrun calls (the bare side needs none), e.g. an installed idrrun's (the
  course's venv). (Before 2026-11-28 the development venv's editable install imported the
  `editables` finder at every interpreter start, ~47 ms here; it is a .pth line since.)
- jacobi: the data_laplace solution, build cached: the bare program against `idrrun run`
  (resident), the same in-process (IDRRUN_RESIDENT=0), with --profile `idrrun run --profile`,
  with --version `idrrun --version`, with --against DIR `idrrun run --profile` of the idrrun
  package in DIR (an earlier version: DIR/idrrun). Read "over bare" (target 5 %); on a GPU
  machine's shared cores the bare rounds alone spread by 10-30 %.
- where: where one per-file call goes: the interpreter's start, the resident caller, `idrrun
  --version` and `idrrun run --help` (start-up: target 50 ms for --version), a call through the
  resident server, the same call in a warm process and in a fresh fork of one (the server's
  worker); then that fork's cProfile by own time and the heaviest imports of `--version`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bench

PY = sys.executable

# ---------------------------------------------------------------------------------------------
# files: a V&V-like suite

C_TEMPLATES = [
    # saxpy, checked
    """#include <stdio.h>
#include <stdlib.h>
int main(void) {{ int n = {n}; float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  for (int i = 0; i < n; i++) {{ x[i] = i; y[i] = {a}; }}
  #pragma acc parallel loop copyin(x[0:n]) copy(y[0:n])
  for (int i = 0; i < n; i++) y[i] = {a}.0f * x[i] + y[i];
  int bad = 0; for (int i = 0; i < n; i++) bad += y[i] != {a}.0f * i + {a};
  printf("%s\\n", bad ? "FAIL" : "PASS"); return bad != 0; }}
""",
    # sum reduction
    """#include <stdio.h>
int main(void) {{ long n = {n}; double s = 0.0;
  #pragma acc parallel loop reduction(+:s)
  for (long i = 1; i <= n; i++) s += (double)i * {a};
  double want = {a}.0 * n * (n + 1) / 2.0;
  int bad = s != want; printf("%s\\n", bad ? "FAIL" : "PASS"); return bad; }}
""",
    # max reduction in kernels
    """#include <stdio.h>
#include <stdlib.h>
int main(void) {{ int n = {n}; int *v = malloc(n * sizeof *v); for (int i = 0; i < n; i++) v[i] = (i * {a}) % 1000;
  int m = -1;
  #pragma acc kernels loop reduction(max:m) copyin(v[0:n])
  for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
  int want = -1; for (int i = 0; i < n; i++) want = v[i] > want ? v[i] : want;
  printf("%s\\n", m == want ? "PASS" : "FAIL"); return m != want; }}
""",
    # data region with update
    """#include <stdio.h>
#include <stdlib.h>
int main(void) {{ int n = {n}; double *a = malloc(n * sizeof *a); for (int i = 0; i < n; i++) a[i] = 1.0;
  #pragma acc data copy(a[0:n])
  {{ for (int k = 0; k < {a}; k++) {{
      #pragma acc parallel loop present(a[0:n])
      for (int i = 0; i < n; i++) a[i] += 1.0; }}
    #pragma acc update self(a[0:n])
  }}
  int bad = 0; for (int i = 0; i < n; i++) bad += a[i] != 1.0 + {a};
  printf("%s\\n", bad ? "FAIL" : "PASS"); return bad != 0; }}
""",
    # atomic histogram
    """#include <stdio.h>
int main(void) {{ int n = {n}; int h[8] = {{0}};
  #pragma acc parallel loop copy(h)
  for (int i = 0; i < n; i++) {{
    #pragma acc atomic update
    h[(i * {a}) % 8]++; }}
  int s = 0; for (int k = 0; k < 8; k++) s += h[k];
  printf("%s\\n", s == n ? "PASS" : "FAIL"); return s != n; }}
""",
    # async queues
    """#include <stdio.h>
#include <stdlib.h>
int main(void) {{ int n = {n}; float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  #pragma acc enter data create(a[0:n], b[0:n])
  #pragma acc parallel loop present(a[0:n]) async(1)
  for (int i = 0; i < n; i++) a[i] = {a};
  #pragma acc parallel loop present(b[0:n]) async(2)
  for (int i = 0; i < n; i++) b[i] = i;
  #pragma acc parallel loop present(a[0:n], b[0:n]) wait(1, 2)
  for (int i = 0; i < n; i++) a[i] += b[i];
  #pragma acc exit data copyout(a[0:n]) delete(b[0:n])
  int bad = 0; for (int i = 0; i < n; i++) bad += a[i] != {a} + i;
  printf("%s\\n", bad ? "FAIL" : "PASS"); return bad != 0; }}
""",
    # collapse 2-D
    """#include <stdio.h>
int main(void) {{ enum {{ N = {m} }}; static double g[N][N]; double s = 0.0;
  #pragma acc parallel loop collapse(2) copyout(g)
  for (int j = 0; j < N; j++) for (int i = 0; i < N; i++) g[j][i] = i + {a} * j;
  for (int j = 0; j < N; j++) for (int i = 0; i < N; i++) s += g[j][i];
  double want = N * (N - 1) / 2.0 * N * (1 + {a});
  printf("%s\\n", s == want ? "PASS" : "FAIL"); return s != want; }}
""",
    # private temporaries
    """#include <stdio.h>
int main(void) {{ int n = {n}; double out = 0.0;
  #pragma acc parallel loop reduction(+:out)
  for (int i = 0; i < n; i++) {{ double t[4]; for (int k = 0; k < 4; k++) t[k] = i + k; out += t[{k}]; }}
  double want = (double)n * (n - 1) / 2.0 + (double){k} * n;
  printf("%s\\n", out == want ? "PASS" : "FAIL"); return out != want; }}
""",
]
F_TEMPLATES = [
    """program p
  implicit none
  integer, parameter :: n = {n}
  real(8) :: x(n), s
  integer :: i
  x = 1.0d0
  s = 0.0d0
  !$acc parallel loop reduction(+:s) copyin(x)
  do i = 1, n
    s = s + {a}.0d0 * x(i)
  end do
  if (s /= {a}.0d0 * n) then
    print *, 'FAIL'
    stop 1
  end if
  print *, 'PASS'
end program p
""",
    """program p
  implicit none
  integer, parameter :: n = {n}
  real(4) :: a(n), b(n)
  integer :: i
  b = 1.0
  !$acc data copyin(b) copyout(a)
  !$acc kernels
  do i = 1, n
    a(i) = b(i) * {a}
  end do
  !$acc end kernels
  !$acc end data
  if (any(a /= {a}.0)) then
    print *, 'FAIL'
    stop 1
  end if
  print *, 'PASS'
end program p
""",
]


def generate(folder: Path, count: int) -> list[Path]:
    files = []
    for k in range(count):
        if k % 5 == 4:
            text = F_TEMPLATES[k % len(F_TEMPLATES)].format(n=1000 + 37 * k, a=1 + k % 7)
            path = folder / f"f{k:03d}.f90"
        else:
            text = C_TEMPLATES[k % len(C_TEMPLATES)].format(n=1000 + 37 * k, a=1 + k % 7,
                                                             m=16 + k % 32, k=k % 4)
            path = folder / f"c{k:03d}.c"
        path.write_text(text)
        files.append(path)
    return files


def bare_suite(files: list[Path], commands: dict[str, bench.Compile], work: Path) -> float:
    start = time.perf_counter()
    for f in files:
        subprocess.run(commands[f.suffix].of(f, work / "prog"), check=True, capture_output=True)
        r = subprocess.run([str(work / "prog")], capture_output=True,
                           env={**os.environ, "ACC_DEVICE_TYPE": "host"}, check=False)
        assert r.returncode == 0, f
    return time.perf_counter() - start


def idrrun_suite(files: list[Path], env: dict[str, str], work: Path, batch: bool,
                 python: str = PY) -> float:
    shutil.rmtree(work / "cache" / "idrrun" / "builds", ignore_errors=True)
    cmd = [python, "-m", "idrrun", "run", "-a", "--notime"]
    start = time.perf_counter()
    for group in ([files] if batch else [[f] for f in files]):
        r = subprocess.run([*cmd, *map(str, group)], capture_output=True, env=env, cwd=work, check=False)
        assert r.returncode == 0, r.stderr.decode()[-2000:]
    return time.perf_counter() - start


def files(args: argparse.Namespace) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix="idrrun-vv-"))
    (work / "suite").mkdir()
    suite = generate(work / "suite", args.programs)
    # host builds on both sides, the cache of this run only
    env = bench.idrrun_env(IDRRUN_OFFLOAD="host", XDG_CACHE_HOME=str(work / "cache"))
    commands = {f.suffix: bench.compile_command(f, env) for f in (suite[0], suite[min(4, len(suite) - 1)])}
    # Warm: the guard and the probe made and remembered, as on a course machine, and the
    # resident server started (by the second call).
    python = args.python or PY
    before = None
    if args.against is not None:  # the earlier idrrun first on the path: its own server
        before = dict(env, PYTHONPATH=os.pathsep.join([str(args.against.resolve()), env["PYTHONPATH"]]))
    for _ in range(2):
        for environment in (env, before) if before is not None else (env,):
            idrrun_suite(suite[:2], environment, work, batch=True, python=python)
    time.sleep(3)
    times: dict[str, list[float]] = {"bare": [], "idrrun batch": [], "idrrun each": []}
    if before is not None:
        times["before each"] = []
    if args.in_process:
        times["in-process"] = []
    for _ in range(args.rounds):
        times["bare"].append(bare_suite(suite, commands, work))
        times["idrrun batch"].append(idrrun_suite(suite, env, work, batch=True, python=python))
        times["idrrun each"].append(idrrun_suite(suite, env, work, batch=False, python=python))
        if before is not None:
            times["before each"].append(idrrun_suite(suite, before, work, batch=False, python=python))
        if args.in_process:
            times["in-process"].append(idrrun_suite(suite, dict(env, IDRRUN_RESIDENT="0"), work,
                                                    batch=False, python=python))
    med = {k: bench.median(v) for k, v in times.items()}
    lines = [f"{len(suite)} programs ({sum(f.suffix == '.c' for f in suite)} C, "
             f"{sum(f.suffix == '.f90' for f in suite)} Fortran), host builds, {args.rounds} rounds, "
             f"medians; {len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}; "
             f"idrrun's interpreter {python}"]
    for k, v in med.items():
        lines.append(f"  {k:13s} {v:7.2f} s  {1000 * v / len(suite):6.1f} ms per program  "
                     f"{v / med['bare']:.2f}x bare   rounds {bench.spread(times[k])}")
    shutil.rmtree(work, ignore_errors=True)
    return lines


# ---------------------------------------------------------------------------------------------
# jacobi: one longer program, build cached


def jacobi(args: argparse.Namespace) -> list[str]:
    gpu = bench.gpu_name()
    program_args = args.args or ("4096 1000" if gpu else "512 1000")
    work = Path(tempfile.mkdtemp(prefix="idrrun-jacobi-"))
    source = work / args.source.name
    shutil.copyfile(args.source, source)
    env = bench.idrrun_env()
    subprocess.run(bench.compile_command(source, env).of(source, work / "prog"), check=True,
                   capture_output=True)
    before = None
    if args.against is not None:  # the earlier idrrun in DIR, then what PYTHONPATH had
        rest = os.environ.get("PYTHONPATH", "")
        before = dict(env, PYTHONPATH=os.pathsep.join(p for p in (str(args.against.resolve()), rest) if p))
    py = args.python or PY
    run = [py, "-m", "idrrun", "run", "-a", "--cliopts", program_args, str(source)]
    profile = [*run[:5], "--profile", *run[5:]]
    small = [*run[:5], "--cliopts", "64 10", str(source)]
    # fills the build cache and starts the resident server, by the second call (its key has
    # the CPU set: run under the same taskset as the rounds)
    for _ in range(2):
        bench.wall(small, env=env, cwd=work)
        if before is not None:  # its own server: another key (other files)
            bench.wall(small, env=before, cwd=work)
    time.sleep(3)
    rows: dict[str, tuple[list[str], dict[str, str]]] = {
        "bare run": ([str(work / "prog"), *shlex.split(program_args)], env),
        "idrrun run": (run, env),
        "in-process": (run, dict(env, IDRRUN_RESIDENT="0")),
    }
    if args.profile:
        rows["idrrun --profile"] = (profile, env)
    # The same program on a tiny grid ("64 10": its run is CUDA's start and little else): what
    # idrrun adds whatever the program's length, with far less of the GPU's own spread.
    rows["bare small"] = ([str(work / "prog"), "64", "10"], env)
    rows["python -c pass"] = ([py, "-c", "pass"], env)  # the caller's interpreter starting
    rows["idrrun small"] = (small, env)
    if args.profile:
        rows["--profile small"] = ([*small[:5], "--profile", *small[5:]], env)
    if before is not None:
        rows["--profile before"] = (profile, before)
    if args.version:
        rows["idrrun --version"] = ([py, "-m", "idrrun", "--version"], env)
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.rounds):
        for name, (argv, environment) in rows.items():
            times[name].append(bench.wall(argv, env=environment, cwd=work))
    med = {name: bench.median(ts) for name, ts in times.items()}
    lines = [f"{args.source.name} {program_args}, {'GPU ' + gpu if gpu else 'host build'}, build "
             f"cached, {args.rounds} rounds, medians; {len(os.sched_getaffinity(0))} cores"]
    base = med["bare run"]
    for name, ts in times.items():
        over = "" if name in ("bare run", "idrrun --version", "python -c pass") else \
            f"  {med[name] - base:+.3f} s ({100 * (med[name] - base) / base:+.1f} %) over bare"
        lines.append(f"  {name:17s} {med[name]:7.3f} s{over}   rounds {bench.spread(ts, digits=3)}")
    if args.profile:  # the profiler's own cost: against the same command without it
        r = med["idrrun run"]
        lines.append(f"  --profile over idrrun run: {med['idrrun --profile'] - r:+.3f} s "
                     f"({100 * (med['idrrun --profile'] - r) / r:+.1f} %)")
    fixed = med["idrrun small"] - med["bare small"]
    lines.append(f"  idrrun's cost on the tiny run: {1000 * fixed:+.1f} ms, "
                 f"{100 * fixed / base:+.1f} % of the bare run above (of which the interpreter's "
                 f"start, python -c pass: {1000 * med['python -c pass']:.1f} ms)")
    if args.profile:
        traced = med["--profile small"] - med["idrrun small"]
        lines.append(f"  --profile's cost on the tiny run: {1000 * traced:+.1f} ms (the tracer's start, "
                     f"collect on a tiny trace), {100 * traced / med['idrrun run']:+.1f} % of idrrun run above")
    shutil.rmtree(work, ignore_errors=True)
    return lines


# ---------------------------------------------------------------------------------------------
# where: one call, part by part

SMALL = r"""#include <stdio.h>
int main(void) { long n = 100000; double s = 0.0;
  #pragma acc parallel loop reduction(+:s)
  for (long i = 1; i <= n; i++) s += (double)i * 3;
  double want = 3.0 * n * (n + 1) / 2.0;
  int bad = s != want; printf("%s\n", bad ? "FAIL" : "PASS"); return bad; }
"""


def forked_calls(rounds: int, one: Callable[[], float]) -> tuple[list[float], str]:
    """The first call of a fresh fork of this warm process, `rounds` - 1 times; and the cProfile
    of one more such call, by own time (the profiled call is not counted)."""
    firsts, profile = [], ""
    for i in range(rounds):
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
            profile = rest
        else:
            firsts.append(float(head))
    return firsts, profile


def where(args: argparse.Namespace) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix="idrrun-call-where-"))
    (work / "p.c").write_text(SMALL)
    builds = work / "cache" / "idrrun" / "builds"
    env = bench.idrrun_env(XDG_CACHE_HOME=str(work / "cache"), IDRRUN_OFFLOAD="host")
    bare = bench.compile_command(work / "p.c", env).of(work / "p.c", work / "bare")
    script = Path(PY).with_name("idrrun")  # the console script pip installs beside python
    for _ in range(2):  # the second call starts the server
        bench.wall([PY, "-m", "idrrun", "run", "-a", "p.c"], env=env, cwd=work)
    time.sleep(2)
    commands: dict[str, list[str]] = {
        "python -c pass": [PY, "-c", "pass"],
        "resident caller": [PY, "-c", "from idrrun import resident; resident.key()"],
        "python -m idrrun --version": [PY, "-m", "idrrun", "--version"],
        "idrrun run --help": [PY, "-m", "idrrun", "run", "--help"],
    }
    if script.exists():
        commands["idrrun --version (script)"] = [str(script), "--version"]
    rows: dict[str, list[float]] = {"bare compile+run": []}
    for _ in range(args.rounds):
        start = time.perf_counter()
        subprocess.run(bare, cwd=work, check=True)
        subprocess.run([str(work / "bare")], stdout=subprocess.DEVNULL, check=False)
        rows["bare compile+run"].append(time.perf_counter() - start)
        for name, argv in commands.items():
            rows.setdefault(name, []).append(bench.wall(argv, env=env, cwd=work))
        shutil.rmtree(builds, ignore_errors=True)
        rows.setdefault("resident call", []).append(
            bench.wall([PY, "-m", "idrrun", "run", "-a", "p.c"], env=env, cwd=work))
    # the same call in this process: warm, then as the server's worker has it (a fresh fork)
    os.environ.update(env)
    here = os.getcwd()
    os.chdir(work)
    sys.path.insert(0, str(bench.ROOT))
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
    rows["warm process"] = [one() for _ in range(args.rounds)]
    rows["forked first"], profile = forked_calls(args.rounds, one)
    print("a forked worker's first call, by own time:")
    print(profile)
    imports = subprocess.run([PY, "-X", "importtime", "-m", "idrrun", "--version"], env=env,
                             capture_output=True, text=True, check=True).stderr
    heaviest = sorted(((int(parts[1]), parts[2].rstrip()) for parts in
                       (line.split("|") for line in imports.splitlines())
                       if len(parts) == 3 and parts[1].strip().isdigit()), reverse=True)[:8]
    print("heaviest imports of `idrrun --version` (cumulative us):")
    for micros, module in heaviest:
        print(f"  {micros:8d} {module}")
    os.chdir(here)
    shutil.rmtree(work, ignore_errors=True)
    lines = [f"a small OpenACC program, host build, {args.rounds} rounds, medians (min-max), ms; "
             f"{len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}"]
    for name, values in rows.items():
        lines.append(f"  {name:27s} {1000 * bench.median(values):7.1f}  "
                     f"({1000 * min(values):.1f}-{1000 * max(values):.1f})")
    return lines


def main() -> int:
    p = bench.parser(__doc__, record=False)
    add = bench.subcommands(p)
    sub = add("files", "Many small programs, one `idrrun run` each or one for all, against bare.")
    sub.add_argument("--programs", type=int, default=240, help="programs in the suite (default 240)")
    sub.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    sub.add_argument("--in-process", action="store_true",
                     help="also one call per file in-process (IDRRUN_RESIDENT=0)")
    sub.add_argument("--against", type=Path, metavar="DIR",
                     help="also one call per file of the idrrun package in DIR")
    sub.add_argument("--python", help="the interpreter of the idrrun calls (default: this one)")
    sub = add("jacobi", "The Jacobi solution, build cached: idrrun run (and --profile) against bare.")
    sub.add_argument("--source", type=Path, default=bench.EXAMPLES / "C" / "data_laplace_solution.c",
                     help="the program (default: the Jacobi solution of data_laplace)")
    sub.add_argument("--args", help="its arguments (default: '4096 1000' with a GPU, else '512 1000')")
    sub.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    sub.add_argument("--profile", action="store_true", help="also `idrrun run --profile`")
    sub.add_argument("--version", action="store_true", help="also `idrrun --version`")
    sub.add_argument("--against", type=Path, metavar="DIR",
                     help="also `idrrun run --profile` of the idrrun package in DIR")
    sub.add_argument("--python", help="the interpreter of the idrrun calls (default: this one)")
    sub = add("where", "Where one per-file call goes: start-up, caller, server, worker.")
    sub.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default 8)")
    args = p.parse_args()
    if args.command == "files":
        bench.report("idrrun run per file against bare", files(args), record=args.record)
    elif args.command == "jacobi":
        if args.args is None and not bench.gpu_name():
            print("no GPU: the Jacobi solution built for the host, 512 x 1000 (--args to change)")
        bench.report("idrrun run of the Jacobi solution against bare", jacobi(args), record=args.record)
    else:
        bench.report("where one idrrun run call goes", where(args), record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
