"""toolchains/gccdumps: compute regions and implicit data, from real gcc/gfortran tree dumps."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from idrrun.checks.directives import code_text, has_directives
from idrrun.model import AccReport, ImplicitData
from idrrun.toolchains.gccdumps import GCC_DUMP_FLAGS, GCC_METHOD, from_gcc_dumps
from idrrun.toolchains.minfo import NVHPC_METHOD, from_nvhpc_minfo


def has_directives_in(text: str, language: str) -> bool:
    """What the checks ask of a source when the compiler left no preprocessed text."""
    return has_directives(code_text(text, language), language)


def compile_dumps(tmp_path: Path, source: str, suffix: str, optimise: str = "-O0") -> AccReport:
    """Build `source` with -fopenacc and the dump flags, as the build will, and read the dumps."""
    compiler = {".f90": "gfortran", ".f": "gfortran", ".cpp": "g++"}.get(suffix, "gcc")
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    path = tmp_path / f"prog{suffix}"
    path.write_text(source)
    argv = [compiler, optimise, "-fopenacc", "-foffload=disable", *GCC_DUMP_FLAGS, "-c", path.name,
            "-o", "prog.o"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    (original,) = tmp_path.glob("*.original")
    (gimple,) = tmp_path.glob("*.gimple")
    (cgraph,) = tmp_path.glob("*.cgraph")
    return from_gcc_dumps(original.read_text(), gimple.read_text(), cgraph.read_text())


def line_of(source: str, text: str, nth: int = 1) -> int:
    """1-based line of the nth line of `source` containing `text`."""
    hits = [i for i, line in enumerate(source.splitlines(), 1) if text in line]
    return hits[nth - 1]


def names(report: AccReport) -> list[str]:
    return [f.variable for f in report.implicit]


# ---------------------------------------------------------------------------------------------
# C with gcc

C_SERIAL = """\
#include <stdio.h>
int main(void) {
  double a[100], s = 0;
  for (int i = 0; i < 100; i++) a[i] = i;
  for (int i = 0; i < 100; i++) s += a[i];
  printf("%f\\n", s);
  return 0;
}
"""


def test_serial_c_program_has_no_region(tmp_path: Path) -> None:
    report = compile_dumps(tmp_path, C_SERIAL, ".c")
    assert report == AccReport(0, (), GCC_METHOD)
    assert not has_directives(code_text(C_SERIAL, "c"), "c")


C_POINTER = """\
#include <stdlib.h>
void scale(double *a, int n) {
  #pragma acc parallel loop CLAUSE
  for (int i = 0; i < n; i++) a[i] = 2.0 * a[i];
}
int main(void) {
  int n = 1000;
  double *a = malloc(n * sizeof(double));
  for (int i = 0; i < n; i++) a[i] = i;
  scale(a, n);
  free(a);
  return 0;
}
"""


def test_c_pointer_without_clause_is_implicit(tmp_path: Path) -> None:
    source = C_POINTER.replace("CLAUSE", "")
    report = compile_dumps(tmp_path, source, ".c")
    assert report.regions == 1
    (finding,) = report.implicit
    assert finding.variable == "a"
    assert finding.construct == "parallel"
    assert finding.line == line_of(source, "#pragma acc parallel")
    assert finding.detail.startswith(f"The pointer a is used in the parallel region at line "
                                     f"{finding.line} without a data clause")
    assert "host address" in finding.detail and "copyin(a[0:n])" in finding.detail


def test_c_pointer_with_copy_section_is_explicit(tmp_path: Path) -> None:
    report = compile_dumps(tmp_path, C_POINTER.replace("CLAUSE", "copy(a[0:n])"), ".c")
    assert report == AccReport(1, (), GCC_METHOD)


C_DATA_REGION = """\
void twice(double *a, int n) {
  #pragma acc data copy(a[0:n])
  {
    #pragma acc parallel loop CLAUSE
    for (int i = 0; i < n; i++) a[i] = 2.0 * a[i];
    #pragma acc parallel loop CLAUSE
    for (int i = 0; i < n; i++) a[i] = a[i] + 1.0;
  }
}
"""


def test_c_present_inside_data_region_is_explicit(tmp_path: Path) -> None:
    report = compile_dumps(tmp_path, C_DATA_REGION.replace("CLAUSE", "present(a[0:n])"), ".c")
    assert report == AccReport(2, (), GCC_METHOD)


def test_c_data_region_without_present_is_reported_kindly(tmp_path: Path) -> None:
    source = C_DATA_REGION.replace("CLAUSE", "")
    report = compile_dumps(tmp_path, source, ".c")
    assert report.regions == 2
    first, second = report.implicit
    data_line = line_of(source, "#pragma acc data")
    assert (first.variable, first.line) == ("a", line_of(source, "#pragma acc parallel"))
    assert (second.variable, second.line) == ("a", line_of(source, "#pragma acc parallel", 2))
    assert first.detail == (f"a is used in the parallel region at line {first.line} without a "
                            f"data clause (it is in an enclosing data region at line "
                            f"{data_line}: add present(a)).")


def test_c_pointer_in_data_region_that_does_not_name_it(tmp_path: Path) -> None:
    source = """\
void add(double *a, double *b, int n) {
  #pragma acc data copy(a[0:n])
  {
    #pragma acc parallel loop present(a[0:n])
    for (int i = 0; i < n; i++) a[i] += b[i];
  }
}
"""
    report = compile_dumps(tmp_path, source, ".c")
    (finding,) = report.implicit
    assert finding.variable == "b"
    assert finding.detail.startswith("The pointer b is used")


C_FIXED_ARRAY = """\
#include <stdio.h>
#define N 1000
double x[N];
int main(void) {
  double y[N];
  for (int i = 0; i < N; i++) { x[i] = i; y[i] = 0; }
  #pragma acc parallel loop CLAUSE
  for (int i = 0; i < N; i++) y[i] = 2.0 * x[i];
  printf("%f\\n", y[N - 1]);
  return 0;
}
"""


def test_c_fixed_size_arrays_without_clause_are_implicit(tmp_path: Path) -> None:
    source = C_FIXED_ARRAY.replace("CLAUSE", "")
    report = compile_dumps(tmp_path, source, ".c")
    assert report.regions == 1
    assert names(report) == ["x", "y"]  # a global and a local array
    line = line_of(source, "#pragma acc parallel")
    assert report.implicit[0] == ImplicitData(
        "x", line, "parallel",
        f"x is used in the parallel region at line {line} without a data clause, so the runtime "
        "moves it implicitly: name it in copy, copyin, copyout or create, or in present if it is "
        "already on the device.")


def test_c_fixed_size_arrays_with_clauses_are_explicit(tmp_path: Path) -> None:
    report = compile_dumps(tmp_path, C_FIXED_ARRAY.replace("CLAUSE", "copyin(x) copyout(y)"), ".c")
    assert report == AccReport(1, (), GCC_METHOD)


def test_c_reduction_scalar_is_not_implicit_data(tmp_path: Path) -> None:
    source = """\
#include <stdio.h>
int main(void) {
  int n = 1000;
  double s = 0.0, h = 1.0 / n;
  #pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < n; i++) s += h * i;
  #pragma acc serial
  { s = s * 2.0; }
  printf("%f\\n", s);
  return 0;
}
"""
    report = compile_dumps(tmp_path, source, ".c")
    assert report == AccReport(2, (), GCC_METHOD)


def test_c_kernels_without_clauses_is_implicit(tmp_path: Path) -> None:
    source = """\
void saxpy(int n, float a, float *x, float *y) {
  float t = 0;
  #pragma acc kernels
  for (int i = 0; i < n; i++) { y[i] = a * x[i] + y[i]; t += a; }
}
"""
    report = compile_dumps(tmp_path, source, ".c")
    assert report.regions == 1
    assert names(report) == ["x", "y"]  # not the scalars n, a, t
    assert {f.construct for f in report.implicit} == {"kernels"}
    assert report.implicit[0].line == line_of(source, "#pragma acc kernels")


# The course's async exercise: matrices created and initialised on the device in a helper,
# multiplied where they are present.
C_MATMUL = """\
#include <stdio.h>
#include <stdlib.h>
double *create_mat(int dim, int q) {
  double *mat = malloc(dim * dim * sizeof(double));
  #pragma acc enter data create(mat[0:dim*dim]) async(q)
  #pragma acc parallel loop present(mat[0:dim*dim]) async(q)
  for (int i = 0; i < dim * dim; i++) mat[i] = (double) i / dim;
  return mat;
}
int main(void) {
  int dim = 200, n = dim * dim;
  double *A = create_mat(dim, 1);
  double *B = create_mat(dim, 2);
  double *C = create_mat(dim, 3);
  #pragma acc parallel loop collapse(2) CLAUSE wait(1,2,3)
  for (int i = 0; i < dim; i++)
    for (int j = 0; j < dim; j++) {
      double s = 0.0;
      for (int k = 0; k < dim; k++) s += A[i * dim + k] * B[k * dim + j];
      C[i * dim + j] = s;
    }
  #pragma acc exit data copyout(C[0:n]) delete(A[0:n], B[0:n])
  printf("%f\\n", C[n - 1]);
  return 0;
}
"""


def test_matmul_with_present_has_no_implicit_data(tmp_path: Path) -> None:
    source = C_MATMUL.replace("CLAUSE", "present(A[:n],B[:n],C[:n])")
    assert has_directives_in(source, "c")
    report = compile_dumps(tmp_path, source, ".c")
    assert report == AccReport(2, (), GCC_METHOD)


def test_matmul_without_present_names_the_three_matrices(tmp_path: Path) -> None:
    source = C_MATMUL.replace("CLAUSE", "")
    report = compile_dumps(tmp_path, source, ".c")
    assert report.regions == 2
    assert names(report) == ["A", "B", "C"]
    line = line_of(source, "collapse(2)")
    assert {(f.line, f.construct) for f in report.implicit} == {(line, "parallel")}
    assert all(f.detail.startswith(f"The pointer {f.variable} ") for f in report.implicit)


def test_c_enter_data_in_same_function_is_mentioned(tmp_path: Path) -> None:
    source = """\
void init(double *v, int n) {
  #pragma acc enter data create(v[0:n])
  #pragma acc parallel loop
  for (int i = 0; i < n; i++) v[i] = i;
}
"""
    report = compile_dumps(tmp_path, source, ".c")
    (finding,) = report.implicit
    assert finding.variable == "v"
    enter = line_of(source, "enter data")
    assert (f"(it was put on the device by the enter data directive at line {enter}: "
            "add present(v))") in finding.detail


def test_cpp_template_and_namespace_functions(tmp_path: Path) -> None:
    source = """\
template <typename T> void scale(T *a, int n) {
  #pragma acc parallel loop
  for (int i = 0; i < n; i++) a[i] *= 2;
}
namespace ns { void fill(double *a, int n) {
  #pragma acc parallel loop copyout(a[0:n])
  for (int i = 0; i < n; i++) a[i] = i;
} }
int main() {
  double v[100];
  ns::fill(v, 100);
  scale(v, 100);
  return 0;
}
"""
    report = compile_dumps(tmp_path, source, ".cpp")
    assert report.regions == 2
    assert [(f.variable, f.line) for f in report.implicit] == [("a", 2)]


# A function returning a function pointer: gcc's gimple dump prints its header as
# `void (*<T350>) (float *, int) getfp (float * a, int n)`.
C_FUNCTION_POINTER = """\
static void helper(float *a, int n) { a[0] = n; }
void (*getfp(float *a, int n))(float *, int) {
  #pragma acc parallel loop CLAUSE
  for (int i = 0; i < n; i++) a[i] = 2.0f * a[i];
  return helper;
}
int main(void) {
  float a[64];
  for (int i = 0; i < 64; i++) a[i] = i;
  getfp(a, 64)(a, 64);
  return 0;
}
"""


def test_function_returning_a_function_pointer_is_paired(tmp_path: Path) -> None:
    source = C_FUNCTION_POINTER.replace("CLAUSE", "")
    report = compile_dumps(tmp_path, source, ".c", "-O2")
    assert report.regions == 1
    (finding,) = report.implicit
    assert (finding.variable, finding.line) == ("a", line_of(source, "#pragma acc parallel"))
    assert finding.detail.startswith("The pointer a is used in the parallel region")
    fixed = C_FUNCTION_POINTER.replace("CLAUSE", "copy(a[0:n])")
    (tmp_path / "fixed").mkdir()
    assert compile_dumps(tmp_path / "fixed", fixed, ".c", "-O2") == AccReport(1, (), GCC_METHOD)


# The serial start file of an exercise, plus directives in functions that never run.
C_DEAD = """\
#include <stdio.h>
STORAGE void ported(float *a, int n) {
  #pragma acc parallel loop
  for (int i = 0; i < n; i++) a[i] = 2.0f * a[i];
}
int main(void) {
  float a[64];
  for (int i = 0; i < 64; i++) a[i] = 2.0f * i;
  printf("%f\\n", a[63]);
  return 0;
}
"""


@pytest.mark.parametrize("storage", ["static", "", "__attribute__((used)) static"])
@pytest.mark.parametrize("optimise", ["-O0", "-O2"])
def test_regions_in_a_function_never_called_do_not_count(tmp_path: Path, storage: str,
                                                         optimise: str) -> None:
    (tmp_path / "dumps").mkdir()
    report = compile_dumps(tmp_path / "dumps", C_DEAD.replace("STORAGE", storage), ".c", optimise)
    # Not counted, not reported (its implicit `a` never moves), but known to be there.
    assert (report.regions, report.implicit, report.unreachable) == (0, (), 1)


C_REACHED = """\
#include <stdio.h>
static void by_pointer(float *a, int n) {
  #pragma acc parallel loop copy(a[0:n])
  for (int i = 0; i < n; i++) a[i] += 1;
}
static void in_table(float *a, int n) {
  #pragma acc parallel loop copy(a[0:n])
  for (int i = 0; i < n; i++) a[i] += 2;
}
static void (*table[])(float *, int) = { in_table };
__attribute__((constructor)) static void at_start(void) {
  float b[4];
  #pragma acc serial copy(b)
  b[0] = 1;
}
void leaf(float *a, int n) {
  #pragma acc kernels copy(a[0:n])
  for (int i = 0; i < n; i++) a[i] += 3;
}
static void caller(float *a, int n) { leaf(a, n); }
void never(float *a, int n) {
  #pragma acc kernels copy(a[0:n])
  for (int i = 0; i < n; i++) a[i] += 4;
}
int main(int argc, char **argv) {
  float a[64] = {0};
  void (*f)(float *, int) = by_pointer;
  if (argc > 5) f(a, 64);
  table[0](a, 64);
  caller(a, 64);
  printf("%f\\n", a[0]);
  return 0;
}
"""


@pytest.mark.parametrize("optimise", ["-O0", "-O2"])
def test_reachable_means_called_or_address_taken_from_main(tmp_path: Path, optimise: str) -> None:
    report = compile_dumps(tmp_path, C_REACHED, ".c", optimise)
    # by_pointer, in_table (through a table), at_start (a constructor), leaf (through caller).
    assert (report.regions, report.unreachable) == (4, 1)


def test_without_main_every_function_counts(tmp_path: Path) -> None:
    source = C_REACHED.replace("int main(", "int not_main(")
    assert compile_dumps(tmp_path, source, ".c", "-O0").regions == 5


def test_fortran_procedure_never_called_does_not_count(tmp_path: Path) -> None:
    source = """\
subroutine ported(a, n)
  integer :: n, i
  real :: a(n)
  !$acc parallel loop
  do i = 1, n
    a(i) = 2 * a(i)
  end do
end subroutine
program start
  implicit none
  real :: a(64)
  a = 1
  call inside()
  print *, a(1)
contains
  subroutine inside()
    integer :: i
    !$acc parallel loop copy(a)
    do i = 1, 64
      a(i) = a(i) + 1
    end do
  end subroutine
end program
"""
    report = compile_dumps(tmp_path, source, ".f90", "-O2")
    assert (report.regions, report.implicit, report.unreachable) == (1, (), 1)


# ---------------------------------------------------------------------------------------------
# Fortran with gfortran

F_SERIAL = """\
program serial
  implicit none
  integer :: i
  real(8) :: a(100)
  do i = 1, 100
    a(i) = i
  end do
  print *, sum(a)
end program
"""


def test_serial_fortran_program_has_no_region(tmp_path: Path) -> None:
    assert compile_dumps(tmp_path, F_SERIAL, ".f90") == AccReport(0, (), GCC_METHOD)
    assert not has_directives_in(F_SERIAL, "fortran")


F_STATIC = """\
program static_arrays
  implicit none
  integer, parameter :: n = 1000
  integer :: i
  real(8) :: x(n), y(n), s
  x = 1.0d0
  !$acc parallel loop CLAUSE
  do i = 1, n
    y(i) = 2.0d0 * x(i)
  end do
  s = 0.0d0
  !$acc parallel loop reduction(+:s) copyin(y)
  do i = 1, n
    s = s + y(i)
  end do
  print *, s
end program
"""


def test_fortran_static_arrays_without_clause_are_implicit(tmp_path: Path) -> None:
    source = F_STATIC.replace("CLAUSE", "")
    report = compile_dumps(tmp_path, source, ".f90")
    assert report.regions == 2
    assert names(report) == ["x", "y"]
    assert {f.line for f in report.implicit} == {line_of(source, "!$acc parallel loop")}
    assert report.implicit[0].detail.startswith("x is used in the parallel region at line ")


def test_fortran_static_arrays_with_copyin_copyout_are_explicit(tmp_path: Path) -> None:
    report = compile_dumps(tmp_path, F_STATIC.replace("CLAUSE", "copyin(x) copyout(y)"), ".f90")
    assert report == AccReport(2, (), GCC_METHOD)


F_ALLOCATABLE = """\
program allocatable_arrays
  implicit none
  integer, parameter :: n = 1000
  integer :: i
  real(8), allocatable :: a(:), b(:)
  allocate(a(n), b(n))
  b = 1.0d0
  !$acc parallel loop CLAUSE
  do i = 1, n
    a(i) = 2.0d0 * b(i)
  end do
  print *, a(n)
  deallocate(a, b)
end program
"""


def test_fortran_allocatable_arrays_without_clause_are_implicit(tmp_path: Path) -> None:
    report = compile_dumps(tmp_path, F_ALLOCATABLE.replace("CLAUSE", ""), ".f90")
    assert report.regions == 1
    assert names(report) == ["a", "b"]


def test_fortran_allocatable_arrays_with_copyin_copyout_are_explicit(tmp_path: Path) -> None:
    source = F_ALLOCATABLE.replace("CLAUSE", "copyin(b) copyout(a)")
    assert compile_dumps(tmp_path, source, ".f90") == AccReport(1, (), GCC_METHOD)


F_ENTER_DATA = """\
module fields
  implicit none
contains
  subroutine create(v, n)
    integer, intent(in) :: n
    real(8), allocatable, intent(inout) :: v(:)
    integer :: i
    allocate(v(n))
    !$acc enter data create(v)
    !$acc parallel loop present(v)
    do i = 1, n
      v(i) = i
    end do
  end subroutine
  subroutine double_it(w, n)
    integer, intent(in) :: n
    real(8), intent(inout) :: w(:)
    integer :: i
    !$acc parallel loop CLAUSE
    do i = 1, n
      w(i) = 2 * w(i)
    end do
  end subroutine
end module
program main
  use fields
  implicit none
  real(8), allocatable :: v(:)
  call create(v, 100)
  call double_it(v, 100)
  !$acc exit data copyout(v)
  print *, v(100)
end program
"""


def test_fortran_enter_data_create_and_present_is_explicit(tmp_path: Path) -> None:
    source = F_ENTER_DATA.replace("CLAUSE", "present(w)")
    assert has_directives_in(source, "fortran")
    assert compile_dumps(tmp_path, source, ".f90") == AccReport(2, (), GCC_METHOD)


def test_fortran_assumed_shape_dummy_without_clause_is_implicit(tmp_path: Path) -> None:
    source = F_ENTER_DATA.replace("CLAUSE", "")
    report = compile_dumps(tmp_path, source, ".f90")
    (finding,) = report.implicit
    assert (finding.variable, finding.line) == ("w", line_of(source, "!$acc parallel loop", 2))
    # gfortran copies a dummy array's data: no talk of pointers for Fortran.
    assert finding.detail.startswith("w is used in the parallel region")


def test_fortran_allocatable_in_data_region_without_present(tmp_path: Path) -> None:
    source = """\
program data_region
  implicit none
  integer :: i
  real(8), allocatable :: a(:)
  allocate(a(100))
  a = 1
  !$acc data copy(a)
  !$acc kernels
  do i = 1, 100
    a(i) = a(i) + 1
  end do
  !$acc end kernels
  !$acc parallel loop present(a)
  do i = 1, 100
    a(i) = a(i) * 2
  end do
  !$acc end data
  print *, a(1)
end program
"""
    report = compile_dumps(tmp_path, source, ".f90")
    assert report.regions == 2
    (finding,) = report.implicit
    assert (finding.variable, finding.construct) == ("a", "kernels")
    assert finding.line == line_of(source, "!$acc kernels")
    assert finding.detail.endswith(f"(it is in an enclosing data region at line "
                                   f"{line_of(source, '!$acc data')}: add present(a)).")


def test_fortran_matmul_with_present_on_allocatables(tmp_path: Path) -> None:
    source = """\
program matmul_async
  implicit none
  integer, parameter :: dim = 100
  real(8), allocatable :: A(:,:), B(:,:), C(:,:)
  integer :: i, j, k
  real(8) :: s
  allocate(A(dim,dim), B(dim,dim), C(dim,dim))
  !$acc enter data create(A, B, C)
  !$acc parallel loop collapse(2) present(A, B) async(1)
  do j = 1, dim
    do i = 1, dim
      A(i,j) = i + j
      B(i,j) = i - j
    end do
  end do
  !$acc parallel loop collapse(2) present(A, B, C) private(s) wait(1)
  do j = 1, dim
    do i = 1, dim
      s = 0
      do k = 1, dim
        s = s + A(i,k) * B(k,j)
      end do
      C(i,j) = s
    end do
  end do
  !$acc kernels
  C(1,1) = C(1,1) + 1
  !$acc end kernels
  !$acc exit data copyout(C) delete(A, B)
  print *, C(dim,dim)
end program
"""
    report = compile_dumps(tmp_path, source, ".f90")
    assert report.regions == 3
    (finding,) = report.implicit
    assert (finding.variable, finding.construct) == ("c", "kernels")  # gfortran lower-cases
    assert "put on the device by the enter data directive" in finding.detail


# ---------------------------------------------------------------------------------------------
# Odd input never raises

ODD = ["", "\n\n", "#pragma", "#pragma omp target oacc_parallel map(", ";; Function (",
       "}{)(][", "  12, Generating implicit copy(", "x:\n 7, Generating NVIDIA GPU code(((",
       "\x00\xff" * 50, "#pragma acc parallel map(tofrom:" + "(" * 5000]


@pytest.mark.parametrize("text", ODD)
def test_odd_input_gives_an_empty_report(text: str) -> None:
    gcc = from_gcc_dumps(text, text)
    assert gcc.implicit == () and gcc.method == GCC_METHOD
    nv = from_nvhpc_minfo(text)
    assert nv.implicit == () and nv.method == NVHPC_METHOD
    assert isinstance(has_directives_in(text, "c"), bool)


def test_gimple_without_original_counts_but_reports_nothing(tmp_path: Path) -> None:
    report = compile_dumps(tmp_path, C_POINTER.replace("CLAUSE", ""), ".c")
    gimple = next(tmp_path.glob("*.gimple")).read_text()
    assert report.implicit
    assert from_gcc_dumps("", gimple) == AccReport(1, (), GCC_METHOD)


def test_fortran_array_sections_are_named_as_the_student_wrote_them(tmp_path: Path) -> None:
    """gfortran maps `copyout(x(1:n))` through a descriptor temporary `parm.N`: the remark
    names the arrays (x, y), never `parm`."""
    source = """\
program p
  implicit none
  integer, parameter :: n = 100
  real(8), allocatable :: x(:), y(:)
  allocate(x(n), y(n))
  call init(n, x, y)
  print *, x(n) + y(n)
contains
  subroutine init(n, x, y)
    integer, intent(in) :: n
    real(8), intent(out) :: x(n), y(n)
    integer :: i
    !$acc parallel loop copyout(x(1:n), y(1:n))
    do i = 1, n
      x(i) = i
      y(i) = 1 - i
    end do
  end subroutine init
end program p
"""
    report = compile_dumps(tmp_path, source, ".f90")
    data = [r for r in report.remarks if r.kind == "data"]
    assert [(r.line, r.text) for r in data] == [(line_of(source, "!$acc parallel"), "copyout x, y")]
    assert not [r for r in report.remarks if "parm" in r.text + r.meaning]
