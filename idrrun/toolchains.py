"""Compiler families as data: commands, OpenACC flags, accopts translation, and probing.

The family is always an explicit name (nvhpc, pgi, gcc), from the magic line, the config, or
detection (nvhpc when `nvc` is on PATH, else gcc). It is never guessed from a path.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from . import proc
from .config import Settings
from .errors import ToolNotFound
from .model import CompilerInfo, FamilyName, GpuInfo, Language, Probe, RunRequest, Target, Toolchain


@dataclass(frozen=True)
class Family:
    name: FamilyName
    compilers: Mapping[str, str]  # key: language or "mpi_<language>"
    acc_flags: tuple[str, ...]
    feedback_flags: tuple[str, ...]
    openmp_flags: tuple[str, ...]
    accopts_switch: str  # nvhpc "-gpu=", pgi "-ta=tesla:", gcc "" (translated item by item)
    default_flags: tuple[str, ...]
    link_flags: Mapping[str, tuple[str, ...]]  # per language
    install_hint: str


FAMILIES: dict[str, Family] = {
    "nvhpc": Family(
        name="nvhpc",
        compilers={"c": "nvc", "c++": "nvc++", "fortran": "nvfortran", "cuda": "nvcc",
                   "mpi_c": "mpicc", "mpi_c++": "mpicxx", "mpi_fortran": "mpifort"},
        acc_flags=("-acc",),
        feedback_flags=("-Minfo=accel",),
        openmp_flags=("-mp",),
        accopts_switch="-gpu=",
        default_flags=(),
        link_flags={},
        install_hint="install the NVIDIA HPC SDK and put its bin/ on PATH, or pick gcc with -c gcc",
    ),
    "pgi": Family(
        name="pgi",
        compilers={"c": "pgcc", "c++": "pgc++", "fortran": "pgf90", "cuda": "nvcc",
                   "mpi_c": "mpicc", "mpi_c++": "mpicxx", "mpi_fortran": "mpif90"},
        acc_flags=("-acc",),
        feedback_flags=("-Minfo=accel",),
        openmp_flags=("-mp",),
        accopts_switch="-ta=tesla:",
        default_flags=(),
        link_flags={},
        install_hint="load the PGI compilers (module load pgi), or pick another family with -c nvhpc|gcc",
    ),
    "gcc": Family(
        name="gcc",
        compilers={"c": "gcc", "c++": "g++", "fortran": "gfortran", "cuda": "nvcc",
                   "mpi_c": "mpicc", "mpi_c++": "mpicxx", "mpi_fortran": "mpifort"},
        acc_flags=("-fopenacc",),
        feedback_flags=("-fopt-info-optimized-omp",),
        openmp_flags=("-fopenmp",),
        accopts_switch="",
        default_flags=("-O2",),
        link_flags={"c": ("-lm",), "c++": ("-lm",)},
        install_hint="apt-get install gcc g++ gfortran (Debian/Ubuntu)",
    ),
}

OFFLOAD_INSTALL_HINT = "apt-get install gcc-12-offload-nvptx libgomp-plugin-nvptx1"
# The -misa=sm_XY values each GCC major version accepts for nvptx (GCC 12: sm_80 at most).
_GCC_NVPTX_ISAS: dict[int, tuple[int, ...]] = {
    11: (30, 35),
    12: (30, 35, 53, 70, 75, 80),
    13: (30, 35, 53, 70, 75, 80),
    14: (30, 35, 52, 53, 60, 61, 70, 75, 80, 89),
}
# gcc accopts items that name a compute capability: cc80, sm_80, sm80.
_CC_ITEM = re.compile(r"^(?:cc|sm_?)(\d{2,3})$", re.IGNORECASE)

PROBE_TIMEOUT = 5.0


# ---------------------------------------------------------------------------------------
# Probing: never raises, short timeouts.


def compiler_key(language: Language, mpi: bool) -> str:
    return f"mpi_{language}" if mpi else language


def compiler_command(family: str, key: str, settings: Settings) -> str:
    return settings.compiler_command(family, key) or FAMILIES[family].compilers[key]


def probe_compiler(command: str) -> CompilerInfo:
    path = shutil.which(command)
    if path is None:
        return CompilerInfo(command=command, path=None, version="")
    result = proc.capture([path, "--version"], what="probe")
    lines = [ln.strip() for ln in result.output.splitlines() if ln.strip()]
    return CompilerInfo(command=command, path=path, version=lines[0] if lines else "")


def probe_gpus() -> tuple[tuple[GpuInfo, ...], str | None]:
    """GPUs seen by nvidia-smi; a warning instead of an exception when it misbehaves."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return (), None
    result = proc.capture(
        [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
        what="probe", timeout=PROBE_TIMEOUT,
    )
    if not result.ok:
        return (), f"nvidia-smi did not answer ({result.describe()}): assuming no GPU"
    gpus = []
    for line in result.output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0]:
            gpus.append(GpuInfo(name=parts[0], compute_capability=parts[1], driver=parts[2]))
    return tuple(gpus), None


def gcc_has_offload(gcc_path: str | None) -> bool:
    """True when gcc's nvptx offload compiler (mkoffload) is installed."""
    if gcc_path is None:
        return False
    result = proc.capture([gcc_path, "-print-prog-name=accel/nvptx-none/mkoffload"], what="probe")
    found = result.output.strip()
    return result.ok and os.path.isabs(found) and os.path.exists(found)


def detect_family(settings: Settings, flag: FamilyName | None) -> tuple[FamilyName, str]:
    if flag is not None:
        return flag, "flag"
    if settings.family is not None:
        return settings.family, "config"  # type: ignore[return-value]
    return ("nvhpc" if shutil.which("nvc") else "gcc"), "detected"


def probe(settings: Settings, family_flag: FamilyName | None = None) -> Probe:
    """Look at the machine once: family, its compilers and versions, GPUs, gcc offloading."""
    family, source = detect_family(settings, family_flag)
    commands = sorted({compiler_command(family, key, settings) for key in FAMILIES[family].compilers})
    compilers = tuple(probe_compiler(c) for c in commands)
    gpus, warning = probe_gpus()
    offload = False
    if family == "gcc":
        gcc = next((c for c in compilers if c.command == compiler_command("gcc", "c", settings)), None)
        offload = gcc_has_offload(gcc.path if gcc else None)
    from . import isolation

    cc = next((c.path for c in compilers if c.command == compiler_command(family, "c", settings)), None)
    protections = isolation.probe(settings.cache_dir, cc if family == "gcc" else None)
    return Probe(
        family=family, family_source=source, compilers=compilers, gpus=gpus,
        gcc_offload=offload, warnings=(warning,) if warning else (),
        protections=protections,
    )


# ---------------------------------------------------------------------------------------
# Resolution: request + probe + settings -> Toolchain (pure but for one probe of an
# unexpected compiler command).


def _gcc_major(version: str) -> int:
    match = re.search(r"\b(\d+)\.\d+(?:\.\d+)?\b", version)
    return int(match.group(1)) if match else 12


def _best_isa(requested: int, gcc_major: int) -> int:
    known = _GCC_NVPTX_ISAS.get(gcc_major) or _GCC_NVPTX_ISAS[max(_GCC_NVPTX_ISAS)]
    below = [isa for isa in known if isa <= requested]
    return max(below) if below else min(known)


def gcc_openacc_flags(
    accopts: tuple[str, ...], probe_: Probe, gcc_version: str, offload_mode: str
) -> tuple[tuple[str, ...], Target, tuple[str, ...]]:
    """gcc's OpenACC flags: offload to nvptx, or build for the host, and say why."""
    notes: list[str] = []
    requested: int | None = None
    ignored: list[str] = []
    for item in accopts:
        match = _CC_ITEM.match(item)
        if match:
            requested = int(match.group(1))
        elif item.lower() in ("nvptx", "nvptx-none", "gpu", "tesla"):
            offload_mode = "gpu"
        else:
            ignored.append(item)
    if ignored:
        notes.append(
            f"gcc ignores these accopts (nvhpc options without a gcc equivalent): {', '.join(ignored)}"
        )
    flags: tuple[str, ...] = ("-fopenacc",)
    want_gpu = offload_mode == "gpu" or requested is not None
    if offload_mode == "host" or not probe_.gcc_offload:
        if not probe_.gcc_offload and offload_mode != "host":
            notes.append(
                "gcc cannot offload to NVIDIA GPUs here (the nvptx offload compiler is missing): "
                f"building for the host. To offload: {OFFLOAD_INSTALL_HINT}"
            )
        else:
            notes.append("building for the host (offload = \"host\" in the config)")
        return flags + ("-foffload=disable",), "host", tuple(notes)
    if not probe_.gpus and not want_gpu:
        notes.append(
            "no GPU found: building for the host (-foffload=disable); the OpenACC regions run "
            "on the CPU. Add --accopts cc80 to build for a GPU anyway."
        )
        return flags + ("-foffload=disable",), "host", tuple(notes)
    major = _gcc_major(gcc_version)
    wanted = requested if requested is not None else (probe_.gpus[0].sm if probe_.gpus else 80)
    isa = _best_isa(wanted, major)
    if isa != wanted:
        notes.append(
            f"sm_{wanted} asked, GCC {major} can build for sm_{isa} at best: building for "
            f"sm_{isa}; the driver compiles that PTX for the GPU when the program starts"
        )
    if not probe_.gpus:
        notes.append("no GPU found: built for a GPU as asked; here the program falls back to the host")
    flags += ("-foffload=nvptx-none", f"-foffload-options=nvptx-none=-misa=sm_{isa} -lm")
    return flags, ("gpu" if probe_.gpus else "host"), tuple(notes)


def resolve(request: RunRequest, probe_: Probe, settings: Settings) -> Toolchain:
    family = FAMILIES[probe_.family]
    language = request.source.language
    key = compiler_key(language, request.mpi_ranks is not None)
    if key not in family.compilers:
        raise ToolNotFound(f"the {family.name} family has no compiler for {language}")
    command = compiler_command(family.name, key, settings)
    info = probe_.compiler(command) or probe_compiler(command)
    if info.path is None:
        hint = "install MPI (apt-get install openmpi-bin libopenmpi-dev)" if key.startswith("mpi_") \
            else family.install_hint
        raise ToolNotFound(
            f"compiler '{command}' ({family.name} family, {language}) not found on PATH: {hint}"
        )
    flags: list[str] = list(family.default_flags) + list(settings.extra_flags(family.name))
    notes: list[str] = []
    target: Target = "none"
    if request.acc and language != "cuda":
        if family.name == "gcc":
            gcc_flags, target, gcc_notes = gcc_openacc_flags(
                request.accopts, probe_, info.version, settings.offload
            )
            flags += gcc_flags
            notes += gcc_notes
        else:
            flags += family.acc_flags
            if request.accopts:
                flags.append(family.accopts_switch + ",".join(request.accopts))
            target = "gpu" if probe_.gpus else "host"
            if not probe_.gpus:
                notes.append("no GPU found: the program will need one to run its OpenACC regions")
        flags += family.feedback_flags
        if request.check is not None and family.name == "gcc":
            # The exercise checks read gcc's tree dumps (written and lowered data clauses).
            from .accinfo import GCC_DUMP_FLAGS

            flags += GCC_DUMP_FLAGS
    elif request.accopts:
        notes.append("--accopts is ignored without -a/--acc")
    if request.openmp:
        flags += family.openmp_flags
    flags += request.compiler_options
    return Toolchain(
        family=family.name,
        language=language,
        compiler=info,
        flags=tuple(flags),
        link_flags=family.link_flags.get(language, ()),
        target=target,
        notes=tuple(notes),
    )
