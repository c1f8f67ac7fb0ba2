"""toolchains/remarks.py: the meaning of the compilers' remarks, against their real wording: real
gcc and gfortran here (-fopt-info-optimized-omp and the tree dumps), nvc/nvfortran -Minfo=accel
in their published wording (tests/data/minfo/, no nvhpc here)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from idrrun.toolchains import diagnostics, gcc
from idrrun.toolchains.gccdumps import GCC_DUMP_FLAGS, from_gcc_dumps
from idrrun.toolchains.minfo import from_nvhpc_minfo
from idrrun.toolchains.remarks import explain

MINFO = Path(__file__).resolve().parent / "data" / "minfo"

C_SOURCE = """\
#include <stdio.h>
#include <stdlib.h>
#pragma acc routine seq
static double sq(double x) { return x * x; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  double s = 0, m[10][10];
  #pragma acc data copyin(a[0:n]) create(b[0:n])
  {
  #pragma acc parallel loop present(a[0:n])
  for (int i = 0; i < n; i++) a[i] = i;
  #pragma acc parallel loop gang reduction(+:s)
  for (int i = 0; i < n; i++) s += sq(a[i]);
  #pragma acc kernels
  for (int i = 0; i < n; i++) b[i] = a[i] * 2;
  #pragma acc parallel loop collapse(2)
  for (int i = 0; i < 10; i++) for (int j = 0; j < 10; j++) m[i][j] = i + j;
  #pragma acc parallel loop gang
  for (int i = 0; i < 10; i++) {
    #pragma acc loop vector
    for (int j = 0; j < 10; j++) m[i][j] += 1;
  }
  #pragma acc parallel loop worker
  for (int i = 0; i < n; i++) b[i] += 1;
  #pragma acc serial
  { b[0] = 1; }
  #pragma acc parallel loop seq
  for (int i = 1; i < n; i++) b[i] += b[i-1];
  #pragma acc update self(b[0:n])
  }
  printf("%g %g %g\\n", s, b[n-1], m[9][9]);
  return 0;
}
"""

F_SOURCE = """\
program main
  implicit none
  integer :: i, n
  real(8), allocatable :: a(:), b(:)
  real(8) :: s
  n = 1000
  allocate(a(n), b(n))
  s = 0
  !$acc enter data create(b)
  !$acc parallel loop copyout(a)
  do i = 1, n
    a(i) = i
  end do
  !$acc parallel loop reduction(+:s)
  do i = 1, n
    s = s + a(i)
  end do
  !$acc kernels
  do i = 1, n
    b(i) = a(i) * 2
  end do
  !$acc end kernels
  !$acc exit data copyout(b)
  print *, s, b(n)
end program
"""


def line_of(text: str, needle: str, nth: int = 1) -> int:
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return lines[nth - 1]


def compile_here(tmp_path: Path, text: str, suffix: str, *flags: str) -> tuple[str, Path]:
    """gcc's output (as the build shows it) and the folder of its dumps."""
    compiler = shutil.which("gfortran" if suffix == ".f90" else "gcc")
    assert compiler is not None
    (tmp_path / f"source{suffix}").write_text(text)
    r = subprocess.run([compiler, "-O2", "-fopenacc", *flags, *gcc.FEEDBACK_FLAGS, *GCC_DUMP_FLAGS,
                        "-o", "prog", f"source{suffix}"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return diagnostics.rename_temporary(r.stderr, f"source{suffix}", "cell[2]"), tmp_path


def dumps(folder: Path) -> tuple[str, str, str]:
    return tuple(next(folder.glob(f"*.{kind}")).read_text()  # type: ignore[return-value]
                 for kind in ("original", "gimple", "cgraph"))


def test_gcc_remarks_have_their_meaning_on_their_line(tmp_path: Path) -> None:
    said, folder = compile_here(tmp_path, C_SOURCE, ".c", "-foffload=disable")
    remarks = [d for d in diagnostics.parse(said) if d.severity == "optimized"]
    assert len(remarks) == 8, said
    meaning = {d.line: explain(d.message)[0] for d in remarks}
    assert all(meaning.values()), meaning
    assert "spread over gangs and vectors" in meaning[line_of(C_SOURCE, "parallel loop present")]
    assert meaning[line_of(C_SOURCE, "loop gang reduction")].endswith("spread over gangs")
    assert "runs sequentially" in meaning[line_of(C_SOURCE, "acc kernels")]
    assert meaning[line_of(C_SOURCE, "loop worker")].endswith("spread over workers")
    assert meaning[line_of(C_SOURCE, "loop vector")].endswith("spread over vectors")
    assert "runs sequentially" in meaning[line_of(C_SOURCE, "parallel loop seq")]


def test_gcc_dump_findings_are_placed_on_their_lines(tmp_path: Path) -> None:
    _, folder = compile_here(tmp_path, C_SOURCE, ".c", "-foffload=disable")
    report = from_gcc_dumps(*dumps(folder))
    by_line: dict[int, list[str]] = {}
    for r in report.remarks:
        by_line.setdefault(r.line, []).append(f"{r.kind}: {r.text} = {r.meaning}")
    data = by_line[line_of(C_SOURCE, "acc data copyin")]
    assert any("copyin a" in d and "create b" in d and "copied to the device" in d for d in data), data
    collapse = by_line[line_of(C_SOURCE, "collapse(2)")]
    assert "region: OpenACC parallel region = gcc made a compute region of this construct: its code " \
           "runs on the device" in collapse
    assert any(d.startswith("implicit: copy(m) added by the compiler = m: copied to the device when the region "
                            "starts, and back when it ends, because no data clause") for d in collapse)
    kernels = by_line[line_of(C_SOURCE, "acc kernels")]
    assert any("a: no clause, found on the device" in d and "data region at line 9" in d
               for d in kernels), kernels
    assert any("present a" in d and "must already be on the device" in d
               for d in by_line[line_of(C_SOURCE, "present(a[0:n])")])
    assert any("update self b" in d and "host's copy is refreshed" in d
               for d in by_line[line_of(C_SOURCE, "update self")])


def test_gfortran_remarks_and_dumps(tmp_path: Path) -> None:
    said, folder = compile_here(tmp_path, F_SOURCE, ".f90", "-foffload=disable")
    remarks = {d.line: explain(d.message)[0] for d in diagnostics.parse(said) if d.severity == "optimized"}
    assert "spread over gangs and vectors" in remarks[line_of(F_SOURCE, "copyout(a)")]
    assert "runs sequentially" in remarks[line_of(F_SOURCE, "!$acc kernels")]
    report = from_gcc_dumps(*dumps(folder))
    texts = {(r.line, r.text) for r in report.remarks}
    assert (line_of(F_SOURCE, "enter data"), "create b") in texts, texts
    assert (line_of(F_SOURCE, "exit data"), "copyout b") in texts, texts
    assert (line_of(F_SOURCE, "copyout(a)"), "copyout a") in texts, texts
    meanings = {r.text: r.meaning for r in report.remarks}
    assert meanings["create b"] == "b: put on the device here (create), kept there until an exit data"
    assert meanings["copyout b"] == "b: copied back to the host and removed from the device here"


@pytest.mark.skipif(not gcc.has_offload(shutil.which("gcc")), reason="gcc has no nvptx offloading")
def test_gcc_warnings_on_an_offloaded_build_are_explained(tmp_path: Path) -> None:
    said, _ = compile_here(tmp_path, C_SOURCE, ".c", "-foffload=nvptx-none",
                           "-foffload-options=nvptx-none=-misa=sm_80 -lm", gcc.LINK_QUIET)
    (warning,) = [d for d in diagnostics.parse(said) if d.severity == "warning"]
    assert warning.line == line_of(C_SOURCE, "acc serial")
    assert explain(warning.message)[0].startswith("gcc runs this region's vector loops 32 wide")


def test_every_minfo_message_has_a_meaning() -> None:
    for recorded in sorted(MINFO.glob("*.minfo")):
        report = from_nvhpc_minfo(recorded.read_text())
        assert report.remarks, recorded.name
        for r in report.remarks:
            assert r.meaning, (recorded.name, r)
    jacobi = from_nvhpc_minfo((MINFO / "jacobi.minfo").read_text()).remarks
    source = (MINFO / "jacobi.c").read_text()
    said = {(r.line, r.kind, r.meaning) for r in jacobi}
    assert (line_of(source, "acc kernels"), "implicit",
            "A: copied to the device when the region starts, and back when it ends, because no "
            "data clause names it (the compiler adds copy)") in said
    assert (line_of(source, "for (int j = 1; j < n - 1; j++)", 2), "loop",
            "an iteration may use what another one writes (Anew, A): the compiler keeps this loop "
            "sequential; if the iterations really are independent, say so (loop independent, or "
            "restrict pointers in C)") in said
    assert (line_of(source, "exit data"), "data",
            "A: copied back to the host and removed from the device here") in said


def test_minfo_messages_about_an_included_file_are_left_out() -> None:
    remarks = from_nvhpc_minfo((MINFO / "header.minfo").read_text()).remarks
    assert {r.line for r in remarks} == {20, 22}
