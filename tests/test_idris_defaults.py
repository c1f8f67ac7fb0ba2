"""The defaults that let the IDRIS notebooks' HPC programs run unchanged: no memory cap outside
grading (grading keeps one), a generous stack (`--stack`, `[limits] stack`), IDRIS's object
names that the next cell links, and a note for a typed flag that can have no effect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import PYTHONPATH, Kernel

from idrrun.request.policy import grading_memory

LIMITS_C = r"""#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>

/* What the program sees: its stack limit, a thread's default stack, its address-space limit,
   and the memory limit of its cgroup (v1 or v2) with the cgroup's name. */
static void print_limit(const char *name, rlim_t v) {
    if (v == RLIM_INFINITY) printf("%s = unlimited\n", name);
    else printf("%s = %llu\n", name, (unsigned long long)v);
}

int main(void) {
    struct rlimit rl;
    getrlimit(RLIMIT_STACK, &rl); print_limit("stack", rl.rlim_cur);
    getrlimit(RLIMIT_AS, &rl); print_limit("address_space", rl.rlim_cur);
    pthread_attr_t attr; size_t size = 0;
    pthread_attr_init(&attr); pthread_attr_getstacksize(&attr, &size);
    printf("thread_stack = %zu\n", size);
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], path[700];
    while (f && fgets(line, sizeof line, f)) {
        char *p = strstr(line, ":memory:");
        line[strcspn(line, "\n")] = 0;
        if (p) snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", p + 8);
        else if (strncmp(line, "0::", 3) == 0) snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
        else continue;
        printf("memory_cgroup = %s\n", p ? p + 8 : line + 3);
        FILE *g = fopen(path, "r");
        unsigned long long v;
        if (g && fscanf(g, "%llu", &v) == 1) printf("cgroup_memory = %llu\n", v);
        else printf("cgroup_memory = max\n");
        break;
    }
    return 0;
}
"""


def idrrun(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=PYTHONPATH, **(env or {}))
    return subprocess.run([sys.executable, "-m", "idrrun", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=180)


def values(output: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in output.splitlines() if " = " in line)


def test_run_has_a_1gib_stack_and_no_memory_cap(tmp_path: Path) -> None:
    (tmp_path / "limits.c").write_text(LIMITS_C)
    r = idrrun("run", "--options", "-pthread", "limits.c", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = values(r.stdout)
    print(seen)
    assert seen["stack"] == str(1 << 30)
    assert seen["thread_stack"] == str(1 << 30)  # glibc's threads (OpenMP's too) follow it
    assert seen["address_space"] == "unlimited"
    # idrrun made no memory cgroup for the run (the one it is in is the machine's or idrrun's own)
    assert "idrrun-" not in seen.get("memory_cgroup", "")


def test_stack_from_the_line_and_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "limits.c").write_text(LIMITS_C)
    r = idrrun("run", "--stack", "unlimited", "limits.c", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert values(r.stdout)["stack"] == "unlimited"
    r = idrrun("run", "--stack", "64MiB", "limits.c", cwd=tmp_path)
    assert values(r.stdout)["stack"] == str(64 << 20)
    (tmp_path / "idrrun.toml").write_text('[limits]\nstack = "256MiB"\n')
    r = idrrun("run", "limits.c", cwd=tmp_path)
    assert values(r.stdout)["stack"] == str(256 << 20)
    (tmp_path / "idrrun.toml").write_text('[limits]\nstack = "lots"\n')
    r = idrrun("run", "limits.c", cwd=tmp_path)
    assert r.returncode == 2 and "field 'limits.stack'" in r.stderr


def test_a_deep_recursion_runs_with_the_default_stack(tmp_path: Path) -> None:
    # 200 MB of stack frames: past the usual 8 MiB, well within 1 GiB.
    (tmp_path / "deep.c").write_text(
        "#include <stdio.h>\n"
        "static long depth(long n) { volatile char pad[1024]; pad[0] = (char)n;\n"
        "  return n == 0 ? pad[0] : 1 + depth(n - 1) + pad[0] * 0; }\n"
        "int main(void) { printf(\"depth = %ld\\n\", depth(200000)); return 0; }\n")
    r = idrrun("run", "--options", "-O0", "deep.c", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "depth = 200000" in r.stdout
    r = idrrun("run", "--options", "-O0", "--stack", "8MiB", "deep.c", cwd=tmp_path)
    assert r.returncode == 3 and "killed by SIGSEGV" in r.stderr


HUNGRY_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* 512 MiB, touched */
int main(void) {
    size_t n = (size_t)512 << 20;
    char *p = malloc(n);
    if (!p) { puts("malloc failed"); return 2; }
    memset(p, 1, n);
    printf("touched = %d\n", p[n - 1]);
    return 0;
}
"""


def test_grading_keeps_a_memory_cap(tmp_path: Path) -> None:
    """A notebook or `idrrun run` gives a program the memory it asks for; `idrrun grade` caps each
    program at 3/4 of the machine's memory shared by its jobs (at least 256 MiB): with many jobs
    the cap is the 256 MiB floor, and a program touching 512 MiB hits it."""
    jobs = 100_000
    assert grading_memory(jobs) == 256 << 20
    assert grading_memory(1) == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 3 // 4
    (tmp_path / "hungry.c").write_text(HUNGRY_C)
    r = idrrun("run", "hungry.c", cwd=tmp_path)
    assert r.returncode == 0 and "touched = 1" in r.stdout, r.stdout + r.stderr
    ex = tmp_path / "examples"
    (ex / "C").mkdir(parents=True)
    for role in ("exercise", "solution"):
        (ex / "C" / f"hungry_{role}.c").write_text(HUNGRY_C)
    (ex / "hungry.toml").write_text(
        'name = "hungry"\n[sources.c]\nexercise = "C/hungry_exercise.c"\n'
        'solution = "C/hungry_solution.c"\n[args]\nhost = []\n[[check]]\nkind = "exit_ok"\n')
    r = idrrun("grade", "hungry", "hungry.c", "-j", str(jobs), "--json", "--unsafe", cwd=tmp_path,
               env={"IDRRUN_EXAMPLES": str(ex)})
    assert r.returncode == 0, r.stdout + r.stderr
    [row] = json.loads(r.stdout)["rows"]
    assert row["verdict"] == "fail", row
    # the cgroup's OOM kill, or (without a memory cgroup) RLIMIT_AS: malloc fails
    assert row["failure"] == "limit" and "memory limit reached" in row["reasons"] or \
        "exit code 2" in row["reasons"], row
    # [limits] memory, when set, is the teacher's choice for grading too (the grader reads
    # the teacher's config given with --config, never ./idrrun.toml)
    (tmp_path / "teacher.toml").write_text('[limits]\nmemory = "none"\n')
    r = idrrun("grade", "hungry", "hungry.c", "-j", str(jobs), "--json", "--unsafe",
               "--config", "teacher.toml", cwd=tmp_path, env={"IDRRUN_EXAMPLES": str(ex)})
    [row] = json.loads(r.stdout)["rows"]
    assert row["verdict"] == "pass", row


def test_object_keeps_idris_names_and_the_next_cell_links_it(kernel: Kernel) -> None:
    lib = "double scale(double x) { return 2 * x; }\n"
    r = kernel.run("%%idrrun --object -l c -k scale.c\n" + lib)
    assert r.status == "ok", r.error_text
    obj = kernel.cwd / "scale.c.o"
    assert obj.read_bytes()[:4] == b"\x7fELF" and not (kernel.cwd / "scale.o").exists()
    assert f"object file: {obj}" in r.stdout
    main = ('%%idrrun -l c --options "scale.c.o"\n#include <stdio.h>\ndouble scale(double);\n'
            'int main(void) { printf("scaled = %g\\n", scale(21)); return 0; }\n')
    r = kernel.run(main)
    assert r.status == "ok", r.error_text + r.stdout
    assert "scaled = 42" in r.stdout
    # A rebuilt object is linked again, not the cached program of the old one.
    assert kernel.run("%%idrrun --object -l c -k scale.c\n" + lib.replace("2 * x", "3 * x")).status == "ok"
    r = kernel.run(main)
    assert "scaled = 63" in r.stdout and "build cached" not in r.stdout


def test_flags_without_effect_get_a_note(tmp_path: Path) -> None:
    (tmp_path / "p.c").write_text('#include <stdio.h>\nint main(void){ puts("ran"); return 0; }\n')
    r = idrrun("run", "--threads", "4", "p.c", cwd=tmp_path)
    assert r.returncode == 0 and "ran" in r.stdout
    assert "note: --threads sets OMP_NUM_THREADS, which only an OpenMP build reads" in r.stdout
    r = idrrun("run", "-t", "--threads", "4", "p.c", cwd=tmp_path)
    assert "--threads sets" not in r.stdout
    r = idrrun("run", "--options", "-fopenmp", "--threads", "4", "p.c", cwd=tmp_path)
    assert "--threads sets" not in r.stdout
    r = idrrun("run", "-n", "--cliopts", "1 2", "--timeout", "5", "p.c", cwd=tmp_path)
    assert r.returncode == 0 and "ran" not in r.stdout
    assert "note: --cliopts, --timeout: no effect with -n/--noexec, the program is not run" in r.stdout
    # Every flag request/options.py marks run_only, the launcher's and the limits' too.
    r = idrrun("run", "--object", "-N", "2", "--file-size", "1MiB", "p.c", cwd=tmp_path)
    assert "note: -N/--nodes, --file-size: no effect with --object, the program is not run" in r.stdout
    r = idrrun("run", "-g", "1", "p.c", cwd=tmp_path)  # the launcher's own note, still there
    assert "-g/--gpus only applies with a launcher (srun); ignored" in r.stdout


BIG_STACK_C = """#include <stdio.h>
#define N 4000

int main(void)
{
    double a[N][N];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            a[i][j] = i + j;
    printf("a = %g\\n", a[N - 1][N - 1]);
    return 0;
}
"""
# As the IDRIS OpenMP notebooks have it: with OpenMP on (nvc's -mp, gfortran's -fopenmp), the
# main program's arrays live on the stack.
BIG_STACK_F90 = """program big_stack
  implicit none
  integer, parameter :: n = 4000
  real(kind=8) :: a(n, n)
  integer :: i, j
  !$omp parallel do
  do j = 1, n
    do i = 1, n
      a(i, j) = i + j
    end do
  end do
  print '(a, f8.1)', 'a = ', a(n, n)
end program big_stack
"""


def test_a_stack_overflow_is_told_from_a_bad_access(tmp_path: Path) -> None:
    # 122 MiB of local arrays on a 32 MiB stack (the IDRIS program: 3.2 GB on the 1 GiB
    # default; smaller here, for the machine's memory): the hint names the function, its frame
    # as gcc measured it (-fstack-usage), the stack, and --stack.
    for name, text, where in (("big.c", BIG_STACK_C, "main (line 4)"),
                              ("big.f90", BIG_STACK_F90, "big_stack (line 1)")):
        (tmp_path / name).write_text(text)
        r = idrrun("run", "--options", "-mp", "--stack", "32MiB", name, cwd=tmp_path)
        assert r.returncode == 3 and "killed by SIGSEGV" in r.stderr, r.stdout + r.stderr
        assert (f"hint: the stack overflowed, most likely: {where} keeps 122.1 MiB on the stack "
                "(its local arrays, as the compiler measured them), and the program's stack is "
                "32 MiB. Raise it with --stack") in r.stderr, r.stderr
        assert "array bounds" not in r.stderr and "-fstack-usage" not in r.stdout
        r = idrrun("run", "--options", "-mp", "--stack", "256MiB", name, cwd=tmp_path)
        assert r.returncode == 0 and ("a = 7998" in r.stdout or "a =   8000.0" in r.stdout), r.stdout + r.stderr
    # A bad access with small frames keeps the hint about array bounds.
    (tmp_path / "bad.c").write_text("#include <stdio.h>\nint main(void) { int *p = (int *)16; "
                                    "printf(\"%d\\n\", *p); return 0; }\n")
    r = idrrun("run", "bad.c", cwd=tmp_path)
    assert r.returncode == 3 and "check array bounds" in r.stderr and "--stack" not in r.stderr


def test_the_sigsegv_hint_without_frame_sizes_mentions_the_stack_too() -> None:
    from idrrun.model import ProcResult, RunRequest, RunResult, StackFrame
    from idrrun.failures import run_failure
    from idrrun.request.source import from_cell

    src = from_cell("int main(void){}\n", "cell[1]", "c", None, Path("/tmp"))
    request = RunRequest(source=src, workdir=Path("/tmp"))
    ran = RunResult(command=("prog",), proc=ProcResult(argv=("prog",), returncode=-11))
    hint = lambda *frames: run_failure(ran, request, frames).hint  # noqa: E731
    # nvc measures nothing: both causes are said
    assert hint().endswith("; or its stack overflowed: --stack raises the limit")
    assert hint(StackFrame("step", 12, 400, dynamic=True)).endswith(
        "; or its stack overflowed (step (line 12) size arrays at run time): --stack raises the limit")
    assert "--stack" not in hint(StackFrame("main", 3, 4096))
    assert hint(StackFrame("MAIN__", 1, 3_200_000_016)).startswith(
        "the stack overflowed, most likely: the main program (line 1) keeps 3.0 GiB on the stack")


# A frame past the default 1 GiB stack (IDRIS's nvfortran cells keep such arrays under
# `ulimit -s unlimited`): 1.2 GiB, of which two pages are touched (no stack probes: the
# machine's memory is not needed).
HUGE_FRAME_C = r"""#include <stdio.h>
#define N 160000000L
int main(void) {
    volatile double a[N];
    a[0] = 1.0; a[N - 1] = 2.0;
    printf("sum = %g\n", a[0] + a[N - 1]);
    return 0;
}
"""


def test_the_stack_is_raised_from_the_frames_the_compiler_measured(tmp_path: Path) -> None:
    """A main whose arrays would not fit the default stack runs with one that holds them, said
    in a note; a stack the line chose is kept (and the overflow explained)."""
    (tmp_path / "huge.c").write_text(HUGE_FRAME_C)
    flags = ("--options", "-fno-stack-clash-protection")
    r = idrrun("run", *flags, "huge.c", cwd=tmp_path)
    assert r.returncode == 0 and "sum = 3" in r.stdout, r.stdout + r.stderr
    assert ("stack raised to 1.3 GiB for this run: main (line 3) keeps 1.2 GiB on the stack, as "
            "the compiler measured it, more than the default 1 GiB (--stack SIZE sets it "
            "yourself)") in r.stdout + r.stderr, r.stdout + r.stderr
    r = idrrun("run", *flags, "--stack", "512MiB", "huge.c", cwd=tmp_path)
    assert r.returncode == 3 and "killed by SIGSEGV" in r.stderr, r.stdout + r.stderr
    assert "main (line 3) keeps 1.2 GiB on the stack" in r.stderr and "stack raised" not in r.stderr


def test_the_stack_raise_is_pure_and_bounded_by_the_machine() -> None:
    from idrrun.failures import stack_note
    from idrrun.model import Limits, StackFrame
    from idrrun.run import stack

    def raised(limits: Limits, frames: tuple[StackFrame, ...], memory: int) -> tuple[Limits, str]:
        found = stack.raised(limits, frames, memory)
        return found.limits, stack_note(found, memory)

    big = StackFrame("MAIN__", 1, 3_200_000_016)
    limits, note = raised(Limits(), (StackFrame("f", 9, 4096), big), 64 << 30)
    assert limits.stack == 3_267_362_816 and limits.stack % (1 << 20) == 0
    assert note.startswith("stack raised to 3.0 GiB for this run: the main program (line 1) keeps 3.0 GiB")
    assert raised(Limits(), (StackFrame("f", 9, 900 << 20),), 64 << 30) == (Limits(), "")
    assert raised(Limits(stack=None), (big,), 64 << 30) == (Limits(stack=None), "")
    same, why = raised(Limits(), (big,), 2 << 30)
    assert same == Limits() and why.endswith("more than this machine's memory (2 GiB); allocate "
                                             "these arrays (malloc, ALLOCATABLE)")
    # A Fortran module procedure is named as its student wrote it (failures' words).
    _, named = raised(Limits(), (StackFrame("__heat_MOD_step", 12, 2 << 30),), 64 << 30)
    assert "step (line 12) keeps 2 GiB on the stack" in named, named
