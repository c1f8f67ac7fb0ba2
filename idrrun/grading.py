"""Running a program against an exercise: the checked pipeline, and grading many at once.

    execute_checked: one request + its exercise -> Outcome with a Verdict
    grade_one:       one submission (file, notebook, folder) -> GradeRow, never raises
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from . import accinfo, build as build_mod, checks, pipeline, profile, source as source_mod, toolchains
from .config import Settings
from .errors import IdrrunError, SpecError
from .options import Options
from .model import BuildResult, Failure, Outcome, Probe, RunRequest, RunResult, Source, Toolchain, Verdict
from .specs import Exercise


class NullReporter:
    """Shows nothing: for the solution run and for grading."""

    def started(self, request: RunRequest, toolchain: Toolchain) -> None: ...
    def notes(self, notes: Sequence[str]) -> None: ...
    def built(self, request: RunRequest, result: BuildResult) -> None: ...
    def output(self, text: str) -> None: ...
    def ran(self, request: RunRequest, result: RunResult) -> None: ...
    def profile(self, report: profile.ProfileReport) -> None: ...
    def verdict(self, verdict: Verdict) -> None: ...


def prepare(request: RunRequest, exercise: Exercise, probe: Probe, settings: Settings,
            timeout_given: bool) -> RunRequest:
    """The exercise's defaults under what the user gave: arguments, flags, time limit."""
    if request.source.language not in exercise.sources:
        raise SpecError(f"exercise {exercise.name!r} has no {request.source.language} version "
                        f"(it has: {', '.join(exercise.sources)})")
    toolchain = toolchains.resolve(request, probe, settings)
    args = request.program_args or (exercise.gpu_args if toolchain.target == "gpu" else exercise.host_args)
    return replace(
        request,
        program_args=args,
        compiler_options=exercise.options + request.compiler_options,
        timeout=request.timeout if timeout_given else exercise.timeout,
        check=exercise.name,
    )


def acc_report(outcome: Outcome) -> accinfo.AccReport | None:
    built, toolchain = outcome.build, outcome.toolchain
    if built is None or not built.ok or toolchain is None or built.build_dir is None:
        return None
    if toolchain.family == "gcc":
        original = sorted(built.build_dir.glob("*.original"))
        gimple = sorted(built.build_dir.glob("*.gimple"))
        if not original or not gimple:
            return None
        return accinfo.from_gcc_dumps(original[0].read_text(errors="replace"),
                                      gimple[0].read_text(errors="replace"))
    return accinfo.from_nvhpc_minfo(built.output)


# One lock per cached solution output: grading threads that need the same solution wait for the
# first to run it instead of running it N times. Process-wide on purpose: it guards a file.
_solution_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def solution_output(request: RunRequest, exercise: Exercise, probe: Probe,
                    settings: Settings) -> tuple[str | None, str]:
    """The solution's output for the same arguments: built and run once, then cached."""
    pair = exercise.sources[request.source.language]
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    scratch = Path(tempfile.mkdtemp(prefix="idrrun-solution-"))
    sol_request = replace(request, source=sol_source, workdir=scratch, keep=None, force=False,
                          get_files=(), profile=None, execute=True, object_only=False)
    try:
        toolchain = toolchains.resolve(sol_request, probe, settings)
        key = build_mod.build_key(sol_request, toolchain)
        args_key = hashlib.sha256("\0".join(sol_request.program_args).encode()).hexdigest()[:12]
        cached = settings.cache_dir / "solutions" / f"{key}-{args_key}.out"
        with _locks_guard:
            lock = _solution_locks.setdefault(str(cached), threading.Lock())
        with lock:
            if cached.is_file():
                return cached.read_text(), ""
            outcome = pipeline.execute(sol_request, probe, settings, NullReporter())
            if outcome.failure is not None:
                return None, f"the solution {outcome.failure.step} failed: {outcome.failure.what}"
            assert outcome.run is not None
            build_mod.write_atomic(cached, outcome.run.proc.output)
            return outcome.run.proc.output, ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def execute_checked(request: RunRequest, exercise: Exercise, probe: Probe, settings: Settings,
                    reporter: pipeline.Reporter) -> Outcome:
    outcome = pipeline.execute(request, probe, settings, reporter)
    sol_out, problem = (None, "")
    if exercise.needs_solution and outcome.run is not None and outcome.build is not None and outcome.build.ok:
        sol_out, problem = solution_output(request, exercise, probe, settings)
    trace = None
    if outcome.profile is not None and outcome.profile.trace is not None and \
            outcome.toolchain is not None and outcome.toolchain.target == "gpu":
        trace = profile.trace_values(outcome.profile.trace)
    evidence = checks.Evidence(
        source_text=request.source.text, language=request.source.language, build=outcome.build,
        run=outcome.run, acc=acc_report(outcome), solution_output=sol_out, solution_problem=problem,
        trace_values=trace,
    )
    verdict = checks.evaluate(exercise, evidence)
    show = getattr(reporter, "verdict", None)
    if show is not None:
        show(verdict)
    failure = outcome.failure
    if failure is None and not verdict.passed:
        failed = verdict.failed_checks
        failure = Failure(
            step="check",
            what=f"{len(failed)} of {len(verdict.checks)} checks failed ({', '.join(c.name for c in failed)})",
            command=(),
            hint=failed[0].reason,
        )
    return replace(outcome, verdict=verdict, failure=failure)


# ---------------------------------------------------------------------------------------
# Grading a class


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path  # what was handed in: a file, a notebook or a folder
    source: Source | None  # None when it could not be read
    problem: str = ""  # why source is None


@dataclass(frozen=True)
class GradeRow:
    student: str
    exercise: str
    language: str
    verdict: str  # pass, fail, error
    reasons: str
    build_seconds: float
    run_seconds: float
    submission: str
    checks: tuple[tuple[str, str, str, str, str], ...] = ()  # name, status, expected, got, reason

    def as_dict(self) -> dict[str, object]:
        return {
            "student": self.student, "exercise": self.exercise, "language": self.language,
            "verdict": self.verdict, "reasons": self.reasons,
            "build_seconds": round(self.build_seconds, 3), "run_seconds": round(self.run_seconds, 3),
            "submission": self.submission,
        }


def row_from_outcome(sub: Submission, exercise: Exercise, outcome: Outcome) -> GradeRow:
    verdict = outcome.verdict
    reasons: list[str] = []
    failure = outcome.failure
    if failure is not None and failure.step != "check":
        reasons.append(f"{failure.step} failed: {failure.what}")
    if verdict is not None:
        reasons += [f"{c.name}: {c.reason}" for c in verdict.failed_checks]
    build_s = outcome.build.seconds if outcome.build is not None else 0.0
    run_s = outcome.run.proc.seconds if outcome.run is not None else 0.0
    return GradeRow(
        student=sub.student, exercise=exercise.name,
        language=outcome.request.source.language,
        verdict="pass" if outcome.ok else "fail",
        reasons="; ".join(reasons), build_seconds=build_s, run_seconds=run_s,
        submission=str(sub.path),
        checks=tuple((c.name, c.status, c.expected, c.got, c.reason) for c in verdict.checks)
        if verdict is not None else (),
    )


def warm_solution(exercise: Exercise, subs: Sequence[Submission], settings: Settings,
                  probe: Probe, timeout: float | None) -> None:
    """Run the solution once for each language the submissions use (filling the cache)."""
    languages = sorted({s.source.language for s in subs if s.source is not None} & set(exercise.sources))
    for language in languages:
        pair = exercise.sources[language]
        src = source_mod.from_file(pair.solution, language, str(pair.solution))
        request = RunRequest(source=src, workdir=pair.solution.parent, acc=True,
                             timeout=timeout or exercise.timeout,
                             compile_timeout=settings.compile_timeout, max_output=settings.max_output,
                             limits=settings.limits)
        try:
            request = prepare(request, exercise, probe, settings, timeout_given=timeout is not None)
            solution_output(request, exercise, probe, settings)
        except IdrrunError:
            pass  # each row reports it


def grade_one(sub: Submission, exercise: Exercise, settings: Settings, probe: Probe,
              acc: bool = True, timeout: float | None = None,
              base_request: RunRequest | None = None) -> GradeRow:
    """Grade one submission in its own scratch folder; every problem becomes a row."""
    def error_row(reason: str, language: str = "") -> GradeRow:
        return GradeRow(sub.student, exercise.name, language, "error", reason, 0.0, 0.0, str(sub.path))

    if sub.source is None:
        return error_row(sub.problem)
    scratch = Path(tempfile.mkdtemp(prefix="idrrun-grade-"))
    try:
        # A copy of the student's folder, so includes and data files work and the original is
        # never touched.
        origin = sub.path if sub.path.is_dir() else sub.path.parent
        if sub.path.is_dir():
            shutil.copytree(origin, scratch / "work", symlinks=True)
        else:
            (scratch / "work").mkdir()
            shutil.copy2(sub.path, scratch / "work" / sub.path.name)
        workdir = scratch / "work"
        src = replace(sub.source, origin_dir=workdir)
        request = base_request or RunRequest(source=src, workdir=workdir)
        request = replace(request, source=src, workdir=workdir, acc=acc,
                          timeout=timeout or exercise.timeout,
                          compile_timeout=settings.compile_timeout, max_output=settings.max_output,
                          limits=settings.limits)
        request = prepare(request, exercise, probe, settings, timeout_given=timeout is not None)
        outcome = execute_checked(request, exercise, probe, settings, NullReporter())
        return row_from_outcome(sub, exercise, outcome)
    except IdrrunError as exc:
        return error_row(str(exc), sub.source.language)
    except OSError as exc:
        return error_row(f"cannot prepare the submission: {exc}", sub.source.language)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_with_options(opts: Options, src: Source, settings: Settings, workdir: Path,
                     probe: Probe, reporter: pipeline.Reporter) -> Outcome:
    """What both front ends do with a parsed line: run, and check when --check names an exercise."""
    from .specs import find

    exercise = find(opts.check, settings, workdir) if opts.check else None
    request = pipeline.request_from(opts, src, settings, workdir)
    if exercise is None:
        return pipeline.execute(request, probe, settings, reporter)
    request = prepare(request, exercise, probe, settings, timeout_given=opts.timeout is not None)
    return execute_checked(request, exercise, probe, settings, reporter)
