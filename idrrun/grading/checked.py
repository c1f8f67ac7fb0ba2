"""A run checked against its exercise: the pipeline, the solution's output, the verdict.

    run_with_options: what the magic and `idrrun run` do with a parsed line (checked or not)
    execute_checked:  one resolved request + its exercise -> Outcome with a Verdict
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import pipeline
from .. import build as build_mod
from ..checks import kinds, specs
from ..checks.specs import Exercise
from ..errors import SpecError
from ..model import (
    BuildResult,
    CheckResult,
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
from ..profile.model import NO_GPU_ACTIVITY
from ..profile.summary import trace_values
from ..request import resolve
from ..request import unused as unused_flags
from ..request import source as source_mod
from ..request.options import Options
from ..run import launch
from ..toolchains import family_of
from ..version import __version__


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


# Why a check that compares with the solution is incomplete in a students' course.
NO_SOLUTION = "no solution in the students' course"


@dataclass(frozen=True)
class SolutionRun:
    """The solution's output for some arguments, and the files its checks compare with."""

    output: str | None  # None when the solution failed
    files: Path | None = None  # folder holding Exercise.solution_files, when it has some
    problem: str = ""  # why output is None


def solution_output(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                    settings: Settings) -> SolutionRun:
    """The solution's output for the same arguments and toolchain: built and run once, in its
    own box when the request is sandboxed, then cached where no program can reach (the cache is
    hidden from every box), under a key that includes idrrun's version."""
    pair = exercise.sources[request.source.language]
    if pair.solution is None:
        return SolutionRun(None, None, NO_SOLUTION)
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    scratch = Path(tempfile.mkdtemp(prefix="idrrun-solution-", dir=launch.scratch_root(settings)))
    os.chmod(scratch, 0o711)  # the box's own uid passes through to its folder
    sol_request = dataclasses.replace(request, source=sol_source, workdir=scratch, keep=None,
                                      force=False, get_files=(), profile=None, execute=True,
                                      object_only=False, build_cache=None)
    try:
        key = build_mod.build_key(sol_request, toolchain)
        args_key = hashlib.sha256("\0".join((__version__, *sol_request.program_args)).encode()).hexdigest()[:12]
        cached = settings.cache_dir / "solutions" / f"{key}-{args_key}.out"
        files = cached.with_suffix(".files")
        with _locks_guard:
            lock = _solution_locks.setdefault(str(cached), threading.Lock())
        with lock:
            if cached.is_file():
                return SolutionRun(cached.read_text(), files if files.is_dir() else None)
            copy_data_files(exercise, scratch)
            if sol_request.sandbox:
                sol_request = _beside_its_copy(sol_request, _solution_folder(pair.solution, settings))
            outcome = pipeline.execute(sol_request, toolchain, probe, settings, NullReporter())
            if outcome.failure is not None:
                said = " | ".join(outcome.failure.output.strip().splitlines()[-3:])
                return SolutionRun(None, None, f"the solution {outcome.failure.step} failed: "
                                               f"{outcome.failure.what}" + (f" ({said})" if said else ""))
            assert outcome.run is not None
            if exercise.solution_files:
                files.mkdir(parents=True, exist_ok=True)
                for name in exercise.solution_files:
                    if (scratch / name).is_file():
                        shutil.copyfile(scratch / name, files / name)
            build_mod.write_atomic(cached, outcome.run.proc.output)
            return SolutionRun(outcome.run.proc.output, files if exercise.solution_files else None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# A sandboxed solution's folder: a copy of its sources and its builds, made once per process
# and solution, so that its build serves every argument set of a grading (the hidden ones too);
# removed at exit, or, after a killed grader, by the next grading (classroom.remove_orphans).
SOLUTION_FOLDER_PREFIX = "idrrun-solution-"
_solution_folders: dict[tuple[str, str], Path] = {}


def _solution_folder(solution: Path, settings: Settings) -> Path:
    root = launch.scratch_root(settings)
    with _locks_guard:
        key = (str(solution), str(root))
        folder = _solution_folders.get(key)
        if folder is not None and folder.is_dir():
            return folder
        if not _solution_folders:
            atexit.register(remove_solution_folders)
        folder = Path(tempfile.mkdtemp(prefix=f"{SOLUTION_FOLDER_PREFIX}{os.getpid()}-", dir=root))
        os.chmod(folder, 0o711)  # the box's own uid passes through to its folder
        copy = folder / ".solution"
        copy.mkdir(mode=0o755)
        # Its files, not its subfolders: a box's own uid may not reach the course where it is
        # installed (under /root), nor a node the login node's /tmp.
        for entry in solution.parent.iterdir():
            if entry.is_file() and not entry.is_symlink():
                shutil.copyfile(entry, copy / entry.name)
        _solution_folders[key] = folder
        return folder


def remove_solution_folders() -> None:
    with _locks_guard:
        for folder in _solution_folders.values():
            shutil.rmtree(folder, ignore_errors=True)
        _solution_folders.clear()


def _beside_its_copy(request: RunRequest, folder: Path) -> RunRequest:
    """The request compiling the copy of the solution's folder made by _solution_folder, its
    build kept beside it. Its cached output stays keyed by the course's own file."""
    source = dataclasses.replace(request.source, origin_dir=folder / ".solution")
    return dataclasses.replace(request, source=source, build_cache=folder / "builds")


def copy_data_files(exercise: Exercise, workdir: Path) -> None:
    """The exercise's data files beside the program (a photo to blur), unless already there."""
    for path in exercise.files:
        if not (workdir / path.name).exists():
            shutil.copyfile(path, workdir / path.name)


def _evidence(request: RunRequest, toolchain: Toolchain, outcome: Outcome,
              solution: SolutionRun | None) -> kinds.Evidence:
    built = outcome.build
    trace = None
    profiled = outcome.profile
    # A profiled GPU build that left no trace never initialised CUDA (the tracer is loaded by
    # the driver when a program first uses the GPU): the GPU did nothing, which checks can judge.
    if profiled is not None and toolchain.target == "gpu" and \
            (profiled.trace is not None or profiled.message == NO_GPU_ACTIVITY):
        trace = trace_values(profiled.trace)
    compiled = None
    if built is not None and built.ok and built.build_dir is not None:
        pre = built.build_dir / build_mod.PREPROCESSED
        if pre.is_file():
            compiled = pre.read_text(errors="replace")
    return kinds.Evidence(
        source_text=request.source.text, language=request.source.language, build=built,
        run=outcome.run,
        acc=family_of(toolchain).feedback(built) if built is not None and built.ok else None,
        solution_output=solution.output if solution is not None else None,
        solution_problem=solution.problem if solution is not None else "",
        trace_values=trace, compiled_text=compiled, acc_requested=request.acc,
        run_dir=request.workdir, solution_dir=solution.files if solution is not None else None,
        regions=outcome.run.regions if outcome.run is not None else None,
    )


def execute_checked(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                    settings: Settings, reporter: pipeline.Reporter,
                    hidden: bool = False) -> Outcome:
    """The run and its verdict. hidden (grading): the program also runs with each of the
    exercise's hidden argument sets, its output checked again each time."""
    check_language(request.source, exercise)
    if not hidden:
        exercise = exercise.without_grading_only()
    copy_data_files(exercise, request.workdir)
    outcome = pipeline.execute(request, toolchain, probe, settings, reporter)
    built = outcome.build
    ran = outcome.run is not None and built is not None and built.ok

    def solution_for(req: RunRequest) -> SolutionRun | None:
        return solution_output(req, toolchain, exercise, probe, settings) \
            if exercise.needs_solution and ran else None

    verdict = kinds.evaluate(exercise, _evidence(request, toolchain, outcome, solution_for(request)))
    if hidden and ran and outcome.failure is None:
        extra: list[CheckResult] = []
        for i, args in enumerate(exercise.hidden_args):
            again = dataclasses.replace(request, program_args=args, keep=None, profile=None)
            rerun = pipeline.execute(again, toolchain, probe, settings, NullReporter())
            evidence = _evidence(again, toolchain, rerun, solution_for(again))
            extra += kinds.evaluate_hidden(exercise, evidence, i)
        verdict = dataclasses.replace(verdict, checks=verdict.checks + tuple(extra))
    reporter.verdict(verdict)
    failure = outcome.failure
    if failure is None and verdict.failed_checks:
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
    unused = unused_flags.notes(opts, request, settings)
    if unused:
        toolchain = dataclasses.replace(toolchain, notes=toolchain.notes + unused)
    if exercise is None:
        return pipeline.execute(request, toolchain, probe, settings, reporter)
    return execute_checked(request, toolchain, exercise, probe, settings, reporter)
