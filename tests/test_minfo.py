"""toolchains/minfo: nvhpc -Minfo=accel (no nvc here: texts as nvc/nvfortran print them)."""

from __future__ import annotations

from idrrun.model import AccReport, ImplicitData
from idrrun.toolchains.minfo import NVHPC_METHOD, from_nvhpc_minfo


NVC_MINFO = """\
main:
     12, Generating copyin(a[:n]) [if not already present]
         Generating implicit copy(s) [if not already present]
         Generating NVIDIA GPU code
         14, #pragma acc loop gang, vector(128) /* blockIdx.x threadIdx.x */
             Generating reduction(+:s)
     20, Generating implicit copyin(b[:n]) [if not already present]
         Generating implicit copyout(c[:n],d[:][:]) [if not already present]
         Generating implicit firstprivate(i)
         Generating NVIDIA GPU code
         22, #pragma acc loop gang, vector(128) /* blockIdx.x threadIdx.x */
     30, Generating present(a[:n],b[:n])
         Generating NVIDIA GPU code
         32, #pragma acc loop gang, vector(128) /* blockIdx.x threadIdx.x */
"""


def test_nvc_minfo_regions_and_implicit_arrays() -> None:
    report = from_nvhpc_minfo(NVC_MINFO)
    assert report.regions == 3
    assert report.method == NVHPC_METHOD
    # s (a reduction scalar) and i (firstprivate) are left out.
    assert [(f.variable, f.line, f.construct) for f in report.implicit] == [
        ("b", 20, "parallel"), ("c", 20, "parallel"), ("d", 20, "parallel")]
    assert report.implicit[0].detail == (
        "b is used in the parallel region at line 20 without a data clause, so the compiler "
        "adds copyin(b[:n]) implicitly: name it in a data clause yourself, or in present if it "
        "is already on the device.")


def test_old_pgi_minfo_kernels_and_routine() -> None:
    minfo = """\
sigmoid:
     33, Generating implicit acc routine seq
         Generating acc routine seq
         Generating Tesla code
saxpy:
      8, Generating implicit copy(y[:n]) [if not already present]
         Generating implicit copyin(x[:n]) [if not already present]
     10, Loop is parallelizable
         Accelerator kernel generated
         Generating Tesla code
         10, #pragma acc loop gang, vector(128) /* blockIdx.x threadIdx.x */
"""
    report = from_nvhpc_minfo(minfo)
    assert report.regions == 1  # the routine is not a compute region; one kernel, not two
    assert [(f.variable, f.line, f.construct) for f in report.implicit] == [
        ("y", 8, "kernels"), ("x", 8, "kernels")]


def test_nvfortran_minfo_sections_and_serial() -> None:
    minfo = """\
main:
     11, Generating implicit copy(a(:)) [if not already present]
         Generating implicit copyin(b(:)) [if not already present]
         Generating implicit copy(tot) [if not already present]
     12, Loop is parallelizable
         Generating NVIDIA GPU code
         12, !$acc loop gang, vector(128) ! blockidx%x threadidx%x
     20, Accelerator serial kernel generated
         Generating implicit copyout(c(:)) [if not already present]
         Generating NVIDIA GPU code
"""
    report = from_nvhpc_minfo(minfo)
    assert report.regions == 2
    assert [(f.variable, f.line, f.construct) for f in report.implicit] == [
        ("a", 11, "kernels"), ("b", 11, "kernels"), ("c", 20, "serial")]


def test_minfo_without_accelerator_code() -> None:
    assert from_nvhpc_minfo("main:\n      5, Loop not vectorized/parallelized: too deeply nested\n"
                            ) == AccReport(0, (), NVHPC_METHOD)


def test_nvc_minfo_names_the_arrays_each_construct_moves() -> None:
    """For the comparison with the solution (checks/compare.py): every array of every data
    clause -Minfo reports, explicit or implicit; scalars left out."""
    moves = from_nvhpc_minfo(NVC_MINFO).moves
    assert [(m.variable, m.clause, m.line, m.implicit) for m in moves] == [
        ("a", "copyin", 12, False), ("b", "copyin", 20, True), ("c", "copyout", 20, True),
        ("d", "copyout", 20, True), ("a", "present", 30, False), ("b", "present", 30, False)]
