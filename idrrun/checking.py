"""A run checked against its exercise: the pipeline, the solution's output, the verdict. The
notebooks' --check and grading both come here; a plain cell goes straight to the pipeline.

    run_with_options: what the magic and `idrrun run` do with a parsed line (checked or not)
    execute_checked:  one prepared Job + its exercise -> Outcome with a Verdict

The runs a check needs beside the program's own are declared, in order, in CHECK_STEPS (the
solution's, the host pair, the timed repeats, the hidden sets), each made when the exercise's
kinds ask for it (their records say what they need: checks/registry.py); each step is a
function from one record (Checked) to the next, and the verdict is one of them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

from . import annotate
from . import build as build_mod
from .files import write_atomic
from . import pipeline
from .checks import (compare, measure, reference, relative, score, specs, trace_kinds,
                     visibility)
from .checks.evidence import Evidence, HostComparison
from .checks.measure import Figure
from .checks.specs import Exercise
from .checks.spec_values import CheckSpec
from .checks.verdict import evaluate, evaluate_hidden
from .checks.words import plural
from .errors import IdrrunError, SpecError
from .model import (AccReport, BuildResult, CheckResult, Comparison, Failure, FailureKind, Probe,
                    RunRequest, Settings, Source, Toolchain, Verdict)
from .pipeline import Job, Outcome
from .profile import diagnose
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


def solution_output(job: Job, exercise: Exercise) -> SolutionRun:
    """The solution's output for the same arguments and toolchain as `job`'s: built and run
    once, in a room of its own when the request is graded (its box, its uid), then cached where
    no program can reach (the cache is hidden from every box), under a key that includes
    idrrun's version."""
    request = job.request
    pair = exercise.sources[request.source.language]
    if pair.solution is None:
        # A students' course: the solution's output for the public arguments travels instead.
        ref = reference.lookup(exercise, request.source.language, request.program_args)
        if ref is None:
            return SolutionRun(None, None, NO_SOLUTION)
        return SolutionRun(ref.output, ref.folder, ref.problem, from_reference=True,
                           left_out=ref.left_out)
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    profile = _solution_profile(job, exercise)
    # Keyed by the course's own file, wherever it is compiled from.
    sol_request = resolve.for_solution(request, sol_source, request.workdir, profile=profile)
    key = build_mod.build_key(sol_request, job.toolchain)
    args_key = hashlib.sha256("\0".join((__version__, *sol_request.program_args)).encode()).hexdigest()[:12]
    cached = job.settings.cache_dir / "solutions" / f"{key}-{args_key}.out"
    files = cached.with_suffix(".files")
    with _locks_guard:
        lock = _solution_locks.setdefault(str(cached), threading.Lock())
    with lock:
        # Kept with every file its checks compare now (a spec may have gained an image check).
        kept = _cached_run(cached, files, profile is not None)
        if kept is not None and all((files / name).is_file() for name in exercise.solution_files):
            return kept
        sol_job, scratch = _solution_job(job, sol_source, pair.solution, profile)
        try:
            copy_data_files(exercise, sol_job.request.workdir)
            outcome = pipeline.execute(sol_job, wanted=exercise.solution_files)
            return _kept_run(cached, exercise, sol_job, outcome, profile is not None)
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)


def _kept_run(cached: Path, exercise: Exercise, sol_job: Job, outcome: Outcome,
              profiled: bool) -> SolutionRun:
    """The solution's run as it went, kept in the cache beside `cached` (its output, its time,
    its files, its figures and timeline) when it did not fail."""
    if outcome.failure is not None:
        said = " | ".join(outcome.failure.output.strip().splitlines()[-3:])
        return SolutionRun(None, None, f"the solution {outcome.failure.step} failed: "
                                       f"{outcome.failure.what}" + (f" ({said})" if said else ""))
    assert outcome.run is not None
    files = cached.with_suffix(".files")
    if exercise.solution_files:
        written = outcome.run.outputs or sol_job.request.workdir
        files.mkdir(parents=True, exist_ok=True)
        for name in exercise.solution_files:
            if (written / name).is_file() and not (written / name).is_symlink():
                shutil.copyfile(written / name, files / name)
    found, timeline = _keep_figures(cached, exercise, sol_job.toolchain, outcome, profiled)
    write_atomic(cached.with_suffix(".seconds"), f"{outcome.run.proc.seconds:.3f}\n")
    write_atomic(cached, outcome.run.proc.output)
    return SolutionRun(outcome.run.proc.output, files if exercise.solution_files else None,
                       figures=found, timeline=timeline, seconds=outcome.run.proc.seconds)


def _solution_profile(job: Job, exercise: Exercise) -> str | None:
    """How the solution runs are profiled: as the student's run is, when the exercise compares
    traces or the student asked for the profile (the diagnosis of her run weighs its causes
    against the solution's kernels: profile/diagnose.py), and the build is for the GPU (a host
    build's trace is judged by no check: _trace); on the host its time is then the program's
    own, no profiler's."""
    wanted = exercise.needs_trace or job.request.show_profile
    return job.request.profile if wanted and job.toolchain.target == "gpu" else None


def _solution_job(job: Job, sol_source: Source, solution: Path,
                  profile: str | None) -> tuple[Job, Path | None]:
    """The solution's Job beside a student's: in its room when the request is graded (its
    box, its uid), else in a scratch folder (returned: the caller removes it)."""
    if job.request.room is not None:
        src = _room(solution, job.settings) / "src"
        return job.for_solution(dataclasses.replace(sol_source, origin_dir=src), src,
                                src.parent, profile=profile), None
    scratch = Path(tempfile.mkdtemp(prefix="idrrun-solution-"))
    return job.for_solution(sol_source, scratch, profile=profile), scratch


def solution_times(job: Job, exercise: Exercise,
                   how: measure.Repeat = measure.REPEAT) -> tuple[float, ...]:
    """The wall times of runs of the solution with the job's arguments, measured as a timed
    figure is (checks/measure.py): more runs of the same build until the last how.least times
    settle, how.most at most (the first as solution_output keeps it: its first run on the
    machine, 5.7 s against 2.3 s for the next ones on an H200); each run as a graded row's is:
    in its room and lane. () where it has no source (a students' course) or a run fails."""
    first = solution_output(job, exercise)
    request = job.request
    pair = exercise.sources[request.source.language]
    if first.seconds is None or pair.solution is None:
        return ()
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    sol_job, scratch = _solution_job(job, sol_source, pair.solution,
                                     _solution_profile(job, exercise))
    times = [first.seconds]
    try:
        copy_data_files(exercise, sol_job.request.workdir)
        while len(times) < how.most and not measure.settled(times, how):
            outcome = pipeline.execute(_timed_as(sol_job, job))
            if outcome.failure is not None or outcome.run is None:
                return ()
            times.append(outcome.run.proc.seconds)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return tuple(times)


def _timed_as(sol_job: Job, job: Job) -> Job:
    """The solution's run in a lane as the row's is: alone on its GPU when hers is timed (a
    solution's request is never timed by itself: resolve.for_solution)."""
    return _timed(sol_job, job.request.timed)


def _timed(job: Job, timed: bool) -> Job:
    """The same run, alone on its GPU (timed) or sharing it."""
    return dataclasses.replace(job, request=dataclasses.replace(job.request, timed=timed))


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


def _evidence(job: Job, outcome: Outcome, solution: SolutionRun | None,
              host: HostComparison | None = None) -> Evidence:
    request, toolchain = job.request, job.toolchain
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
    figures = solution.figures if solution is not None else None
    if figures is not None and figures.traced:
        out["gpu_busy"] = (figures.gpu_busy,)
        if figures.shape is not None and figures.shape.span_ns > 0:
            out[trace_kinds.GPU_SPAN] = (figures.shape.span_ns / 1e9,)
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


@dataclass(frozen=True)
class Checked:
    """A checked request on its way through CHECK_STEPS: its jobs, and what each step adds."""

    job: Job  # the run's, under its limit relative to the solution's time (limited)
    unlimited: Job  # the same before that limit: the solution's runs and the hidden sets'
    exercise: Exercise
    hidden: bool  # graded: the hidden argument sets too, and the verdict as graded
    solution_seconds: float | None = None  # the solution's time, when it set the run's limit
    # What decides its timed figures, when graded and timed (work_key): identical work's key.
    work: tuple[str, ...] | None = None
    outcome: Outcome | None = None
    solution: SolutionRun | None = None
    host: HostComparison | None = None
    evidence: Evidence | None = None
    verdict: Verdict | None = None

    @property
    def ran(self) -> bool:
        """The program built and ran (whatever its run did)."""
        outcome = self.outcome
        return outcome is not None and outcome.run is not None and \
            outcome.build is not None and outcome.build.ok

    @property
    def clean(self) -> bool:
        """It ran and did not fail: worth running again."""
        return self.ran and self.outcome is not None and self.outcome.failure is None


def _main_run(c: Checked) -> Checked:
    """The program's run; one whose timed figures identical work of the grading measured
    already (measured_before) shares its GPU: alone, it would measure what is known."""
    job = _timed(c.job, False) if c.job.request.timed and measured_before(c) else c.job
    return dataclasses.replace(c, outcome=pipeline.execute(job, wanted=c.exercise.solution_files))


def _solution_run(c: Checked) -> Checked:
    """The solution's run with the same arguments (and the exercise's own limit), for the
    checks that compare with its output and the figures compared with the run's."""
    return dataclasses.replace(c, solution=solution_output(c.unlimited, c.exercise))


def _host_pair(c: Checked) -> Checked:
    assert c.outcome is not None
    return dataclasses.replace(c, host=host_comparison(c.job, c.exercise, c.outcome))


def _judged(c: Checked) -> Checked:
    """The one evaluation of the run's checks (checks/verdict.py), with its figures beside the
    solution's."""
    assert c.outcome is not None
    evidence = _evidence(c.job, c.outcome, c.solution, c.host)
    verdict = dataclasses.replace(evaluate(c.exercise, evidence), comparison=_comparison(
        c.exercise, c.job.toolchain, c.outcome, c.solution))
    return dataclasses.replace(c, evidence=evidence, verdict=verdict)


def _timed_repeats(c: Checked) -> Checked:
    return dataclasses.replace(c, verdict=_measured(c))


def _relative_runs(c: Checked) -> Checked:
    return dataclasses.replace(c, verdict=_relative(c))


def _hidden_sets(c: Checked) -> Checked:
    """The program run again with each hidden argument set, its output checks evaluated on
    each run (checks/verdict.py evaluate_hidden)."""
    assert c.verdict is not None
    exercise, extra = c.exercise, list[CheckResult]()
    for i, args in enumerate(exercise.hidden_args):
        public = c.unlimited.with_args(args, hidden=True)
        again = limited(public, exercise)[0]
        rerun = pipeline.execute(again, wanted=exercise.solution_files)
        solution = solution_output(public, exercise) if exercise.needs_solution else None
        extra += evaluate_hidden(exercise, _evidence(again, rerun, solution), i)
    return dataclasses.replace(c, verdict=dataclasses.replace(
        c.verdict, checks=c.verdict.checks + tuple(extra)))


class CheckStep(NamedTuple):
    """A step of a checked run: made when `asks` says the exercise's checks need it. `timed`:
    it measures the timed figures identical work shares (the run to the timed repeats)."""

    name: str
    asks: Callable[[Checked], bool]
    make: Callable[[Checked], Checked]
    timed: bool = True


# The runs a check needs, and its evaluation, in order. What each asks for is what the
# exercise's kinds need (Kind.needs_solution, needs_host, timed; compare.wanted: figures
# compared with the solution's), of a program that built and ran (cleanly, for a run again).
CHECK_STEPS = (
    CheckStep("the run", lambda c: True, _main_run),
    CheckStep("the solution's run", lambda c: c.ran and (
        c.exercise.needs_solution or compare.wanted(c.exercise)), _solution_run),
    CheckStep("the host pair", lambda c: c.clean and c.exercise.compares_host, _host_pair),
    CheckStep("the verdict", lambda c: True, _judged),
    CheckStep("the runs relative to the solution's", lambda c: c.clean and c.job.request.timed and
              any(relative.relative(spec) for spec in c.exercise.checks), _relative_runs),
    CheckStep("the timed repeats", lambda c: c.clean and c.job.request.timed, _timed_repeats),
    CheckStep("the hidden sets", lambda c: c.clean and c.hidden, _hidden_sets, timed=False),
)


def execute_checked(job: Job, exercise: Exercise, hidden: bool = False) -> Outcome:
    """The run and its verdict: CHECK_STEPS, each made when the exercise asks for it. hidden
    (grading): the program also runs with each of the exercise's hidden argument sets, its
    output checked again each time. A timed run (graded) has its timed checks measured over
    more runs; a run that timed out is told how long the solution takes."""
    checked = _checking(job, exercise, hidden)
    with _TURNS.turn(checked.work):
        checked = _steps(checked, [s for s in CHECK_STEPS if s.timed])
    return _checked_outcome(_steps(checked, [s for s in CHECK_STEPS if not s.timed]))


def _steps(checked: Checked, steps: Sequence[CheckStep]) -> Checked:
    for step in steps:
        if step.asks(checked):
            checked = step.make(checked)
    return checked


def _checking(job: Job, exercise: Exercise, hidden: bool) -> Checked:
    """Before the run: its language checked, a notebook's exercise without what only grading
    runs, the exercise's data files beside the program, and its limit relative to the
    solution's time (the spec's, the line giving no --timeout): the solution then runs first
    (once per machine and arguments, cached; graded: once for the class), its time bounding
    the run's; the solution's own runs keep the exercise's limit."""
    check_language(job.request.source, exercise)
    if not hidden:
        exercise = exercise.without_grading_only()
    copy_data_files(exercise, job.request.workdir)
    under, seconds = limited(job, exercise)
    work = work_key(under, exercise) if under.request.timed else None
    return Checked(under, job, exercise, hidden, seconds, work)


def _checked_outcome(c: Checked) -> Outcome:
    """The outcome with its verdict (a notebook's: what its student may see), shown; the
    source annotated; the failure: the run's (a timeout told the solution's time), else the
    failed checks."""
    assert c.outcome is not None and c.verdict is not None and c.evidence is not None
    exercise, reporter, verdict = c.exercise, c.job.reporter, c.verdict
    if not c.hidden:
        # A notebook's or a terminal's --check is the student's: what the spec lets them see.
        verdict = visibility.student_verdict(verdict, exercise)
    reporter.verdict(verdict)
    outcome = with_causes(c.outcome, c.evidence, c.solution)
    # The source annotated with the checks its student may see (a feedback file carries it).
    listing = annotated(c.job.request, outcome, c.evidence,
                        visibility.student_checks(verdict, exercise))
    if listing.notes:
        reporter.annotated(listing)
    failure = _against_solution(outcome, c.unlimited, exercise, stopped_at=c.job.request.timeout
                                if c.solution_seconds is not None else None)
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
    """The source with what its build said of it, the compiler's report, the failed checks and
    why the run was slow."""
    src = request.source
    return annotate.annotate(src.text, src.name, src.language, src.first_line,
                             outcome.build.output if outcome.build is not None else "",
                             evidence.acc, checks,
                             outcome.profile.causes if outcome.profile is not None else ())


def with_causes(outcome: Outcome, evidence: Evidence, solution: SolutionRun | None) -> Outcome:
    """The run's profile with why the run was slow (profile/diagnose.py), beside the solution's
    run when the check made one: the one call into the diagnosis."""
    if outcome.profile is None:
        return outcome
    shape = solution.figures.shape if solution is not None and solution.figures is not None else None
    causes = diagnose.of_run(outcome.request.source, outcome.build, evidence.acc, outcome.run,
                             outcome.profile, shape)
    if not causes:
        return outcome
    return dataclasses.replace(outcome, profile=diagnose.explained(outcome.profile, causes))


def _measured(c: Checked) -> Verdict:
    """The timed checks measured over more runs of the same build (each one in its lane,
    alone on its GPU: run/lanes.py) until their figures settle (checks/measure.py); the other
    checks stay as the first run gave them. A program that fails another check is not run
    again: its verdict is decided (trace_kinds.unmeasured_result)."""
    exercise, toolchain, outcome, verdict = c.exercise, c.job.toolchain, c.outcome, c.verdict
    assert outcome is not None and verdict is not None
    timed = {spec.label: spec for spec in exercise.checks if trace_kinds.is_timed(spec)
             and not relative.relative(spec)}  # those measured with the solution's: _relative
    if outcome.run is None or not outcome.run.proc.ok:
        return verdict  # its trace checks are not judged (verdict.py's CUT_SHORT): nothing to measure
    times = [outcome.run.proc.seconds]

    def again() -> dict[str, Figure] | str:
        rerun = pipeline.execute(c.job.quiet(), wanted=exercise.solution_files)
        if rerun.failure is not None:
            return f"a run {rerun.failure.step} failed: {rerun.failure.what}"
        if rerun.run is not None:
            times.append(rerun.run.proc.seconds)
        return _figures(timed, gpu_trace_values(toolchain, rerun)) or "a run left no GPU trace"

    first = _figures(timed, gpu_trace_values(toolchain, outcome))
    if not first:
        return verdict  # no trace: the checks say why they are incomplete
    if any(r.status == "fail" and r.name not in timed for r in verdict.checks):
        return _judged_timed(verdict, first, trace_kinds.unmeasured_result, timed)
    bounds = {label: bound for label, spec in timed.items()
              if (bound := trace_kinds.timed_bound(spec)) is not None}

    def repeated() -> Repeated:
        return Repeated(measure.repeat(first, again, bounds=bounds), tuple(times))

    record = repeated() if c.work is None else _SHARED_REPEATS.once(c.work, repeated)
    assert record is not None
    return dataclasses.replace(_judged_timed(verdict, record.figures, trace_kinds.measured_result,
                                             timed), run_times=record.times)


def _figures(timed: Mapping[str, CheckSpec], values: dict[str, float] | None) -> dict[str, Figure]:
    """The timed checks' figures in one run's trace values, by label (none without a trace)."""
    found = {label: trace_kinds.figure(spec, values) for label, spec in timed.items()}
    return {label: f for label, f in found.items() if f is not None}


_F = TypeVar("_F")


def _judged_timed(verdict: Verdict, figures: Mapping[str, _F],
                  judge: Callable[[CheckSpec, _F], CheckResult],
                  timed: Mapping[str, CheckSpec]) -> Verdict:
    """The verdict with each public timed check that has a figure judged on it."""
    return dataclasses.replace(verdict, checks=tuple(
        judge(timed[r.name], figures[r.name]) if r.name in figures and not r.hidden else r
        for r in verdict.checks))


# --- the checks judged relative to the solution (checks/relative.py): issue 47 ---------------
# The solution's runs of this grading (this process), per build, arguments, GPU and driver.
_SOLUTION_RUNS = relative.SolutionRuns()
NO_SOLUTION_RUN = "the solution could not be run again here (a students' course has none)"


class Judged(NamedTuple):
    """The relative checks of one build as its runs decided them, and those runs' times."""

    checks: dict[int, CheckResult]  # by the [[check]]'s index (relative.measured)
    times: tuple[float, ...]


class Repeated(NamedTuple):
    """The timed figures of one build measured over its runs (measure.repeat), and their times."""

    figures: dict[str, measure.Measured]
    times: tuple[float, ...]


# Identical work of this grading (this process) measured once (relative.Shared), by work_key:
# identical submissions get one mark, and the GPU measures them once.
_SHARED_RELATIVE: relative.Shared[Judged] = relative.Shared()
_SHARED_REPEATS: relative.Shared[Repeated] = relative.Shared()
# A row of work another row is measuring waits for its figures before its own run, which then
# shares the GPU (measured_before): without the turn, every copy that started meanwhile ran its
# graded run alone on the GPU (6 of 30 profile_cg rows at -j 8 on the H200, 2026-12-03).
_TURNS = relative.Turns()


def measured_before(c: Checked) -> bool:
    """Identical work of the grading measured every timed figure this run's checks read: the
    relative ones' (_relative) and the repeated ones' (_measured), where it has them."""
    if c.work is None:
        return False
    timed = [relative.relative(spec) for spec in c.exercise.checks if trace_kinds.is_timed(spec)]
    return bool(timed) and (not any(timed) or _SHARED_RELATIVE.known(c.work)) and \
        (all(timed) or _SHARED_REPEATS.known(c.work))


def work_key(job: Job, exercise: Exercise) -> tuple[str, ...] | None:
    """What decides a graded run's timed figures, for identical work of the grading to share
    them (STYLE.md 21: everything that decided it): the build but its room (build.content_key),
    the files it runs beside, by content (its source's own file under one name: a renamed copy
    is the same work), how it runs (arguments, limits, profiler, ranks, threads), the exercise,
    and the solution's key (its file, the compiler, the GPUs and their driver). None for a run
    not graded (a notebook's: its folder is the user's, and nothing is shared there)."""
    request = job.request
    if request.room is None:
        return None
    how = repr((request.threads, request.mpi_ranks, request.gpus, request.nodes, request.profile,
                request.timeout, request.relative_timeout, request.limits, request.sandbox,
                request.run_on_host, request.get_files, job.toolchain.target))
    return ("work", exercise.name, str(exercise.path), build_mod.content_key(request, job.toolchain),
            files_digest(request.workdir, Path(request.source.name).name), how,
            *_solution_key(job, exercise))


def files_digest(folder: Path, source_name: str) -> str:
    """The tree of a graded run's folder (the grader's own copy, which a run gets a copy of)
    by its names and contents, links by their targets; the file `source_name` under one name."""
    h = hashlib.sha256()
    for top, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = Path(top, name)
            rel = path.relative_to(folder).as_posix()
            shown = "<source>" if rel == source_name else rel
            h.update(shown.encode("utf-8", "surrogateescape") + b"\0")
            h.update(os.readlink(path).encode("utf-8", "surrogateescape") if path.is_symlink()
                     else path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def _run_of(toolchain: Toolchain, done: Outcome) -> relative.Run | str:
    """What one run says for the relative checks, or why it says nothing."""
    if done.failure is not None or done.run is None:
        return f"a run failed: {done.failure.what if done.failure is not None else 'not run'}"
    return relative.Run(done.run.proc.seconds, done.run.proc.output,
                        gpu_trace_values(toolchain, done))


def _relative(c: Checked) -> Verdict:
    """The relative checks (speed, gpu_busy's min_ratio) over her build's runs and the
    solution's, each in its lane alone on its GPU, until decided (checks/ratio.py); not judged
    without a GPU trace (verdict.py says why)."""
    exercise, job, outcome, verdict = c.exercise, c.job, c.outcome, c.verdict
    assert outcome is not None and verdict is not None
    if outcome.run is None or not outcome.run.proc.ok or \
            gpu_trace_values(job.toolchain, outcome) is None:
        return verdict
    key = _solution_key(job, exercise)
    mine: list[relative.Run] = []

    def again_solution() -> relative.Run | str:
        done = solution_again(job, exercise)
        got = _run_of(job.toolchain, done) if done is not None else NO_SOLUTION_RUN
        if not isinstance(got, str):
            _SOLUTION_RUNS.add(key, got)
        return got

    def again_yours() -> relative.Run | str:
        got = _run_of(job.toolchain, pipeline.execute(job.quiet(), wanted=exercise.solution_files))
        if not isinstance(got, str):
            mine.append(got)
        return got

    def judged() -> Judged:
        first = _run_of(job.toolchain, outcome)
        assert not isinstance(first, str)
        found = relative.measured(exercise, verdict.checks, [first], again_yours,
                                  _SOLUTION_RUNS.runs(key), again_solution,
                                  uncounted=_uncounted(exercise, verdict))
        return Judged(found, (first.seconds, *(r.seconds for r in mine)))

    record = judged() if c.work is None else _SHARED_RELATIVE.once(c.work, judged)
    assert record is not None
    times = record.times
    return dataclasses.replace(verdict, checks=relative.applied(verdict.checks, record.checks),
                               run_times=times if len(times) > len(verdict.run_times)
                               else verdict.run_times)


def _uncounted(exercise: Exercise, verdict: Verdict) -> dict[int, str]:
    """The relative checks whose points cannot count on this run (score.cannot_count), with
    the checks that keep them from counting in words: not measured further. A start file held
    the GPU alone for three runs of 6.5 s each to measure a speed that could earn nothing
    (profile_cg, a class of 30 on the H200, 2026-12-03)."""
    return {index: score.waits_said(failing)
            for index, failing in score.cannot_count(exercise, verdict.checks).items()}


def _solution_key(job: Job, exercise: Exercise) -> tuple[str, ...]:
    """What the solution's runs are kept by for the grading: its file as it is, the arguments,
    the compiler, and the GPUs with their driver (never another GPU's runs)."""
    request = job.request
    where = exercise.sources[request.source.language].solution
    stat = where.stat() if where is not None and where.is_file() else None
    return (str(where), f"{stat.st_size}:{stat.st_mtime_ns}" if stat is not None else "",
            *request.program_args, job.toolchain.compiler.version, job.toolchain.target,
            *(f"{g.name} {g.driver}" for g in job.probe.gpus))


def solution_again(job: Job, exercise: Exercise) -> Outcome | None:
    """One more run of the solution with the job's arguments, made as her timed run is: in its
    room, in a lane (alone on its GPU when hers is), profiled as hers; None where there is no
    solution to run (a students' course)."""
    request = job.request
    pair = exercise.sources[request.source.language]
    if pair.solution is None:
        return None
    sol_source = source_mod.from_file(pair.solution, request.source.language, str(pair.solution))
    sol_job, scratch = _solution_job(job, sol_source, pair.solution, _solution_profile(job, exercise))
    try:
        copy_data_files(exercise, sol_job.request.workdir)
        return pipeline.execute(_timed_as(sol_job, job))
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


# Why agrees_with_host cannot compare a build that runs its regions on the host anyway.
NOT_ON_GPU = ("this build runs its compute regions on the host: there is no GPU run to compare "
              "with the host's (needs a GPU)")


def host_comparison(job: Job, exercise: Exercise, outcome: Outcome) -> HostComparison:
    """For agrees_with_host: the program's output at the exercise's host arguments (small, so
    that the host's run stays short) on the GPU — the checked run's own when it ran with them —
    and the same build's with its compute regions on the host (the family says how)."""
    if job.toolchain.target != "gpu":
        return HostComparison(problem=NOT_ON_GPU)
    why = job.prepared.family.host_comparison(job.toolchain)
    if why:
        return HostComparison(problem=why)
    at = job.with_args(exercise.host_args)
    on_gpu = outcome if job.request.program_args == exercise.host_args else pipeline.execute(at)
    on_host = pipeline.execute(at.on_host())
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


def limited(job: Job, exercise: Exercise) -> tuple[Job, float | None]:
    """The job under its limit relative to the solution's time (request.relative_timeout:
    the exercise's, unless the line gave --timeout), the solution run once for these arguments
    on this machine when its time is not kept yet, and the solution's seconds when that limit
    is below the absolute one; the job as it is with no such limit, or no solution's time
    (a students' course: its references keep outputs, not times)."""
    request = job.request
    relative = request.relative_timeout
    if relative is None or not request.execute:
        return job, None
    try:
        seconds = solution_output(job, exercise).seconds
    except IdrrunError:
        return job, None  # the checks that need the solution say why
    if seconds is None or relative.limit(seconds, request.timeout) >= request.timeout:
        return job, None
    return job.with_timeout(relative.limit(seconds, request.timeout)), seconds


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


def _against_solution(outcome: Outcome, job: Job, exercise: Exercise,
                      stopped_at: float | None = None) -> Failure | None:
    """The run's failure; one that timed out told how long the solution takes with the same
    arguments (run once for it when its output is not kept yet): far less says more than
    "timed out". stopped_at: the limit relative to the solution's time the run had, when it had
    one; stopped there, it is told why it is slow and, in a notebook, how to let it run (a
    graded run's limit is the grader's: a student cannot raise it there) (`job`: the run's
    before that limit, with its absolute one)."""
    failure = outcome.failure
    if failure is None or failure.kind is not FailureKind.TIMEOUT:
        return failure
    try:
        seconds = solution_output(job, exercise).seconds
    except IdrrunError:
        seconds = None  # the row says it timed out, as it would without this
    if seconds is None:
        return failure
    request = job.request
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
    job = pipeline.prepare(request, toolchain, probe, settings, reporter)
    if exercise is None:
        return pipeline.execute(job)
    return execute_checked(job, exercise)
