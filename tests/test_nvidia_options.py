"""NVIDIA's compiler options on a gcc line (the IDRIS notebooks pass nvc's): translated where gcc
has a meaning for them, each with a note saying what became of it, refused all at once where it
has none, before gcc sees them. The table is toolchains/gcc.py's NVIDIA_OPTIONS."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH, Kernel

from idrrun import toolchains
from idrrun.errors import UsageError
from idrrun.model import CompilerInfo, GpuInfo, Probe, RunRequest, Settings, Toolchain
from idrrun.request.source import from_cell
from idrrun.toolchains import gcc

GCC = CompilerInfo("gcc", "/usr/bin/gcc", "gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
V100 = GpuInfo("Tesla V100-SXM2-32GB", "7.0", "525.1")
# CUDA 13's ptxas (this machine's): sm_75 and newer of GCC 12's targets.
CUDA13 = (75, 80)


def resolved(options: str, *, acc: bool = False, openmp: bool = False, accopts: tuple[str, ...] = (),
             gpus: tuple[GpuInfo, ...] = (), targets: tuple[int, ...] | None = CUDA13,
             language: str = "c", offload: str = "auto") -> tuple[RunRequest, Toolchain]:
    src = from_cell("int main(void){return 0;}\n", "cell[1]", language, None, Path("/tmp"))  # type: ignore[arg-type]
    request = RunRequest(source=src, workdir=Path("/tmp"), acc=acc, openmp=openmp, accopts=accopts,
                         compiler_options=tuple(options.split()))
    probe = Probe(family="gcc", compilers=(GCC, CompilerInfo("gfortran", "/usr/bin/gfortran", GCC.version)),
                  gpus=gpus, offload=True, offload_targets=targets)
    settings = Settings(offload=offload)
    translation = toolchains.translate(request, probe, settings)
    return translation.request, toolchains.toolchain_for(translation.request, probe, settings, translation)


def test_the_idris_openmp_target_line_on_a_v100() -> None:
    request, tc = resolved("-mp=gpu -gpu=cc70 -Minfo=all", gpus=(V100,), targets=(70, 75, 80))
    assert request.openmp and not request.acc and request.compiler_options == ()
    assert tc.flags == ("-O2", "-fopenmp", "-foffload=nvptx-none",
                        "-foffload-options=nvptx-none=-misa=sm_70 -lm -latomic", gcc.LINK_QUIET,
                        "-fopt-info-optimized-omp")
    assert tc.target == "gpu"
    assert tc.notes == (
        "-mp=gpu → -fopenmp, as -t: target regions offloaded with nvptx where the build is for a GPU",
        "-gpu=cc70 → -foffload-options=nvptx-none=-misa=sm_70",
        "-Minfo=all → -fopt-info-optimized-omp, already in idrrun's OpenACC and OpenMP flags "
        "(what gcc offloaded, shown with the build)")


def test_the_idris_line_here_cuda_13_and_no_gpu() -> None:
    # CUDA 13's ptxas has no sm_70: sm_75, said twice (what became of -gpu=cc70, and why).
    _, tc = resolved("-mp=gpu -gpu=cc70 -Minfo=all")
    assert "-foffload-options=nvptx-none=-misa=sm_75 -lm -latomic" in tc.flags and tc.target == "host"
    # The note says why itself: the machine's notes are said once per kernel, above it.
    assert tc.notes[1] == ("-gpu=cc70 → -foffload-options=nvptx-none=-misa=sm_75 (this CUDA's ptxas "
                           "no longer accepts sm_70: the program runs on GPUs of compute "
                           "capability 7.5 or newer)")
    assert any(n.startswith("sm_70 asked, but this CUDA's ptxas no longer accepts it") for n in tc.machine_notes)


@pytest.mark.parametrize("option, acc, openmp, flags, note", [
    ("-acc", True, False, ("-fopenacc", "-foffload=disable"), "-acc → -fopenacc (as -a)"),
    ("-acc=gpu", True, False, ("-fopenacc", "-foffload=nvptx-none"),
     "-acc=gpu → -fopenacc, offloaded to the GPU with nvptx (as -a on a GPU)"),
    ("-acc=host", True, False, ("-fopenacc", "-foffload=disable"),
     "-acc=host → -fopenacc -foffload=disable: OpenACC regions on the host"),
    ("-acc=multicore", True, False, ("-fopenacc", "-foffload=disable"),
     "-acc=multicore → -fopenacc -foffload=disable; gcc has no multicore target: the regions run "
     "serially on the host"),
    ("-mp", False, True, ("-fopenmp", "-foffload=disable"),
     "-mp → -fopenmp -foffload=disable: OpenMP threads, target regions on the host (nvc's -mp is "
     "-mp=multicore)"),
    ("-fast", False, False, ("-O3", "-march=native"),
     "-fast → -O3 -march=native: optimised and vectorised for this processor, as nvc's -fast "
     "(nvc's -fast also flushes denormals to zero; gcc does that only with -ffast-math, which "
     "relaxes IEEE rules as well: not added)"),
    ("-Minfo=accel", False, False, (),
     "-Minfo=accel → nothing: gcc's report of offloaded loops (-fopt-info-optimized-omp) comes "
     "with -a, -t, -acc or -mp"),
    ("-gpu=cc80", False, False, (),
     "-gpu=cc80 → nothing: it sets the GPU target of -acc or -mp=gpu, and neither is on"),
])
def test_each_translation_and_its_note(option: str, acc: bool, openmp: bool,
                                       flags: tuple[str, ...], note: str) -> None:
    request, tc = resolved(option)
    assert (request.acc, request.openmp) == (acc, openmp)
    at = [i for i, f in enumerate(tc.flags) if f in flags]
    assert [tc.flags[i] for i in at] == list(flags), tc.flags
    assert tc.notes[0] == note
    assert option not in tc.flags


def test_target_sub_options_are_the_target_and_the_rest_is_said_ignored() -> None:
    _, tc = resolved("-acc -gpu=cc80,managed,lineinfo", gpus=(V100,), targets=(70, 75, 80))
    # cc80 on a V100: the newest target it runs
    assert tc.notes[1] == ("-gpu=cc80,managed,lineinfo → -foffload-options=nvptx-none=-misa=sm_70 "
                           "(sm_80 is newer than the GPU here, Tesla V100-SXM2-32GB (sm_70)); "
                           "ignored: managed, lineinfo (no gcc equivalent)")
    _, tc = resolved("-ta=tesla:cc75,pinned -acc")
    assert "-foffload-options=nvptx-none=-misa=sm_75 -lm -latomic" in tc.flags
    assert tc.notes[0].startswith("-ta=tesla:cc75,pinned → -foffload-options=nvptx-none=-misa=sm_75;"
                                  " ignored: pinned")
    _, tc = resolved("-ta=tesla", acc=True)
    assert "-foffload=nvptx-none" in tc.flags and tc.notes[0] == "-ta=tesla → nvptx offloading (as --accopts gpu)"
    # --accopts has the last word on the target
    _, tc = resolved("-acc -gpu=cc75", accopts=("cc80",))
    assert "-foffload-options=nvptx-none=-misa=sm_80 -lm -latomic" in tc.flags
    assert tc.notes[1] == "-gpu=cc75 → nothing: --accopts sets the target (sm_80)"


def test_host_build_says_the_target_does_nothing() -> None:
    _, tc = resolved("-acc -gpu=cc80", offload="host")
    assert tc.notes[1] == ("-gpu=cc80 → nothing: this build is for the host (offload = \"host\" in "
                           "the config)")
    assert "-foffload=disable" in tc.flags


def test_other_nvidia_options_are_refused_together_before_gcc_sees_them() -> None:
    with pytest.raises(UsageError) as caught:
        resolved("-O3 -mp=gpu -gpu=cc70 -cuda -Mvect=simd -stdpar=gpu -acc=bogus -ta=radeon -tp=zen2 -Kieee")
    assert str(caught.value) == (
        "gcc cannot take these NVIDIA compiler options (no gcc equivalent unless said): -cuda, "
        "-Mvect=simd, -stdpar=gpu, -acc=bogus (unknown sub-option bogus), -ta=radeon (no gcc "
        "target for 'radeon'), -tp=zen2, -Kieee. Remove them from --options, or build with nvc "
        "(-c nvhpc)")


@pytest.mark.parametrize("option", ["-MD", "-MMD", "-MF", "-MT", "-march=native", "-mpopcnt",
                                    "-fopenmp", "-O3", "-g", "-DN=4", "-lm", "-Wall"])
def test_gcc_s_own_options_pass_unchanged(option: str) -> None:
    request, tc = resolved(option)
    assert request.compiler_options == (option,) and tc.notes == ()


def fake_cuda(root: Path) -> Path:
    """A CUDA toolkit folder with a fake cuRAND (a library built here, and its header)."""
    (root / "lib64").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "curand.h").write_text("int fake_curand_seed(int);\n")
    src = root / "curand.c"
    src.write_text("int fake_curand_seed(int s) { return s * 7; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(root / "lib64" / "libcurand.so"), str(src)],
                   check=True)
    return root


def test_cudalib_links_the_toolkit_s_libraries_with_a_fake_curand(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = fake_cuda(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    _, tc = resolved("-Mcudalib=curand")
    lib = cuda.resolve() / "lib64"
    assert f"-I{cuda.resolve() / 'include'}" in tc.flags
    assert tc.link_flags[-3:] == (f"-L{lib}", f"-Wl,-rpath,{lib}", "-lcurand")
    assert tc.notes == (f"-Mcudalib=curand → -I{cuda.resolve() / 'include'} -L{lib} "
                        f"-Wl,-rpath,{lib} -lcurand",)
    with pytest.raises(UsageError, match=r"-Mcudalib=curand,cublas \(.*has no libcublas: install "
                                         r"CUDA's curand, cublas"):
        resolved("-Mcudalib=curand,cublas")
    _, tc = resolved("-Mcudalib=curand", language="fortran")
    assert "gfortran has no module for them" in tc.notes[0]


# -- through the command line, real gcc ------------------------------------------------------

def idrrun(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=PYTHONPATH, **(env or {}))
    return subprocess.run([sys.executable, "-m", "idrrun", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=180)


WHERE_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <openacc.h>
int main(void) {
    int n = 1000; double s = 0;
    #pragma acc parallel loop reduction(+:s)
    for (int i = 0; i < n; i++) s += i;
    printf("sum = %g\nACC_DEVICE_TYPE=%s\n", s, getenv("ACC_DEVICE_TYPE") ? getenv("ACC_DEVICE_TYPE") : "-");
    return 0;
}
"""


def test_acc_host_and_multicore_build_and_run_on_the_host(tmp_path: Path) -> None:
    (tmp_path / "where.c").write_text(WHERE_C)
    for option in ("-acc=host", "-acc=multicore", "-acc -fast"):
        r = idrrun("run", "--options", option, "where.c", cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "sum = 499500" in r.stdout and "ACC_DEVICE_TYPE=host" in r.stdout
        assert f"note: {option.split()[0]} → -fopenacc" in r.stdout


def test_refused_options_exit_2_and_gcc_never_runs(tmp_path: Path) -> None:
    (tmp_path / "where.c").write_text(WHERE_C)
    r = idrrun("run", "--options", "-acc -gpu=cc70 -Mconcur", "where.c", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "gcc cannot take these NVIDIA compiler options (no gcc equivalent unless said): -Mconcur." in r.stderr
    assert "unrecognized" not in r.stdout + r.stderr and "$ gcc" not in r.stdout


def test_cudalib_builds_and_runs_with_a_fake_curand(tmp_path: Path) -> None:
    cuda = fake_cuda(tmp_path / "cuda")
    (tmp_path / "seed.c").write_text('#include <stdio.h>\n#include <curand.h>\n'
                                     'int main(void){ printf("seed = %d\\n", fake_curand_seed(6)); return 0; }\n')
    r = idrrun("run", "--options", "-Mcudalib=curand", "seed.c", cwd=tmp_path, env={"CUDA_HOME": str(cuda)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "seed = 42" in r.stdout and "-lcurand" in r.stdout


# -- the IDRIS course's OpenMP-target cells, as they are written, in a real kernel -----------

IDRIS_LINE = '%%idrrun --options "-mp=gpu -gpu=cc70 -Minfo=all"\n'
TARGET_C = r"""#include <stdio.h>
#include <omp.h>
#define N 100000

int main(void)
{
    static double x[N], y[N];
    double dot = 0.0;
    for (int i = 0; i < N; i++) {
        x[i] = i;
        y[i] = 2.0 * i;
    }
    #pragma omp target teams distribute parallel for map(to: x, y) reduction(+: dot)
    for (int i = 0; i < N; i++)
        dot += x[i] * y[i];
    printf("dot = %.6e\n", dot);
    return 0;
}
"""
TARGET_F90 = """program dot_target
  implicit none
  integer, parameter :: n = 100000
  real(kind=8) :: x(n), y(n), dot
  integer :: i
  do i = 1, n
    x(i) = i
    y(i) = 2.0d0 * i
  end do
  dot = 0.0d0
  !$omp target teams distribute parallel do map(to: x, y) map(tofrom: dot) reduction(+: dot)
  do i = 1, n
    dot = dot + x(i) * y(i)
  end do
  !$omp end target teams distribute parallel do
  print '(a, es13.6)', 'dot = ', dot
end program dot_target
"""


@pytest.mark.parametrize("code, language, dot", [(TARGET_C, "c", "dot = 6.666567e+14"),
                                                 (TARGET_F90, "fortran", "dot =  6.666767E+14")])
def test_idris_openmp_target_cells_build_with_gcc_unchanged(kernel: Kernel, code: str,
                                                             language: str, dot: str) -> None:
    r = kernel.run(IDRIS_LINE + code, timeout=180)
    assert r.status == "ok", r.error_text + r.stdout
    assert dot in r.stdout, r.stdout
    assert f"[gcc] · {language}" in r.stdout
    assert "note: -mp=gpu → -fopenmp, as -t" in r.stdout
    assert "note: -gpu=cc70 → -foffload-options=nvptx-none=-misa=sm_" in r.stdout
    assert "note: -Minfo=all → -fopt-info-optimized-omp, already in idrrun's" in r.stdout
    assert "unrecognized" not in r.stdout


def test_idris_cudalib_cell_builds_or_is_refused_clearly(kernel: Kernel) -> None:
    cell = ('%%idrrun -a --options "-Mcudalib=curand"\n#include <stdio.h>\n#include <curand.h>\n'
            'int main(void){ curandGenerator_t g;\n'
            '  if (curandCreateGeneratorHost(&g, CURAND_RNG_PSEUDO_DEFAULT)) return 1;\n'
            '  puts("generator made"); return 0; }\n')
    r = kernel.run(cell, timeout=180)
    roots = [Path("/usr/local/cuda/lib64"), Path("/usr/local/cuda/targets/x86_64-linux/lib")]
    if any((root / "libcurand.so").exists() for root in roots):
        assert r.status == "ok" and "generator made" in r.stdout, r.error_text + r.stdout
    else:
        # No cuRAND in this machine's CUDA (13.0 without its math libraries): one line, no build.
        [line] = r.stderr.strip().splitlines()
        assert r.status == "error" and line.startswith("UsageError: gcc cannot take these NVIDIA")
        assert "-Mcudalib=curand (" in line and "has no libcurand" in line
        assert "$ gcc" not in r.stdout
