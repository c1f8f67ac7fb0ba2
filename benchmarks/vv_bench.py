"""`idrrun run` against a bare compile+run over a suite of many small self-checking OpenACC
programs, like the OpenACC validation suites (issue 13: idrrun run <= 1.15x bare).

    python benchmarks/vv_bench.py [--programs 240] [--rounds 3]

The programs are generated (C and Fortran: parallel and kernels loops, reductions, data
regions, update, atomics, async queues), each exits 0 when its own result is right. Rounds are
interleaved; each round times, over the whole suite:
- bare:         gcc/gfortran with the flags idrrun uses, then the program, one after the other
- idrrun batch: `idrrun run -a FILE...` once for the suite (one start-up)
- idrrun each:  `idrrun run -a FILE` per program (by the resident server the warm-up started)
- in-process:   the same with IDRRUN_RESIDENT=0 (with --in-process)
with an empty build cache each time (idrrun compiles everything). Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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


FLAGS = ["-O2", "-fopenacc", "-foffload=disable", "-fopt-info-optimized-omp"]


def bare(files: list[Path], work: Path) -> float:
    start = time.perf_counter()
    for f in files:
        compiler = "gfortran" if f.suffix == ".f90" else "gcc"
        exe = work / "prog"
        subprocess.run([compiler, *FLAGS, "-o", str(exe), str(f), *(["-lm"] if compiler == "gcc" else [])],
                       check=True, capture_output=True)
        r = subprocess.run([str(exe)], capture_output=True, env={**os.environ, "ACC_DEVICE_TYPE": "host"})
        assert r.returncode == 0, f
    return time.perf_counter() - start


def idrrun(files: list[Path], work: Path, batch: bool, resident: bool = True) -> float:
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if not resident:
        env["IDRRUN_RESIDENT"] = "0"
    shutil.rmtree(work / "cache" / "idrrun" / "builds", ignore_errors=True)
    cmd = [sys.executable, "-m", "idrrun", "run", "-a", "--notime"]
    start = time.perf_counter()
    if batch:
        r = subprocess.run([*cmd, *map(str, files)], capture_output=True, env=env, cwd=work)
        assert r.returncode == 0, r.stderr.decode()[-2000:]
    else:
        for f in files:
            r = subprocess.run([*cmd, str(f)], capture_output=True, env=env, cwd=work)
            assert r.returncode == 0, r.stderr.decode()[-2000:]
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-process", action="store_true", help="also one call per file, in-process")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-vv-"))
    (work / "suite").mkdir()
    files = generate(work / "suite", args.programs)
    # Warm: the guard and the probe are built and remembered once, as on a course machine, and
    # the resident server started (by the second call).
    for _ in range(2):
        idrrun(files[:2], work, batch=True)
    time.sleep(3)
    times: dict[str, list[float]] = {"bare": [], "idrrun batch": [], "idrrun each": []}
    if args.in_process:
        times["in-process"] = []
    for _ in range(args.rounds):
        times["bare"].append(bare(files, work))
        times["idrrun batch"].append(idrrun(files, work, batch=True))
        times["idrrun each"].append(idrrun(files, work, batch=False))
        if args.in_process:
            times["in-process"].append(idrrun(files, work, batch=False, resident=False))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{len(files)} programs ({sum(f.suffix == '.c' for f in files)} C, "
          f"{sum(f.suffix == '.f90' for f in files)} Fortran), {args.rounds} rounds, medians; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for k, v in med.items():
        print(f"  {k:13s} {v:7.2f} s   {1000 * v / len(files):6.1f} ms per program   "
              f"{v / med['bare']:.2f}x bare   rounds {[round(t, 2) for t in times[k]]}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
