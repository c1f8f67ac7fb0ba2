"""The GCC family: gcc, g++, gfortran, with OpenACC offloaded to NVIDIA GPUs through nvptx.

The offload decision is GCC's own: it builds for a GPU only when its nvptx offload compiler
(mkoffload) is installed, and for the host (-foffload=disable) when there is no GPU and none
was asked for, so that a laptop runs the course. `ccXY` in --accopts picks -misa=sm_XY, capped
at what this GCC knows (GCC 12: sm_80; the driver compiles that PTX for newer GPUs).
Its feedback is read from tree dumps (gccdumps.py); a host build runs with ACC_DEVICE_TYPE=host.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..model import (
    AccReport,
    BuildResult,
    CompilerInfo,
    DoctorLine,
    DependencyList,
    GpuInfo,
    Preprocessing,
    Probe,
    RunRequest,
    Settings,
    Target,
    Toolchain,
)
from ..run import proc
from . import gccdumps
from .family import INFO, MISSING, OK, WARN, AccDecision, CommandFamily
from .machine import probe_compiler

OFFLOAD_INSTALL_HINT = "apt-get install gcc-12-offload-nvptx libgomp-plugin-nvptx1"
# The -misa=sm_XY values each GCC major version accepts for nvptx (GCC 12: sm_80 at most).
_NVPTX_ISAS: dict[int, tuple[int, ...]] = {
    11: (30, 35),
    12: (30, 35, 53, 70, 75, 80),
    13: (30, 35, 53, 70, 75, 80),
    14: (30, 35, 52, 53, 60, 61, 70, 75, 80, 89),
}
# accopts items that name a compute capability: cc80, sm_80, sm80.
_CC_ITEM = re.compile(r"^(?:cc|sm_?)(\d{2,3})$", re.IGNORECASE)
_GPU_WORDS = ("nvptx", "nvptx-none", "gpu", "tesla")
# gcc's own report of what it offloaded, printed with the build: "optimized: assigned OpenACC
# gang vector loop parallelism".
FEEDBACK_FLAGS = ("-fopt-info-optimized-omp",)
# What a graded compile leaves: the files it read, in make's format (-MD -MF).
DEPENDENCIES = "idrrun-deps.d"
# Line tables only, for a checked build: libgomp names no line for a region that starts, only
# its call site, which they map to the source line (profile/elflines.py). They leave the code
# as it was; measured on the course's 32 OpenACC solutions (C and Fortran, -O2 with the
# checked build's dumps, minimum of 5 compiles each): 3.28 s without, 3.31 s with (+0.9 %).
LINE_TABLES = ("-g1",)
_OFFLOAD_TEST = "int main(void){ int x = 0;\n#pragma acc parallel copy(x)\nx = 1;\nreturn !x; }\n"


# ptxas's list of the targets it accepts: "Allowed values for this option: 'compute_75', ...,
# 'sm_75', 'sm_80', ...". GCC's nvptx assembler hands the PTX to the ptxas on PATH (when there is
# one) to check it: a target that ptxas no longer knows (sm_70 with CUDA 13) fails the build.
_PTXAS_SM = re.compile(r"'sm_(\d+)'")
# Text relocations in GCC's offload table (crtoffloadtable.o) make ld warn twice on every
# offloaded build ("relocation against __offload_vars_end", "creating DT_TEXTREL in a PIE"):
# harmless (the loader applies them), so they are allowed explicitly instead of shown each time.
LINK_QUIET = "-Wl,-z,notext"


def gcc_major(version: str) -> int:
    match = re.search(r"\b(\d+)\.\d+(?:\.\d+)?\b", version)
    return int(match.group(1)) if match else 12


def gcc_isas(major: int) -> tuple[int, ...]:
    return _NVPTX_ISAS.get(major) or _NVPTX_ISAS[max(_NVPTX_ISAS)]


def ptxas_isas() -> tuple[int, ...] | None:
    """The sm_XY targets of the ptxas on PATH; None without one (nothing then checks GCC's PTX)."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return None
    result = proc.capture([ptxas, "--help"], what="probe", timeout=10)
    start = result.output.find("--gpu-name")
    text = result.output[start:start + 4000] if start >= 0 else ""
    found = sorted({int(m) for m in _PTXAS_SM.findall(text)})
    return tuple(found) if found else None


def targets(major: int, ptxas: tuple[int, ...] | None) -> tuple[int, ...]:
    """What this GCC can emit and this machine's ptxas accepts."""
    known = gcc_isas(major)
    return tuple(isa for isa in known if ptxas is None or isa in ptxas)


def best_isa(requested: int, available: Sequence[int]) -> int | None:
    """The highest target not above the one asked for (the driver compiles older PTX for newer
    GPUs); else the lowest one above it; None when nothing is available."""
    if not available:
        return None
    below = [isa for isa in available if isa <= requested]
    return max(below) if below else min(available)


def has_offload(gcc_path: str | None) -> bool:
    """True when gcc's nvptx offload compiler (mkoffload) is installed."""
    if gcc_path is None:
        return False
    result = proc.capture([gcc_path, "-print-prog-name=accel/nvptx-none/mkoffload"], what="probe")
    found = result.output.strip()
    return result.ok and os.path.isabs(found) and os.path.exists(found)


@dataclass(frozen=True)
class _AccOpts:
    """What gcc takes of --accopts: a compute capability, a word that asks for the GPU, and
    the nvhpc options it has no equivalent for."""

    requested: int | None
    gpu_asked: bool
    ignored: tuple[str, ...]


def _read_accopts(accopts: Sequence[str]) -> _AccOpts:
    requested: int | None = None
    gpu_asked = False
    ignored: list[str] = []
    for item in accopts:
        match = _CC_ITEM.match(item)
        if match:
            requested = int(match.group(1))
        elif item.lower() in _GPU_WORDS:
            gpu_asked = True
        else:
            ignored.append(item)
    return _AccOpts(requested, gpu_asked, tuple(ignored))


def _host_reason(mode: str, want_gpu: bool, probe: Probe, model: str) -> str | None:
    """Why the build is for the host (the note that says so); None when it is for a GPU."""
    if mode == "host":
        return "building for the host (offload = \"host\" in the config)"
    if not probe.offload:
        return ("gcc cannot offload to NVIDIA GPUs here (the nvptx offload compiler is missing): "
                f"building for the host. To offload: {OFFLOAD_INSTALL_HINT}")
    if not probe.gpus and not want_gpu:
        regions = "OpenMP target regions" if model == "-fopenmp" else "OpenACC regions"
        return (f"no GPU found: building for the host (-foffload=disable); the {regions} run "
                "on the CPU. Add --accopts cc80 to build for a GPU anyway.")
    return None


def _target_notes(wanted: int, isa: int, major: int, shown: str, gpu: GpuInfo | None) -> list[str]:
    """What to say when the target built differs from the one asked, or no GPU is here."""
    notes = []
    if isa < wanted:
        notes.append(
            f"sm_{wanted} asked, GCC {major} can build for sm_{isa} at best ({shown}): building "
            f"for sm_{isa}; the driver compiles that PTX for the GPU when the program starts"
        )
    elif isa > wanted:
        notes.append(
            f"sm_{wanted} asked, but this CUDA's ptxas no longer accepts it (it takes {shown}): "
            f"building for sm_{isa}, so the program runs on GPUs of compute capability "
            f"{isa // 10}.{isa % 10} or newer" + (f" ({gpu.name} here: yes)" if gpu else ""))
    if gpu is None:
        notes.append("no GPU found: built for a GPU as asked; here the program falls back to the host")
    return notes


def _gpu_target(requested: int | None, probe: Probe, major: int) -> tuple[int, list[str]]:
    """The sm_XY to build for: the one asked, else the GPU's, else sm_80, as near as this GCC
    and ptxas allow; and what to say about it. UsageError when no program built here could
    run on the GPU."""
    wanted = requested if requested is not None else (probe.gpus[0].sm if probe.gpus else 80)
    available = probe.offload_targets or gcc_isas(major)
    isa = best_isa(wanted, available)
    shown = ", ".join(f"sm_{t}" for t in available)
    if isa is None:
        raise UsageError(f"GCC {major} and this machine's ptxas share no GPU target "
                         f"(GCC: {', '.join(f'sm_{t}' for t in gcc_isas(major))}): build for the "
                         "host (offload = \"host\") or install a CUDA toolkit that accepts one")
    gpu = probe.gpus[0] if probe.gpus else None
    if gpu is not None and isa > gpu.sm:
        raise UsageError(f"sm_{wanted} asked, and the oldest target this machine can build is "
                         f"sm_{isa} ({shown}), newer than the GPU here ({gpu.name}, "
                         f"sm_{gpu.sm}): no program built here can run on it")
    return isa, _target_notes(wanted, isa, major, shown, gpu)


def offload_flags(accopts: Sequence[str], probe: Probe, gcc_version: str,
                  offload_mode: str, model: str = "-fopenacc") -> AccDecision:
    """gcc's OpenACC flags (or OpenMP's, model="-fopenmp": gcc offloads OpenMP target regions
    the same way): offload to nvptx, or build for the host, and say why."""
    opts = _read_accopts(accopts)
    notes = [f"gcc ignores these accopts (nvhpc options without a gcc equivalent): "
             f"{', '.join(opts.ignored)}"] if opts.ignored else []
    # A GPU word in accopts asks for the GPU over the config's offload mode.
    mode = "gpu" if opts.gpu_asked else offload_mode
    host = _host_reason(mode, mode == "gpu" or opts.requested is not None, probe, model)
    if host is not None:
        return AccDecision((model, "-foffload=disable"), "host", (*notes, host))
    major = gcc_major(gcc_version)
    isa, target_notes = _gpu_target(opts.requested, probe, major)
    # -latomic (nvptx's, GCC 12 and later): two reductions of one construct (+ and max on
    # doubles) become one 16-byte compare-and-swap, which nvptx's libatomic provides.
    device_libs = "-lm -latomic" if major >= 12 else "-lm"
    flags = (model, "-foffload=nvptx-none",
             f"-foffload-options=nvptx-none=-misa=sm_{isa} {device_libs}", LINK_QUIET)
    return AccDecision(flags, "gpu" if probe.gpus else "host", (*notes, *target_notes))


@dataclass(frozen=True)
class GccFamily(CommandFamily):
    def can_offload(self, c_compiler: CompilerInfo) -> bool:
        return has_offload(c_compiler.path)

    def offload_targets(self, c_compiler: CompilerInfo) -> tuple[int, ...]:
        return targets(gcc_major(c_compiler.version), ptxas_isas())

    def openacc(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                settings: Settings) -> AccDecision:
        decision = offload_flags(request.accopts, probe, compiler.version, settings.offload)
        # The exercise checks read gcc's tree dumps (written and lowered data clauses), and
        # the line tables that place the regions a run executed (profile/regions.py).
        dumps = gccdumps.GCC_DUMP_FLAGS + LINE_TABLES if request.check is not None else ()
        return AccDecision(decision.flags + FEEDBACK_FLAGS + dumps, decision.target, decision.notes)

    def openmp(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
               settings: Settings, acc_target: Target) -> AccDecision:
        if request.acc:
            if acc_target == "gpu" or any(i.lower() in _GPU_WORDS or _CC_ITEM.match(i)
                                          for i in request.accopts):
                # GCC 12's nvptx mkoffload takes -fopenacc or -fopenmp, never both.
                raise UsageError("gcc cannot offload OpenACC and OpenMP in one program (its nvptx "
                                 "offload compiler takes -fopenacc or -fopenmp, not both): use -a "
                                 "for OpenACC or -t for OpenMP target regions")
            return AccDecision(self.flags_openmp, acc_target)
        decision = offload_flags(request.accopts, probe, compiler.version, settings.offload,
                                 model="-fopenmp")
        dumps = gccdumps.GCC_DUMP_FLAGS if request.check is not None else ()
        return AccDecision(decision.flags + FEEDBACK_FLAGS + dumps, decision.target, decision.notes)

    def feedback(self, build: BuildResult) -> AccReport | None:
        if build.build_dir is None:
            return None
        original = sorted(build.build_dir.glob("*.original"))
        gimple = sorted(build.build_dir.glob("*.gimple"))
        cgraph = sorted(build.build_dir.glob("*.cgraph"))
        if not original or not gimple:
            return None
        return gccdumps.from_gcc_dumps(original[0].read_text(errors="replace"),
                                       gimple[0].read_text(errors="replace"),
                                       cgraph[0].read_text(errors="replace") if cgraph else "")

    def run_env(self, request: RunRequest, toolchain: Toolchain) -> Mapping[str, str]:
        # Built without device code: on a machine with a GPU and libgomp's nvptx plugin, the
        # runtime would still pick the GPU and fail to find code for it. Say "host" outright.
        # A GPU build keeps libgomp's host fallback of every region: the same variable runs
        # them on the host (request.run_on_host, the agrees_with_host check).
        on_host = toolchain.target == "host" or request.run_on_host
        if request.acc and on_host:
            return {"ACC_DEVICE_TYPE": "host"}
        if request.openmp and on_host:
            return {"OMP_TARGET_OFFLOAD": "DISABLED"}
        return {}

    def host_comparison(self, toolchain: Toolchain) -> str:
        return ""

    def gpu_context(self, toolchain: Toolchain) -> bool:
        return toolchain.target == "gpu"

    def preprocess(self, toolchain: Toolchain, source_file: str, product: str) -> Preprocessing:
        if toolchain.language not in ("c", "c++") or toolchain.compiler.path is None:
            return Preprocessing()
        # The compile keeps its own preprocessor output instead of a second `gcc -E -P` in a
        # sandbox of its own after it: one box and one compiler start less per graded row
        # (benchmarks/RESULTS.md). -save-temps=obj names it after the output: PRODUCT-STEM.i
        # when linking, PRODUCTSTEM.i for an object; .ii for C++.
        base = Path(product).stem if product.endswith(".o") else f"{product}-{Path(source_file).stem}"
        suffix = ".ii" if toolchain.language == "c++" else ".i"
        return Preprocessing(compile_flags=("-save-temps=obj",), saved=base + suffix)

    def feedback_files(self, toolchain: Toolchain) -> tuple[str, ...]:
        return (gccdumps.DUMP_FILES,)

    def dependencies(self, toolchain: Toolchain, product: str) -> DependencyList:
        # gfortran lists its files only with its preprocessor on (-cpp); the course's Fortran
        # builds the same with it.
        cpp = ("-cpp",) if toolchain.language == "fortran" else ()
        return DependencyList((*cpp, "-MD", "-MF", DEPENDENCIES), DEPENDENCIES)

    def doctor(self, settings: Settings, active: bool) -> list[DoctorLine]:
        lines = self.compiler_lines(settings, active)
        gcc = probe_compiler(settings.compiler_command(self.name, "c") or self.compilers["c"])
        if gcc.path is None:
            return lines
        if not has_offload(gcc.path):
            return lines + [DoctorLine("gcc offloading", MISSING if active else INFO,
                                       "no nvptx offload compiler: OpenACC runs on the host",
                                       OFFLOAD_INSTALL_HINT)]
        with tempfile.TemporaryDirectory(prefix="idrrun-doctor-") as tmp:
            src = Path(tmp) / "t.c"
            src.write_text(_OFFLOAD_TEST)
            test_isa = max(targets(gcc_major(gcc.version), ptxas_isas()) or (80,))
            r = proc.run([gcc.path, "-fopenacc", "-foffload=nvptx-none",
                          f"-foffload-options=nvptx-none=-misa=sm_{test_isa} -lm", "-o",
                          str(Path(tmp) / "t"), str(src)], what="doctor", timeout=60,
                         spec=proc.ProcSpec(cwd=Path(tmp)))
        ptxas = ptxas_isas()
        available = targets(gcc_major(gcc.version), ptxas)
        shown = ", ".join(f"sm_{t}" for t in available) or "none"
        source = "ptxas on PATH" if ptxas is not None else "no ptxas on PATH: nothing checks the PTX"
        if r.ok:
            return lines + [DoctorLine("gcc offloading", OK,
                                       f"nvptx-none: targets {shown} (GCC {gcc_major(gcc.version)} "
                                       f"and {source}); a test build for sm_{max(available or (80,))} links")]
        last = r.output.strip().splitlines()[-1:] or [r.describe()]
        return lines + [DoctorLine("gcc offloading", WARN,
                                   f"offload compiler present but a test build failed: {last[0]}",
                                   "check CUDA's ptxas on PATH and the libgomp-plugin-nvptx1 package")]


GCC = GccFamily(
    name="gcc",
    summary="GCC (gcc, g++, gfortran), OpenACC offloaded to NVIDIA GPUs through nvptx",
    compilers={"c": "gcc", "c++": "g++", "fortran": "gfortran", "cuda": "nvcc",
               "mpi_c": "mpicc", "mpi_c++": "mpicxx", "mpi_fortran": "mpifort"},
    install_hint="apt-get install gcc g++ gfortran (Debian/Ubuntu)",
    detect=(100, "gcc"),
    flags_default=("-O2",),
    flags_link={"c": ("-lm",), "c++": ("-lm",)},
    flags_openmp=("-fopenmp",),
)
