"""profile/regions: the compute constructs a checked run executed, counted by the OpenACC
profiling interface (ACC_PROFLIB) in real gcc and gfortran builds, read through the boundary,
and what the checks make of them."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT, has_gpu
from idrrun.checks.evidence import Evidence
from idrrun.checks.verdict import evaluate_one
from idrrun.checks.specs import CheckSpec
from idrrun.model import AccReport, BuildResult, ConstructRan, ProcResult, RegionsRan, RunResult
from idrrun.profile import regions
from idrrun.profile.regions import Counting, Record, parse_record, summarise
from idrrun.run import isolation
from idrrun.toolchains.gcc import LINE_TABLES
from idrrun.toolchains.gccdumps import GCC_DUMP_FLAGS, from_gcc_dumps

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

USES = CheckSpec("uses_openacc", "uses_openacc")
NO_IMPLICIT = CheckSpec("no_implicit_data", "no_implicit_data")


def ran_check(minimum: int) -> CheckSpec:
    return CheckSpec("regions_ran", "regions_ran", minimum=minimum)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built, why = regions.build_library(tmp_path_factory.mktemp("cache"))
    assert built is not None, why
    return built


class Run:
    """A program built as a checked gcc build is (dumps, line tables), run with the library."""

    def __init__(self, folder: Path, source: str, suffix: str = ".c") -> None:
        self.folder = folder
        self.source = source
        compiler = "gfortran" if suffix == ".f90" else "gcc"
        if shutil.which(compiler) is None:
            pytest.skip(f"{compiler} is not installed")
        (folder / f"prog{suffix}").write_text(source)
        argv = [compiler, "-O2", "-fopenacc", "-foffload=disable", *GCC_DUMP_FLAGS, *LINE_TABLES,
                "-o", "prog", f"prog{suffix}", "-lm"]
        done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        self.executable = folder / "prog"
        self.acc = from_gcc_dumps(*(next(folder.glob(f"*.{d}")).read_text()
                                    for d in ("original", "gimple", "cgraph")))

    def counting(self, library: Path, prefix: str = ".idrrun-regions-test") -> Counting:
        return Counting(env={regions.PROFLIB_VAR: str(library),
                             regions.RECORD_VAR: str(self.folder / prefix)},
                        readable=(library,), prefix=prefix)

    def run(self, counting: Counting, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ACC_DEVICE_TYPE": "host", **counting.env}
        return subprocess.run([str(self.executable), *args], cwd=self.folder, env=env,
                              capture_output=True, text=True, timeout=60)

    def counted(self, library: Path, *args: str) -> RegionsRan:
        counting = self.counting(library)
        done = self.run(counting, *args)
        self.output = done.stdout
        ran = regions.collect(counting, self.folder, -1, self.executable)
        assert ran is not None
        return ran

    def evidence(self, ran: RegionsRan | None) -> Evidence:
        build = BuildResult(ok=True, command=("gcc",), proc=None, output="", cached=False,
                            key="k", build_dir=self.folder, executable=self.executable)
        run = RunResult(("prog",), ProcResult(("prog",), 0, output=self.output), regions=ran)
        return Evidence(source_text=self.source, language="c", build=build, run=run,
                        acc=self.acc, solution_output=None, regions=ran)


def line_of(source: str, text: str, nth: int = 1) -> int:
    return [i for i, line in enumerate(source.splitlines(), 1) if text in line][nth - 1]


# ---------------------------------------------------------------------------------------------
# Directives that never run: the hostile tester's submission

SERIAL_PI = """\
#include <stdio.h>
#include <stdlib.h>
DEAD
int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    double h = 1.0 / n, sum = 0.0;
    for (long i = 0; i < n; i++) {
        double x = (i + 0.5) * h;
        sum += 4.0 / (1.0 + x * x);
    }
    printf("pi = %.12f\\n", sum * h);
    return 0;
}
"""
DEAD_PI = """\
STORAGE double ported_pi(long n, double h)
{
    double sum = 0.0;
#pragma acc parallel loop reduction(+:sum)
    for (long i = 0; i < n; i++) {
        double x = (i + 0.5) * h;
        sum += 4.0 / (1.0 + x * x);
    }
    return sum * h;
}
"""


def test_directives_in_a_function_never_called_fail_uses_openacc(tmp_path: Path,
                                                                  library: Path) -> None:
    # Not static: gcc keeps the function (and libgomp, which loads the library): the run is
    # counted, and nothing ran.
    prog = Run(tmp_path, SERIAL_PI.replace("DEAD", DEAD_PI.replace("STORAGE", "")))
    ran = prog.counted(library)
    assert (ran.state, ran.distinct) == ("counted", 0)
    result = evaluate_one(USES, prog.evidence(ran))
    assert (result.status, result.got) == ("fail", "0")
    assert result.reason.startswith("the compute regions never ran: the program executed none")
    assert "1 compute region is in a function the program never calls" in result.reason
    result = evaluate_one(NO_IMPLICIT, prog.evidence(ran))
    assert result.status == "fail" and "nothing runs on the device" in result.reason
    assert not list(tmp_path.glob(".idrrun-regions*")), "the record is removed once read"


def test_static_dead_function_leaves_no_region_to_count(tmp_path: Path, library: Path) -> None:
    # static: gcc drops the function, nothing calls libgomp, which the linker then leaves out:
    # no record at all. The compiler's report (reachable code) decides, and says why.
    prog = Run(tmp_path, SERIAL_PI.replace("DEAD", DEAD_PI.replace("STORAGE", "static")))
    ran = prog.counted(library)
    assert ran.state == "not_loaded"
    result = evaluate_one(USES, prog.evidence(ran))
    assert result.status == "fail"
    assert result.reason == ("the compute regions never run: the compiler made them only in "
                             "functions the program never calls (from the compiler's report: "
                             f"{regions.NOT_LOADED})")


def test_honest_port_passes(tmp_path: Path, library: Path) -> None:
    source = SERIAL_PI.replace("DEAD", "").replace(
        "    for (long i = 0; i < n; i++) {", "#pragma acc parallel loop reduction(+:sum)\n"
                                                "    for (long i = 0; i < n; i++) {")
    prog = Run(tmp_path, source)
    ran = prog.counted(library)
    (construct,) = ran.constructs
    assert (construct.line, construct.function, construct.count) == (
        line_of(source, "#pragma acc"), "main", 1)
    result = evaluate_one(USES, prog.evidence(ran))
    assert (result.status, result.got) == ("pass", "1")


# A profiler that takes ACC_PROFLIB for itself (nsys's OpenACC trace)

PROFILER_LIB = r"""
#include <stdio.h>
#include <stdlib.h>
typedef void (*cb)(void *, void *, void *);
typedef void (*reg_fn)(int, cb, int);
static long events;
static void on_start(void *p, void *e, void *a) { (void)p; (void)e; (void)a; events++; }
static void report(void) {
    FILE *f = fopen(getenv("PROFILER_OUT"), "w");
    if (f) { fprintf(f, "%ld\n", events); fclose(f); }
}
void acc_register_library(reg_fn reg, reg_fn unreg, void *lookup) {
    (void)unreg; (void)lookup;
    atexit(report);
    reg(16 /* acc_ev_compute_construct_start */, on_start, 0);
}
"""


def test_a_profilers_own_library_keeps_its_events_beside_the_count(tmp_path: Path,
                                                                    library: Path) -> None:
    """A profiler sets ACC_PROFLIB to its own library after idrrun set it (nsys does): the shim
    between them puts the regions library back and regions.c hands the registration on, so the
    regions are counted and the profiler still sees every construct."""
    profiler = tmp_path / "profiler.so"
    (tmp_path / "profiler.c").write_text(PROFILER_LIB)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(profiler), str(tmp_path / "profiler.c")],
                   check=True, timeout=60)
    source = SERIAL_PI.replace("DEAD", "").replace(
        "    for (long i = 0; i < n; i++) {", "#pragma acc parallel loop reduction(+:sum)\n"
                                                "    for (long i = 0; i < n; i++) {")
    prog = Run(tmp_path, source)
    counting = prog.counting(library)
    # What the profiler (its prefix: env) does to the environment it was given.
    profiler_prefix = ("env", f"ACC_PROFLIB={profiler}", f"PROFILER_OUT={tmp_path / 'events'}")
    argv = regions.under_profiler(
        dataclasses.replace(counting, env={**counting.env, regions.LIBRARY_VAR: str(library)}),
        profiler_prefix)
    env = {**os.environ, "ACC_DEVICE_TYPE": "host", **counting.env,
           regions.LIBRARY_VAR: str(library)}
    done = subprocess.run([*argv, str(prog.executable), "1000"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "pi = 3.14" in done.stdout, done.stderr
    assert (tmp_path / "events").read_text() == "1\n"  # the profiler's library: its event
    ran = regions.collect(counting, tmp_path, -1, prog.executable)
    assert ran is not None and [c.count for c in ran.constructs] == [1], ran
    # Without a profiler, nothing is put before the program.
    assert regions.under_profiler(counting, ()) == ()


# ---------------------------------------------------------------------------------------------
# How many distinct constructs ran

HALF_PORTED = """\
#include <stdio.h>
#define N 1000
static double a[N], b[N];
int main(void)
{
    for (int it = 0; it < 50; it++) {
#pragma acc parallel loop copy(a)
        for (int i = 0; i < N; i++) a[i] = a[i] + 1.0;
        for (int i = 0; i < N; i++) b[i] = 2.0 * a[i];
    }
    printf("b = %f\\n", b[N - 1]);
    return 0;
}
"""


def test_half_ported_program_ran_one_of_two_regions(tmp_path: Path, library: Path) -> None:
    prog = Run(tmp_path, HALF_PORTED)
    ran = prog.counted(library)
    (construct,) = ran.constructs
    assert (construct.line, construct.count) == (line_of(HALF_PORTED, "#pragma acc"), 50)
    result = evaluate_one(ran_check(2), prog.evidence(ran))
    assert (result.status, result.expected, result.got) == ("fail", "≥ 2 compute regions run", "1")
    assert result.reason == f"1 of 2 compute regions ran (ran: line {construct.line} (main) 50 times)"
    assert evaluate_one(ran_check(1), prog.evidence(ran)).status == "pass"


INLINED_TWICE = """\
#include <stdio.h>
#define N 100
static double a[N];
static inline __attribute__((always_inline)) void bump(double *v, int n)
{
#pragma acc parallel loop copy(v[0:n])
    for (int i = 0; i < n; i++) v[i] += 1.0;
}
int main(int argc, char **argv)
{
    bump(a, N);
    if (argc > 0) bump(a, N / 2);
    printf("a = %f\\n", a[0]);
    return 0;
}
"""


def test_a_construct_inlined_twice_counts_once(tmp_path: Path, library: Path) -> None:
    prog = Run(tmp_path, INLINED_TWICE)
    counting = prog.counting(library)
    prog.run(counting)
    (record_file,) = tmp_path.glob(counting.prefix + ".*")
    record = parse_record(record_file.read_bytes())
    assert record is not None and len(record.constructs) == 2  # two call sites in main
    ran = regions.collect(counting, tmp_path, -1, prog.executable)
    assert ran is not None
    (construct,) = ran.constructs  # one construct: the line in bump
    assert (construct.line, construct.count) == (line_of(INLINED_TWICE, "#pragma acc"), 2)


FUNCTION_POINTER = """\
#include <stdio.h>
#define N 256
static void report(float *a, int n) { printf("a = %f\\n", a[n - 1]); }
void (*scale(float *a, int n))(float *, int)
{
#pragma acc parallel loop copy(a[0:n])
    for (int i = 0; i < n; i++) a[i] = 2.0f * a[i];
    return report;
}
int main(void)
{
    float a[N];
    for (int i = 0; i < N; i++) a[i] = i;
    scale(a, N)(a, N);
    return 0;
}
"""


def test_function_returning_a_function_pointer_is_counted(tmp_path: Path, library: Path) -> None:
    prog = Run(tmp_path, FUNCTION_POINTER)
    ran = prog.counted(library)
    (construct,) = ran.constructs
    assert construct.line == line_of(FUNCTION_POINTER, "#pragma acc")
    assert prog.acc.regions == 1 and prog.acc.implicit == ()


FORTRAN = """\
module ops
contains
  subroutine double_it(a, n)
    integer, intent(in) :: n
    real, intent(inout) :: a(n)
    integer :: i
    !$acc parallel loop copy(a)
    do i = 1, n
      a(i) = 2 * a(i)
    end do
  end subroutine
  subroutine never(a, n)
    integer, intent(in) :: n
    real, intent(inout) :: a(n)
    integer :: i
    !$acc parallel loop copy(a)
    do i = 1, n
      a(i) = 3 * a(i)
    end do
  end subroutine
end module
program main
  use ops
  implicit none
  integer, parameter :: n = 100
  real :: a(n)
  integer :: k
  a = 1
  do k = 1, 3
    call double_it(a, n)
    call inner()
  end do
  print *, a(1)
contains
  subroutine inner()
    integer :: i
    !$acc kernels copy(a)
    do i = 1, n
      a(i) = a(i) + 1
    end do
    !$acc end kernels
  end subroutine
end program
"""


def test_fortran_module_and_internal_procedures(tmp_path: Path, library: Path) -> None:
    prog = Run(tmp_path, FORTRAN, ".f90")
    ran = prog.counted(library)
    assert ran.state == "counted"
    assert [(c.line, c.count) for c in ran.constructs] == [
        (line_of(FORTRAN, "!$acc parallel loop"), 3), (line_of(FORTRAN, "!$acc kernels"), 3)]
    assert (prog.acc.regions, prog.acc.unreachable) == (2, 1)  # never() is never called


def test_processes_of_one_run_are_summed(tmp_path: Path, library: Path) -> None:
    """One record per process (the ranks of an MPI run): the same constructs, counts added."""
    prog = Run(tmp_path, HALF_PORTED)
    counting = prog.counting(library)
    prog.run(counting)
    prog.run(counting)
    assert len(list(tmp_path.glob(counting.prefix + ".*"))) == 2
    ran = regions.collect(counting, tmp_path, -1, prog.executable)
    assert ran is not None and [c.count for c in ran.constructs] == [100]


# ---------------------------------------------------------------------------------------------
# No record, or not one: never a pass

HOSTILE = """\
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#define N 100
static double a[N];
int main(void)
{
#pragma acc parallel loop copy(a)
    for (int i = 0; i < N; i++) a[i] = i;
    char name[4200];
    snprintf(name, sizeof name, "%s.%ld", getenv("IDRRUN_ACC_REGIONS"), (long)getpid());
    ACTION
    printf("a = %f\\n", a[N - 1]);
    return 0;
}
"""


def test_program_ending_with__exit_is_incomplete(tmp_path: Path, library: Path) -> None:
    prog = Run(tmp_path, HOSTILE.replace("ACTION", 'printf("a = %f\\n", a[N - 1]); fflush(stdout); _exit(0);'))
    ran = prog.counted(library)
    assert ran.state == "unfinished"
    for spec in (ran_check(1), USES):
        result = evaluate_one(spec, prog.evidence(ran))
        assert (result.status, result.reason) == ("incomplete", regions.UNFINISHED)


def test_record_replaced_by_a_link_is_not_followed(tmp_path: Path, library: Path) -> None:
    target = tmp_path / "secret"
    target.write_text("idrrun-regions 1\nC - 7 1 forged forged.c\nE 1 0\n")
    prog = Run(tmp_path, HOSTILE.replace("ACTION", f'unlink(name); symlink("{target}", name);'))
    ran = prog.counted(library)
    assert ran.state == "unreadable"
    assert ran.why == regions.UNREADABLE.format(
        why="a link, or a name leading out of its folder: not followed")
    assert evaluate_one(ran_check(1), prog.evidence(ran)).status == "incomplete"
    assert evaluate_one(USES, prog.evidence(ran)).status == "incomplete"
    assert target.read_text().startswith("idrrun-regions 1")  # the link went, not its target
    assert not list(tmp_path.glob(".idrrun-regions*"))


def test_record_replaced_by_a_fifo_is_not_read(tmp_path: Path, library: Path) -> None:
    prog = Run(tmp_path, HOSTILE.replace("ACTION", "unlink(name); mkfifo(name, 0600);"))
    ran = prog.counted(library)  # returns at once: a FIFO is never opened for reading
    assert (ran.state, ran.why) == ("unreadable", regions.UNREADABLE.format(why="not a regular file"))
    assert evaluate_one(ran_check(1), prog.evidence(ran)).status == "incomplete"


def test_library_not_loaded_falls_back_to_the_compiler(tmp_path: Path, library: Path) -> None:
    prog = Run(tmp_path, HOSTILE.replace("ACTION", ""))
    counting = Counting(env={}, prefix=".idrrun-regions-test")  # no ACC_PROFLIB: never loaded
    prog.run(counting)
    prog.output = ""
    ran = regions.collect(counting, tmp_path, -1, prog.executable)
    assert ran is not None and ran.state == "not_loaded"
    result = evaluate_one(ran_check(1), prog.evidence(ran))
    assert (result.status, result.reason) == ("incomplete", regions.NOT_LOADED)
    result = evaluate_one(USES, prog.evidence(ran))
    assert result.status == "pass"
    assert result.reason.endswith(f"from the compiler's report: {regions.NOT_LOADED})")


def test_library_that_did_not_build_is_not_loaded(tmp_path: Path) -> None:
    ran = regions.collect(Counting(prefix=".x", problem="no C compiler"), tmp_path)
    assert ran == RegionsRan("not_loaded", why="no C compiler")
    assert regions.collect(Counting(), tmp_path) is None  # not a counted run


# ---------------------------------------------------------------------------------------------
# Records, parsed (pure)

GCC_RECORD = b"idrrun-regions 1\nC 1105 0 3 - -\nC 1145 0 1 - -\nE 2 0\n"
# What regions.c writes under NVIDIA's runtime, which fills src_file, func_name and line_no
# (written here by hand from the profiling interface's fields: there is no nvc on this machine).
NVHPC_RECORD = (b"idrrun-regions 1\n"
                b"C 4021a3 47 1000 main /home/stu%20dent/laplace.c\n"
                b"C 402310 55 1000 main /home/stu%20dent/laplace.c\n"
                b"C - 12 1 init_%E2%82%AC /home/stu%20dent/laplace.c\n"
                b"E 3 0\n")


def test_gcc_record_parses() -> None:
    assert parse_record(GCC_RECORD) == Record(
        (ConstructRan(3, site=0x1105), ConstructRan(1, site=0x1145)), 0, True)


def test_nvhpc_record_with_lines_parses_without_nvc() -> None:
    record = parse_record(NVHPC_RECORD)
    assert record is not None and record.finished
    ran = summarise([record], None)
    assert ran.state == "counted"
    assert [(c.line, c.function, c.count) for c in ran.constructs] == [
        (12, "init_€", 1), (47, "main", 1000), (55, "main", 1000)]
    assert ran.constructs[1].file == "/home/stu dent/laplace.c"
    assert collections.Counter(c.function for c in ran.constructs) == {"init_€": 1, "main": 2}


BAD_RECORDS = [
    b"", b"\n", b"idrrun-regions 3\nE 0 0\n", b"idrrun-regions 2\nS 1105 0 -\n",
    b"idrrun-regions 2\nC 1105 0 3 - -\nS 1105 0 - -\nE 1 0\n", b"idrrun-regions 1\nC 1105 0 0 - -\nE 1 0\n",
    b"idrrun-regions 1\nC 1105 0 3 - -\nE 2 0\n", b"idrrun-regions 1\nE 0 0\nC 1105 0 3 - -\n",
    b"idrrun-regions 1\nC 1105 0 3 - -\nE 1 0\nE 1 0\n", b"idrrun-regions 1\nC zz 0 3 - -\nE 1 0\n",
    b"idrrun-regions 1\nC 1105 0 3 -\nE 1 0\n", b"idrrun-regions 1\nC 1105 0 3 - - x\nE 1 0\n",
    b"idrrun-regions 1\nC 1105 -1 3 - -\nE 1 0\n", b"\xff\xfe" * 100, b"idrrun-regions 1\n\x00",
    b"idrrun-regions 1\n" + b"C 1 1 1 - -\n" * 257 + b"E 257 0\n",
    b"idrrun-regions 1\nC 1105 0 3 " + b"f" * 5000 + b" -\nE 1 0\n",
    b"idrrun-regions 1\n" + b"x" * (regions.RECORD_CAP + 1),
]


@pytest.mark.parametrize("data", BAD_RECORDS)
def test_anything_else_is_not_a_record(data: bytes) -> None:
    assert parse_record(data) is None
    assert summarise([parse_record(data)], None).state == "unreadable"


def test_a_record_of_a_stopped_run_says_which_constructs_it_saw_start() -> None:
    """Version 2: each construct's line as it first starts (no count), the counts at exit. A
    program stopped before its exit leaves the first lines (the last one perhaps cut as it was
    written): unfinished, with the constructs it is known to have run."""
    seen = parse_record(b"idrrun-regions 2\nS 1105 0 - -\nS 1145 0 - -\nS 11")
    assert seen == Record((), 0, False, (ConstructRan(1, site=0x1105), ConstructRan(1, site=0x1145)))
    ran = summarise([seen], None)
    assert (ran.state, ran.why, ran.distinct) == ("unfinished", regions.UNFINISHED, 2)
    ended = parse_record(b"idrrun-regions 2\nS 1105 0 - -\nC 1105 0 7 - -\nE 1 0\n")
    assert ended == Record((ConstructRan(7, site=0x1105),), 0, True)  # the counts say it all
    assert summarise([ended], None).constructs == (ConstructRan(7, site=0x1105),)


STOPPED = """\
#include <stdio.h>
#include <unistd.h>
#define N 1000
int main(void)
{
    static double a[N];
#pragma acc parallel loop
    for (int i = 0; i < N; i++)
        a[i] = 2.0 * i;
    printf("a = %f\\n", a[N - 1]);
    fflush(stdout);
    for (;;)
        sleep(1);
#pragma acc parallel loop
    for (int i = 0; i < N; i++)
        a[i] += 1.0;
    return 0;
}
"""


def test_a_run_stopped_at_its_limit_is_judged_on_the_regions_it_saw_start(tmp_path: Path,
                                                                          library: Path) -> None:
    """A real gcc build stopped while it waits after its first construct: that construct ran
    (uses OpenACC, its loop on the device: said judged so far); two constructs run is not
    decided; the same record of a program that crashed is not judged."""
    prog = Run(tmp_path, STOPPED)
    counting = prog.counting(library)
    env = {**os.environ, "ACC_DEVICE_TYPE": "host", **counting.env}
    with pytest.raises(subprocess.TimeoutExpired) as stopped:
        subprocess.run([str(prog.executable)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=2)
    prog.output = (stopped.value.stdout or b"").decode() if isinstance(stopped.value.stdout, bytes) \
        else (stopped.value.stdout or "")
    ran = regions.collect(counting, tmp_path, -1, prog.executable)
    assert ran is not None and (ran.state, ran.distinct) == ("unfinished", 1), ran
    assert ran.constructs[0].line == line_of(STOPPED, "#pragma acc parallel loop"), ran
    proc = ProcResult(("prog",), None, output=prog.output, timed_out=True, seconds=2.0)
    timed_out = dataclasses.replace(prog.evidence(ran), run=RunResult(("prog",), proc, regions=ran))
    said = "judged on the compute regions seen until the run was stopped at 2.0 s: "
    result = evaluate_one(USES, timed_out)
    assert (result.status, result.reason) == ("pass", said + "1 compute region ran (counted as "
                                              "they ran, OpenACC profiling interface)"), result
    loop = CheckSpec("loop_on_device", "the doubling", pattern=r"a\[i\] = 2\.0 \* i")
    result = evaluate_one(loop, timed_out)
    assert result.status == "pass" and result.reason.startswith(said), result
    later = CheckSpec("loop_on_device", "the increment", pattern=r"a\[i\] \+= 1\.0")
    assert evaluate_one(later, timed_out).status == "incomplete"
    assert evaluate_one(ran_check(2), timed_out).status == "incomplete"
    crashed = dataclasses.replace(timed_out, run=RunResult(("prog",), ProcResult(("prog",), -11)))
    result = evaluate_one(USES, crashed)
    assert (result.status, result.reason) == ("incomplete", regions.UNFINISHED)


def test_record_without_its_closing_line_is_unfinished() -> None:
    assert parse_record(b"idrrun-regions 1\n") == Record((), 0, False)
    assert summarise([parse_record(GCC_RECORD), parse_record(b"idrrun-regions 1\n")],
                     None).state == "unfinished"
    assert summarise([], None) == RegionsRan("not_loaded", why=regions.NOT_LOADED)


# ---------------------------------------------------------------------------------------------
# Through idrrun: the hostile tester's intro_pi, checked and graded


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ROOT / "examples"))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_start_file_with_dead_directives_fails_intro_pi(tmp_path: Path) -> None:
    start = (ROOT / "examples" / "C" / "intro_pi_exercise.c").read_text()
    dead = DEAD_PI.replace("STORAGE", "static")
    (tmp_path / "dead.c").write_text(start.replace("int main(", dead + "\nint main(", 1))
    r = _cli("run", "-a", "--check", "intro_pi", "dead.c", cwd=tmp_path)
    assert r.returncode != 0
    row = next(line for line in r.stdout.splitlines() if line.lstrip().startswith("uses OpenACC"))
    assert "FAIL" in row and "never run" in row, r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dead.c"]  # no record left behind


# The hostile tester's tiling_laplace: both sweeps in a function that returns a function
# pointer, no data clause at all (it used to pass no_implicit_data: the function was never
# paired across gcc's dumps).
LAPLACE_FUNCTION_POINTER = """\
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void done(void) {}

void (*sweep(double *restrict T, double *restrict Tnew, int nx, int ny, double *err))(void)
{
    double error = 0.0;
    #pragma acc parallel loop tile(32, 32) reduction(max:error)
    for (int j = 1; j < ny - 1; j++)
        for (int i = 1; i < nx - 1; i++) {
            Tnew[j * nx + i] = 0.25 * (T[j * nx + i + 1] + T[j * nx + i - 1]
                                     + T[(j + 1) * nx + i] + T[(j - 1) * nx + i]);
            error = fmax(error, fabs(Tnew[j * nx + i] - T[j * nx + i]));
        }
    #pragma acc parallel loop tile(32, 32)
    for (int j = 1; j < ny - 1; j++)
        for (int i = 1; i < nx - 1; i++)
            T[j * nx + i] = Tnew[j * nx + i];
    *err = error;
    return done;
}

int main(int argc, char *argv[])
{
    int nx = argc > 1 ? atoi(argv[1]) : 258;
    int ny = argc > 2 ? atoi(argv[2]) : 258;
    int niter = argc > 3 ? atoi(argv[3]) : 1000;
    int report = niter >= 10 ? niter / 10 : 1;
    size_t n = (size_t)nx * ny;
    double *T = calloc(n, sizeof(double)), *Tnew = calloc(n, sizeof(double));
    for (int i = 0; i < nx; i++)
        T[i] = 100.0;
    double error = 0.0;
    for (int it = 1; it <= niter; it++) {
        sweep(T, Tnew, nx, ny, &error)();
        if (it % report == 0)
            printf("iteration %6d   error = %.6E\\n", it, error);
    }
    printf("grid = %d x %d\\n", nx, ny);
    printf("iterations = %d\\n", niter);
    printf("error = %.6E\\n", error);
    double mean = 0.0;
    for (size_t p = 0; p < n; p++)
        mean += T[p];
    printf("mean T = %.6E\\n", mean / n);
    free(T);
    free(Tnew);
    return 0;
}
"""


def _row(stdout: str, check: str) -> str:
    return next(line for line in stdout.splitlines() if line.lstrip().startswith(check + " "))


def test_function_pointer_laplace_without_data_clauses_fails(tmp_path: Path) -> None:
    (tmp_path / "laplace.c").write_text(LAPLACE_FUNCTION_POINTER)
    r = _cli("run", "-a", "--check", "tiling_laplace", "laplace.c", cwd=tmp_path)
    assert "PASS" in _row(r.stdout, "error as the solution's"), r.stdout + r.stderr
    assert "PASS" in _row(r.stdout, "uses OpenACC")  # both sweeps ran
    row = _row(r.stdout, "data clauses")
    assert "FAIL" in row and "T, Tnew" in row, r.stdout


@pytest.fixture
def no_bwrap(tmp_path: Path) -> Iterator[str]:
    """A PATH with all of /usr/local/bin, /usr/bin and /usr/sbin but bubblewrap: the "uid"
    level. Open to every user: a box's uid runs the compiler through it."""
    folder = Path(f"/tmp/regions-no-bwrap-{os.getpid()}")
    folder.mkdir()
    os.chmod(folder, 0o755)
    for d in ("/usr/local/bin", "/usr/bin", "/usr/sbin"):
        for entry in os.scandir(d):
            if entry.name != "bwrap" and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry.path)
    yield str(folder)
    shutil.rmtree(folder)


@pytest.mark.parametrize("level", ["namespaces", "uid"])
def test_graded_dead_directives_fail_beside_an_honest_port(tmp_path: Path, level: str,
                                                           no_bwrap: str) -> None:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ROOT / "examples"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    if level == "uid":
        if os.geteuid() != 0:
            pytest.skip("the uid level needs root")
        # A box at the uid level sees every file others can read: the grader wants a course
        # of its own (the checkout's is readable by all).
        os.chmod(tmp_path, 0o700)
        shutil.copytree(ROOT / "examples", tmp_path / "course" / "examples")
        env.update(PATH=no_bwrap, IDRRUN_EXAMPLES=str(tmp_path / "course" / "examples"))
    elif isolation.sandbox_support().level != "namespaces":
        pytest.skip("this machine cannot make namespaces (bubblewrap)")
    start = (ROOT / "examples" / "C" / "intro_pi_exercise.c").read_text()
    subs = tmp_path / "class"
    subs.mkdir()
    (subs / "alice.c").write_text((ROOT / "examples" / "C" / "intro_pi_solution.c").read_text())
    for name, storage in (("dave.c", "static"), ("erin.c", "")):
        dead = DEAD_PI.replace("STORAGE", storage)
        (subs / name).write_text(start.replace("int main(", dead + "\nint main(", 1))
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "intro_pi",
                           "--report", str(report), "--", *sorted(str(p) for p in subs.iterdir())],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert report.is_file(), done.stdout + done.stderr
    rows = {row["student"]: row for row in json.loads(report.read_text())}
    uses = {name: next(c for c in row["checks"] if c["name"] == "uses OpenACC")
            for name, row in rows.items()}
    # Without a GPU the solution is incomplete: its agrees_with_host check needs one.
    assert rows["alice"]["verdict"] == ("pass" if has_gpu() else "incomplete"), rows["alice"]
    assert uses["alice"]["got"] == "1"
    for cheat in ("dave", "erin"):
        assert rows[cheat]["verdict"] == "fail", rows[cheat]
        assert uses[cheat]["status"] == "fail", uses[cheat]
        assert "never ran" in uses[cheat]["reason"] or "never run" in uses[cheat]["reason"]
    assert sorted(p.name for p in subs.iterdir()) == ["alice.c", "dave.c", "erin.c"]
