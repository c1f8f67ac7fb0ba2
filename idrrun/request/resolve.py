"""The one place where what was typed becomes a RunRequest and its Toolchain.

Precedence, lowest first, applied here and nowhere else:

    RunRequest's own defaults (model.py)
    < the settings (config files, then IDRRUN_* variables; request/config.py)
    < the exercise (its timeout; its arguments for the target the toolchain builds for)
    < the line (%%idrrun flags, `idrrun run` flags)
    < the grader's policy, when grading (request/policy.py: what it keeps of a student's line,
      its time limit, its box, its room)

Requests are derived from a resolved one in three named ways only, all here: the same request
for the exercise's solution (`for_solution`), with other program arguments (`with_args`, a
hidden argument set), and the same build run with its regions on the host (`on_host`).

A flag reaches its RunRequest field by name (or by its FlagSpec.to, e.g. "limits.memory"), so
a new flag needs no code here. The exercise's compiler options come before the line's: both
are used, the line's last so that it can override one of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..checks.specs import Exercise
from ..model import Limits, Probe, RunRequest, Settings, Source, Toolchain
from .. import toolchains
from . import unused
from .options import NO_LIMIT, SAME, Options, specs
from .policy import Policy


def _layered(options: Options, settings: Settings, exercise: Exercise | None) -> dict[str, Any]:
    """{RunRequest path: value} from the three layers, the highest one winning per field."""
    exercise_layer: dict[str, Any] = {}
    if exercise is not None:
        exercise_layer = {"timeout": exercise.timeout, "check": exercise.name,
                          "mpi_ranks": exercise.ranks}
        if exercise.model == "openmp":
            exercise_layer["openmp"] = True
    out: dict[str, Any] = {}
    for name, spec in specs():
        target = name if spec.to == SAME else spec.to
        if target is None:
            continue
        for layer in (getattr(options, name), exercise_layer.get(name), settings.values.get(name)):
            if layer is not None:
                out[target] = layer
                break
    return out


def _value(target: str, value: Any, workdir: Path) -> Any:
    if value == NO_LIMIT and target.startswith("limits."):
        return None  # "--memory none": no limit at all
    if isinstance(value, Path) and not value.is_absolute():
        return workdir / value  # a file on the line is relative to where the program runs
    return value


def build_request(options: Options, source: Source, workdir: Path, settings: Settings,
                  exercise: Exercise | None = None) -> RunRequest:
    """The request without its toolchain-dependent part (the exercise's arguments)."""
    values = _layered(options, settings, exercise)
    top: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for target, value in values.items():
        value = _value(target, value, workdir)
        if target.startswith("limits."):
            limits[target.split(".", 1)[1]] = value
        else:
            top[target] = value
    if exercise is not None:
        top["compiler_options"] = exercise.options + tuple(top.get("compiler_options", ()))
        top["compare_host"] = exercise.compares_host
    if top.get("object_only"):
        top["execute"] = False
    return RunRequest(source=source, workdir=workdir, limits=dataclasses.replace(Limits(), **limits),
                      **top)


def resolve(options: Options, source: Source, workdir: Path, settings: Settings, probe: Probe,
            exercise: Exercise | None = None,
            policy: Policy | None = None) -> tuple[RunRequest, Toolchain]:
    """The request, every layer applied, and the toolchain that builds it (resolved once); the
    options of the line written for another family's compilers read by this one (the IDRIS
    notebooks' nvc options on gcc: Family.translate); its notes say what became of them, and
    which flags of the line can do nothing for it (unused.py)."""
    line = options if policy is None else policy.line(options)
    completed = line if policy is None else policy.options(line)
    request = build_request(completed, source, workdir, settings, exercise)
    translation = toolchains.translate(request, probe, settings)
    request = translation.request
    toolchain = toolchains.toolchain_for(request, probe, settings, translation)
    if exercise is not None and completed.program_args is None:
        args = exercise.gpu_args if toolchain.target == "gpu" else exercise.host_args
        request = dataclasses.replace(request, program_args=args)
    if exercise is not None and line.timeout is None:
        # The exercise's limit relative to the solution's time is part of its time limit: a
        # --timeout on the student's line replaces both (she asked to let it run). A grader's
        # --timeout is not the line's: it caps the relative limit (RelativeTimeout.limit).
        request = dataclasses.replace(request, relative_timeout=exercise.relative_timeout)
    if policy is not None:
        request = policy.apply(request, toolchain, line)
    elif request.profile is None and request.execute:
        traced = checks_trace(exercise, toolchain, probe, settings.profiler)
        if traced is not None:
            request = dataclasses.replace(request, profile=traced, show_profile=False)
    unused_notes = unused.notes(line, request, settings)
    if unused_notes:
        toolchain = dataclasses.replace(toolchain, notes=toolchain.notes + unused_notes)
    return request, toolchain


def checks_trace(exercise: Exercise | None, toolchain: Toolchain, probe: Probe,
                 profiler: Sequence[str] = ()) -> str | None:
    """The profiler that collects the GPU trace an exercise's checks read (ran_on_gpu, queues,
    data_moved, gpu_busy) when the line asks for no profile; None when none is needed or none
    can say anything: no such check, a build for the host, or no GPU on this machine. The
    trace is the checks' own: collected whether or not the student asked for --profile, which
    decides only whether the profile is shown. The built-in tracer (light: it records the
    GPU's activity and nothing else), or nsys where one is configured ([profiler] command)."""
    if exercise is None or not exercise.needs_trace or toolchain.target != "gpu" or not probe.gpus:
        return None
    return "auto" if profiler else "builtin"


def for_solution(request: RunRequest, source: Source, workdir: Path,
                 room: Path | None = None, profile: str | None = None) -> RunRequest:
    """The same request (the same toolchain, arguments and policy) for the exercise's solution
    `source`, run in `workdir` (a graded one in its own `room`): nothing of the student's own
    (a kept copy, files to get, a forced build) comes along, nor a profile unless `profile`
    asks for one (its trace beside the student's), and nothing of it is timed (its output is
    compared, not its speed). Its profile is drawn (its timeline is kept beside its output for
    a later run's comparison, and it is computed once), though shown to nobody."""
    return dataclasses.replace(request, source=source, workdir=workdir, room=room, keep=None,
                               force=False, get_files=(), profile=profile, execute=True,
                               object_only=False, timed=False, show_profile=True)


def with_args(request: RunRequest, args: tuple[str, ...], hidden: bool = False) -> RunRequest:
    """The same request run with other arguments (a hidden argument set, when `hidden`: no
    other box runs beside it where boxes see each other's command lines): without its profile
    (the trace checks, timed ones included, are for the public run) nor a kept copy."""
    return dataclasses.replace(request, program_args=args, keep=None, profile=None, timed=False,
                               hidden_args=hidden)


def on_host(request: RunRequest) -> RunRequest:
    """The same request (the same build) run with its compute regions on the host, for the
    agrees_with_host check: without a profile, a kept copy nor files to get; never timed."""
    return dataclasses.replace(request, run_on_host=True, profile=None, keep=None, get_files=(),
                               timed=False)
