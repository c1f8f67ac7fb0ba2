"""The GCC family: gcc, g++, gfortran, with OpenACC offloaded to NVIDIA GPUs through nvptx.

The offload decision is GCC's own: it builds for a GPU only when its nvptx offload compiler
(mkoffload) is installed, and for the host (-foffload=disable) when there is no GPU and none
was asked for, so that a laptop runs the course. `ccXY` in --accopts picks -misa=sm_XY, capped
at what this GCC knows (GCC 12 to 14: sm_80; the driver compiles that PTX for newer GPUs).
Its feedback is read from tree dumps (gccdumps.py); a host build runs with ACC_DEVICE_TYPE=host.
GCC 12, 13 and 14 are this one family: what differs between them (targets, OpenACC 2.7, the
runtime's launches) is gccversions.py's, asked by the major version of gcc --version.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
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
from . import gccdumps, gccversions, nvcc, nvfortranisms
from ..profile.tracer import candidate_roots
from .family import INFO, MISSING, OK, WARN, AccDecision, CommandFamily, Translation
from .machine import probe_compiler

OFFLOAD_INSTALL_HINT = "apt-get install gcc-{major}-offload-nvptx libgomp-plugin-nvptx1"
# accopts items that name a compute capability: cc80, sm_80, sm80.
_CC_ITEM = re.compile(r"^(?:cc|sm_?)(\d{2,3})$", re.IGNORECASE)
_GPU_WORDS = ("nvptx", "nvptx-none", "gpu", "tesla")
# accopts words that ask for the host: nvc's -acc=host, and -acc=multicore, which gcc runs on
# one core (it has no multicore OpenACC target).
_HOST_WORDS = ("host", "multicore")
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
STACK_USAGE = ("-fstack-usage",)
# The nvptx mkoffload of GCC 12, 13 and 14 takes -fopenacc or -fopenmp, never both ("either
# '-fopenacc' or '-fopenmp' must be set"): refused before the build, the version named.
# What GCC 12's OpenACC runtime adds to each synchronous launch (gccversions.Release.launch_table).
LAUNCH_TABLE = ("GCC {major}'s OpenACC runtime allocates, copies and frees each launch's argument "
                "table around the launch and waits for the kernel (GCC 14's launches without the "
                "table's allocation and copy)")
MODELS_APART = ("GCC {major} cannot offload OpenACC and OpenMP in one program (its nvptx offload "
                "compiler takes -fopenacc or -fopenmp, not both): use -a for OpenACC or -t for "
                "OpenMP target regions")
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
    """The major version of gcc's --version line (GCC 12 when it says none)."""
    found = gccversions.major_of(version)
    return gccversions.UNREADABLE if found is None else found


def gcc_isas(major: int) -> tuple[int, ...]:
    """The -misa=sm_XY values of this GCC's nvptx compiler (the nearest known release's)."""
    return gccversions.release(f"{major}.0")[0].isas


def install_hint(major: int) -> str:
    """How to install this GCC's nvptx offloading (Debian's and Ubuntu's package names)."""
    return OFFLOAD_INSTALL_HINT.format(major=major)


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
    """What gcc takes of --accopts: a compute capability, a word that asks for the GPU or for
    the host, and the nvhpc options it has no equivalent for."""

    requested: int | None
    gpu_asked: bool
    ignored: tuple[str, ...]
    host_asked: bool = False


def _read_accopts(accopts: Sequence[str]) -> _AccOpts:
    requested: int | None = None
    gpu_asked = host_asked = False
    ignored: list[str] = []
    for item in accopts:
        match = _CC_ITEM.match(item)
        if match:
            requested = int(match.group(1))
        elif item.lower() in _GPU_WORDS:
            gpu_asked = True
        elif item.lower() in _HOST_WORDS:
            host_asked = True
        else:
            ignored.append(item)
    return _AccOpts(requested, gpu_asked, tuple(ignored), host_asked)


def _mode(opts: _AccOpts, offload_mode: str) -> str:
    """Where the line asks the regions to run, over the config's offload mode: a host word
    (-acc=host) first, then a GPU word (-acc=gpu, --accopts gpu)."""
    return "host" if opts.host_asked else "gpu" if opts.gpu_asked else offload_mode


def _host_reason(mode: str, want_gpu: bool, probe: Probe, model: str, major: int,
                 asked: bool = False) -> str | None:
    """Why the build is for the host (the note that says so); None when it is for a GPU.
    asked: the line asked for the host (a host word), not the config."""
    if mode == "host":
        return ("building for the host as asked (-foffload=disable)" if asked else
                "building for the host (offload = \"host\" in the config)")
    if not probe.offload:
        return ("gcc cannot offload to NVIDIA GPUs here (the nvptx offload compiler is missing): "
                f"building for the host. To offload: {install_hint(major)}")
    if not probe.gpus and not want_gpu:
        regions = "OpenMP target regions" if model == "-fopenmp" else "OpenACC regions"
        return (f"no GPU found: building for the host (-foffload=disable); the {regions} run "
                "on the CPU. Add --accopts cc80 to build for a GPU anyway.")
    return None


def _available(probe: Probe, major: int) -> tuple[int, ...]:
    """The targets this machine can build: the probe's (GCC's that its ptxas accepts, maybe
    none), else, when the probe did not say, GCC's own."""
    return gcc_isas(major) if probe.offload_targets is None else probe.offload_targets


def _choose_isa(wanted: int, available: Sequence[int], gpu: GpuInfo | None) -> int | None:
    """best_isa, but never newer than the GPU here when an older target can be built: a
    program built for a newer target than its GPU cannot run on it."""
    isa = best_isa(wanted, available)
    if isa is not None and gpu is not None and isa > gpu.sm:
        runnable = [t for t in available if t <= gpu.sm]
        return max(runnable) if runnable else isa
    return isa


def _target_notes(wanted: int, isa: int, major: int, shown: str, gpu: GpuInfo | None) -> list[str]:
    """What to say when the target built differs from the one asked, or no GPU is here."""
    notes = []
    if gpu is not None and isa < wanted and wanted > gpu.sm:
        notes.append(f"sm_{wanted} asked, newer than the GPU here ({gpu.name}, sm_{gpu.sm}): "
                     f"building for sm_{isa}, which it can run")
    elif isa < wanted:
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


def _wanted(requested: int | None, probe: Probe) -> int:
    """The target asked for: the line's, else the GPU's own, else sm_80."""
    return requested if requested is not None else (probe.gpus[0].sm if probe.gpus else 80)


def _gpu_target(requested: int | None, probe: Probe, major: int) -> tuple[int, list[str]]:
    """The sm_XY to build for: the one asked, else the GPU's, else sm_80, as near as this GCC
    and ptxas allow; and what to say about it. UsageError when no program built here could
    run on the GPU."""
    wanted = _wanted(requested, probe)
    available = _available(probe, major)
    gpu = probe.gpus[0] if probe.gpus else None
    isa = _choose_isa(wanted, available, gpu)
    shown = ", ".join(f"sm_{t}" for t in available)
    if isa is None:
        raise UsageError(f"GCC {major} and this machine's ptxas share no GPU target "
                         f"(GCC: {', '.join(f'sm_{t}' for t in gcc_isas(major))}): build for the "
                         "host (offload = \"host\") or install a CUDA toolkit that accepts one")
    if gpu is not None and isa > gpu.sm:
        raise UsageError(f"sm_{wanted} asked, and the oldest target this machine can build is "
                         f"sm_{min(available)} ({shown}), newer than the GPU here ({gpu.name}, "
                         f"sm_{gpu.sm}): no program built here can run on it")
    return isa, _target_notes(wanted, isa, major, shown, gpu)


def offload_flags(accopts: Sequence[str], probe: Probe, gcc_version: str,
                  offload_mode: str, model: str = "-fopenacc") -> AccDecision:
    """gcc's OpenACC flags (or OpenMP's, model="-fopenmp": gcc offloads OpenMP target regions
    the same way): offload to nvptx, or build for the host, and say why."""
    opts = _read_accopts(accopts)
    notes = [f"gcc ignores these accopts (nvhpc options without a gcc equivalent): "
             f"{', '.join(opts.ignored)}"] if opts.ignored else []
    mode = _mode(opts, offload_mode)
    major = gcc_major(gcc_version)
    host = _host_reason(mode, mode == "gpu" or opts.requested is not None, probe, model, major,
                        asked=opts.host_asked)
    if host is not None:
        return AccDecision((model, "-foffload=disable"), "host", tuple(notes), (host,))
    release, unknown = gccversions.release(gcc_version)
    isa, target_notes = _gpu_target(opts.requested, probe, major)
    # -latomic (nvptx's, GCC 12 and later): two reductions of one construct (+ and max on
    # doubles) become one 16-byte compare-and-swap, which nvptx's libatomic provides. -lm:
    # GCC 14 adds the offload libm itself when the host links -lm, GCC 12 and 13 do not.
    device_libs = "-lm -latomic" if release.libatomic else "-lm"
    flags = (model, "-foffload=nvptx-none",
             f"-foffload-options=nvptx-none=-misa=sm_{isa} {device_libs}", LINK_QUIET)
    return AccDecision(flags, "gpu" if probe.gpus else "host", tuple(notes),
                       (*target_notes, *([unknown] if unknown else [])), offload=True)


# ---------------------------------------------------------------------------------------
# NVIDIA's options on a gcc line. The IDRIS notebooks pass nvc's options in --options
# ("-mp=gpu -gpu=cc70 -Minfo=all"): those with a gcc meaning are translated, each with a note
# saying what became of it; the others are refused, all named in one message, before gcc
# sees them (it would stop at the first with "unrecognized debug output level 'pu=cc70'").


@dataclass(frozen=True)
class _Meaning:
    """What gcc makes of one NVIDIA option."""

    flags: tuple[str, ...] = ()  # gcc's own, in its place on the line
    link: tuple[str, ...] = ()  # after the source (libraries)
    acc: bool = False  # turns OpenACC on, as -a
    openmp: bool = False  # turns OpenMP on, as -t
    accopts: tuple[str, ...] = ()  # for the offload decision: ccXY, a GPU or a host word
    said: str = ""  # what became of it: the note is "OPTION → SAID"
    ignored: tuple[str, ...] = ()  # its sub-options that gcc has no use for
    refused: str = ""  # why gcc cannot take it ("": it can)


@dataclass(frozen=True)
class _Line:
    """What the readers need to know of the line and the machine."""

    acc: bool  # OpenACC is on (-a, or -acc among the options)
    models: bool  # OpenACC or OpenMP is on, by the line or its NVIDIA options
    fortran: bool
    cuda_roots: tuple[Path, ...]  # where -Mcudalib looks for CUDA's libraries


_MODEL_OPTION = re.compile(r"-(acc|mp)(=.*)?")
# nvc's -acc sub-options that only tune its own compiler or runtime: gcc has nothing to set.
_ACC_TUNING = ("autopar", "noautopar", "routineseq", "noroutineseq", "sync", "wait", "nowait",
               "strict", "verystrict", "legacy")
_MP_TUNING = ("align", "noalign", "allcores", "bind", "numa", "nonuma")
_NO_FTZ = ("nvc's -fast also flushes denormals to zero; gcc does that only with -ffast-math, "
           "which relaxes IEEE rules as well: not added")


NO_EQUIVALENT = "no gcc equivalent"
REFUSED = ("gcc cannot take these NVIDIA compiler options (no gcc equivalent unless said): "
           "{options}. Remove them from --options, or build with nvc (-c nvhpc)")


def _subs(value: str) -> list[str]:
    return [item for item in value.split(",") if item]


def _acc(value: str, line: _Line) -> _Meaning:
    subs = _subs(value)
    unknown = [s for s in subs if s not in ("gpu", "host", "multicore", *_ACC_TUNING)]
    if unknown:
        return _Meaning(refused=f"unknown sub-option {', '.join(unknown)}")
    ignored = tuple(s for s in subs if s in _ACC_TUNING)
    if "host" in subs or "multicore" in subs:
        serial = ("; gcc has no multicore target: the regions run serially on the host"
                  if "multicore" in subs else ": OpenACC regions on the host")
        return _Meaning(acc=True, accopts=("host",), ignored=ignored,
                        said=f"-fopenacc -foffload=disable{serial}")
    if "gpu" in subs:
        return _Meaning(acc=True, accopts=("gpu",), ignored=ignored,
                        said="-fopenacc, offloaded to the GPU with nvptx (as -a on a GPU)")
    return _Meaning(acc=True, ignored=ignored, said="-fopenacc (as -a)")


def _mp(value: str, line: _Line) -> _Meaning:
    subs = _subs(value)
    unknown = [s for s in subs if s not in ("gpu", "multicore", *_MP_TUNING)]
    if unknown:
        return _Meaning(refused=f"unknown sub-option {', '.join(unknown)}")
    ignored = tuple(s for s in subs if s in _MP_TUNING)
    if "gpu" in subs:
        return _Meaning(openmp=True, ignored=ignored,
                        said="-fopenmp, as -t: target regions offloaded with nvptx where the "
                             "build is for a GPU")
    if line.acc:
        # Beside OpenACC, the OpenACC decision says where the code runs (gcc offloads one
        # model per program).
        return _Meaning(openmp=True, ignored=ignored, said="-fopenmp (as -t)")
    return _Meaning(openmp=True, accopts=("host",), ignored=ignored,
                    said="-fopenmp -foffload=disable: OpenMP threads, target regions on the host "
                         "(nvc's -mp is -mp=multicore)")


def _gpu(value: str, line: _Line) -> _Meaning:
    subs = _subs(value)
    if not subs:
        return _Meaning(refused="no target given")
    cc = tuple(s for s in subs if _CC_ITEM.match(s))
    if not line.models:
        return _Meaning(said="nothing: it sets the GPU target of -acc or -mp=gpu, and neither "
                             "is on")
    return _Meaning(accopts=cc[-1:], ignored=tuple(s for s in subs if s not in cc[-1:]))


def _ta(value: str, line: _Line) -> _Meaning:
    """PGI's -ta=tesla:LIST (-gpu=LIST's older name), -ta=host, -ta=multicore."""
    target, _, rest = value.partition(":")
    if target in ("tesla", "nvidia"):
        meaning = _gpu(rest, line) if rest else _Meaning()
        if meaning.accopts or not line.models:
            return dataclasses.replace(meaning, refused="")
        return dataclasses.replace(meaning, refused="", accopts=("gpu",),
                                   said="nvptx offloading (as --accopts gpu)")
    if target in ("host", "multicore") and not rest:
        return _acc(target, line)
    return _Meaning(refused=f"no gcc target for {target!r}")


def _minfo(value: str, line: _Line) -> _Meaning:
    if line.models:
        return _Meaning(said=f"{FEEDBACK_FLAGS[0]}, already in idrrun's OpenACC and OpenMP flags "
                             "(what gcc offloaded, shown with the build)")
    return _Meaning(said=f"nothing: gcc's report of offloaded loops ({FEEDBACK_FLAGS[0]}) comes "
                         "with -a, -t, -acc or -mp")


def _cuda_libraries(names: Sequence[str], roots: Sequence[Path]) -> tuple[Path, Path] | str:
    """(CUDA folder, its library folder) that holds every lib{name}.so, or why there is none."""
    looked: list[str] = []
    for root in dict.fromkeys(r.resolve() for r in roots):
        for lib in (root / "lib64", root / "targets" / "x86_64-linux" / "lib", root / "lib"):
            if not lib.is_dir():
                continue
            missing = [n for n in names if not (lib / f"lib{n}.so").exists()]
            if not missing:
                return root, lib
            looked.append(f"{root} has no {', '.join(f'lib{n}' for n in missing)}")
            break
    where = "; ".join(looked) or "no CUDA toolkit found (CUDA_HOME, the nvcc on PATH, /usr/local/cuda)"
    return (f"{where}: install CUDA's {', '.join(names)} (NVIDIA's packages "
            f"{', '.join(f'lib{n}-dev-VERSION' for n in names)}) or set CUDA_HOME to a CUDA that has them")


def _cudalib(value: str, line: _Line) -> _Meaning:
    names = _subs(value)
    if not names:
        return _Meaning(refused="no library named")
    found = _cuda_libraries(names, line.cuda_roots)
    if isinstance(found, str):
        return _Meaning(refused=found)
    root, lib = found
    include = root / "include"
    flags = (f"-I{include}",) if include.is_dir() else ()
    link = (f"-L{lib}", f"-Wl,-rpath,{lib}", *(f"-l{n}" for n in names))
    fortran = (" (gfortran has no module for them: nvfortran's `use curand` and the like do not "
               "exist here; call the C functions through ISO_C_BINDING interfaces)"
               if line.fortran else "")
    return _Meaning(flags=flags, link=link, said=f"{' '.join((*flags, *link))}{fortran}")


def _fast(value: str, line: _Line) -> _Meaning:
    return _Meaning(flags=FAST, said=f"{' '.join(FAST)}: optimised and vectorised for this "
                                     f"processor, as nvc's -fast ({_NO_FTZ})")


# What nvc's -fast (-O2 with vectorisation, unrolling and inlining, for the processor it runs
# on) is in gcc: -O3 vectorises, unrolls and inlines; -march=native uses this processor's
# vector units, as nvc does by default (its -tp is the host's).
FAST = ("-O3", "-march=native")
_CUDALIB = re.compile(r"-M?cudalib=(.*)")
# The translation table: NVIDIA's option (a full match; the group is its value), its reader.
NVIDIA_OPTIONS: tuple[tuple[re.Pattern[str], Callable[[str, _Line], _Meaning]], ...] = (
    (re.compile(r"-acc(?:=(.*))?"), _acc),
    (re.compile(r"-mp(?:=(.*))?"), _mp),
    (re.compile(r"-gpu=(.*)"), _gpu),
    (re.compile(r"-ta=(.*)"), _ta),
    (re.compile(r"-Minfo(?:=(.*))?"), _minfo),
    (_CUDALIB, _cudalib),
    (re.compile(r"-fast(sse)?"), _fast),
)
# NVIDIA's options that gcc does not know, whatever their value: nvc's -M... (gcc's own are
# capitals: -MD, -MF), -gpu, -ta, -tp, -cuda..., -stdpar, -acc/-mp (their sub-options), PGI's
# -K..., -noacc, -nomp, -static-nvidia, pgcc's -c99/-c11.
NVIDIA_ONLY = re.compile(r"-(?:M[a-z]|gpu\b|ta\b|tp\b|cuda|stdpar|acc\b|mp\b|K[a-z]|noacc$|nomp$|"
                         r"static-nvidia|c\d\d$)")


def _read_option(word: str, line: _Line) -> _Meaning | None:
    """What gcc makes of one word of the line; None when it is not NVIDIA's."""
    for pattern, reader in NVIDIA_OPTIONS:
        match = pattern.fullmatch(word)
        if match:
            return reader(match.group(1) or "", line)
    if NVIDIA_ONLY.match(word):
        return _Meaning(refused=NO_EQUIVALENT)
    return None


def _cc_said(cc: str, request: RunRequest, probe: Probe, major: int,
             offload_mode: str) -> str:
    """What a target option (-gpu=cc70) became: the nvptx -misa the build will use."""
    opts = _read_accopts(request.accopts)
    mode = _mode(opts, offload_mode)
    model = "-fopenacc" if request.acc else "-fopenmp"
    if _host_reason(mode, True, probe, model, major, opts.host_asked) is not None:
        return (f"nothing: this build is for the host "
                f"({_host_why(mode, probe, opts.host_asked, major)})")
    match = _CC_ITEM.match(cc)
    asked = int(match.group(1)) if match else None
    if opts.requested != asked:
        return f"nothing: --accopts sets the target (sm_{opts.requested})"
    gpu = probe.gpus[0] if probe.gpus else None
    wanted = _wanted(asked, probe)
    isa = _choose_isa(wanted, _available(probe, major), gpu)
    if isa is None:
        return f"nothing: GCC {major} and this machine's ptxas share no GPU target"
    shown = f"-foffload-options=nvptx-none=-misa=sm_{isa}"
    return shown if isa == wanted else f"{shown} ({_isa_why(wanted, isa, major, gpu)})"


# A translated option's note says why in its own words: the machine's notes, which say more,
# are shown once per kernel, above it or in an earlier cell.
def _isa_why(wanted: int, isa: int, major: int, gpu: GpuInfo | None) -> str:
    """Why the target built is not the one asked, in a few words."""
    if gpu is not None and isa < wanted and wanted > gpu.sm:
        return f"sm_{wanted} is newer than the GPU here, {gpu.name} (sm_{gpu.sm})"
    if isa < wanted:
        return f"GCC {major} builds sm_{isa} at best; the driver compiles its PTX for the GPU"
    return (f"this CUDA's ptxas no longer accepts sm_{wanted}: the program runs on GPUs of compute "
            f"capability {isa // 10}.{isa % 10} or newer")


def _host_why(mode: str, probe: Probe, asked: bool, major: int) -> str:
    """Why the build is for the host, in a few words (_host_reason says it in full)."""
    if mode == "host":
        return "as asked" if asked else 'offload = "host" in the config'
    if not probe.offload:
        return f"gcc has no nvptx offload compiler here: {install_hint(major)}"
    return "no GPU here; --accopts cc80 builds for one anyway"


def _line(request: RunRequest, cuda_roots: Sequence[Path]) -> _Line:
    words = request.compiler_options
    acc = request.acc or any(_MODEL_OPTION.fullmatch(w) and w.startswith("-acc") for w in words)
    models = acc or request.openmp or any(_MODEL_OPTION.fullmatch(w) for w in words)
    return _Line(acc=acc, models=models, fortran=request.source.language == "fortran",
                 cuda_roots=tuple(cuda_roots))


def _refuse(read: Sequence[tuple[str, _Meaning | None]]) -> None:
    """UsageError naming every option gcc has no meaning for, with why where it is not plain."""
    refused = [word if m.refused == NO_EQUIVALENT else f"{word} ({m.refused})"
               for word, m in read if m is not None and m.refused]
    if refused:
        raise UsageError(REFUSED.format(options=", ".join(refused)))


def _applied(request: RunRequest, read: Sequence[tuple[str, _Meaning | None]]) -> RunRequest:
    """The request with gcc's flags in the place of NVIDIA's, and the models and target words
    they ask for (before the line's own --accopts, which keep the last word)."""
    flags: list[str] = []
    words: list[str] = []
    for word, meaning in read:
        flags += [word] if meaning is None else meaning.flags
        words += meaning.accopts if meaning is not None else ()
    meanings = [m for _, m in read if m is not None]
    return dataclasses.replace(request, compiler_options=tuple(flags),
                               accopts=(*words, *request.accopts),
                               acc=request.acc or any(m.acc for m in meanings),
                               openmp=request.openmp or any(m.openmp for m in meanings))


def _note(word: str, meaning: _Meaning, translated: RunRequest, probe: Probe, major: int,
          offload_mode: str) -> str:
    """"OPTION → what became of it; ignored: its sub-options gcc has no use for"."""
    cc = next((a for a in meaning.accopts if _CC_ITEM.match(a)), None)
    said = _cc_said(cc, translated, probe, major, offload_mode) if cc is not None else meaning.said
    ignored = f"ignored: {', '.join(meaning.ignored)} (no gcc equivalent)" if meaning.ignored else ""
    return f"{word} → {'; '.join(p for p in (said, ignored) if p) or 'nothing'}"


def translate_options(request: RunRequest, probe: Probe, gcc_version: str, offload_mode: str,
                      cuda_roots: Sequence[Path]) -> tuple[RunRequest, tuple[str, ...],
                                                            tuple[str, ...]]:
    """(the request with NVIDIA's options of its --options read as gcc's, the libraries to
    link after the source, the notes); UsageError naming those gcc has no meaning for."""
    line = _line(request, cuda_roots)
    read = [(word, _read_option(word, line)) for word in request.compiler_options]
    _refuse(read)
    translated = _applied(request, read)
    major = gcc_major(gcc_version)
    link = tuple(flag for _, m in read if m is not None for flag in m.link)
    notes = tuple(_note(word, m, translated, probe, major, offload_mode)
                  for word, m in read if m is not None)
    return translated, link, notes


def _read_as_nvfortran(request: RunRequest) -> tuple[RunRequest, tuple[str, ...]]:
    """The Fortran source as gfortran must see it to read what nvfortran reads (nvfortranisms)."""
    source = request.source
    fixed = nvfortranisms.fixes(source.text, source.suffix, request.compiler_options,
                                source.first_line)
    if fixed.text == source.text and not fixed.flags:
        return request, ()
    return replace(request, source=replace(source, text=fixed.text),
                   compiler_options=request.compiler_options + fixed.flags), fixed.notes


@dataclass(frozen=True)
class GccFamily(CommandFamily):
    def can_offload(self, c_compiler: CompilerInfo) -> bool:
        return has_offload(c_compiler.path)

    def offload_targets(self, c_compiler: CompilerInfo) -> tuple[int, ...] | None:
        return targets(gcc_major(c_compiler.version), ptxas_isas())

    def translate(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                  settings: Settings) -> Translation:
        if request.source.language == "cuda":
            request, notes = nvcc.read_arch(request, compiler, probe)  # nvcc's own options
            return Translation(request, notes=notes)
        # CUDA is looked for (~0.5 ms: PATH, /usr/local/cuda, the HPC SDK) only for -Mcudalib.
        roots = candidate_roots(os.environ) \
            if any(_CUDALIB.fullmatch(w) for w in request.compiler_options) else ()
        translated, link, notes = translate_options(request, probe, compiler.version,
                                                    settings.offload, roots)
        if translated.source.language == "fortran":
            translated, more = _read_as_nvfortran(translated)
            notes += more
        return Translation(translated, link, notes)

    def openacc(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                settings: Settings) -> AccDecision:
        decision = offload_flags(request.accopts, probe, compiler.version, settings.offload)
        # The exercise checks read gcc's tree dumps (written and lowered data clauses), and
        # the line tables that place the regions a run executed (profile/regions.py).
        dumps = gccdumps.GCC_DUMP_FLAGS + LINE_TABLES if request.check is not None else ()
        return replace(decision, flags=decision.flags + FEEDBACK_FLAGS + dumps)

    def openmp(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
               settings: Settings, acc_target: Target) -> AccDecision:
        if request.acc:
            release, _ = gccversions.release(compiler.version)
            if release.models_apart and (acc_target == "gpu" or any(
                    i.lower() in _GPU_WORDS or _CC_ITEM.match(i) for i in request.accopts)):
                raise UsageError(MODELS_APART.format(major=gcc_major(compiler.version)))
            return AccDecision(self.flags_openmp, acc_target)
        decision = offload_flags(request.accopts, probe, compiler.version, settings.offload,
                                 model="-fopenmp")
        dumps = gccdumps.GCC_DUMP_FLAGS if request.check is not None else ()
        return replace(decision, flags=decision.flags + FEEDBACK_FLAGS + dumps)

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

    def stack_usage(self, toolchain: Toolchain) -> tuple[str, ...]:
        # A file per compiled source, the size of every function's frame: a SIGSEGV in a
        # program whose main keeps 3 GB of arrays on a 1 GiB stack is a stack overflow, and
        # the hint says so (failures.py). It leaves the code as it was.
        return STACK_USAGE if toolchain.language in ("c", "c++", "fortran") else ()

    def launch_cost(self, toolchain: Toolchain) -> str:
        release, _ = gccversions.release(toolchain.compiler.version)
        if toolchain.target != "gpu" or not release.launch_table:
            return ""
        return LAUNCH_TABLE.format(major=release.major)

    def doctor(self, settings: Settings, active: bool) -> list[DoctorLine]:
        lines = self.compiler_lines(settings, active)
        gcc = probe_compiler(settings.compiler_command(self.name, "c") or self.compilers["c"])
        if gcc.path is None:
            return lines
        lines.append(version_line(gcc))
        if not has_offload(gcc.path):
            return lines + [DoctorLine("gcc offloading", MISSING if active else INFO,
                                       "no nvptx offload compiler: OpenACC runs on the host",
                                       install_hint(gcc_major(gcc.version)))]
        return lines + [_offload_line(gcc), runtime_line(gcc.path, gcc_major(gcc.version))]


def version_line(gcc: CompilerInfo) -> DoctorLine:
    """`idrrun doctor`'s line of what this GCC release means for OpenACC (a warning for one
    idrrun does not know)."""
    release, unknown = gccversions.release(gcc.version)
    said = gccversions.summary(release)
    if unknown:
        return DoctorLine("gcc version", WARN, f"{unknown}. GCC {release.major}: {said}",
                          "tell idrrun's maintainers what this GCC does (docs/compilers.md)")
    number = re.search(r"\b\d+\.\d+(?:\.\d+)?\b", gcc.version)
    return DoctorLine("gcc version", INFO, f"GCC {number.group(0) if number else release.major}: {said}")


def runtime_line(gcc_path: str, major: int) -> DoctorLine:
    """`idrrun doctor`'s line of the runtime this gcc's programs load (libgomp and its nvptx
    plugin, from the distribution's newest GCC) and what it does at each launch."""
    asked = proc.capture([gcc_path, "-print-file-name=libgomp.so.1"], what="probe")
    library = os.path.normpath(asked.output.strip()) if asked.ok else ""
    if not os.path.isabs(library) or not os.path.exists(library):
        return DoctorLine("gcc runtime", WARN, "gcc finds no libgomp.so.1: OpenACC programs do not "
                                               "link", "apt-get install libgomp1")
    found = gccversions.runtime_of(Path(library))
    if found.runtime is None:
        return DoctorLine("gcc runtime", WARN, f"{found.warning}: what its launches cost is not "
                                               "known", "")
    other = (f"; gcc is GCC {major}: its programs run with the runtime of the distribution's "
             f"newest GCC" if found.runtime.major != major else "")
    return DoctorLine("gcc runtime", INFO, f"libgomp of GCC {found.runtime.major} ({library}, "
                                           f"{found.tag}): {gccversions.runtime_said(found.runtime)}{other}")


def _offload_line(gcc: CompilerInfo) -> DoctorLine:
    """A test build for the newest target this GCC and ptxas share: does offloading link?"""
    major = gcc_major(gcc.version)
    ptxas = ptxas_isas()
    available = targets(major, ptxas)
    test_isa = max(available or (80,))
    with tempfile.TemporaryDirectory(prefix="idrrun-doctor-") as tmp:
        src = Path(tmp) / "t.c"
        src.write_text(_OFFLOAD_TEST)
        r = proc.run([gcc.path or "gcc", "-fopenacc", "-foffload=nvptx-none",
                      f"-foffload-options=nvptx-none=-misa=sm_{test_isa} -lm", "-o",
                      str(Path(tmp) / "t"), str(src)], what="doctor", timeout=60,
                     spec=proc.ProcSpec(cwd=Path(tmp)))
    shown = ", ".join(f"sm_{t}" for t in available) or "none"
    source = "ptxas on PATH" if ptxas is not None else "no ptxas on PATH: nothing checks the PTX"
    if r.ok:
        return DoctorLine("gcc offloading", OK, f"nvptx-none: targets {shown} (GCC {major} and "
                                                f"{source}); a test build for sm_{test_isa} links")
    last = r.output.strip().splitlines()[-1:] or [r.describe()]
    return DoctorLine("gcc offloading", WARN,
                      f"offload compiler present but a test build failed: {last[0]}",
                      "check CUDA's ptxas on PATH and the libgomp-plugin-nvptx1 package")

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
