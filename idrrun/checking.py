"""A run checked against its exercise: the pipeline, the solution's output, the verdict. The
notebooks' --check and grading both come here; a plain cell goes straight to the pipeline.

    run_with_options: what the magic and `idrrun run` do with a parsed line (checked or not)
    execute_checked:  one resolved request + its exercise -> Outcome with a Verdict
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import annotate
from . import build as build_mod
from .files import write_atomic
from . import pipeline
from .checks import compare, measure, reference, relative, specs, trace_kinds, visibility
from .checks.evidence import Evidence, HostComparison
from .checks.measure import Figure
from .checks.specs import Exercise
from .checks.verdict import evaluate, evaluate_hidden
from .checks.words import plural
from .errors import IdrrunError, SpecError
from .model import (AccReport, BuildResult, CheckResult, Comparison, Failure, FailureKind, Probe,
                    RunRequest, Settings, Source, Toolchain, Verdict)
from .pipeline import NullReporter, Outcome
from .profile.model import NO_GPU_ACTIVITY, Hint, Trace
from .profile.summary import trace_values
from .request import resolve
from .request import source as source_mod
from .request.options import Options
from .run import boundary, rooms
from .toolchains import family_of
from .version import __version__


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
    # From the course's references (a students' copy has no solution to run): problem is then
    # why there is none for these arguments, not a failure of the solution.
    from_reference: bool = False
    left_out: tuple[str, ...] = ()  # files its reference does not keep, with why
    # Its figures for the comparison with a student's run (checks/compare.py), and its
    # timeline when it was profiled on a GPU.
    figures: compare.RunFigures | None = None
    timeline: Path | None = None

    seconds: float | None = None  # how long its run took; None: not known


def _kept_figures(path: Path) -> tuple[bool, compare.RunFigures] | None:
    """(profiled, figures) a cached solution run left, None when it left none readable."""
    try:
        data = json.loads(path.read_text())
        return bool(data["profiled"]), compare.RunFigures.from_dict(data["figures"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cached_run(cached: Path, files: Path, profiled: bool) -> SolutionRun | None:
    """The solution's run for these arguments as the cache has it: its output, its time, and
    its figures, profiled when they must be."""
    kept = _kept_figures(cached.with_suffix(".figures.json"))
    if not cached.is_file() or kept is None or (profiled and not kept[0]):
        return None
    timeline = cached.with_suffix(".timeline.png")
    return SolutionRun(cached.read_text(), files if files.is_dir() else None, figures=kept[1],
                       timeline=timeline if timeline.is_file() else None,
                       seconds=_seconds(cached.with_suffix(".seconds")))


def _keep_figures(cached: Path, exercise: Exercise, toolchain: Toolchain, outcome: Outcome,
                  profiled: bool) -> tuple[compare.RunFigures, Path | None]:
    """The solution's figures and timeline, kept beside its cached output."""
    trace, traced = _trace(toolchain, outcome)
    assert outcome.run is not None
    found = compare.figures(exercise, trace, traced, _acc(toolchain, outcome.build),
                            outcome.run.proc.output)
    timeline = None
    drawn = outcome.profile.timeline_png if outcome.profile is not None else None
    if drawn is not None and drawn.is_file():
        timeline = cached.with_suffix(".timeline.png")
        timeline.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(drawn, timeline)
    write_atomic(cached.with_suffix(".figures.json"),
                 json.dumps({"profiled": profiled, "figures": found.as_dict()}) + "\n")
    return found, timeline


def solution_output(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                    settings: Settings) -> SolutionRun:
    """The solution's output for the same arguments and toolchain: built and run once, in a
    room of its own when the request is graded (its box, its uid), then cached where no
    program can reach (the cache is hidden from every box), under a key that includes
    idrrun's version."""
    pair = exercise.sources[request.source.language]
    if pair.solution is None:
        # A students' course: the solution's output for the public arguments travels instead.
        ref = reference.lookup(exercise, request.source.language, request.program_args)
        if ref is None:
            return SolutionRun(None, None, NO_SOLUTION)
        return SolutionRun(ref.output, ref.folder, ref.problem, from_reference=True,
                           left_out=ref.left_out)
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    profile = _solution_profile(request, toolchain, exercise)
    # Keyed by the course's own file, wherever it is compiled from.
    sol_request = resolve.for_solution(request, sol_source, request.workdir, profile=profile)
    key = build_mod.build_key(sol_request, toolchain)
    args_key = hashlib.sha256("\0".join((__version__, *sol_request.program_args)).encode()).hexdigest()[:12]
    cached = settings.cache_dir / "solutions" / f"{key}-{args_key}.out"
    files = cached.with_suffix(".files")
    seconds = cached.with_suffix(".seconds")
    with _locks_guard:
        lock = _solution_locks.setdefault(str(cached), threading.Lock())
    with lock:
        # Kept with every file its checks compare now (a spec may have gained an image check).
        kept = _cached_run(cached, files, profile is not None)
        if kept is not None and all((files / name).is_file() for name in exercise.solution_files):
            return kept
        sol_request, scratch = _solution_request(request, sol_source, pair.solution, settings,
                                                 profile)
        try:
            copy_data_files(exercise, sol_request.workdir)
            outcome = pipeline.execute(sol_request, toolchain, probe, settings, NullReporter(),
                                       wanted=exercise.solution_files)
            if outcome.failure is not None:
                said = " | ".join(outcome.failure.output.strip().splitlines()[-3:])
                return SolutionRun(None, None, f"the solution {outcome.failure.step} failed: "
                                               f"{outcome.failure.what}" + (f" ({said})" if said else ""))
            assert outcome.run is not None
            if exercise.solution_files:
                written = outcome.run.outputs or sol_request.workdir
                files.mkdir(parents=True, exist_ok=True)
                for name in exercise.solution_files:
                    if (written / name).is_file() and not (written / name).is_symlink():
                        shutil.copyfile(written / name, files / name)
            found, timeline = _keep_figures(cached, exercise, toolchain, outcome, profile is not None)
            write_atomic(seconds, f"{outcome.run.proc.seconds:.3f}\n")
            write_atomic(cached, outcome.run.proc.output)
            return SolutionRun(outcome.run.proc.output, files if exercise.solution_files else None,
                               figures=found, timeline=timeline, seconds=outcome.run.proc.seconds)
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)


def _solution_profile(request: RunRequest, toolchain: Toolchain,
                      exercise: Exercise) -> str | None:
    """How the solution runs are profiled: as the student's run is, when the exercise compares
    traces and the build is for the GPU (a host build's trace is judged by no check: _trace);
    on the host its time is then the program's own, no profiler's."""
    return request.profile if exercise.needs_trace and toolchain.target == "gpu" else None


def _solution_request(request: RunRequest, sol_source: Source, solution: Path, settings: Settings,
                      profile: str | None) -> tuple[RunRequest, Path | None]:
    """The solution's request beside a student's: in its room when the request is graded (its
    box, its uid), else in a scratch folder (returned: the caller removes it)."""
    if request.room is not None:
        src = _room(solution, settings) / "src"
        return resolve.for_solution(request, dataclasses.replace(sol_source, origin_dir=src), src,
                                    src.parent, profile=profile), None
    scratch = Path(tempfile.mkdtemp(prefix="idrrun-solution-"))
    return resolve.for_solution(request, sol_source, scratch, profile=profile), scratch


def solution_times(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                   settings: Settings, how: measure.Repeat = measure.REPEAT) -> tuple[float, ...]:
    """The wall times of runs of the solution with the request's arguments, measured as a timed
    figure is (checks/measure.py): more runs of the same build until the last how.least times
    settle, how.most at most (the first as solution_output keeps it: its first run on the
    machine, 5.7 s against 2.3 s for the next ones on an H200); each run as a graded row's is:
    in its room and lane. () where it has no source (a students' course) or a run fails."""
    first = solution_output(request, toolchain, exercise, probe, settings)
    pair = exercise.sources[request.source.language]
    if first.seconds is None or pair.solution is None:
        return ()
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    sol_request, scratch = _solution_request(request, sol_source, pair.solution, settings,
                                             _solution_profile(request, toolchain, exercise))
    times = [first.seconds]
    try:
        copy_data_files(exercise, sol_request.workdir)
        while len(times) < how.most and not measure.settled(times, how):
            # In a lane as the row's timed run is: alone on its GPU (issue 47).
            outcome = pipeline.execute(dataclasses.replace(sol_request, timed=request.timed),
                                       toolchain, probe, settings, NullReporter())
            if outcome.failure is not None or outcome.run is None:
                return ()
            times.append(outcome.run.proc.seconds)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return tuple(times)


def _seconds(path: Path) -> float | None:
    """The solution's run time kept beside its output; None for an output cached without it."""
    try:
        return float(path.read_text())
    except (OSError, ValueError):
        return None


# A graded solution's room: a copy of its folder's files and its builds, made once per process
# and solution, so that its build serves every argument set of a grading (the hidden ones too);
# removed with the grader's scratch folder (run/rooms.py), at exit or, after a killed
# grader, by the next grading.
_solution_rooms: dict[tuple[str, str], Path] = {}


def _room(solution: Path, settings: Settings) -> Path:
    """The solution's room: its own copy of the solution's folder (its files, not its
    subfolders) in `src`, private to the grader."""
    with _locks_guard:
        key = (str(solution), str(rooms.scratch_root(settings)))
        room = _solution_rooms.get(key)
        if room is None or not room.is_dir():
            room = rooms.new_room(settings, "idrrun-solution-")
            src = rooms.source_folder(room)
            fd = boundary.open_dir(src)
            try:
                for entry in solution.parent.iterdir():
                    if entry.is_file() and not entry.is_symlink():
                        boundary.copy_tree(entry, fd)
            finally:
                os.close(fd)
            _solution_rooms[key] = room
    return room


def copy_data_files(exercise: Exercise, workdir: Path) -> None:
    """The exercise's data files beside the program (a photo to blur), unless already there.
    `workdir` is the user's folder (a notebook), or a graded room's own copy of a submission
    (no box ever writes there): the files then reach each run's fresh folder with it."""
    for path in exercise.files:
        if not (workdir / path.name).exists():
            shutil.copyfile(path, workdir / path.name)


def _trace(toolchain: Toolchain, outcome: Outcome) -> tuple[Trace | None, bool]:
    """The run's GPU trace, and whether the checks can judge one: a profiled GPU build that
    left no trace never initialised CUDA (the tracer is loaded by the driver when a program
    first uses the GPU): the GPU did nothing, which checks can judge."""
    profiled = outcome.profile
    if profiled is not None and toolchain.target == "gpu" and \
            (profiled.trace is not None or profiled.message == NO_GPU_ACTIVITY):
        return profiled.trace, True
    return None, False


def _trace_problem(outcome: Outcome) -> str:
    """Why the run's profiler left no trace, in its own words ("" when it did not say)."""
    report = outcome.profile
    if report is None or report.kind != "none":
        return ""
    return report.message.replace("no GPU profile: ", "")


def gpu_trace_values(toolchain: Toolchain, outcome: Outcome) -> dict[str, float] | None:
    """What the GPU trace of a profiled GPU run says for the checks; None: no trace to judge."""
    trace, traced = _trace(toolchain, outcome)
    return trace_values(trace) if traced else None


def _acc(toolchain: Toolchain, built: BuildResult | None) -> AccReport | None:
    return family_of(toolchain).feedback(built) if built is not None and built.ok else None


def _evidence(request: RunRequest, toolchain: Toolchain, outcome: Outcome,
              solution: SolutionRun | None,
              host: HostComparison | None = None) -> Evidence:
    built = outcome.build
    compiled = None
    if built is not None and built.ok and built.build_dir is not None:
        pre = built.build_dir / build_mod.PREPROCESSED
        if pre.is_file():
            compiled = pre.read_text(errors="replace")
    return Evidence(
        source_text=request.source.text, language=request.source.language, build=built,
        run=outcome.run,
        acc=_acc(toolchain, built),
        solution_output=solution.output if solution is not None else None,
        solution_problem=solution.problem if solution is not None else "",
        from_reference=solution.from_reference if solution is not None else False,
        target=toolchain.target,
        trace_values=gpu_trace_values(toolchain, outcome), compiled_text=compiled,
        trace_problem=_trace_problem(outcome),
        acc_requested=request.acc,
        run_dir=outcome.run.outputs or request.workdir if outcome.run is not None else request.workdir,
        solution_dir=solution.files if solution is not None else None,
        solution_left_out=solution.left_out if solution is not None else (),
        regions=outcome.run.regions if outcome.run is not None else None,
        source_name=request.source.name, first_line=request.source.first_line,
        temporary=build_mod.source_file_name(request.source), host=host,
        headers=request.source.headers, solution_timed=_timed_figures(solution),
    )


def _timed_figures(solution: SolutionRun | None) -> dict[str, tuple[float, ...]]:
    """The solution's figures a check relative to it reads on one run (checks/relative.py)."""
    out: dict[str, tuple[float, ...]] = {}
    if solution is not None and solution.seconds is not None:
        out["seconds"] = (solution.seconds,)
    if solution is not None and solution.figures is not None and solution.figures.traced:
        out["gpu_busy"] = (solution.figures.gpu_busy,)
    return out


def _comparison(exercise: Exercise, toolchain: Toolchain, outcome: Outcome,
                solution: SolutionRun | None) -> Comparison | None:
    """The public run's figures beside the solution's, and both timelines when both were drawn."""
    if solution is None or solution.figures is None or outcome.run is None:
        return None
    trace, traced = _trace(toolchain, outcome)
    yours = compare.figures(exercise, trace, traced, _acc(toolchain, outcome.build),
                            outcome.run.proc.output)
    found = compare.compare(exercise, yours, solution.figures)
    drawn = outcome.profile.timeline_png if outcome.profile is not None else None
    if found is None or not (yours.traced and solution.figures.traced):
        return found
    return dataclasses.replace(found, timeline=drawn if drawn is not None and drawn.is_file() else None,
                               solution_timeline=solution.timeline)


def execute_checked(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                    settings: Settings, reporter: pipeline.Reporter,
                    hidden: bool = False) -> Outcome:
    """The run and its verdict. hidden (grading): the program also runs with each of the
    exercise's hidden argument sets, its output checked again each time. A timed run (graded)
    has its timed checks measured over more runs; a run that timed out is told how long the
    solution takes."""
    check_language(request.source, exercise)
    if not hidden:
        exercise = exercise.without_grading_only()
    copy_data_files(exercise, request.workdir)
    # With a limit relative to the solution's time (the spec's, the line giving no --timeout)
    # the solution runs first (once per machine and arguments, cached; graded: once for the
    # class), its time bounding the run's; the solution's own runs keep the exercise's limit.
    unlimited = request
    request, solution_seconds = limited(request, toolchain, exercise, probe, settings)
    outcome = pipeline.execute(request, toolchain, probe, settings, reporter,
                               wanted=exercise.solution_files)
    built = outcome.build
    ran = outcome.run is not None and built is not None and built.ok

    def solution_for(req: RunRequest, figures: bool = False) -> SolutionRun | None:
        """The solution's run with the same arguments, when a check needs its output or (the
        public run) its figures are compared with the run's."""
        wanted = exercise.needs_solution or (figures and compare.wanted(exercise))
        return solution_output(dataclasses.replace(req, timeout=unlimited.timeout), toolchain,
                               exercise, probe, settings) if wanted and ran else None

    solution = solution_for(request, figures=True)
    host = host_comparison(request, toolchain, exercise, probe, settings, outcome) \
        if exercise.compares_host and ran and outcome.failure is None else None
    evidence = _evidence(request, toolchain, outcome, solution, host)
    verdict = dataclasses.replace(evaluate(exercise, evidence),
                                  comparison=_comparison(exercise, toolchain, outcome, solution))
    if request.timed and ran and outcome.failure is None:
        verdict = _measured(verdict, exercise, request, toolchain, probe, settings, outcome)
    if hidden and ran and outcome.failure is None:
        extra: list[CheckResult] = []
        for i, args in enumerate(exercise.hidden_args):
            again = limited(resolve.with_args(unlimited, args, hidden=True), toolchain, exercise,
                            probe, settings)[0]
            rerun = pipeline.execute(again, toolchain, probe, settings, NullReporter(),
                                     wanted=exercise.solution_files)
            extra += evaluate_hidden(exercise, _evidence(again, toolchain, rerun,
                                                         solution_for(again)), i)
        verdict = dataclasses.replace(verdict, checks=verdict.checks + tuple(extra))
    if not hidden:
        # A notebook's or a terminal's --check is the student's: what the spec lets them see.
        verdict = visibility.student_verdict(verdict, exercise)
    reporter.verdict(verdict)
    # The source annotated with the checks its student may see (a feedback file carries it).
    listing = annotated(request, outcome, evidence, visibility.student_checks(verdict, exercise))
    if listing.notes:
        reporter.annotated(listing)
    failure = _against_solution(outcome, unlimited, toolchain, exercise, probe, settings,
                                stopped_at=request.timeout if solution_seconds is not None else None)
    if failure is None and verdict.failed_checks:
        failed = verdict.failed_checks
        failure = Failure(
            kind=FailureKind.CHECK,
            what=f"{len(failed)} of {plural(len(verdict.checks), 'check')} failed "
                 f"({', '.join(c.name for c in failed)})",
            hint=failed[0].reason,
        )
    return dataclasses.replace(outcome, verdict=verdict, failure=failure, annotated=listing)


def annotated(request: RunRequest, outcome: Outcome, evidence: Evidence,
              checks: Sequence[CheckResult]) -> annotate.Listing:
    """The source with what its build said of it, the compiler's report and the failed checks."""
    src = request.source
    return annotate.annotate(src.text, src.name, src.language, src.first_line,
                             outcome.build.output if outcome.build is not None else "",
                             evidence.acc, checks)


def _measured(verdict: Verdict, exercise: Exercise, request: RunRequest, toolchain: Toolchain,
              probe: Probe, settings: Settings, outcome: Outcome) -> Verdict:
    """The timed checks measured over more runs of the same build (each one in its lane,
    alone on its GPU: run/lanes.py) until their figures settle (checks/measure.py); the other
    checks stay as the first run gave them. A program that fails another check is not run
    again: its verdict is decided (trace_kinds.unmeasured_result)."""
    # Issue 47's hook: the checks judged relative to the solution, over runs of both.
    verdict = _relative(verdict, exercise, request, toolchain, probe, settings, outcome)
    timed = {spec.label: spec for spec in exercise.checks if spec.kind in specs.TIMED_KINDS
             and not relative.relative(spec)}
    if outcome.run is None or not outcome.run.proc.ok:
        return verdict  # its trace checks are not judged (verdict.py's CUT_SHORT): nothing to measure

    def figures(values: dict[str, float] | None) -> dict[str, Figure]:
        found = {label: trace_kinds.figure(spec, values) for label, spec in timed.items()}
        return {label: f for label, f in found.items() if f is not None}

    times = [outcome.run.proc.seconds]

    def again() -> dict[str, Figure] | str:
        rerun = pipeline.execute(request, toolchain, probe, settings, NullReporter(),
                                 wanted=exercise.solution_files)
        if rerun.failure is not None:
            return f"a run {rerun.failure.step} failed: {rerun.failure.what}"
        if rerun.run is not None:
            times.append(rerun.run.proc.seconds)
        return figures(gpu_trace_values(toolchain, rerun)) or "a run left no GPU trace"

    first = figures(gpu_trace_values(toolchain, outcome))
    if not first:
        return verdict  # no trace: the checks say why they are incomplete
    if any(c.status == "fail" and c.name not in timed for c in verdict.checks):
        return dataclasses.replace(verdict, checks=tuple(
            trace_kinds.unmeasured_result(timed[c.name], first[c.name])
            if c.name in first and not c.hidden else c for c in verdict.checks))
    bounds = {label: bound for label, spec in timed.items()
              if (bound := trace_kinds.timed_bound(spec)) is not None}
    measured = measure.repeat(first, again, bounds=bounds)
    return dataclasses.replace(verdict, run_times=tuple(times), checks=tuple(
        trace_kinds.measured_result(timed[c.name], measured[c.name])
        if c.name in measured and not c.hidden else c for c in verdict.checks))


# --- issue 47: the checks judged relative to the solution (checks/relative.py) ---------------
# The solution's runs of this grading (this process), per build, arguments, GPU and driver.
_SOLUTION_RUNS = relative.SolutionRuns()
NO_SOLUTION_RUN = "the solution could not be run again here (a students' course has none)"


def _relative(verdict: Verdict, exercise: Exercise, request: RunRequest, toolchain: Toolchain,
              probe: Probe, settings: Settings, outcome: Outcome) -> Verdict:
    """The relative checks (speed, gpu_busy's min_ratio) over her build's runs and the
    solution's, each alone on its GPU in its lane, until decided (checks/ratio.py)."""
    if outcome.run is None or not outcome.run.proc.ok or gpu_trace_values(toolchain, outcome) is None \
            or not any(relative.relative(spec) for spec in exercise.checks):
        return verdict  # no GPU trace: they are not judged (verdict.py says why)

    def run_of(done: Outcome) -> relative.Run | str:
        if done.failure is not None or done.run is None:
            return f"a run failed: {done.failure.what if done.failure is not None else 'not run'}"
        return relative.Run(done.run.proc.seconds, done.run.proc.output,
                            gpu_trace_values(toolchain, done))

    key = _solution_key(request, toolchain, exercise, probe)

    def again_solution() -> relative.Run | str:
        done = solution_again(request, toolchain, exercise, probe, settings)
        got = run_of(done) if done is not None else NO_SOLUTION_RUN
        if not isinstance(got, str):
            _SOLUTION_RUNS.add(key, got)
        return got

    mine: list[relative.Run] = []

    def again_yours() -> relative.Run | str:
        got = run_of(pipeline.execute(request, toolchain, probe, settings, NullReporter(),
                                      wanted=exercise.solution_files))
        if not isinstance(got, str):
            mine.append(got)
        return got

    first = run_of(outcome)
    assert not isinstance(first, str)
    checks = relative.judged(exercise, verdict.checks, [first], again_yours,
                             _SOLUTION_RUNS.runs(key), again_solution)
    times = (first.seconds, *(r.seconds for r in mine))
    return dataclasses.replace(verdict, checks=checks,
                               run_times=times if len(times) > len(verdict.run_times) else verdict.run_times)


def _solution_key(request: RunRequest, toolchain: Toolchain, exercise: Exercise,
                  probe: Probe) -> tuple[str, ...]:
    """What the solution's runs are kept by for the grading: its file as it is, the arguments,
    the compiler, and the GPUs with their driver (never another GPU's runs)."""
    pair = exercise.sources[request.source.language]
    where = pair.solution
    stat = where.stat() if where is not None and where.is_file() else None
    return (str(where), f"{stat.st_size}:{stat.st_mtime_ns}" if stat is not None else "",
            *request.program_args, toolchain.compiler.version, toolchain.target,
            *(f"{g.name} {g.driver}" for g in probe.gpus))


def solution_again(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                   settings: Settings) -> Outcome | None:
    """One more run of the solution with the request's arguments, made as her timed run is: in
    its room, in a lane (alone on its GPU when hers is), profiled as hers; None where there is
    no solution to run (a students' course)."""
    pair = exercise.sources[request.source.language]
    if pair.solution is None:
        return None
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    sol_request, scratch = _solution_request(request, sol_source, pair.solution, settings,
                                             _solution_profile(request, toolchain, exercise))
    try:
        copy_data_files(exercise, sol_request.workdir)
        return pipeline.execute(dataclasses.replace(sol_request, timed=request.timed), toolchain,
                                probe, settings, NullReporter())
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


# Why agrees_with_host cannot compare a build that runs its regions on the host anyway.
NOT_ON_GPU = ("this build runs its compute regions on the host: there is no GPU run to compare "
              "with the host's (needs a GPU)")


def host_comparison(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
                    settings: Settings, outcome: Outcome) -> HostComparison:
    """For agrees_with_host: the program's output at the exercise's host arguments (small, so
    that the host's run stays short) on the GPU — the checked run's own when it ran with them —
    and the same build's with its compute regions on the host (the family says how)."""
    if toolchain.target != "gpu":
        return HostComparison(problem=NOT_ON_GPU)
    why = family_of(toolchain).host_comparison(toolchain)
    if why:
        return HostComparison(problem=why)
    at = resolve.with_args(request, exercise.host_args)
    on_gpu = outcome if request.program_args == exercise.host_args else \
        pipeline.execute(at, toolchain, probe, settings, NullReporter())
    on_host = pipeline.execute(resolve.on_host(at), toolchain, probe, settings, NullReporter())
    for where, done in (("on the GPU", on_gpu), ("on the host", on_host)):
        if done.failure is not None or done.run is None:
            what = done.failure.what if done.failure is not None else "it did not run"
            return HostComparison(problem=f"the run with the host arguments {where} "
                                          f"failed: {what}")
    assert on_gpu.run is not None and on_host.run is not None
    return HostComparison(on_gpu.run.proc.output, on_host.run.proc.output)


# What a run that timed out is told of the solution's own time, when it is known.
TIMED_OUT_VS_SOLUTION = "{what}; the solution runs in {seconds} s with these arguments"
FAR_BEYOND = ": a loop left on the host?"
# A time limit this many times the solution's time is far beyond it.
FAR = 10.0


def timed_out_against(what: str, timeout: float, seconds: float) -> str:
    """"timed out after 60 s; the solution runs in 2.1 s with these arguments: a loop left on
    the host?" (the question when the limit is far beyond the solution's time)."""
    text = TIMED_OUT_VS_SOLUTION.format(what=what, seconds=_shown(seconds))
    return text + FAR_BEYOND if timeout >= FAR * seconds else text


# What a run stopped by its limit relative to the solution's time is told.
STOPPED_VS_SOLUTION = "stopped at {limit} s: the solution takes {seconds} s ({rule})"
# Failure.limit of a TIMEOUT that was the limit relative to the solution's time.
SOLUTION_LIMIT = "solution's time"


def _shown(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds >= 0.1 else f"{seconds:.3f}"


def limited(request: RunRequest, toolchain: Toolchain, exercise: Exercise, probe: Probe,
            settings: Settings) -> tuple[RunRequest, float | None]:
    """The request under its limit relative to the solution's time (request.relative_timeout:
    the exercise's, unless the line gave --timeout), the solution run once for these arguments
    on this machine when its time is not kept yet, and the solution's seconds when that limit
    is below the absolute one; the request as it is with no such limit, or no solution's time
    (a students' course: its references keep outputs, not times)."""
    relative = request.relative_timeout
    if relative is None or not request.execute:
        return request, None
    try:
        seconds = solution_output(request, toolchain, exercise, probe, settings).seconds
    except IdrrunError:
        return request, None  # the checks that need the solution say why
    if seconds is None or relative.limit(seconds, request.timeout) >= request.timeout:
        return request, None
    return dataclasses.replace(request, timeout=relative.limit(seconds, request.timeout)), seconds


# What a run stopped at the limit relative to the solution's time is told, after what: why it
# is slow (the lesson's words, else what its trace showed, else a question), then how to let
# it run.
SLOW_MEASURED = "{why} (measured in this run: {figure})"
SLOW_UNKNOWN = ("it is far slower than the solution with the same arguments: a loop left on the "
                "host, or arrays moved between host and GPU at every iteration?")
LET_IT_RUN = ("To let it run to its end, put --timeout {seconds:g} on the %%idrrun line (or "
              "idrrun run's): its own limit, in place of this one.")


def why_slow(slow: str, hints: Sequence[Hint]) -> str:
    """Why a run stopped at the relative limit is slow: the exercise's words (its `slow`),
    with the figure of the first hint its trace gave (a run stopped on the GPU still leaves
    the copies it made: profile/hints.py), else that hint's own words, else a question."""
    first = min(hints, key=lambda h: h.severity != "warning", default=None)
    why = slow or (first.message if first is not None else SLOW_UNKNOWN)
    if first is not None:
        why = SLOW_MEASURED.format(why=why.rstrip("."), figure=first.figure)
    return why if why.endswith((".", "?", "!")) else why + "."


def _against_solution(outcome: Outcome, request: RunRequest, toolchain: Toolchain,
                      exercise: Exercise, probe: Probe, settings: Settings,
                      stopped_at: float | None = None) -> Failure | None:
    """The run's failure; one that timed out told how long the solution takes with the same
    arguments (run once for it when its output is not kept yet): far less says more than
    "timed out". stopped_at: the limit relative to the solution's time the run had, when it had
    one; stopped there, it is told why it is slow and, in a notebook, how to let it run (a
    graded run's limit is the grader's: a student cannot raise it there) (`request`: the
    request before that limit, with its absolute one)."""
    failure = outcome.failure
    if failure is None or failure.kind is not FailureKind.TIMEOUT:
        return failure
    try:
        seconds = solution_output(request, toolchain, exercise, probe, settings).seconds
    except IdrrunError:
        seconds = None  # the row says it timed out, as it would without this
    if seconds is None:
        return failure
    if stopped_at is not None and request.relative_timeout is not None and failure.limit is None:
        hints = outcome.profile.hints if outcome.profile is not None else ()
        return dataclasses.replace(failure, limit=SOLUTION_LIMIT, what=STOPPED_VS_SOLUTION.format(
            limit=f"{stopped_at:.1f}".removesuffix(".0"), seconds=_shown(seconds),
            rule=request.relative_timeout),
            hint=why_slow(exercise.slow, hints) + ("" if request.room is not None else
                                                   " " + LET_IT_RUN.format(seconds=request.timeout)))
    return dataclasses.replace(failure, what=timed_out_against(failure.what, request.timeout,
                                                               seconds))


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
