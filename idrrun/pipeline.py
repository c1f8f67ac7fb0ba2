"""The one pipeline behind %%idrrun, %idrrunfile, `idrrun run` and grading.

    RunRequest -> Toolchain -> BuildResult -> RunResult (-> Verdict, checking.py)

Front ends resolve the RunRequest and its Toolchain (request/resolve.py), make a Reporter
(display.py), put them together with the probe and the settings into one Job (`prepare`: what
was decided, frozen) and call `execute(job)`: a ladder of small rungs (LADDER, as nbclient's
execute_cell), each a function (Job, Run) -> Run | Outcome over one record of what happened
(Run), the rungs that hold something while the next ones run (a graded run's folders, the
profile's folder, a GPU lane) entered on one ExitStack and left once the rung they serve is
done:

    start -> box -> compile -> (object file) -> stage the program -> profile
          -> plan the run -> lane -> run -> after the run -> take out -> collect

A GPU lane (run/lanes.py) is held for the program's run only: a timed run holds its GPU alone,
and the class's other timed runs wait for it, so the run is planned before (its launch, its
box, the libraries it loads placed for its user) and read after (the profiler's end, the
regions it ran), each outside the hold.

The run's plan is one value (RunPlan): its launch, its box (sandbox.box, as every box), its
time limit. Its profile session (profile/running.py) is the record's, always one
(NoProfile when nothing profiles the run), which profile/stages.py makes before the run and
reads after it: the pipeline calls that module twice, its plan and its collect. What a failure
says (its wording) is failures.py's; the program's output renamed as it comes, build.Renamed.
A run derived from another (other arguments, the host's, the solution's) is a Job derived by
name (Job.with_args, on_host, for_solution).

A graded request (RunRequest.room) compiles and runs in fresh folders of its room, given to
a fresh uid, and whatever the program wrote is read back only through run/boundary.py.
Expected failures come back in Outcome.failure, as a FailureKind; only misconfiguration
raises (errors.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from . import build as build_mod
from . import failures, files
from .annotate import Listing
from .model import (
    BuildResult,
    DependencyList,
    Failure,
    Limits,
    Preprocessing,
    Probe,
    ProcResult,
    RunRequest,
    RunResult,
    SandboxSupport,
    Settings,
    Source,
    Toolchain,
    Verdict,
)
from .profile import regions, running
from .profile import stages as profile
from .profile.model import ExportBox, ProfileReport
from .profile.running import NoProfile, ProfileSession
from .errors import UsageError
from .checks import directives
from .run import allowance, boundary, isolation, lanes, launch, proc, sandbox, stack
from .run.allowance import Ledger
from .run.lanes import Held
from .run.launch import Launch
from .run.sandbox import Box
from .request import resolve
from .toolchains import family_of
from .toolchains.family import Family

# What the grader takes out of a graded run's folder for its checks, at most per file.
OUTPUT_CAP = 256 << 20


@dataclass(frozen=True)
class Outcome:
    """Everything one request produced: its stages' values, as data (a failure included)."""

    request: RunRequest
    toolchain: Toolchain | None
    build: BuildResult | None
    run: RunResult | None
    failure: Failure | None
    verdict: Verdict | None = None
    notes: tuple[str, ...] = field(default=())
    profile: ProfileReport | None = None
    # A checked request's source with the compiler's messages and remarks on their lines.
    annotated: Listing | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and (self.verdict is None or self.verdict.passed)


class Reporter(Protocol):
    """What the front end shows while the pipeline runs; each method shows nothing unless a
    reporter says otherwise (NullReporter is the protocol as it is)."""

    def started(self, request: RunRequest, toolchain: Toolchain) -> None:
        return None

    def notes(self, notes: Sequence[str]) -> None:
        return None

    def built(self, request: RunRequest, result: BuildResult) -> None:
        return None

    def output(self, text: str) -> None:
        return None

    def running(self, seconds: float) -> None:
        """The program has been running `seconds` (told about every second while it runs)."""
        return None

    def ran(self, request: RunRequest, result: RunResult) -> None:
        return None

    def profile(self, report: ProfileReport) -> None:
        return None

    def verdict(self, verdict: Verdict) -> None:
        return None

    def annotated(self, listing: Listing) -> None:
        return None


class NullReporter(Reporter):
    """Shows nothing (the protocol's methods do nothing): for the solution's runs and grading."""



@dataclass(frozen=True)
class Prepared:
    """What a request runs with: its family, its environment, its box's level (None: no box)."""

    family: Family
    environ: Mapping[str, str]
    support: SandboxSupport | None


@dataclass(frozen=True)
class Job:
    """One run's context, decided before it starts: the resolved request, its toolchain, the
    machine's probe and settings, what it runs with (Prepared) and who is told (the reporter).
    Every rung reads it; a run derived from it (other arguments, the host's, the solution's,
    the same once more) is another Job, by name (with_args, on_host, for_solution,
    with_timeout, quiet), and is shown to nobody but with_timeout's."""

    request: RunRequest
    toolchain: Toolchain
    probe: Probe
    settings: Settings
    prepared: Prepared
    reporter: Reporter = NullReporter()

    def _derived(self, request: RunRequest, reporter: Reporter | None = None) -> Job:
        return dataclasses.replace(self, request=request, prepared=_prepared(request, self.toolchain),
                                   reporter=NullReporter() if reporter is None else reporter)

    def with_args(self, args: tuple[str, ...], hidden: bool = False) -> Job:
        """Other program arguments (resolve.with_args; hidden: a hidden argument set)."""
        return self._derived(resolve.with_args(self.request, args, hidden))

    def on_host(self) -> Job:
        """The same build with its compute regions on the host (resolve.on_host)."""
        return self._derived(resolve.on_host(self.request))

    def for_solution(self, source: Source, workdir: Path, room: Path | None = None,
                     profile: str | None = None) -> Job:
        """The exercise's solution `source` beside this run (resolve.for_solution)."""
        return self._derived(resolve.for_solution(self.request, source, workdir, room, profile))

    def with_timeout(self, seconds: float) -> Job:
        """The same run under another time limit (the limit relative to the solution's time),
        shown as this one is."""
        return self._derived(dataclasses.replace(self.request, timeout=seconds), self.reporter)

    def quiet(self) -> Job:
        """The same run once more, shown to nobody (a timed figure's repeats)."""
        return self._derived(self.request)

    @property
    def label(self) -> str:
        """What names the run's profile folder: the kept copy's name, else the source's."""
        request = self.request
        return Path(request.keep).stem if request.keep else Path(request.source.name).stem


def _prepared(request: RunRequest, toolchain: Toolchain) -> Prepared:
    support = isolation.sandbox_support() if request.sandbox else None
    return Prepared(family_of(toolchain), os.environ, support)


def prepare(request: RunRequest, toolchain: Toolchain, probe: Probe, settings: Settings,
            reporter: Reporter = NullReporter()) -> Job:
    """The Job of a resolved request (the one place its parts are put together)."""
    return Job(request, toolchain, probe, settings, _prepared(request, toolchain), reporter)


@dataclass(frozen=True)
class Staged:
    """The program to run, where it runs, and the folder (of the room) it is read from."""

    executable: Path
    cwd: Path
    run_folder: Path | None = None  # a graded request's fresh folder for this run (its cwd)
    sealed: Path | None = None  # the folder holding the box's copy of the executable
    profile_dir: Path | None = None  # in run_folder: the profiler's, made before the box's run


@dataclass(frozen=True)
class RunPlan:
    """The run, decided before it starts: its launch (the command and its environment), its
    box (None: none), its time limit (the request's, and the grace its profiler may take after
    it) and the compute regions a checked OpenACC run counts."""

    launch: Launch
    box: Box | None
    timeout: float
    counting: regions.Counting = regions.Counting()
    limits: Limits = Limits()  # the request's, its stack raised where the frames need it
    # A graded run on a GPU machine whose program has no GPU code (without_gpu): no GPU held,
    # none in its box.
    gpu_free: bool = False


@dataclass(frozen=True)
class Run:
    """One execution of a Job on its way up the ladder: what each rung did, for the next ones
    (a field stays at its default until the rung that sets it)."""

    wanted: tuple[str, ...] = ()  # files the program writes that its checks read
    uid: int = -1  # the boxes' own user (a fresh uid for a graded request, as root); -1: ours
    notes: tuple[str, ...] = ()  # shown as they came (noted), kept for the Outcome
    built: BuildResult | None = None
    staged: Staged | None = None
    ledger: Ledger | None = None  # what is read of a graded run's box, all together
    profiling: ProfileSession = NoProfile()  # the one profile session of the run
    held: Held | None = None  # the GPU lane it holds while it runs
    plan: RunPlan | None = None
    ended: ProcResult | None = None  # the program's process as it ended (run_stage)
    ran: RunResult | None = None
    outputs: Path | None = None  # the files taken out of a graded run's folder
    report: ProfileReport | None = None

    @property
    def owners(self) -> tuple[int, ...]:
        """Who may own what the grader takes out of a box."""
        return (self.uid if self.uid >= 0 else os.geteuid(),)

    def noted(self, job: Job, notes: Sequence[str]) -> Run:
        """The run with `notes` added, shown once as they come."""
        job.reporter.notes(notes)
        return dataclasses.replace(self, notes=self.notes + tuple(notes))

    def outcome(self, job: Job, failure: Failure | None = None) -> Outcome:
        """What the request produced when it ends before its run: its build, or its failure."""
        return Outcome(job.request, job.toolchain, self.built, None, failure, notes=self.notes)


# --- the rungs, in LADDER's order ---------------------------------------------------------


def started(job: Job, run: Run) -> Run:
    """The request shown, with what the machine and the toolchain say of it."""
    job.reporter.started(job.request, job.toolchain)
    return run.noted(job, [*job.probe.warnings, *job.toolchain.machine_notes,
                           *job.toolchain.notes])


def boxed(job: Job, run: Run) -> Run:
    """The kept copy written; a box asked for that this machine cannot make refused; the
    boxes' user of this execution."""
    request = job.request
    if request.keep:
        files.write_atomic(request.workdir / request.keep, request.source.text)
    support = job.prepared.support
    if support is not None and support.level == "none":
        raise UsageError(f"a sandbox was asked for ([sandbox] mode, --sandbox, or grading) but "
                         f"{support.why}")
    # One fresh user per graded request, as root: its compile and run are its own, nobody else's.
    uid = sandbox.fresh_uid() if support is not None and support.root and request.room is not None \
        else -1
    return dataclasses.replace(run, uid=uid)


def compile_stage(job: Job, run: Run) -> Run | Outcome:
    """The build (in a box of its own when graded); a failed one is the request's outcome."""
    request, toolchain, family = job.request, job.toolchain, job.prepared.family
    product = build_mod.product_name(request)
    preprocess = family.preprocess(toolchain, build_mod.source_file_name(request.source), product) \
        if request.check is not None else Preprocessing()
    graded = request.room is not None
    job_step = launch.compile_launch(request, job.settings, job.prepared.environ)
    built = build_mod.build(
        request, toolchain, job.settings.cache_dir, job.probe.protections, preprocess, run.uid,
        launcher=job_step.launcher if job_step is not None else (),
        env=job_step.env if job_step is not None else None,
        dependencies=family.dependencies(toolchain, product) if graded else DependencyList(),
        feedback_files=family.feedback_files(toolchain) if graded else (),
        stack_usage=family.stack_usage(toolchain))
    if job_step is not None:
        nodes, placement = launch.after(job_step, built.proc)
        built = dataclasses.replace(built, nodes=nodes)
        run = run.noted(job, placement)
    run = dataclasses.replace(run, built=built)
    job.reporter.built(request, built)
    return run if built.ok else run.outcome(job, failures.compile_failure(built, request))


def object_file_stage(job: Job, run: Run) -> Run | Outcome:
    """-c (--object): the object file copied into the working folder; -c and -n end here,
    nothing runs."""
    request = job.request
    if request.object_only:
        assert run.built is not None and run.built.object_file is not None
        dest = request.workdir / build_mod.object_name(request)
        shutil.copyfile(run.built.object_file, dest)
        run = run.noted(job, [f"object file: {dest}"])
    return run.outcome(job) if request.object_only or not request.execute else run


@contextlib.contextmanager
def stage_program(job: Job, run: Run) -> Iterator[Run]:
    """Where the program runs: its working folder, or for a graded request a fresh folder of
    its room holding a copy of the submission's files (and its profiler's folder, made before
    the box gets it), the executable sealed in a folder of its own that the box can run, not
    change; both removed when this ends (once nothing of its box runs)."""
    staged = _staged(job, run)
    # What is read of a graded run's box, all together (run/allowance.py).
    ledger = allowance.Ledger() if staged.run_folder is not None else None
    try:
        yield dataclasses.replace(run, staged=staged, ledger=ledger)
    finally:
        for folder in (staged.run_folder, staged.sealed):
            if folder is not None:
                boundary.remove(folder)


def _staged(job: Job, run: Run) -> Staged:
    request, built, prepared = job.request, run.built, job.prepared
    assert built is not None and built.executable is not None
    if request.room is None:
        return Staged(built.executable, request.workdir)
    profile_dir = f"{running.PROFILE_DIR}/{running.run_dir_name(job.label)}" \
        if request.profile is not None else None
    folder = boundary.box_folder(request.room, "run-", run.uid, run.uid,
                                 files_from=request.workdir,
                                 make_dirs=(profile_dir,) if profile_dir is not None else (),
                                 tmp=sandbox.own_tmp(prepared.support))
    sealed = boundary.sealed_folder(request.room, "bin-", run.uid)
    executable = boundary.seal(built.executable, sealed, build_mod.EXECUTABLE, run.uid)
    return Staged(executable, folder, folder, sealed,
                  folder / profile_dir if profile_dir is not None else None)


@contextlib.contextmanager
def profile_stage(job: Job, run: Run) -> Iterator[Run]:
    """The run's profile session (NoProfile when nothing profiles it), the one call before the
    run into profile/stages.py. The profiler writes in a graded run's folder made for it
    (stage_program), else in the user's idrrun-profile/ for a profile shown, else (a trace
    for the checks only) in a hidden folder of its own, removed when this ends."""
    request, staged = job.request, run.staged
    assert staged is not None
    if request.profile is None:
        yield run
        return
    if staged.profile_dir is not None:
        run_dir, quiet = staged.profile_dir, None
    else:
        run_dir, quiet = running.profile_folder(request.workdir, job.label, request.show_profile)
    try:
        plan = profile.plan(request.profile, run_dir, job.settings.cache_dir,
                            nsys_command=job.settings.profiler, timeout=request.timeout,
                            drawn=request.show_profile)
        # A box's trace is read after the run, through run/boundary.py: no follower.
        yield dataclasses.replace(run, profiling=ProfileSession.start(
            plan, follow=staged.run_folder is None, show_profile=request.show_profile,
            work=_work(job)))
    finally:
        if quiet is not None:
            boundary.remove(quiet)


@contextlib.contextmanager
def lane_stage(job: Job, run: Run) -> Iterator[Run]:
    """A graded run on a GPU machine holds a lane while its program runs (run/lanes.py), its
    plan made: a timed one waits for its GPU to be its own. Other runs hold none."""
    request = job.request
    if request.lanes is None:
        yield run
        return
    if run.plan is not None and run.plan.gpu_free:
        yield dataclasses.replace(run, held=lanes.without_gpu(request.lanes))
        return
    with lanes.hold(request.lanes, request.timed, (request.mpi_ranks or 1) > 1) as held:
        yield dataclasses.replace(run, held=held)


def without_gpu(job: Job, run: Run) -> bool:
    """A graded run on a GPU machine whose program has no GPU code (directives.reaches_gpu,
    over its source, its headers and what its compile read): it holds no GPU (lane_stage) and
    its box shows no GPU device (run_box), so that whatever the reading missed runs on the
    host, never on a GPU beside another program's timed run."""
    request = job.request
    if request.lanes is None or not request.lanes.gpus:
        return False
    source, built = request.source, run.built
    pre = built.build_dir / build_mod.PREPROCESSED if built is not None and built.build_dir else None
    # The grader's own cache (no box sees it), written by the grader: build.PREPROCESSED_CAP.
    compiled = pre.read_text(errors="replace") if pre is not None and pre.is_file() else None
    return not directives.reaches_gpu(source.text, source.language, source.headers, compiled)


def plan_run(job: Job, run: Run) -> Run:
    """The run's launch and box, decided before it starts (and before its lane: the lane's GPU
    and CPUs are the run's at its start, run_stage); its profile session placed for its box's
    user."""
    request, settings, staged = job.request, job.settings, run.staged
    assert staged is not None
    tools_dir = request.room / "tools" if request.room is not None and run.uid >= 0 else None
    profiling = run.profiling.placed(tools_dir) if tools_dir is not None else run.profiling
    if profiling.unavailable:
        run = run.noted(job, profiling.unavailable)
    run = dataclasses.replace(run, profiling=profiling)
    counting = regions.counting(request, settings.cache_dir, staged.cwd, tools_dir)
    base_env = {**job.prepared.environ, **job.prepared.family.run_env(request, job.toolchain),
                **counting.env}
    launched = launch.command(request, staged.executable, settings, base_env,
                              regions.under_profiler(counting, profiling.argv_prefix),
                              profiling.env)
    run = run.noted(job, launched.notes)
    gpu_free = without_gpu(job, run)
    box = run_box(job, run, launched, counting, gpu_free) if job.prepared.support is not None else None
    memory = stack.memory()
    raised = stack.raised(request.limits, run.built.frames if run.built else (), memory)
    note = failures.stack_note(raised, memory)
    run = run.noted(job, [note] if note else [])
    return dataclasses.replace(run, plan=RunPlan(launched, box, request.timeout + profiling.grace,
                                                 counting, raised.limits, gpu_free))


def run_box(job: Job, run: Run, launched: Launch,
            counting: regions.Counting = regions.Counting(), gpu_free: bool = False) -> Box:
    """What the program's box shows (sandbox.box, as every box): its folder read-write;
    its executable, idrrun's libraries it loads, the profiler's and the compiler's
    installations, the libraries on its path, all read-only; nothing else of the machine but
    the system's folders."""
    request, toolchain, prepared, staged = job.request, job.toolchain, job.prepared, run.staged
    assert prepared.support is not None and staged is not None
    readable = [staged.sealed or staged.executable, *counting.readable, *run.profiling.readable]
    return sandbox.box("run", staged.cwd, prepared.support, run.uid, environ=launched.env,
                       extra_env={**run.profiling.env, **counting.env},
                       readable=readable, installations=[Path(p) for p in toolchain.prefixes],
                       hidden=request.hide, cache=job.settings.cache_dir,
                       gpu=prepared.family.gpu_context(toolchain) and not gpu_free,
                       room=request.room,
                       protections=job.probe.protections)


def run_stage(job: Job, run: Run) -> Run:
    """The program's run, in the lane it holds (if any: its GPU and CPUs given to the plan,
    Held.placed), its output shown as it comes (the build's names renamed, a profiler's own
    messages filtered), the built-in tracer's file read meanwhile by the profile session's
    follower; then the run as its profiler tells it (ProfileSession.stopped: its launch mark,
    watched by the kernel, else looked for), and once more where the profiler failed before it
    started the program for a reason of its own that passes (ProfileSession.start_again:
    nsys's daemon), only where the kernel watched the mark's folder: without a watch, a mark
    not found is a name the program could have removed, and a program that ran is never run
    twice (its second run would find what its first left). Nothing else happens while a timed
    run holds its GPU alone."""
    p, watched = _run_once(job, run)
    again = run.profiling.start_again(p) if watched else None
    if again is not None:
        run = run.noted(job, [again])
        p, _ = _run_once(job, run)
    return dataclasses.replace(run, ended=p)


def _run_once(job: Job, run: Run) -> tuple[ProcResult, bool]:
    """One start of the planned run, as its profiler tells it, and whether the kernel watched
    its launch mark's folder."""
    request, reporter, profiling = job.request, job.reporter, run.profiling
    plan, staged, held = run.plan, run.staged, run.held
    assert plan is not None and staged is not None
    env, box = held.placed(plan.launch.env, plan.box) if held is not None else \
        (plan.launch.env, plan.box)
    renamed = build_mod.Renamed(reporter.output, request.source)
    output = profiling.output_filter(renamed)
    outside, inside = plan.launch.around_box() if box is not None else ((), plan.launch.argv)
    watch = profiling.watch()
    with profiling.follower or contextlib.nullcontext():
        p = proc.run(inside, what="run",
                     timeout=plan.timeout, spec=proc.ProcSpec(
                         cwd=staged.cwd, env=env, on_output=output,
                         on_tick=reporter.running, terminal=True,
                         max_output=request.max_output, protections=job.probe.protections,
                         limits=held.limits(plan.limits) if held is not None else plan.limits,
                         gpu_run=job.prepared.family.gpu_context(job.toolchain),
                         box=box, outer=outside, alone=request.hidden_args))
    output.finish()
    renamed.finish()  # (what the profiler's filter let go when it finished)
    return profiling.stopped(p, staged.run_folder, watch), watch is not None


def after_run(job: Job, run: Run) -> Run:
    """After the program's run, its lane given back: the run as its profiler tells it, where
    it ran, and the regions it ran, counted against a graded run's ledger (its regions
    records first)."""
    request, plan, staged, held = job.request, run.plan, run.staged, run.held
    assert plan is not None and staged is not None and run.ended is not None
    p = run.ended
    run = run.noted(job, p.notes)
    nodes, placement = launch.after(plan.launch, p)
    if len(nodes) > 1:
        placement.insert(0, launch.describe_placement(nodes))
    run = run.noted(job, placement)
    missing = tuple(f for f in request.get_files if not _written(staged, f))
    ran = RunResult(command=plan.launch.shown, proc=p, missing_files=missing, nodes=nodes,
                    regions=regions.collect(plan.counting, staged.cwd, run.uid,
                                            staged.executable, run.ledger),
                    lane=held.describe() if held is not None else "")
    job.reporter.ran(request, ran)
    return dataclasses.replace(run, ran=ran)


def _written(staged: Staged, name: str) -> bool:
    if staged.run_folder is None:
        return (staged.cwd / name).exists()
    return boundary.is_file(staged.run_folder, name)


def take_out(job: Job, run: Run) -> Run:
    """After a graded run: the files the checks want and the profile's files, copied out of
    the run's folder (regular files of the box's uid, capped, counted against the row's
    ledger) into folders of the grader's own; the profile session then reads them there.
    Nothing for a run in its working folder."""
    request, staged, profiling = job.request, run.staged, run.profiling
    assert staged is not None
    profiled = profiling.leaves_files and staged.profile_dir is not None
    if staged.run_folder is None or request.room is None or not (run.wanted or profiled):
        return run
    out = boundary.fresh(request.room, "out-")
    fd = boundary.open_dir(staged.run_folder)
    try:
        for name in run.wanted:
            boundary.take_to(fd, name, out / name, OUTPUT_CAP, run.owners, ledger=run.ledger)
        if profiled and staged.profile_dir is not None:
            profiling = profiling.taken_from(
                fd, staged.profile_dir.relative_to(staged.run_folder).as_posix(),
                boundary.fresh(request.room, "profile-"), run.owners, run.ledger)
    finally:
        os.close(fd)
    return dataclasses.replace(run, outputs=out, profiling=profiling)


def _export_box(job: Job, run: Run) -> ExportBox | None:
    """For a graded run in a box: the box nsys's export of its report runs in (the run's own
    level, uid, guard, limits and hidden folders); None for a run outside a box."""
    request, prepared = job.request, job.prepared
    box = run.plan.box if run.plan is not None else None
    if box is None or request.room is None or prepared.support is None:
        return None
    return ExportBox(room=request.room, support=prepared.support, uid=run.uid,
                     protections=job.probe.protections, limits=request.limits,
                     environ=prepared.environ, hidden=box.hidden)


def _work(job: Job) -> profile.Work:
    """What the run's profile is told beside its trace: the source's name, the GPU's."""
    probe = job.probe
    return profile.Work(gpu=probe.gpus[0].name if probe.gpus else "",
                        source_name=job.request.source.name,
                        launch_cost=job.prepared.family.launch_cost(job.toolchain))


def collect_stage(job: Job, run: Run) -> Run:
    """The run's profile, read after it and shown when asked: the one call after the run into
    profile/stages.py."""
    profiling = run.profiling
    if not profiling.reported:
        return run
    work = _work(job)
    report = profile.collect(profiling.plan, timeout=120, source_name=work.source_name,
                             gpu=work.gpu, follower=profiling.follower, ledger=run.ledger,
                             boxed=_export_box(job, run), launch_cost=work.launch_cost)
    if profiling.show_profile:
        job.reporter.profile(report)
    return dataclasses.replace(run, report=report)


def finished(job: Job, run: Run) -> Outcome:
    """The Outcome of a request that ran: its run with what was taken out of it, and its
    failure (failures.py) when it failed."""
    assert run.ran is not None and run.built is not None
    ran = dataclasses.replace(run.ran, outputs=run.outputs)
    if run.ledger is not None and run.ledger.refused:
        ran = dataclasses.replace(ran, refused=run.ledger.refused)
    # Its failure told of the stack it had (raised from its frames, where they needed it).
    request = job.request if run.plan is None else dataclasses.replace(job.request,
                                                                        limits=run.plan.limits)
    failure = failures.run_failure(ran, request, run.built.frames, job.toolchain.target) \
        if ran.failed else None
    return Outcome(job.request, job.toolchain, run.built, ran, failure, notes=run.notes,
                   profile=run.report)


# --- the ladder ----------------------------------------------------------------------------


class Rung(NamedTuple):
    """A step of the ladder: the next record, or the Outcome that ends the request there."""

    name: str
    step: Callable[[Job, Run], Run | Outcome]


class Holding(NamedTuple):
    """A rung that holds something while the rungs after it run (a folder, a profile's folder,
    a GPU lane): entered in its place, left once the rung `until` is done (or on an error)."""

    name: str
    enter: Callable[[Job, Run], contextlib.AbstractContextManager[Run]]
    until: str


LADDER: tuple[Rung | Holding, ...] = (
    Rung("start", started),
    Rung("box", boxed),
    Rung("compile", compile_stage),
    Rung("object file", object_file_stage),
    Holding("stage the program", stage_program, until="take out"),
    Holding("profile", profile_stage, until="collect"),
    Rung("plan the run", plan_run),
    Holding("lane", lane_stage, until="run"),
    Rung("run", run_stage),
    Rung("after the run", after_run),
    Rung("take out", take_out),
    Rung("collect", collect_stage),
)


def execute(job: Job, wanted: Sequence[str] = ()) -> Outcome:
    """Build and run one resolved request: LADDER, in order, each rung given the Job and the
    record so far (the held ones entered on one ExitStack); every expected failure is in the
    Outcome. wanted: files the program writes that its checks read (taken out of a graded
    run)."""
    run = Run(wanted=tuple(wanted))
    scopes: dict[str, list[contextlib.ExitStack[bool | None]]] = {}
    with contextlib.ExitStack() as stack:
        for rung in LADDER:
            if isinstance(rung, Holding):
                scope = stack.enter_context(contextlib.ExitStack())
                run = scope.enter_context(rung.enter(job, run))
                scopes.setdefault(rung.until, []).append(scope)
                continue
            done = rung.step(job, run)
            if isinstance(done, Outcome):
                return done
            run = done
            for scope in reversed(scopes.pop(rung.name, [])):
                scope.close()
    return finished(job, run)
