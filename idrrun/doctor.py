"""`idrrun doctor`: what this machine offers for the course, each line OK or not with its fix."""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import specs
from .checks.specs import Exercise
from .errors import MPI_MISSING, IdrrunError, SpecError
from .model import DoctorLine, Settings
from .profile.tracer import find_cupti
from . import resident
from .request import options
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

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        # IPython's text/plain (a terminal, a notebook's plain view, nbconvert to text): the
        # table, not the dataclass.
        p.text(str(self))

    def as_dict(self) -> dict[str, object]:
        """For `idrrun doctor --json`."""
        return {"can_compile": self.can_compile,
                "lines": [{"topic": line.topic, "status": line.status, "detail": line.detail,
                           "fix": line.fix} for line in self.lines]}

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


# What the course's notebooks need beyond a compiler (notebooks/README.md says the same).
NEEDS_MPI = "the -m N cells of notebooks 11_multi_gpu, 13_interop and 16_mandelbrot need MPI"
NEEDS_GPU = ("the checks that read the GPU trace (ran on the GPU, data moved, queues, GPU busy) "
             "need one: here they are INCOMPLETE")


def _gpus() -> list[DoctorLine]:
    gpus, warning = probe_gpus()
    if warning:
        return [DoctorLine("GPU", WARN, warning, "check the NVIDIA driver (nvidia-smi)")]
    if not gpus:
        return [DoctorLine("GPU", INFO, "none: OpenACC regions run on the host (gcc builds for the "
                                        f"host); {NEEDS_GPU}")]
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


def _exercises(settings: Settings, workdir: Path) -> DoctorLine:
    """Where `--check NAME` finds the exercises, from this folder."""
    found = specs.locate_examples(settings, workdir)
    if found is None:
        return DoctorLine("exercises", WARN, "none found: --check NAME and idrrun grade need a course",
                          "idrrun course init DIR (a copy of the course), or examples_dir in "
                          "idrrun.toml / IDRRUN_EXAMPLES")
    try:
        exercises = specs.all_exercises(found.path)
    except SpecError as exc:
        return DoctorLine("exercises", WARN, f"{found.path} ({found.describe()}): {exc}",
                          "fix the spec, or point examples_dir at another course")
    edition = ", students' copy (no solutions)" if any(e.students for e in exercises) else ""
    status = OK if exercises else WARN
    return DoctorLine("exercises", status, f"{len(exercises)} in {found.path} ({found.describe()}"
                                           f"{edition})",
                      "" if exercises else "no *.toml spec there: is it the right folder?")


def _sandbox() -> DoctorLine:
    """The sandbox `idrrun grade` puts each submission in (run/sandbox.py), and how to get the
    full one where it is missing."""
    support = isolation.sandbox_support()
    detail = support.describe().removeprefix("sandbox: ")
    if support.level == "namespaces":
        return DoctorLine("grading sandbox", OK, detail)
    if support.bwrap is None and not shutil.which("bwrap"):
        fix = "apt-get install bubblewrap (dnf install bubblewrap)"
    else:
        fix = ("allow user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
               "user.max_user_namespaces > 0); in a container, run it with --security-opt "
               "seccomp=unconfined --security-opt apparmor=unconfined (docker/README.md)")
    if support.level == "uid":
        return DoctorLine("grading sandbox", WARN, detail, fix)
    return DoctorLine("grading sandbox", MISSING, detail + "; idrrun grade refuses without --unsafe",
                      fix + "; or grade as root (a fresh uid per submission)")


def _resident() -> DoctorLine:
    """The resident `idrrun run` (resident.py): on, off, or impossible here."""
    topic = "resident run"
    if not resident.enabled():
        return DoctorLine(topic, INFO, f"off ({resident.ENV_SWITCH}=0): every `idrrun run` starts "
                                       "Python and imports idrrun (0.2-0.4 s)")
    folder = resident.socket_folder()
    if folder is None:
        path = resident.folder_path()
        return DoctorLine(topic, WARN, f"{path} is not a folder only you can enter: every `idrrun "
                                       "run` starts Python and imports idrrun (0.2-0.4 s)",
                          f"remove {path} if it is yours (idrrun makes it again, private), or "
                          "set XDG_RUNTIME_DIR to a folder of your own")
    running = Path(folder, resident.key() + ".sock").exists()
    state = ("a server for this environment is running" if running
             else "two `idrrun run` within two minutes start a server for the calls after them")
    return DoctorLine(topic, OK, f"on: {state} (sockets and logs in {folder}; "
                                 f"{resident.ENV_SWITCH}=0 turns it off)")


@dataclass(frozen=True)
class CourseNeeds:
    """What the course's notebooks need beyond a compiler, by notebook name (`11_multi_gpu`,
    the C and the Fortran one together)."""

    mpi: tuple[str, ...]  # a cell runs its program on MPI ranks (-m N, or its exercise's ranks)
    gpu: tuple[str, ...]  # a cell checks an exercise whose checks read the GPU trace


# The magics that run a program, and whether their line names a file.
_MAGICS = (("%%idrrun", False), ("%idrrunfile", True))


def _magic_lines(path: Path) -> Iterator[options.Options]:
    """The options of every idrrun cell of a notebook (a line that does not parse is left out:
    the cell says what is wrong with it when it runs)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return
    for cell in cells:
        text = cell.get("source", "") if isinstance(cell, dict) else ""
        first = ("".join(text) if isinstance(text, list) else str(text)).lstrip().split("\n", 1)[0]
        for magic, with_file in _MAGICS:
            if first.startswith(magic + " ") or first == magic:
                try:
                    opts = options.parse_line(first[len(magic):], prog=magic, with_file=with_file,
                                              show_help=False)
                except IdrrunError:
                    continue
                if opts is not None:
                    yield opts


def course_needs(notebooks: Path, exercises: Mapping[str, Exercise]) -> CourseNeeds:
    """Which notebooks of the course in `notebooks` need MPI, and which a GPU for their checks."""
    mpi: set[str] = set()
    gpu: set[str] = set()
    for path in sorted(notebooks.rglob("*.ipynb")):
        for opts in _magic_lines(path):
            exercise = exercises.get(opts.check) if opts.check else None
            if opts.mpi_ranks is not None or (exercise is not None and exercise.ranks):
                mpi.add(path.stem)
            # What the notebook's --check evaluates: not the checks grading alone runs.
            if exercise is not None and exercise.without_grading_only().needs_trace:
                gpu.add(path.stem)
    return CourseNeeds(tuple(sorted(mpi)), tuple(sorted(gpu)))


def _needs(settings: Settings, workdir: Path, has_gpu: bool) -> list[DoctorLine]:
    """What the course's notebooks need, up front: MPI for those with cells on MPI ranks, a GPU
    for the checks that read its trace; each OK here or not, and how to get it."""
    found = specs.locate_examples(settings, workdir)
    notebooks = found.path.parent / "notebooks" if found is not None else None
    if notebooks is None or not notebooks.is_dir():
        return []
    try:
        exercises = {e.name: e for e in specs.all_exercises(found.path)} if found else {}
    except SpecError:
        exercises = {}
    needs = course_needs(notebooks, exercises)
    lines: list[DoctorLine] = []
    if needs.mpi:
        missing = [tool for tool in ("mpirun", "mpicc") if shutil.which(tool) is None]
        which = ", ".join(needs.mpi)
        if missing:
            lines.append(DoctorLine("notebooks: MPI", MISSING,
                                    f"{which} run cells on MPI ranks (-m N): {' and '.join(missing)} "
                                    "not found", MPI_MISSING))
        else:
            lines.append(DoctorLine("notebooks: MPI", OK, f"{which} run cells on MPI ranks (-m N)"))
    if needs.gpu:
        which = ", ".join(needs.gpu)
        if has_gpu:
            lines.append(DoctorLine("notebooks: GPU", OK, f"{which} check what ran on the GPU"))
        else:
            lines.append(DoctorLine(
                "notebooks: GPU", INFO,
                f"{which} check what ran on the GPU: without one those checks are n/a here "
                "(the rest of each exercise is checked)",
                "a machine with an NVIDIA GPU and its driver (the course's) evaluates them all"))
    return lines


def diagnose(settings: Settings, workdir: Path | None = None) -> Report:
    lines: list[DoctorLine] = []
    active, source = select_family(settings, None)
    lines.append(DoctorLine("family", INFO, f"{active} ({source}; known: {', '.join(registry.names())})"))
    for family in registry.families():
        lines += family.doctor(settings, family.name == active)
    gpus = _gpus()
    lines += _needs(settings, workdir or Path.cwd(), any(g.status == OK for g in gpus))
    lines += gpus
    lines += _cupti()
    lines.append(_tool("nsys", "nsys", "install NVIDIA Nsight Systems (or the HPC SDK); "
                       "without it --profile uses the built-in tracer", INFO))
    lines.append(_tool("MPI", "mpirun", f"apt-get install openmpi-bin libopenmpi-dev ({NEEDS_MPI})"))
    lines += _slurm()
    protections = isolation.probe(settings.cache_dir)
    lines.append(DoctorLine("protections", OK if not protections.notes else WARN, protections.describe(),
                      "; ".join(protections.notes)))
    lines.append(_sandbox())
    lines.append(_resident())
    files = ", ".join(settings.files) or "none (built-in defaults)"
    lines.append(DoctorLine("config files", INFO, files))
    lines.append(_exercises(settings, workdir or Path.cwd()))
    return Report(tuple(lines))
