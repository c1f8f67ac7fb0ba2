"""The run command: launcher (mpirun/srun), profiler, program, arguments, environment."""

from __future__ import annotations

import math
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolNotFound
from ..model import LauncherConfig, RunRequest, Settings


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    notes: tuple[str, ...] = ()
    # After a run that did not end well: the command that removes what the launcher left on the
    # cluster (a SLURM job step), and one that lists it (empty output: nothing left).
    cancel: tuple[str, ...] = ()
    remaining: tuple[str, ...] = ()
    # How many leading words of argv must run outside a sandbox (srun talks to the cluster;
    # its tasks start the box on their node). mpirun runs inside, with its ranks.
    outer_count: int = 0

    @property
    def outer(self) -> tuple[str, ...]:
        return self.argv[:self.outer_count]

    @property
    def inner(self) -> tuple[str, ...]:
        return self.argv[self.outer_count:]


def _flag(flag: str, value: int) -> tuple[str, ...]:
    """IDRIS site files write "--ntasks=" (glued) or "-np" (separate word)."""
    if not flag:
        return ()
    return (f"{flag}{value}",) if flag.endswith(("=", ":")) else (flag, str(value))


def launcher_for(request: RunRequest, settings: Settings) -> LauncherConfig | None:
    launcher = settings.launcher
    if launcher.kind == "none":
        if request.mpi_ranks is None:
            return None
        return LauncherConfig(kind="mpirun", command="mpirun", tasks="-np")
    if not launcher.command:
        default = {"mpirun": ("mpirun", "-np"), "srun": ("srun", "--ntasks=")}[launcher.kind]
        return LauncherConfig(kind=launcher.kind, command=default[0],
                              tasks=launcher.tasks or default[1], threads=launcher.threads,
                              gpus=launcher.gpus, options=launcher.options)
    return launcher


def command(
    request: RunRequest, executable: Path, settings: Settings, base_env: Mapping[str, str],
    profiler_prefix: tuple[str, ...] = (), profiler_env: Mapping[str, str] | None = None,
) -> Launch:
    """argv and environment of the run; base_env already holds what the build needs (the
    family's run environment)."""
    env = dict(base_env)
    notes: list[str] = []
    argv: list[str] = []
    cancel: tuple[str, ...] = ()
    remaining: tuple[str, ...] = ()
    outer_count = 0
    if request.threads is not None:
        env["OMP_NUM_THREADS"] = str(request.threads)
    launcher = launcher_for(request, settings)
    if launcher is not None:
        words = launcher.command.split()
        exe = shutil.which(words[0])
        if exe is None:
            hint = "apt-get install openmpi-bin" if launcher.kind == "mpirun" else "run on a SLURM login node"
            raise ToolNotFound(f"launcher '{words[0]}' not found on PATH: {hint}")
        argv += [exe, *words[1:], *launcher.options]
        argv += _flag(launcher.tasks, request.mpi_ranks or 1)
        if request.threads is not None:
            argv += _flag(launcher.threads, request.threads)
        if request.gpus is not None:
            argv += _flag(launcher.gpus, request.gpus)
        if launcher.kind == "srun":
            # A name to find the step again: an interrupt or timeout must not leave it running
            # on the cluster. The limit goes to SLURM too; idrrun enforces it locally as well.
            name = f"idrrun-{uuid.uuid4().hex[:12]}"
            minutes = max(1, math.ceil(request.timeout / 60))
            argv += [f"--job-name={name}", f"--time={minutes}", "--unbuffered"]
            outer_count = len(argv)
            cancel = ("scancel", "--full", "--name", name)
            remaining = ("squeue", "--noheader", "--name", name)
            # Remote tasks write to a pipe, not a terminal: ask stdio and gfortran for lines.
            env.setdefault("GFORTRAN_UNBUFFERED_PRECONNECTED", "y")
            stdbuf = shutil.which("stdbuf")
            if stdbuf:
                argv += [stdbuf, "-oL", "-eL"]
        if launcher.kind == "mpirun":
            # Open MPI refuses root and more ranks than cores unless told; course containers
            # run as root and laptops have few cores. Set both Open MPI 4 and 5 spellings.
            if os.geteuid() == 0:
                env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
                env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
            env.setdefault("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe")
    elif request.gpus is not None:
        notes.append("-g/--gpus only applies with a launcher (srun); ignored")
    # After the launcher, before the program: one profile per task under srun or mpirun.
    argv += profiler_prefix
    env.update(profiler_env or {})
    argv += [str(executable), *request.program_args]
    return Launch(argv=tuple(argv), env=env, notes=tuple(notes), cancel=cancel, remaining=remaining,
                  outer_count=outer_count)
