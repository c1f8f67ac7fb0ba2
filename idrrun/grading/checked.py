"""A run checked against its exercise: the pipeline, the solution's output, the verdict.

    run_with_options: what the magic and `idrrun run` do with a parsed line (checked or not)
    execute_checked:  one resolved request + its exercise -> Outcome with a Verdict
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from .. import build as build_mod
from .. import pipeline
from ..checks import kinds, specs
from ..checks.specs import Exercise
from ..errors import SpecError
from ..model import (
    BuildResult,
    Failure,
    FailureKind,
    Outcome,
    Probe,
    RunRequest,
    RunResult,
    Settings,
    Source,
    Toolchain,
    Verdict,
)
from ..profile.model import ProfileReport
from ..profile.summary import trace_values
from ..request import resolve
from ..request import source as source_mod
from ..request.options import Options
from ..run import launch
from ..toolchains import family_of


class NullReporter:
    """Shows nothing: for the solution run and for grading."""

    def started(self, request: RunRequest, toolchain: Toolchain) -> None: ...
    def notes(self, notes: Sequence[str]) -> None: ...
    def built(self, request: RunRequest, result: BuildResult) -> None: ...
    def output(self, text: str) -> None: ...
    def ran(self, request: RunRequest, result: RunResult) -> None: ...
    def profile(self, report: ProfileReport) -> None: ...
    def verdict(self, verdict: Verdict) -> None: ...


def check_language(source: Source, exercise: Exercise) -> None:
    if source.language not in exercise.sources:
        raise SpecError(f"exercise {exercise.name!r} has no {source.language} version "
                        f"(it has: {', '.join(exercise.sources)})")


# One lock per cached solution output: grading threads that need the same solution wait for the
# first to run it instead of running it N times. Process-wide on purpose: it guards a file.
_solution_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def solution_output(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                    settings: Settings) -> tuple[str | None, str]:
    """The solution's output for the same arguments and toolchain: built and run once, cached."""
    pair = exercise.sources[request.source.language]
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    scratch = Path(tempfile.mkdtemp(prefix="idrrun-solution-", dir=launch.scratch_root(settings)))
    sol_request = dataclasses.replace(request, source=sol_source, workdir=scratch, keep=None,
                                      force=False, get_files=(), profile=None, execute=True,
                                      object_only=False)
    try:
        key = build_mod.build_key(sol_request, toolchain)
        args_key = hashlib.sha256("\0".join(sol_request.program_args).encode()).hexdigest()[:12]
        cached = settings.cache_dir / "solutions" / f"{key}-{args_key}.out"
        with _locks_guard:
            lock = _solution_locks.setdefault(str(cached), threading.Lock())
        with lock:
            if cached.is_file():
                return cached.read_text(), ""
            outcome = pipeline.execute(sol_request, toolchain, probe, settings, NullReporter())
            if outcome.failure is not None:
                return None, f"the solution {outcome.failure.step} failed: {outcome.failure.what}"
            assert outcome.run is not None
            build_mod.write_atomic(cached, outcome.run.proc.output)
            return outcome.run.proc.output, ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def execute_checked(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                    settings: Settings, reporter: pipeline.Reporter) -> Outcome:
    check_language(request.source, exercise)
    outcome = pipeline.execute(request, toolchain, probe, settings, reporter)
    built = outcome.build
    sol_out, problem = (None, "")
    if exercise.needs_solution and outcome.run is not None and built is not None and built.ok:
        sol_out, problem = solution_output(request, toolchain, exercise, probe, settings)
    trace = None
    if outcome.profile is not None and outcome.profile.trace is not None and toolchain.target == "gpu":
        trace = trace_values(outcome.profile.trace)
    evidence = kinds.Evidence(
        source_text=request.source.text, language=request.source.language, build=built,
        run=outcome.run,
        acc=family_of(toolchain).feedback(built) if built is not None and built.ok else None,
        solution_output=sol_out, solution_problem=problem, trace_values=trace,
    )
    verdict = kinds.evaluate(exercise, evidence)
    reporter.verdict(verdict)
    failure = outcome.failure
    if failure is None and not verdict.passed:
        failed = verdict.failed_checks
        failure = Failure(
            kind=FailureKind.CHECK,
            what=f"{len(failed)} of {len(verdict.checks)} checks failed ({', '.join(c.name for c in failed)})",
            hint=failed[0].reason,
        )
    return dataclasses.replace(outcome, verdict=verdict, failure=failure)


def run_with_options(opts: Options, src: Source, settings: Settings, workdir: Path,
                     probe: Probe, reporter: pipeline.Reporter) -> Outcome:
    """What both front ends do with a parsed line: run, and check when --check names an exercise."""
    exercise = specs.find(opts.check, settings, workdir) if opts.check else None
    if exercise is not None:
        check_language(src, exercise)
    request, toolchain = resolve.resolve(opts, src, workdir, settings, probe, exercise)
    if exercise is None:
        return pipeline.execute(request, toolchain, probe, settings, reporter)
    return execute_checked(request, toolchain, exercise, probe, settings, reporter)
