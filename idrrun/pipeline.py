"""The one pipeline behind %%idrrun, %idrrunfile, `idrrun run` and grading.

    RunRequest -> Toolchain -> BuildResult -> RunResult (-> Verdict, grading/checked.py)

Front ends resolve the RunRequest and its Toolchain (request/resolve.py), make a Reporter
(display.py) and call `execute`. Expected failures come back in Outcome.failure, as a
FailureKind; only misconfiguration raises (errors.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from . import build as build_mod
from .model import (
    BuildResult,
    Failure,
    FailureKind,
    Outcome,
    Preprocessing,
    Probe,
    RunRequest,
    RunResult,
    Settings,
    Toolchain,
    Verdict,
)
from .profile import regions
from .profile import session as profile
from .profile.model import ProfileReport
from .errors import UsageError
from .run import isolation, launch, proc, sandbox
from .run.sandbox import Box
from .toolchains import family_of


PROFILE_DIR = "idrrun-profile"  # profiled runs keep their report here, in the working directory
NSYS_GRACE = 60.0


class Reporter(Protocol):
    """What the front end shows while the pipeline runs."""

    def started(self, request: RunRequest, toolchain: Toolchain) -> None: ...
    def notes(self, notes: Sequence[str]) -> None: ...
    def built(self, request: RunRequest, result: BuildResult) -> None: ...
    def output(self, text: str) -> None: ...
    def ran(self, request: RunRequest, result: RunResult) -> None: ...
    def profile(self, report: ProfileReport) -> None: ...
    def verdict(self, verdict: Verdict) -> None: ...


_SIGNAL_HINTS = {
    "SIGSEGV": "the program touched memory it does not own: check array bounds, and on a GPU "
               "that every array used in a compute region is in a data clause",
    "SIGBUS": "bad memory access: check array bounds and alignment",
    "SIGFPE": "arithmetic error, e.g. an integer division by zero",
    "SIGABRT": "the program aborted: read the runtime's message above (assert, double free, "
               "OpenACC runtime error)",
    "SIGKILL": "killed from outside: out of memory, or a limit was reached",
    "SIGILL": "illegal instruction: built for another processor?",
}


_LIMIT_HINTS = {
    "memory": "the program used more memory than allowed ([limits] memory in the config, "
              "--memory on the line); check the sizes it allocates",
    "tasks": "the program started too many processes or threads (a fork in a loop?); the limit "
             "is [limits] tasks, --tasks",
    "file size": "the program wrote a file larger than allowed ([limits] file_size, --file-size); "
                 "the truncated file was removed",
    "disk": "the program wrote too much in its folder (a sandboxed run may leave 1 GiB and "
            "20 000 files at most)",
}


def compile_failure(result: BuildResult, request: RunRequest) -> Failure:
    p = result.proc
    assert p is not None
    if p.timed_out:
        kind = FailureKind.COMPILE_TIMEOUT
        what = f"compile timeout after {request.compile_timeout:g} s"
        hint = ("the compiler ran past compile_timeout: look for an #include of the file itself "
                "or a huge generated source")
    elif p.start_error is not None:
        kind, what, hint = FailureKind.NOT_STARTED, p.describe(), "is the compiler installed and executable?"
    elif p.interrupted:
        kind, what, hint = FailureKind.INTERRUPTED, "interrupted", "the build was interrupted"
    else:
        kind, what = FailureKind.COMPILE_ERROR, p.describe()
        hint = (f"fix the first error above; line numbers are those of {request.source.name}"
                if p.returncode else "the compiler produced no output file")
    return Failure(kind=kind, what=what, command=result.command, output=result.output, hint=hint,
                   compile_step=True)


def run_failure(result: RunResult, request: RunRequest) -> Failure | None:
    p = result.proc
    if p.ok and not result.missing_files:
        return None
    limit = p.limit
    if p.start_error is not None:
        kind, what = FailureKind.NOT_STARTED, p.describe()
        hint = "the program or its launcher could not be started"
    elif p.interrupted:
        kind, what = FailureKind.INTERRUPTED, "interrupted"
        hint = "the run was interrupted; its output so far is kept above"
    elif p.limit is not None:
        kind, what = FailureKind.LIMIT, f"{p.limit} limit reached"
        if p.timed_out:
            kind, what = FailureKind.TIMEOUT, what + f", then timed out after {request.timeout:g} s"
        hint = _LIMIT_HINTS.get(p.limit, "the program went past a limit of the run")
    elif p.timed_out:
        kind, what = FailureKind.TIMEOUT, f"timed out after {request.timeout:g} s"
        hint = ("the program ran past --timeout: an endless loop, or a wait on something that "
                "never comes? If it really needs longer, raise --timeout")
    elif p.signal_name is not None:
        kind, what = FailureKind.SIGNAL, f"killed by {p.signal_name}"
        hint = _SIGNAL_HINTS.get(p.signal_name, "the program was stopped by a signal")
    elif p.returncode != 0:
        kind, what = FailureKind.EXIT_STATUS, f"exit code {p.returncode}"
        hint = "the program returned a non-zero status, which means failure"
    else:
        kind, what = FailureKind.MISSING_FILES, "missing output files"
        hint = f"--get named files the program did not write: {', '.join(result.missing_files)}"
    return Failure(kind=kind, what=what, command=result.command, output=p.output, hint=hint,
                   limit=limit)


def execute(
    request: RunRequest,
    toolchain: Toolchain,
    probe: Probe,
    settings: Settings,
    reporter: Reporter,
    environ: Mapping[str, str] | None = None,
) -> Outcome:
    """Build and run one resolved request; every expected failure is in the Outcome."""
    family = family_of(toolchain)
    reporter.started(request, toolchain)
    notes = list(probe.warnings) + list(toolchain.notes)
    reporter.notes(notes)
    if request.keep:
        build_mod.write_atomic(request.workdir / request.keep, request.source.text)
    environ = os.environ if environ is None else environ
    support = isolation.sandbox_support() if request.sandbox else None
    if support is not None and support.level == "none":
        raise UsageError(f"a sandbox was asked for ([sandbox] mode, --sandbox, or grading) but "
                         f"{support.why}")
    # One fresh user per graded request, as root: its compile and run are its own, nobody else's.
    uid = sandbox.fresh_uid() if support is not None and support.root and request.own_uid else -1
    if uid >= 0:
        sandbox.give(Box(workdir=request.workdir, writable=(request.workdir,), uid=uid, gid=uid))
    preprocess = family.preprocess(toolchain, build_mod.source_file_name(request.source),
                                   build_mod.product_name(request)) if request.check is not None else Preprocessing()
    via = launch.compile_launch(request, settings, environ)
    built = build_mod.build(request, toolchain, settings.cache_dir, probe.protections, preprocess, uid,
                            launcher=via.launcher if via is not None else (),
                            env=via.env if via is not None else None)
    if via is not None:
        nodes, placed = launch.after(via, built.proc)
        built = dataclasses.replace(built, nodes=nodes)
        reporter.notes(placed)
        notes += placed
    reporter.built(request, built)
    if not built.ok:
        return Outcome(request, toolchain, built, None, compile_failure(built, request), notes=tuple(notes))
    if request.object_only:
        assert built.object_file is not None
        dest = request.workdir / build_mod.object_name(request)
        shutil.copyfile(built.object_file, dest)
        reporter.notes([f"object file: {dest}"])
        return Outcome(request, toolchain, built, None, None, notes=tuple(notes))
    if not request.execute:
        return Outcome(request, toolchain, built, None, None, notes=tuple(notes))
    assert built.executable is not None
    executable = built.executable
    if uid >= 0:
        # The box's own user cannot reach the (private) build cache: a copy in its own folder.
        executable = request.workdir / ".idrrun-prog"
        shutil.copy2(built.executable, executable)
        os.chown(executable, uid, uid)
    pplan = None
    if request.profile is not None:
        label = Path(request.keep).stem if request.keep else Path(request.source.name).stem
        pplan = profile.plan(request.profile, profile.new_run_dir(request.workdir / PROFILE_DIR, label),
                             settings.cache_dir, nsys_command=settings.profiler)
        reporter.notes(pplan.notes)
        notes += pplan.notes
    counting = regions.plan(request, settings.cache_dir, uid)  # checked OpenACC runs
    base_env = {**environ, **family.run_env(request, toolchain), **counting.env}
    how = launch.command(request, executable, settings, base_env,
                         pplan.argv_prefix if pplan is not None else (),
                         pplan.env if pplan is not None else None)
    reporter.notes(how.notes)
    notes += how.notes
    # nsys writes its report after the program ends: give it time beyond the program's limit.
    extra = NSYS_GRACE if pplan is not None and pplan.kind == "nsys" else 0.0
    box = None
    if support is not None:
        readable = [executable, *counting.readable]
        if pplan is not None and pplan.argv_prefix:
            # A profiler installed outside the system folders (nsys in an SDK): its own folder.
            tool = Path(pplan.argv_prefix[0]).resolve().parent.parent
            if not sandbox.in_system_dirs(tool):
                readable.append(tool)
        profiler_env = dict(pplan.env) if pplan is not None else {}
        if "CUDA_INJECTION64_PATH" in profiler_env:
            tracer = Path(profiler_env["CUDA_INJECTION64_PATH"])
            tracer = sandbox.shared_copy(tracer) if uid >= 0 else tracer
            profiler_env["CUDA_INJECTION64_PATH"] = str(tracer)
            readable.append(tracer)
        box = Box(workdir=request.workdir, writable=(request.workdir,), readable=tuple(readable),
                  hidden=(*request.hide, settings.cache_dir),
                  env=sandbox.clean_env(how.env, {**profiler_env, **counting.env}),
                  gpu=family.gpu_context(toolchain), uid=uid, gid=uid, support=support,
                  disk_caps=request.own_uid)
    shown = profile.output_filter(pplan, reporter.output)  # nsys's progress bars: one line
    followed = profile.follower(pplan)  # the built-in tracer's file, read as it is written
    with followed or contextlib.nullcontext():
        p = proc.run(how.program if box is not None else how.argv, what="run",
                     timeout=request.timeout + extra, cwd=request.workdir, env=how.env,
                     on_output=shown, terminal=True, max_output=request.max_output,
                     protections=probe.protections, limits=request.limits,
                     gpu_run=family.gpu_context(toolchain), box=box,
                     outer=how.launcher if box is not None else ())
    shown.finish()
    if p.notes:
        reporter.notes(p.notes)
        notes += p.notes
    nodes, placed = launch.after(how, p)
    if len(nodes) > 1:
        placed.insert(0, launch.describe_placement(nodes))
    reporter.notes(placed)
    notes += placed
    missing = tuple(f for f in request.get_files if not (request.workdir / f).exists())
    ran = RunResult(command=how.argv, proc=p, missing_files=missing, nodes=nodes,
                    regions=regions.collect(counting, request.workdir, uid, built.executable))
    reporter.ran(request, ran)
    report = None
    if pplan is not None and pplan.kind != "none":
        report = profile.collect(pplan, timeout=120, source_name=request.source.name,
                                 gpu=probe.gpus[0].name if probe.gpus else "", followed=followed)
        reporter.profile(report)
    return Outcome(request, toolchain, built, ran, run_failure(ran, request), notes=tuple(notes),
                   profile=report)

