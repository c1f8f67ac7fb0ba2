"""The grader's policy: one declared layer that request/resolve.py applies last, above what a
student's line asks for (as nbgrader declares its autograde steps in one list).

    Policy(room=..., sandbox=True, hide=..., timeout=...)

What it decides, whatever the line says:
- the line keeps only LINE_FLAGS, the flags request/options.py marks `graded_line` (the model,
  the target, threads, a profile): arguments, limits, time and compiler flags are the grader's,
  so that no submission gives itself more than its classmates;
- OpenACC is on for an OpenACC exercise unless the line turns it off;
- the time limit is the grader's when it gives one (else the exercise's);
- the trace checks are profiled on a GPU build (they need a trace), never on a host one unless
  the line asked for it (a profile there only adds seconds);
- every compile and run is in a box (`sandbox`), in the grader's room for this request
  (`room`, RunRequest.room), the course's folders hidden (`hide`);
- on a machine with GPUs, every run takes a lane (`lanes`, run/lanes.py), alone on its GPU
  when the exercise's checks are timed (`timed`), and the compiles keep off the lanes' CPUs.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from ..model import Lanes, LauncherConfig, RunRequest, Settings, Toolchain
from .options import Options, specs

# What a graded notebook's magic line may set (Options fields).
LINE_FLAGS = frozenset(name for name, spec in specs() if spec.graded_line)


@dataclass(frozen=True)
class Policy:
    room: Path  # the grader's own folder for this request's boxes (run/rooms.py)
    sandbox: bool = True  # False: the course's own files, checked without a box
    hide: tuple[Path, ...] = ()  # folders a box must not see (the course's)
    timeout: float | None = None  # the grader's time limit; None: the exercise's
    openacc: bool = True  # the exercise's model is OpenACC: -a unless the line says otherwise
    profile_traces: bool = False  # the exercise has checks of the GPU's trace
    lanes: Lanes | None = None  # the machine's GPU lanes; None: no GPU, or SLURM places the runs
    timed: bool = False  # the exercise has timed checks (specs.TIMED_KINDS)

    def line(self, options: Options) -> Options:
        """The flags of a student's line that the grader keeps."""
        return Options(**{k: v for k, v in options.given().items() if k in LINE_FLAGS})

    def options(self, line: Options) -> Options:
        """The line as the grader completes it, before the layers are applied."""
        return dataclasses.replace(
            line, acc=self.openacc if line.acc is None else line.acc, timeout=self.timeout,
            profile=line.profile if line.profile is not None else
            ("auto" if self.profile_traces else None))

    def apply(self, request: RunRequest, toolchain: Toolchain, line: Options) -> RunRequest:
        """The fields no line sets: the box, the room, what is hidden, the lanes; and the profile
        dropped from a host build unless the line asked for one."""
        profile = request.profile if toolchain.target == "gpu" or line.profile is not None else None
        compile_limits = request.compile_limits if self.lanes is None else \
            dataclasses.replace(request.compile_limits, cpus=self.lanes.rest)
        return dataclasses.replace(request, sandbox=self.sandbox, room=self.room, hide=self.hide,
                                   profile=profile, lanes=self.lanes, timed=self.timed,
                                   compile_limits=compile_limits)


def grading_settings(settings: Settings, launcher: str | None, jobs: int) -> Settings:
    """The settings a grading runs with: the launcher it was given (srun: its compiles are job
    steps too, and srun's own chatter stays out of the outputs that are checked), and a memory
    cap per program when the configuration gives none: notebooks run without one, but a class
    runs unattended, `jobs` at a time, and together they may take 3/4 of the machine."""
    kind = launcher or settings.launcher.kind
    chosen = settings.launcher
    if launcher is not None:
        chosen = dataclasses.replace(chosen, kind=launcher,
                                     command=chosen.command if launcher == chosen.kind else "")
    if kind == "srun":
        chosen = _grading_srun(chosen)
    values = dict(settings.values)
    if "memory" not in values:
        values["memory"] = grading_memory(jobs)
    return dataclasses.replace(settings, launcher=chosen, values=values)


def _grading_srun(launcher: LauncherConfig) -> LauncherConfig:
    options = launcher.options if "--quiet" in launcher.options else (*launcher.options, "--quiet")
    return dataclasses.replace(launcher, builds=launcher.builds is not False, options=options)


def grading_memory(jobs: int) -> int:
    """Each graded program's memory cap: 3/4 of the machine shared by `jobs` programs, the rest
    left to the grader and the system."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(256 << 20, total * 3 // 4 // max(1, jobs))
