"""The NVIDIA HPC SDK family (nvc, nvc++, nvfortran) and its predecessor PGI (pgcc, pgf90).

Both build OpenACC for the GPU with -acc, take target options as one comma list (-gpu=LIST,
PGI: -ta=tesla:LIST), and report what they did with -Minfo=accel, read by minfo.py. Their
programs always start the CUDA runtime, so they are GPU runs whether or not a GPU is present.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..model import (AccReport, BuildResult, CompilerInfo, DependencyList, DoctorLine, Probe,
                     RunRequest, Settings, Toolchain)
from . import minfo
from .family import INFO, AccDecision, CommandFamily

FEEDBACK_FLAGS = ("-Minfo=accel",)
DEPENDENCIES = "idrrun-deps.d"


@dataclass(frozen=True)
class NvhpcFamily(CommandFamily):
    accopts_switch: str = "-gpu="  # PGI: -ta=tesla:
    legacy: bool = False  # PGI: the old name of the SDK, reported as information only

    def can_offload(self, c_compiler: CompilerInfo) -> bool:
        return c_compiler.path is not None

    def openacc(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                settings: Settings) -> AccDecision:
        # -acc builds the compute regions for the GPU only; -acc=gpu,host adds the host's
        # (serial) code of each, which ACC_DEVICE_TYPE=HOST picks at run time: PGI's "unified
        # binary", what the agrees_with_host check runs on the host (request.compare_host).
        flags: tuple[str, ...] = ("-acc=gpu,host",) if request.compare_host and not self.legacy \
            else ("-acc",)
        if request.accopts:
            flags += (self.accopts_switch + ",".join(request.accopts),)
        machine = () if probe.gpus else ("no GPU found: the program will need one to run its OpenACC regions",)
        return AccDecision(flags + FEEDBACK_FLAGS, "gpu" if probe.gpus else "host",
                           machine_notes=machine, offload=True)

    def feedback(self, build: BuildResult) -> AccReport | None:
        return minfo.from_nvhpc_minfo(build.output)

    def gpu_context(self, toolchain: Toolchain) -> bool:
        return True

    def run_env(self, request: RunRequest, toolchain: Toolchain) -> Mapping[str, str]:
        return {"ACC_DEVICE_TYPE": "HOST"} if request.run_on_host else {}

    def host_comparison(self, toolchain: Toolchain) -> str:
        if self.legacy:
            return ("idrrun builds PGI programs for the GPU alone (-ta=tesla): compare with the "
                    "host with the nvhpc or gcc family")
        return ""

    def prefixes(self, compiler: str) -> tuple[Path, ...]:
        # SDK/Linux_x86_64/24.1/compilers/bin/nvc: the compilers read (and the programs load)
        # the version's cuda/, math_libs/ and comm_libs/ beside compilers/.
        compilers = Path(compiler).resolve().parent.parent
        return (compilers.parent if compilers.name == "compilers" else compilers,)

    def dependencies(self, toolchain: Toolchain, product: str) -> DependencyList:
        # nvc and nvc++ write gcc's dependency list with -MD -MF since 21.7 (CMake's NVHPC
        # support relies on it); nvfortran's own -M options are not gcc's: the box alone
        # decides what a Fortran build can read.
        if toolchain.language in ("c", "c++") and not self.legacy:
            return DependencyList(("-MD", "-MF", DEPENDENCIES), DEPENDENCIES)
        return DependencyList()

    def doctor(self, settings: Settings, active: bool) -> list[DoctorLine]:
        lines = self.compiler_lines(settings, active)
        if self.legacy:
            return [DoctorLine(line.topic, line.status if line.status == "OK" else INFO,
                               line.detail + ("" if line.status == "OK" else
                                              f" ({self.name} is the old name of nvhpc)"))
                    for line in lines]
        return lines


NVHPC = NvhpcFamily(
    name="nvhpc",
    summary="NVIDIA HPC SDK (nvc, nvc++, nvfortran)",
    compilers={"c": "nvc", "c++": "nvc++", "fortran": "nvfortran", "cuda": "nvcc",
               "mpi_c": "mpicc", "mpi_c++": "mpicxx", "mpi_fortran": "mpifort"},
    install_hint="install the NVIDIA HPC SDK and put its bin/ on PATH, or pick gcc with -c gcc",
    detect=(10, "nvc"),
    flags_openmp=("-mp",),
)

PGI = NvhpcFamily(
    name="pgi",
    summary="PGI compilers (pgcc, pgc++, pgf90), the NVIDIA HPC SDK's predecessor",
    compilers={"c": "pgcc", "c++": "pgc++", "fortran": "pgf90", "cuda": "nvcc",
               "mpi_c": "mpicc", "mpi_c++": "mpicxx", "mpi_fortran": "mpif90"},
    install_hint="load the PGI compilers (module load pgi), or pick another family with -c nvhpc|gcc",
    flags_openmp=("-mp",),
    accopts_switch="-ta=tesla:",
    legacy=True,
)
