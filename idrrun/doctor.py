"""`idrrun doctor`: what this machine offers for the course, each line OK or not with its fix."""

from __future__ import annotations

import html
import shutil
from dataclasses import dataclass

from .model import DoctorLine, Settings
from .profile.tracer import find_cupti
from .run import isolation, proc
from .toolchains import registry, select_family
from .toolchains.family import INFO, MISSING, OK, WARN
from .toolchains.machine import probe_gpus

@dataclass(frozen=True)
class Report:
    lines: tuple[DoctorLine, ...]

    @property
    def can_compile(self) -> bool:
        return any(line.topic.startswith("compiler ") and line.status == OK for line in self.lines)

    def __str__(self) -> str:
        width = max(len(line.topic) for line in self.lines)
        out = []
        for line in self.lines:
            text = f"{line.topic.ljust(width)}  {line.status:8s} {line.detail}"
            if line.fix:
                text += f"\n{' ' * width}  {'':8s} fix: {line.fix}"
            out.append(text)
        return "\n".join(out)

    def _repr_html_(self) -> str:
        colors = {OK: "#1a7f37", MISSING: "#cf222e", WARN: "#9a6700", INFO: "#6e7781"}
        rows = "".join(
            f"<tr><td>{html.escape(line.topic)}</td>"
            f"<td style='color:{colors[line.status]};font-weight:bold'>{line.status}</td>"
            f"<td>{html.escape(line.detail)}</td><td><code>{html.escape(line.fix)}</code></td></tr>"
            for line in self.lines
        )
        return ("<table><thead><tr><th>what</th><th>state</th><th>detail</th><th>fix</th></tr>"
                f"</thead><tbody>{rows}</tbody></table>")


def _gpus() -> list[DoctorLine]:
    gpus, warning = probe_gpus()
    if warning:
        return [DoctorLine("GPU", WARN, warning, "check the NVIDIA driver (nvidia-smi)")]
    if not gpus:
        return [DoctorLine("GPU", INFO, "none: OpenACC regions run on the host (gcc builds for the host)")]
    return [DoctorLine("GPU", OK, f"{g.name}, compute capability {g.compute_capability}, driver {g.driver}")
            for g in gpus]


def _cupti() -> list[DoctorLine]:
    """The built-in profiler's needs, found the way the profiler finds them."""
    found = find_cupti()
    if isinstance(found, str):
        return [DoctorLine("CUPTI", MISSING, found.split(": ")[0] + ": no built-in profiler",
                     found.split(": ", 1)[-1])]
    return [DoctorLine("CUPTI", OK, f"{found.include / 'cupti.h'}, {found.lib / 'libcupti.so'} "
                              f"(built-in profiler; CUDA in {found.root})")]


def _tool(topic: str, command: str, fix: str, missing_status: str = MISSING) -> DoctorLine:
    path = shutil.which(command)
    if path is None:
        return DoctorLine(topic, missing_status, f"{command} not found", fix)
    r = proc.capture([path, "--version"], what="doctor")
    first = next((ln.strip() for ln in r.output.splitlines() if ln.strip()), "version unknown")
    return DoctorLine(topic, OK, f"{path}: {first}")


def _slurm() -> list[DoctorLine]:
    srun = shutil.which("srun")
    if srun is None:
        return [DoctorLine("SLURM", INFO, "srun not found: programs run on this machine",
                     "on a cluster: run idrrun on a login node and set [launcher] kind = \"srun\"")]
    r = proc.capture([shutil.which("sinfo") or "sinfo", "-h", "-o", "%P %a %D %t"], what="doctor")
    if not r.ok:
        return [DoctorLine("SLURM", WARN, f"srun found but sinfo failed ({r.describe()})",
                     "is slurmctld running? (systemctl status slurmctld)")]
    parts = ", ".join(r.output.split("\n")[:3]).strip(", ")
    return [DoctorLine("SLURM", OK, f"{srun}; partitions: {parts}")]


def diagnose(settings: Settings) -> Report:
    lines: list[DoctorLine] = []
    active, source = select_family(settings, None)
    lines.append(DoctorLine("family", INFO, f"{active} ({source}; known: {', '.join(registry.names())})"))
    for family in registry.families():
        lines += family.doctor(settings, family.name == active)
    lines += _gpus()
    lines += _cupti()
    lines.append(_tool("nsys", "nsys", "install NVIDIA Nsight Systems (or the HPC SDK); "
                       "without it --profile uses the built-in tracer", INFO))
    lines.append(_tool("MPI", "mpirun", "apt-get install openmpi-bin libopenmpi-dev"))
    lines += _slurm()
    protections = isolation.probe(settings.cache_dir)
    lines.append(DoctorLine("protections", OK if not protections.notes else WARN, protections.describe(),
                      "; ".join(protections.notes)))
    files = ", ".join(settings.files) or "none (built-in defaults)"
    lines.append(DoctorLine("config files", INFO, files))
    return Report(tuple(lines))
