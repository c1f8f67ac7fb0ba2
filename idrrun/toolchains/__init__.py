"""Compiler families, one module each (gcc, nvhpc/pgi) behind family.Family, named by a registry;
probing the machine once, and turning a request into the Toolchain that builds it.

    probe(settings, family)               -> Probe        (the family's compilers, GPUs, protections)
    translate(request, probe, settings)   -> Translation  (another family's options on the line
                                                           read by this one: Family.translate)
    toolchain_for(request, probe, settings, t) -> Toolchain   (the compiler and every flag)
"""

from __future__ import annotations

from pathlib import Path

from ..errors import MPI_MISSING, ToolNotFound
from ..model import CompilerInfo, GpuInfo, Probe, RunRequest, Settings, Target, Toolchain
from ..run import isolation
from . import onpath, probecache, registry
from .registry import family_of
from .family import Family, Translation, compiler_command, compiler_key
from .machine import probe_compiler, probe_gpus

__all__ = ["Family", "Translation", "family_of", "probe", "registry", "select_family",
           "toolchain_for", "translate"]


def select_family(settings: Settings, flag: str | None,
                  view: onpath.View | None = None) -> tuple[str, str]:
    """(family name, where it came from: "flag", "config" or "detected")."""
    if flag is not None:
        return registry.get(flag).name, "flag"
    if settings.family is not None:
        return registry.get(settings.family).name, "config"
    return registry.detect(view), "detected"


def probe(settings: Settings, family_flag: str | None = None) -> Probe:
    """Look at the machine: family, its compilers and versions, GPUs, offloading, limits (what
    the commands answer is remembered between calls: probecache.py)."""
    view = onpath.view()
    name, _ = select_family(settings, family_flag, view)
    family = registry.get(name)
    commands = sorted({compiler_command(family, key, settings) for key in family.compilers})
    c_command = compiler_command(family, "c", settings)

    def ask() -> tuple[tuple[CompilerInfo, ...], tuple[GpuInfo, ...], str | None, bool,
                       tuple[int, ...] | None]:
        compilers = tuple(probe_compiler(c) for c in commands)
        gpus, warning = probe_gpus()
        c_info = next((c for c in compilers if c.command == c_command), None) or \
            probe_compiler(c_command)
        offload = family.can_offload(c_info)
        return compilers, gpus, warning, offload, family.offload_targets(c_info) if offload else None

    digest = probecache.key(name, commands, settings, view)
    compilers, gpus, warning, offload, targets = probecache.remembered(settings.cache_dir, digest, ask)
    return Probe(
        family=name, compilers=compilers, gpus=gpus, offload=offload,
        offload_targets=targets, warnings=(warning,) if warning else (),
        protections=isolation.probe(settings.cache_dir, which=view.which),
    )


def _compiler(family: Family, request: RunRequest, probe_: Probe,
              settings: Settings) -> tuple[str, CompilerInfo]:
    """The command that compiles this request and what the probe knows of it; ToolNotFound
    when it is not installed."""
    language = request.source.language
    key = compiler_key(language, request.mpi_ranks is not None)
    if key not in family.compilers:
        raise ToolNotFound(f"the {family.name} family has no compiler for {language}")
    command = compiler_command(family, key, settings)
    info = probe_.compiler(command) or probe_compiler(command)
    if info.path is None:
        hint = MPI_MISSING if key.startswith("mpi_") \
            else family.install_hint
        raise ToolNotFound(
            f"compiler '{command}' ({family.name} family, {language}) not found on PATH: {hint}"
        )
    return command, info


def translate(request: RunRequest, probe_: Probe, settings: Settings) -> Translation:
    """The request as the probe's family reads it: options on the line written for another
    family's compilers translated, or refused (UsageError) when they mean nothing here."""
    family = registry.get(probe_.family)
    _, info = _compiler(family, request, probe_, settings)
    return family.translate(request, info, probe_, settings)


def toolchain_for(request: RunRequest, probe_: Probe, settings: Settings,
                  translation: Translation | None = None) -> Toolchain:
    """The compiler and every flag for this request, decided by the probe's family.
    translation: translate()'s answer for it (its request is `request`): its libraries go
    after the source, its notes first."""
    family = registry.get(probe_.family)
    language = request.source.language
    command, info = _compiler(family, request, probe_, settings)
    flags: list[str] = [*family.default_flags(language), *settings.extra_flags(family.name)]
    notes: list[str] = list(translation.notes) if translation is not None else []
    machine_notes: list[str] = []
    target: Target = "none"
    offload = False
    if request.acc and language != "cuda":
        decision = family.openacc(request, info, probe_, settings)
        flags += decision.flags
        notes += decision.notes
        machine_notes += decision.machine_notes
        target, offload = decision.target, decision.offload
    elif request.accopts and not request.openmp:
        notes.append("--accopts is ignored without -a/--acc")
    if request.openmp and language != "cuda":
        decision = family.openmp(request, info, probe_, settings, target)
        flags += decision.flags
        notes += decision.notes
        machine_notes += decision.machine_notes
        target, offload = decision.target, offload or decision.offload
    flags += request.compiler_options
    link = family.link_flags(language) + (translation.link_flags if translation is not None else ())
    return Toolchain(
        family=family.name,
        language=language,
        compiler=info,
        flags=tuple(flags),
        link_flags=link,
        target=target,
        notes=tuple(notes),
        label=family.name if language != "cuda" else Path(command).name,
        machine_notes=tuple(machine_notes),
        offload=offload,
        prefixes=_prefixes(family, request, probe_, settings, info),
    )


def _prefixes(family: Family, request: RunRequest, probe_: Probe, settings: Settings,
              info: CompilerInfo) -> tuple[str, ...]:
    """The family's prefixes of the compilers a build runs: the compiler's and, behind an MPI
    wrapper, those of the family's compiler of the language, which Open MPI's and MPICH's
    wrappers run by its name from PATH (gcc offloading on the GPU machine lives in
    /opt/gcc-offload, the wrapper in /usr/bin)."""
    paths = [info.path]
    if request.mpi_ranks is not None:
        plain = compiler_command(family, compiler_key(request.source.language, False), settings)
        paths.append((probe_.compiler(plain) or probe_compiler(plain)).path)
    found = dict.fromkeys(str(d) for p in paths if p is not None for d in family.prefixes(p))
    return tuple(found)
