"""What a compiler family is: the protocol every family module implements, and a base for them.

A family knows its commands and flags, decides where OpenACC regions will run (the offload
decision), reads its compiler's feedback, sets its programs' environment and says what `idrrun
doctor` should check. Nothing outside its module compares family names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from . import nvcc
from .machine import probe_compiler

from ..model import (
    AccReport,
    BuildResult,
    CompilerInfo,
    DoctorLine,
    Language,
    DependencyList,
    Preprocessing,
    Probe,
    RunRequest,
    Settings,
    Target,
    Toolchain,
)


# Doctor line states.
OK, MISSING, WARN, INFO = "OK", "missing", "warning", "info"


def compiler_key(language: Language, mpi: bool) -> str:
    return f"mpi_{language}" if mpi else language


def compiler_command(family: Family, key: str, settings: Settings) -> str:
    """The configured command ([compilers.FAMILY] KEY) or the family's default."""
    return settings.compiler_command(family.name, key) or family.compilers[key]


@dataclass(frozen=True)
class AccDecision:
    """A family's answer for an OpenACC build: its flags, where the regions run, what to say."""

    flags: tuple[str, ...]
    target: Target
    notes: tuple[str, ...] = ()  # about this request (accopts the family ignores)
    # About this machine, the same for every request here (no GPU, the GPU target it can
    # build): a notebook says them once per kernel.
    machine_notes: tuple[str, ...] = ()
    offload: bool = False  # the build holds code for a GPU (whether or not one is here)


@dataclass(frozen=True)
class Translation:
    """What a family makes of compiler options written for another family (the IDRIS notebooks'
    nvc options reaching gcc): the request as it reads them (its own flags in their place, the
    models and target options they ask for), what goes after the source, what to say."""

    request: RunRequest
    link_flags: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


class Family(Protocol):
    """One compiler family (gcc, nvhpc, pgi, ...): register an instance with registry.register."""

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str:
        """One line for --help and doctor: "GCC (gcc, gfortran) with nvptx offloading"."""
        ...

    @property
    def compilers(self) -> Mapping[str, str]:
        """Default command per key: a language ("c", "fortran", ...) or "mpi_<language>"."""
        ...

    @property
    def install_hint(self) -> str: ...

    @property
    def detect(self) -> tuple[int, str] | None:
        """(rank, command): chosen when no family is configured and `command` is on PATH, lower
        ranks first; when no family's command is found, the highest rank is taken. None: never
        chosen automatically."""
        ...

    def default_flags(self, language: Language) -> tuple[str, ...]:
        """Flags of every build, before the OpenACC ones (optimisation level)."""
        ...

    def link_flags(self, language: Language) -> tuple[str, ...]:
        """After the source file (libraries)."""
        ...

    def openmp(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
               settings: Settings, acc_target: Target) -> AccDecision:
        """The OpenMP flags (-t): threads, and target regions offloaded where the family can;
        acc_target is where the OpenACC decision put the OpenACC regions ("none" without -a)."""
        ...

    def can_offload(self, c_compiler: CompilerInfo) -> bool:
        """Whether the family's C compiler can build GPU code on this machine (probed once)."""
        ...

    def offload_targets(self, c_compiler: CompilerInfo) -> tuple[int, ...] | None:
        """The GPU targets (sm_XY as XY) it can build for here (probed once); None if it cannot
        say, () when it can build for none."""
        ...

    def translate(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                  settings: Settings) -> Translation:
        """The request with the options of its line that belong to another family's compilers
        translated into this family's, with a note for each; UsageError naming those that
        have no meaning here (they never reach the compiler). Translation(request) for none."""
        ...

    def openacc(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                settings: Settings) -> AccDecision:
        """The OpenACC flags, feedback flags included, and where the regions will run."""
        ...

    def feedback(self, build: BuildResult) -> AccReport | None:
        """What the compiler made of the directives (regions, implicit data), from what the
        build wrote; None when the build left nothing to read."""
        ...

    def run_env(self, request: RunRequest, toolchain: Toolchain) -> Mapping[str, str]:
        """Environment the program needs to run as built (e.g. host-only builds), and to run a
        GPU build's compute regions on the host when request.run_on_host."""
        ...

    def host_comparison(self, toolchain: Toolchain) -> str:
        """"" when a GPU build of this toolchain can also run its compute regions on the host
        (the agrees_with_host check: run_env with request.run_on_host says how, openacc() with
        request.compare_host builds for it); else why not, in one sentence."""
        ...

    def preprocess(self, toolchain: Toolchain, source_file: str, product: str) -> Preprocessing:
        """How the compile of `source_file` into `product` also leaves the source as the
        compiler reads it (comments and disabled #if blocks gone), for the source checks;
        Preprocessing() when the family has none (the checks then strip comments themselves)."""
        ...

    def feedback_files(self, toolchain: Toolchain) -> tuple[str, ...]:
        """Patterns (fnmatch) of the files a compile leaves in its folder that feedback() reads
        (gcc's tree dumps): a graded build takes out only these, its product and what the
        source checks read."""
        ...

    def prefixes(self, compiler: str) -> tuple[Path, ...]:
        """The folders a compiler of this family (its resolved path) and the programs it
        builds read from (headers, libraries, its runtime): a box shows them read-only when
        they are outside the system's folders."""
        ...

    def dependencies(self, toolchain: Toolchain, product: str) -> DependencyList:
        """How a graded compile into `product` also lists the files it read (what a student's
        source really included); DependencyList() when the family cannot say."""
        ...

    def stack_usage(self, toolchain: Toolchain) -> tuple[str, ...]:
        """Compile flags that make the compiler write each function's stack frame size
        (gcc's -fstack-usage: NAME.su beside the product, build.FRAMES); () when it cannot."""
        ...

    def launch_cost(self, toolchain: Toolchain) -> str:
        """What the compiler's own runtime adds to each compute region's launch, in words a
        profile's hint names as the compiler's (not the student's); "" when nothing known."""
        ...

    def gpu_context(self, toolchain: Toolchain) -> bool:
        """Whether the program may create a CUDA context (which maps ~13 GiB of address space,
        so no address-space limit may be put on it)."""
        ...

    def doctor(self, settings: Settings, active: bool) -> list[DoctorLine]:
        """Lines for `idrrun doctor`: its compilers, and whatever else it needs (offloading)."""
        ...


@dataclass(frozen=True)
class CommandFamily:
    """The parts most families share, as data; a family module fills them and adds its logic."""

    name: str
    summary: str
    compilers: Mapping[str, str]
    install_hint: str
    detect: tuple[int, str] | None = None
    flags_default: tuple[str, ...] = ()
    flags_link: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # per language
    flags_openmp: tuple[str, ...] = ("-fopenmp",)

    def default_flags(self, language: Language) -> tuple[str, ...]:
        return self.flags_default

    def link_flags(self, language: Language) -> tuple[str, ...]:
        return self.flags_link.get(language, ())

    def offload_targets(self, c_compiler: CompilerInfo) -> tuple[int, ...] | None:
        return None

    def translate(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                  settings: Settings) -> Translation:
        if request.source.language == "cuda":
            request, notes = nvcc.read_arch(request, compiler, probe)
            return Translation(request, notes=notes)
        return Translation(request)

    def openmp(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
               settings: Settings, acc_target: Target) -> AccDecision:
        return AccDecision(self.flags_openmp, acc_target)

    def run_env(self, request: RunRequest, toolchain: Toolchain) -> Mapping[str, str]:
        return {}

    def host_comparison(self, toolchain: Toolchain) -> str:
        return (f"idrrun does not know how a {self.name} build runs its compute regions on the "
                "host: nothing to compare the GPU's output with")

    def preprocess(self, toolchain: Toolchain, source_file: str, product: str) -> Preprocessing:
        return Preprocessing()

    def feedback_files(self, toolchain: Toolchain) -> tuple[str, ...]:
        return ()

    def prefixes(self, compiler: str) -> tuple[Path, ...]:
        # bin/gcc -> the installation's root (an offload GCC unpacked in /opt/gcc-offload)
        return (Path(compiler).resolve().parent.parent,)

    def dependencies(self, toolchain: Toolchain, product: str) -> DependencyList:
        return DependencyList()

    def stack_usage(self, toolchain: Toolchain) -> tuple[str, ...]:
        return ()

    def launch_cost(self, toolchain: Toolchain) -> str:
        return ""

    def compiler_lines(self, settings: Settings, active: bool) -> list[DoctorLine]:
        """A doctor line per language (C and Fortran): found, or how to install it. Only the
        family in use must be complete; the others are options."""
        lines = []
        for language in ("c", "fortran"):
            command = settings.compiler_command(self.name, language) or self.compilers[language]
            info = probe_compiler(command)
            topic = f"compiler {self.name} {language}"
            if info.path:
                lines.append(DoctorLine(topic, OK, f"{info.path}: {info.version or 'version unknown'}"))
            else:
                lines.append(DoctorLine(topic, MISSING if active else INFO, f"{command} not found",
                                        self.install_hint))
        return lines
