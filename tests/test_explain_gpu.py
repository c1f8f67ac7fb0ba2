"""The OpenACC runtime's messages that only a GPU raises, raised for real and explained in the
student's terms (toolchains/explain.py): an array named in `present` that was never put on the
device, a data section smaller than what the loop touches, an array mapped twice with other
bounds. C and Fortran, each through `idrrun run -a` on the GPU.

On the GPU machine: source .gpu/activate.sh && python3 -m pytest -m gpu tests/test_explain_gpu.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH, has_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="no GPU on this machine")]

PRESENT = {
    "present.c": """#include <stdio.h>
int main(void)
{
    int n = 10000; static int a[10000];
    #pragma acc parallel loop present(a[0:n])
    for (int i = 0; i < n; i++) a[i] = i;
    printf("%d\\n", a[n - 1]);
    return 0;
}
""",
    "present.f90": """program p
  integer :: a(10000), i
  !$acc parallel loop present(a)
  do i = 1, 10000
    a(i) = i
  end do
  print *, a(10000)
end program p
""",
}
# A section of 1/64 of a 512 MiB array, the loop writing all of it: past the device copy's
# allocation by far, into memory the GPU has not mapped.
SECTION = {
    "section.c": """#include <stdio.h>
#include <stdlib.h>
int main(void)
{
    long n = 1L << 26;
    double *a = malloc(n * sizeof *a);
    #pragma acc parallel loop copy(a[0:n/64])
    for (long i = 0; i < n; i++) a[i] = 2.0 * i;
    printf("%f\\n", a[1]);
    return 0;
}
""",
    "section.f90": """program p
  integer(8), parameter :: n = 2_8**26
  real(8), allocatable :: a(:)
  integer(8) :: i
  allocate(a(n))
  !$acc parallel loop copy(a(1:n/64))
  do i = 1, n
    a(i) = 2.0d0 * i
  end do
  print *, a(2)
end program p
""",
}
MAPPED = {
    "mapped.c": """int main(void)
{
    int n = 10000; static int a[10000];
    #pragma acc enter data copyin(a[0:n/2])
    #pragma acc data copy(a[0:n])
    {
    }
    return 0;
}
""",
    "mapped.f90": """program p
  integer :: a(10000)
  !$acc enter data copyin(a(1:5000))
  !$acc data copy(a)
  !$acc end data
end program p
""",
}


def run(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    r = subprocess.run([sys.executable, "-m", "idrrun", "run", "-a", name], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    # The runtime's own words are kept, and the generic hint gives way to the explanation.
    assert "the program returned a non-zero status" not in out, out
    return out


@pytest.mark.parametrize("name", sorted(PRESENT))
def test_present_never_put_on_the_device(tmp_path: Path, name: str) -> None:
    out = run(tmp_path, name, PRESENT[name])
    assert "present" in out and "no device copy of a" in out, out


@pytest.mark.parametrize("name", sorted(SECTION))
def test_a_section_smaller_than_the_loop(tmp_path: Path, name: str) -> None:
    out = run(tmp_path, name, SECTION[name])
    assert "section smaller than what the loop touches" in out, out


@pytest.mark.parametrize("name", sorted(MAPPED))
def test_an_array_mapped_twice(tmp_path: Path, name: str) -> None:
    out = run(tmp_path, name, MAPPED[name])
    assert "already" in out and "exit data" in out, out
