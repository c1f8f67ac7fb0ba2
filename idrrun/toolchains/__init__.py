"""Compiler families, one module each (gcc, nvhpc/pgi) behind family.Family, named by a registry;
probing the machine once, and turning a request into the Toolchain that builds it.

    probe(settings, family)           -> Probe       (the family's compilers, GPUs, protections)
    resolve(request, probe, settings) -> Toolchain   (the compiler and every flag)
"""

from __future__ import annotations

from ..errors import ToolNotFound
from ..model import CompilerInfo, GpuInfo, Probe, RunRequest, Settings, Target, Toolchain
from ..run import isolation
from . import probecache, registry
from .family import Family, compiler_command, compiler_key
from .machine import probe_compiler, probe_gpus

__all__ = ["Family", "family_of", "probe", "registry", "resolve", "select_family"]


def select_family(settings: Settings, flag: str | None) -> tuple[str, str]:
    """(family name, where it came from: "flag", "config" or "detected")."""
    if flag is not None:
        return registry.get(flag).name, "flag"
    if settings.family is not None:
        return registry.get(settings.family).name, "config"
    return registry.detect(), "detected"


def family_of(toolchain: Toolchain) -> Family:
    return registry.get(toolchain.family)


def probe(settings: Settings, family_flag: str | None = None) -> Probe:
    """Look at the machine: family, its compilers and versions, GPUs, offloading, limits (what
    the commands answer is remembered between calls: probecache.py)."""
    name, _ = select_family(settings, family_flag)
    family = registry.get(name)
    commands = sorted({compiler_command(family, key, settings) for key in family.compilers})
    c_command = compiler_command(family, "c", settings)

    def ask() -> tuple[tuple[CompilerInfo, ...], tuple[GpuInfo, ...], str | None, bool,
                       tuple[int, ...]]:
        compilers = tuple(probe_compiler(c) for c in commands)
        gpus, warning = probe_gpus()
        c_info = next((c for c in compilers if c.command == c_command), None) or \
            probe_compiler(c_command)
        offload = family.can_offload(c_info)
        return compilers, gpus, warning, offload, family.offload_targets(c_info) if offload else ()

    digest = probecache.key(name, commands, settings)
    compilers, gpus, warning, offload, targets = probecache.remembered(settings.cache_dir, digest, ask)
    return Probe(
        family=name, compilers=compilers, gpus=gpus, offload=offload,
        offload_targets=targets, warnings=(warning,) if warning else (),
        protections=isolation.probe(settings.cache_dir),
    )


def resolve(request: RunRequest, probe_: Probe, settings: Settings) -> Toolchain:
    """The compiler and every flag for this request, decided by the probe's family."""
    family = registry.get(probe_.family)
    language = request.source.language
    key = compiler_key(language, request.mpi_ranks is not None)
    if key not in family.compilers:
        raise ToolNotFound(f"the {family.name} family has no compiler for {language}")
    command = compiler_command(family, key, settings)
    info = probe_.compiler(command) or probe_compiler(command)
    if info.path is None:
        hint = "install MPI (apt-get install openmpi-bin libopenmpi-dev)" if key.startswith("mpi_") \
            else family.install_hint
        raise ToolNotFound(
            f"compiler '{command}' ({family.name} family, {language}) not found on PATH: {hint}"
        )
    flags: list[str] = [*family.default_flags(language), *settings.extra_flags(family.name)]
    notes: list[str] = []
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
    return Toolchain(
        family=family.name,
        language=language,
        compiler=info,
        flags=tuple(flags),
        link_flags=family.link_flags(language),
        target=target,
        notes=tuple(notes),
        machine_notes=tuple(machine_notes),
        offload=offload,
    )
