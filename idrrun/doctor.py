"""`idrrun doctor`: what this machine offers for the course, each line OK or not with its fix."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import isolation, proc, toolchains
from .config import Settings
from .toolchains import FAMILIES, OFFLOAD_INSTALL_HINT

OK, MISSING, WARN, INFO = "OK", "missing", "warning", "info"

_OFFLOAD_TEST = "int main(void){ int x = 0;\n#pragma acc parallel copy(x)\nx = 1;\nreturn !x; }\n"


@dataclass(frozen=True)
class Line:
    topic: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Report:
    lines: tuple[Line, ...]

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
        import html

        colors = {OK: "#1a7f37", MISSING: "#cf222e", WARN: "#9a6700", INFO: "#6e7781"}
        rows = "".join(
            f"<tr><td>{html.escape(line.topic)}</td>"
            f"<td style='color:{colors[line.status]};font-weight:bold'>{line.status}</td>"
            f"<td>{html.escape(line.detail)}</td><td><code>{html.escape(line.fix)}</code></td></tr>"
            for line in self.lines
        )
        return ("<table><thead><tr><th>what</th><th>state</th><th>detail</th><th>fix</th></tr>"
                f"</thead><tbody>{rows}</tbody></table>")


def _compilers(settings: Settings, active: str) -> list[Line]:
    lines = []
    for family in FAMILIES.values():
        for language in ("c", "fortran"):
            command = toolchains.compiler_command(family.name, language, settings)
            info = toolchains.probe_compiler(command)
            topic = f"compiler {family.name} {language}"
            if info.path:
                lines.append(Line(topic, OK, f"{info.path}: {info.version or 'version unknown'}"))
            elif family.name == "pgi":
                lines.append(Line(topic, INFO, f"{command} not found (PGI is the old name of nvhpc)"))
            else:
                # Only the family in use must be complete; the others are options.
                status = MISSING if family.name == active else INFO
                lines.append(Line(topic, status, f"{command} not found", family.install_hint))
    return lines


def _gcc_offload(settings: Settings) -> list[Line]:
    gcc = toolchains.probe_compiler(toolchains.compiler_command("gcc", "c", settings))
    if gcc.path is None:
        return []
    if not toolchains.gcc_has_offload(gcc.path):
        return [Line("gcc offloading", MISSING, "no nvptx offload compiler: OpenACC runs on the host",
                     OFFLOAD_INSTALL_HINT)]
    with tempfile.TemporaryDirectory(prefix="idrrun-doctor-") as tmp:
        src = Path(tmp) / "t.c"
        src.write_text(_OFFLOAD_TEST)
        r = proc.run([gcc.path, "-fopenacc", "-foffload=nvptx-none",
                      "-foffload-options=nvptx-none=-misa=sm_80 -lm", "-o", str(Path(tmp) / "t"), str(src)],
                     what="doctor", timeout=60, cwd=Path(tmp))
    if r.ok:
        return [Line("gcc offloading", OK, "nvptx-none: a test build for sm_80 links")]
    last = r.output.strip().splitlines()[-1:] or [r.describe()]
    return [Line("gcc offloading", WARN, f"offload compiler present but a test build failed: {last[0]}",
                 "check CUDA's ptxas on PATH and the libgomp-plugin-nvptx1 package")]


def _gpus() -> list[Line]:
    gpus, warning = toolchains.probe_gpus()
    if warning:
        return [Line("GPU", WARN, warning, "check the NVIDIA driver (nvidia-smi)")]
    if not gpus:
        return [Line("GPU", INFO, "none: OpenACC regions run on the host (gcc builds for the host)")]
    return [Line("GPU", OK, f"{g.name}, compute capability {g.compute_capability}, driver {g.driver}")
            for g in gpus]


def _cupti() -> list[Line]:
    """The built-in profiler's needs, found the way the profiler finds them."""
    from .profile import find_cupti

    found = find_cupti()
    if isinstance(found, str):
        return [Line("CUPTI", MISSING, found.split(": ")[0] + ": no built-in profiler",
                     found.split(": ", 1)[-1])]
    return [Line("CUPTI", OK, f"{found.include / 'cupti.h'}, {found.lib / 'libcupti.so'} "
                              f"(built-in profiler; CUDA in {found.root})")]


def _tool(topic: str, command: str, fix: str, missing_status: str = MISSING) -> Line:
    path = shutil.which(command)
    if path is None:
        return Line(topic, missing_status, f"{command} not found", fix)
    r = proc.capture([path, "--version"], what="doctor")
    first = next((ln.strip() for ln in r.output.splitlines() if ln.strip()), "version unknown")
    return Line(topic, OK, f"{path}: {first}")


def _slurm() -> list[Line]:
    srun = shutil.which("srun")
    if srun is None:
        return [Line("SLURM", INFO, "srun not found: programs run on this machine",
                     "on a cluster: run idrrun on a login node and set [launcher] kind = \"srun\"")]
    r = proc.capture([shutil.which("sinfo") or "sinfo", "-h", "-o", "%P %a %D %t"], what="doctor")
    if not r.ok:
        return [Line("SLURM", WARN, f"srun found but sinfo failed ({r.describe()})",
                     "is slurmctld running? (systemctl status slurmctld)")]
    parts = ", ".join(r.output.split("\n")[:3]).strip(", ")
    return [Line("SLURM", OK, f"{srun}; partitions: {parts}")]


def diagnose(settings: Settings) -> Report:
    lines: list[Line] = []
    family, source = toolchains.detect_family(settings, None)
    lines.append(Line("family", INFO, f"{family} ({source}; nvhpc when nvc is on PATH, else gcc)"))
    lines += _compilers(settings, family)
    lines += _gcc_offload(settings)
    lines += _gpus()
    lines += _cupti()
    lines.append(_tool("nsys", "nsys", "install NVIDIA Nsight Systems (or the HPC SDK); "
                       "without it --profile uses the built-in tracer", INFO))
    lines.append(_tool("MPI", "mpirun", "apt-get install openmpi-bin libopenmpi-dev"))
    lines += _slurm()
    protections = isolation.probe(settings.cache_dir)
    lines.append(Line("protections", OK if not protections.notes else WARN, protections.describe(),
                      "; ".join(protections.notes)))
    files = ", ".join(settings.files) or "none (built-in defaults)"
    lines.append(Line("config files", INFO, files))
    return Report(tuple(lines))
