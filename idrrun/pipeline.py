"""The one pipeline behind %%idrrun, %idrrunfile and `idrrun run`.

    RunRequest -> Toolchain -> BuildResult -> RunResult (-> Verdict, checks.py)

Front ends build the RunRequest and a Reporter (display.py) and call `execute`. Expected
failures come back in Outcome.failure; only misconfiguration raises (errors.py).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from . import build as build_mod
from . import launch, proc, profile, toolchains
from .config import Settings
from .model import BuildResult, Failure, Outcome, Probe, RunRequest, RunResult, Source, Toolchain
from .options import NO_LIMIT, Options


PROFILE_DIR = "idrrun-profile"  # profiled runs keep their report here, in the working directory
NSYS_GRACE = 60.0


class Reporter(Protocol):
    """What the front end shows while the pipeline runs."""

    def started(self, request: RunRequest, toolchain: Toolchain) -> None: ...
    def notes(self, notes: Sequence[str]) -> None: ...
    def built(self, request: RunRequest, result: BuildResult) -> None: ...
    def output(self, text: str) -> None: ...
    def ran(self, request: RunRequest, result: RunResult) -> None: ...
    def profile(self, report: profile.ProfileReport) -> None: ...


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
}


def compile_failure(result: BuildResult, request: RunRequest) -> Failure:
    p = result.proc
    assert p is not None
    if p.timed_out:
        what = f"compile timeout after {request.compile_timeout:g} s"
        hint = ("the compiler ran past compile_timeout: look for an #include of the file itself "
                "or a huge generated source")
    elif p.start_error is not None:
        what = p.describe()
        hint = "is the compiler installed and executable?"
    elif p.interrupted:
        what, hint = "interrupted", "the build was interrupted"
    else:
        what = p.describe()
        hint = (f"fix the first error above; line numbers are those of {request.source.name}"
                if p.returncode else "the compiler produced no output file")
    return Failure(step="compile", what=what, command=result.command,
                   output=result.output, hint=hint)


def run_failure(result: RunResult, request: RunRequest) -> Failure | None:
    p = result.proc
    if p.ok and not result.missing_files:
        return None
    if p.start_error is not None:
        what, hint = p.describe(), "the program or its launcher could not be started"
    elif p.interrupted:
        what, hint = "interrupted", "the run was interrupted; its output so far is kept above"
    elif p.limit is not None:
        what = f"{p.limit} limit reached"
        if p.timed_out:
            what += f", then timed out after {request.timeout:g} s"
        hint = _LIMIT_HINTS.get(p.limit, "the program went past a limit of the run")
    elif p.timed_out:
        what = f"timed out after {request.timeout:g} s"
        hint = ("the program ran past --timeout: an endless loop, or a wait on something that "
                "never comes? If it really needs longer, raise --timeout")
    elif p.signal_name is not None:
        what = f"killed by {p.signal_name}"
        hint = _SIGNAL_HINTS.get(p.signal_name, "the program was stopped by a signal")
    elif p.returncode != 0:
        what = f"exit code {p.returncode}"
        hint = "the program returned a non-zero status, which means failure"
    else:
        what = "missing output files"
        hint = f"--get named files the program did not write: {', '.join(result.missing_files)}"
    return Failure(step="run", what=what, command=result.command, output=p.output, hint=hint)


def execute(
    request: RunRequest,
    probe: Probe,
    settings: Settings,
    reporter: Reporter,
    environ: Mapping[str, str] | None = None,
) -> Outcome:
    toolchain = toolchains.resolve(request, probe, settings)
    reporter.started(request, toolchain)
    notes = list(probe.warnings) + list(toolchain.notes)
    reporter.notes(notes)
    if request.keep:
        build_mod.write_atomic(request.workdir / request.keep, request.source.text)
    built = build_mod.build(request, toolchain, settings.cache_dir, probe.protections)
    reporter.built(request, built)
    if not built.ok:
        return Outcome(request, toolchain, built, None, compile_failure(built, request), notes=tuple(notes))
    if request.object_only:
        assert built.object_file is not None
        stem = Path(request.keep).stem if request.keep else Path(request.source.name).stem
        stem = stem if stem and "[" not in stem else "cell"
        dest = request.workdir / f"{stem}.o"
        shutil.copyfile(built.object_file, dest)
        reporter.notes([f"object file: {dest}"])
        return Outcome(request, toolchain, built, None, None, notes=tuple(notes))
    if not request.execute:
        return Outcome(request, toolchain, built, None, None, notes=tuple(notes))
    assert built.executable is not None
    pplan = None
    if request.profile is not None:
        label = Path(request.keep).stem if request.keep else Path(request.source.name).stem
        pplan = profile.plan(request.profile, profile.new_run_dir(request.workdir / PROFILE_DIR, label),
                             settings.cache_dir, nsys_command=settings.profiler)
        reporter.notes(pplan.notes)
        notes += pplan.notes
    how = launch.command(request, toolchain, built.executable, settings,
                         os.environ if environ is None else environ, pplan)
    reporter.notes(how.notes)
    notes += how.notes
    # nsys writes its report after the program ends: give it time beyond the program's limit.
    extra = NSYS_GRACE if pplan is not None and pplan.kind == "nsys" else 0.0
    p = proc.run(how.argv, what="run", timeout=request.timeout + extra, cwd=request.workdir,
                 env=how.env, on_output=reporter.output, terminal=True,
                 max_output=request.max_output, protections=probe.protections,
                 limits=request.limits,
                 gpu_run=toolchain.target == "gpu" or toolchain.family != "gcc")
    if p.notes:
        reporter.notes(p.notes)
        notes += p.notes
    if how.cancel and not p.ok:
        cancelled = _cancel_remote(how)
        reporter.notes(cancelled)
        notes += cancelled
    missing = tuple(f for f in request.get_files if not (request.workdir / f).exists())
    ran = RunResult(command=how.argv, proc=p, missing_files=missing)
    reporter.ran(request, ran)
    report = None
    if pplan is not None and pplan.kind != "none":
        report = profile.collect(pplan, timeout=120, source_name=request.source.name)
        reporter.profile(report)
    return Outcome(request, toolchain, built, ran, run_failure(ran, request), notes=tuple(notes),
                   profile=report)


def _cancel_remote(how: launch.Launch) -> list[str]:
    """Cancel what the launcher left on the cluster and wait (briefly) until it is gone."""
    result = proc.run(how.cancel, what="cancel", timeout=15)
    if not result.ok:
        return [f"could not cancel the job step ({result.describe()}): {result.output.strip()[:200]}"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = proc.run(how.remaining, what="cancel", timeout=10)
        if left.ok and not left.output.strip():
            return ["job step cancelled on the cluster"]
        time.sleep(0.3)
    return ["the job step was cancelled but is still listed by squeue"]


def _given(flag: int | None, setting: int | None) -> int | None:
    """The line's value over the setting; NO_LIMIT on the line means no limit."""
    if flag is None:
        return setting
    return None if flag == NO_LIMIT else flag


def request_from(
    options: Options, source: Source, settings: Settings, workdir: Path
) -> RunRequest:
    """Merge the typed options over the settings (the magic line wins)."""
    return RunRequest(
        source=source,
        workdir=workdir,
        acc=options.acc,
        accopts=options.accopts,
        compiler_options=options.compiler_options,
        program_args=options.program_args,
        family=options.family,
        openmp=options.openmp,
        threads=options.threads,
        mpi_ranks=options.mpi,
        gpus=options.gpus,
        get_files=options.get,
        show_time=not options.notime,
        profile=options.profile,
        execute=not (options.noexec or options.object),
        object_only=options.object,
        keep=options.keep,
        timeout=options.timeout if options.timeout is not None else settings.timeout,
        compile_timeout=settings.compile_timeout,
        max_output=_given(options.max_output, settings.max_output) or settings.max_output,
        limits=replace(
            settings.limits,
            memory=_given(options.memory, settings.limits.memory),
            tasks=_given(options.tasks, settings.limits.tasks),
            file_size=_given(options.file_size, settings.limits.file_size),
            stdin=(workdir / options.stdin) if options.stdin else settings.limits.stdin,
        ),
        force=options.force,
        raise_on_failure=not options.no_raise,
        check=options.check,
    )
