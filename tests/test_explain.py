"""The messages of nvcc, gfortran and the OpenACC runtimes, explained in the student's terms
(toolchains/explain.py): which array, which directive (at its line in the cell), what to change.

The runtime's messages come only from a GPU (with host fallback, libgomp maps nothing and checks
no `present`: tried here): they are written below as GCC 12's libgomp prints them (its format
strings, read from this machine's libgomp.so and libgomp-plugin-nvptx.so; the addresses made up)
and as the issue quotes nvc's runtime; the reading is tested on those, in C and Fortran, and once
through a real run of a program that prints one. The compilers' messages are real: gfortran's,
and nvcc's when it is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH
from idrrun.request.source import from_cell
from idrrun.toolchains.explain import clauses, compile_hint, run_hint

# libgomp's: "present clause: !acc_is_present (%p, %lu (0x%lx))", "cuStreamSynchronize error: %s",
# "Trying to map into device [%p..%p) object when [%p..%p) is already mapped"; nvc's runtime's.
PRESENT_GCC = "libgomp: present clause: !acc_is_present (0x7ffc1d2e3a40, 40000 (0x9c40))\n"
PRESENT_NV = ("FATAL ERROR: data in PRESENT clause was not found on device 1: name=a "
              "host:0x7ffc1d2e3a40\n file:/w/cell.c main line:5\n")
ILLEGAL_GCC = "libgomp: cuStreamSynchronize error: an illegal memory access was encountered\n"
ILLEGAL_NV = ("Failing in Thread:1\nAccelerator Fatal Error: call to cuStreamSynchronize returned "
              "error 700 (CUDA_ERROR_ILLEGAL_ADDRESS): Illegal address during kernel execution\n")
MAPPED_GCC = ("libgomp: Trying to map into device [0x55d1c1b2a2c0..0x55d1c1b33f00) object when "
              "[0x55d1c1b2a2c0..0x55d1c1b2f0e0) is already mapped\n")

PRESENT_C = """#include <stdio.h>
int main(void)
{
    int n = 10000; static int a[10000];
    #pragma acc parallel loop present(a[0:n])
    for (int i = 0; i < n; i++) a[i] = i;
    printf("%d\\n", a[n - 1]);
    return 0;
}
"""
PRESENT_F90 = """program p
  integer :: a(10000), i
  !$acc parallel loop present(a)
  do i = 1, 10000
    a(i) = i
  end do
  print *, a(10000)
end program p
"""


def cell(text: str, language: str = "c"):  # type: ignore[no-untyped-def]
    return from_cell(text, "cell[1]", language, None, Path("/w"))  # type: ignore[arg-type]


def test_present_never_put_there_names_the_array_and_the_directive_in_c() -> None:
    hint = run_hint("0\n" + PRESENT_GCC, cell(PRESENT_C))
    assert hint is not None
    # line 6 of the cell: the magic line is line 1
    assert "no device copy of a (40000 bytes at 0x7ffc1d2e3a40)" in hint
    assert "present(a[0:n]) at line 6" in hint
    assert "#pragma acc enter data copyin(a[0:n])" in hint and "moves nothing" in hint


def test_present_never_put_there_in_fortran_and_from_nvidias_runtime() -> None:
    hint = run_hint(PRESENT_GCC, cell(PRESENT_F90, "fortran"))
    assert hint is not None and "present(a) at line 4" in hint
    assert "!$acc enter data copyin(a)" in hint and "!$acc end data" in hint
    hint = run_hint(PRESENT_NV, cell(PRESENT_C))
    assert hint is not None and "no device copy of a," in hint


SECTION_C = """int main(void)
{
    int n = 1000; static double a[1000];
    #pragma acc parallel loop copy(a[0:n/2])
    for (int i = 0; i < n; i++) a[i] = 2 * i;
    return 0;
}
"""
SECTION_F90 = """program p
  integer, parameter :: n = 1000
  real(8) :: a(n)
  integer :: i
  !$acc parallel loop &
  !$acc& copy(a(1:n/2))
  do i = 1, n
    a(i) = 2 * i
  end do
end program p
"""


@pytest.mark.parametrize("output", [ILLEGAL_GCC, ILLEGAL_NV])
def test_an_illegal_access_points_at_the_sections_in_c(output: str) -> None:
    hint = run_hint(output, cell(SECTION_C))
    assert hint is not None and "copy(a[0:n/2]) at line 5" in hint
    assert "section smaller than what the loop touches" in hint and "a[0:n]" in hint


def test_an_illegal_access_points_at_the_sections_in_fortran() -> None:
    # a directive continued with `&` is one directive, at its first line
    hint = run_hint(ILLEGAL_GCC, cell(SECTION_F90, "fortran"))
    assert hint is not None and "copy(a(1:n/2)) at line 6" in hint and "a(1:n)" in hint


MAPPED_C = """int main(void)
{
    int n = 10000; static int a[10000];
    #pragma acc enter data copyin(a[0:n/2])
    #pragma acc data copy(a[0:n])
    {
    }
    return 0;
}
"""
MAPPED_F90 = """program p
  integer :: a(10000)
  !$acc enter data copyin(a(1:5000))
  !$acc data copy(a)
  !$acc end data
end program p
"""


def test_mapped_twice_names_the_array_and_both_clauses() -> None:
    hint = run_hint(MAPPED_GCC, cell(MAPPED_C))
    assert hint is not None
    assert "(20000 bytes)" in hint and "(40000 bytes)" in hint
    assert "a: copyin(a[0:n/2]) at line 5, copy(a[0:n]) at line 6." in hint
    assert "#pragma acc exit data" in hint
    hint = run_hint(MAPPED_GCC, cell(MAPPED_F90, "fortran"))
    assert hint is not None and "a: copyin(a(1:5000)) at line 4, copy(a) at line 5." in hint
    assert "!$acc exit data" in hint


def test_other_failures_keep_the_generic_hint() -> None:
    assert run_hint("Segmentation fault\n", cell(PRESENT_C)) is None
    assert run_hint("", cell(PRESENT_C)) is None
    assert compile_hint("cell[1]:3:5: error: expected ';'\n", cell(PRESENT_C)) is None


def test_clauses_read_continued_directives_and_nested_sections() -> None:
    found = list(clauses(cell("#pragma acc parallel loop copyin(a[0:n], b[f(1):n]) \\\n"
                              "    copyout(c[0:n]) default(present)\nint x;\n")))
    assert [(c.line, c.name, c.items) for c in found] == [
        (2, "copyin", ("a[0:n]", "b[f(1):n]")), (2, "copyout", ("c[0:n]",)),
        (2, "default", ("present",))]
    assert found[0].arrays == ("a", "b")


def idrrun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, XDG_CACHE_HOME=str(cwd / ".cache"))
    return subprocess.run([sys.executable, "-m", "idrrun", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_run_that_prints_the_recorded_present_message_gets_its_explanation(tmp_path: Path) -> None:
    # A real run; the program prints libgomp's message as recorded on the GPU, and fails as
    # libgomp does (exit status 1).
    program = PRESENT_C.replace('    printf("%d\\n", a[n - 1]);\n',
                                '    fputs("' + PRESENT_GCC.strip() + '\\n", stderr);\n'
                                '    return 1;\n')
    (tmp_path / "present.c").write_text(program)
    r = idrrun("run", "-a", "present.c", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "exit code 1" in out, out
    assert "no device copy of a (40000 bytes" in out and "present(a[0:n]) at line 5" in out
    assert "the program returned a non-zero status" not in out


FORTRAN_IFDEF = """program p
  implicit none
  #ifdef _OPENACC
  print *, 'acc'
  #endif
end program p
"""


def test_an_indented_ifdef_in_fortran_builds_as_nvfortran_reads_it(tmp_path: Path) -> None:
    # Once a hint ("the # must be in column 1"); now read as nvfortran does (nvfortranisms.py)
    (tmp_path / "ifdef.f90").write_text(FORTRAN_IFDEF)
    r = idrrun("run", "-a", "--options", "-cpp", "ifdef.f90", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Invalid character in name" not in out, out
    assert "line 3, 5: a preprocessor line indented as nvfortran allows" in out, out
    assert " acc" in r.stdout  # the preprocessor ran: _OPENACC's branch


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no CUDA toolkit (nvcc)")
def test_nvcc_without_the_target_asked_builds_the_nearest(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k() {}\nint main() { k<<<1, 1>>>(); return 0; }\n")
    listed = subprocess.run(["nvcc", "--list-gpu-arch"], capture_output=True, text=True).stdout
    if "compute_70" in listed:
        pytest.skip("this nvcc still builds for sm_70")
    r = idrrun("run", "--options", "-arch=sm_70", "k.cu", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert "Unsupported gpu architecture" not in out, out
    assert "-arch=sm_70: this nvcc does not build sm_70" in out, out
    # the hint stays for what idrrun does not rewrite (a -gencode written out)
    r = idrrun("run", "--options", "-gencode=arch=compute_70,code=sm_70", "k.cu", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "this nvcc no longer builds for sm_70" in out, out