"""The one pipeline behind %%idrrun, %idrrunfile, `idrrun run` and grading.

    RunRequest -> Toolchain -> BuildResult -> RunResult (-> Verdict, checking.py)

Front ends resolve the RunRequest and its Toolchain (request/resolve.py), make a Reporter
(display.py) and call `execute`: a ladder of small stages, each a function of the previous
stage's value (as nbclient's execute_cell):

    prepare -> compile -> (object file) -> stage the program -> profile -> lane -> plan the run
            -> run -> take out -> collect

Each rung is a function named for it (compile_stage, object_file_stage, stage_program,
profile_stage, lane_stage, plan_run, run_stage, take_out, collect_stage). The run's plan is
one value (RunPlan): its launch, its box (build.box_for, as a compile's), and its profile
session (profile/running.py), which profile/session.py makes before the run and reads after
it: the pipeline calls that module twice, its plan and its collect. What a failure says
(its wording) is failures.py's; the program's output renamed as it comes, build.Renamed.

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from . import build as build_mod
from . import failures, files
from .annotate import Listing
from .model import (
    BuildResult,
    DependencyList,
    Failure,
    Preprocessing,
    Probe,
    RunRequest,
    RunResult,
    SandboxSupport,
    Settings,
    Toolchain,
    Verdict,
)
from .profile import regions, running
from .profile import session as profile
from .profile.model import ExportBox, ProfileReport
from .profile.running import ProfileSession
from .errors import UsageError
from .run import boundary, evidence, isolation, lanes, launch, proc, sandbox
from .run.evidence import Ledger
from .run.lanes import Held
from .run.launch import Launch
from .run.sandbox import Box
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



class Notes:
    """The request's notes, shown once as they come and kept for its Outcome."""

    def __init__(self, reporter: Reporter) -> None:
        self._reporter = reporter
        self.all: list[str] = []

    def add(self, notes: Sequence[str]) -> None:
        self._reporter.notes(notes)
        self.all += notes


@dataclass(frozen=True)
class Prepared:
    """What a request runs with: its family, its environment, its box's level and user."""

    family: Family
    environ: Mapping[str, str]
    support: SandboxSupport | None  # None: no box
    uid: int  # the boxes' own user (a fresh uid for a graded request, as root); -1: ours

    @property
    def owners(self) -> tuple[int, ...]:
        """Who may own what the grader takes out of a box."""
        return (self.uid if self.uid >= 0 else os.geteuid(),)


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
    box (None: none), its profile session, its time limit (the request's, and the grace its
    profiler may take after it) and the compute regions a checked OpenACC run counts."""

    launch: Launch
    box: Box | None
    profile: ProfileSession | None
    timeout: float
    counting: regions.Counting = regions.Counting()


def prepare(request: RunRequest, toolchain: Toolchain, environ: Mapping[str, str] | None) -> Prepared:
    if request.keep:
        files.write_atomic(request.workdir / request.keep, request.source.text)
    support = isolation.sandbox_support() if request.sandbox else None
    if support is not None and support.level == "none":
        raise UsageError(f"a sandbox was asked for ([sandbox] mode, --sandbox, or grading) but "
                         f"{support.why}")
    # One fresh user per graded request, as root: its compile and run are its own, nobody else's.
    uid = sandbox.fresh_uid() if support is not None and support.root and request.room is not None \
        else -1
    return Prepared(family_of(toolchain), os.environ if environ is None else environ, support, uid)


def compile_stage(request: RunRequest, toolchain: Toolchain, probe: Probe, settings: Settings,
                  prepared: Prepared, notes: Notes) -> BuildResult:
    family = prepared.family
    product = build_mod.product_name(request)
    preprocess = family.preprocess(toolchain, build_mod.source_file_name(request.source), product) \
        if request.check is not None else Preprocessing()
    graded = request.room is not None
    job_step = launch.compile_launch(request, settings, prepared.environ)
    built = build_mod.build(
        request, toolchain, settings.cache_dir, probe.protections, preprocess, prepared.uid,
        launcher=job_step.launcher if job_step is not None else (),
        env=job_step.env if job_step is not None else None,
        dependencies=family.dependencies(toolchain, product) if graded else DependencyList(),
        feedback_files=family.feedback_files(toolchain) if graded else (),
        stack_usage=family.stack_usage(toolchain))
    if job_step is not None:
        nodes, placement = launch.after(job_step, built.proc)
        built = dataclasses.replace(built, nodes=nodes)
        notes.add(placement)
    return built


def object_file_stage(request: RunRequest, built: BuildResult, notes: Notes) -> None:
    """-c (--object): the object file copied into the working folder; nothing runs."""
    assert built.object_file is not None
    dest = request.workdir / build_mod.object_name(request)
    shutil.copyfile(built.object_file, dest)
    notes.add([f"object file: {dest}"])


def stage_program(request: RunRequest, built: BuildResult, prepared: Prepared,
                  label: str) -> Staged:
    """Where the program runs: its working folder, or for a graded request a fresh folder of
    its room holding a copy of the submission's files (and its profiler's folder, made before
    the box gets it), the executable sealed in a folder of its own that the box can run, not
    change."""
    assert built.executable is not None
    if request.room is None:
        return Staged(built.executable, request.workdir)
    profile_dir = f"{running.PROFILE_DIR}/{running.run_dir_name(label)}" \
        if request.profile is not None else None
    folder = boundary.box_folder(request.room, "run-", prepared.uid, prepared.uid,
                                 files_from=request.workdir,
                                 make_dirs=(profile_dir,) if profile_dir is not None else (),
                                 tmp=sandbox.own_tmp(prepared.support))
    sealed = boundary.sealed_folder(request.room, "bin-", prepared.uid)
    executable = boundary.seal(built.executable, sealed, build_mod.EXECUTABLE, prepared.uid)
    return Staged(executable, folder, folder, sealed,
                  folder / profile_dir if profile_dir is not None else None)


def remove_staged(staged: Staged) -> None:
    """A graded run's fresh folder and its sealed executable, once nothing of its box runs."""
    for folder in (staged.run_folder, staged.sealed):
        if folder is not None:
            boundary.remove(folder)


@contextlib.contextmanager
def profile_stage(request: RunRequest, settings: Settings, staged: Staged,
                  label: str) -> Iterator[ProfileSession | None]:
    """The run's profile session (None when nothing profiles it), the one call before the
    run into profile/session.py. The profiler writes in a graded run's folder made for it
    (stage_program), else in the user's idrrun-profile/ for a profile shown, else (a trace
    for the checks only) in a hidden folder of its own, removed when this ends."""
    if request.profile is None:
        yield None
        return
    if staged.profile_dir is not None:
        run_dir, quiet = staged.profile_dir, None
    else:
        run_dir, quiet = running.profile_folder(request.workdir, label, request.show_profile)
    try:
        plan = profile.plan(request.profile, run_dir, settings.cache_dir,
                            nsys_command=settings.profiler, timeout=request.timeout,
                            drawn=request.show_profile)
        # A box's trace is read after the run, through run/boundary.py: no follower.
        yield ProfileSession.start(plan, follow=staged.run_folder is None,
                                   show_profile=request.show_profile)
    finally:
        if quiet is not None:
            boundary.remove(quiet)


def lane_stage(request: RunRequest) -> contextlib.AbstractContextManager[Held | None]:
    """A graded run on a GPU machine holds a lane while it runs (run/lanes.py): a timed one
    waits for its GPU to be its own. Other runs hold none."""
    if request.lanes is None:
        return contextlib.nullcontext()
    return lanes.hold(request.lanes, request.timed, (request.mpi_ranks or 1) > 1)


def plan_run(request: RunRequest, toolchain: Toolchain, settings: Settings, probe: Probe,
             prepared: Prepared, staged: Staged, profiling: ProfileSession | None, notes: Notes,
             held: Held | None = None) -> RunPlan:
    """The run's launch, box and profile session, decided before it starts."""
    family = prepared.family
    tools_dir = request.room / "tools" if request.room is not None and prepared.uid >= 0 \
        else None
    if profiling is not None:
        if tools_dir is not None:
            profiling = profiling.placed(tools_dir)
        if profiling.unavailable:
            notes.add(profiling.unavailable)
    counting = regions.counting(request, settings.cache_dir, staged.cwd, tools_dir)
    base_env = {**prepared.environ, **family.run_env(request, toolchain), **counting.env,
                **(held.env if held is not None else {})}
    launched = launch.command(
        request, staged.executable, settings, base_env,
        regions.under_profiler(counting, profiling.argv_prefix if profiling is not None else ()),
        profiling.env if profiling is not None else None)
    notes.add(launched.notes)
    box = None
    if prepared.support is not None:
        box = run_box(request, toolchain, settings, probe, prepared, staged, profiling, launched,
                      counting)
    return RunPlan(launched, box, profiling,
                   request.timeout + (profiling.grace if profiling is not None else 0.0), counting)


def run_box(request: RunRequest, toolchain: Toolchain, settings: Settings, probe: Probe,
            prepared: Prepared, staged: Staged, profiling: ProfileSession | None,
            launched: Launch, counting: regions.Counting = regions.Counting()) -> Box:
    """What the program's box shows (sandbox.box, as every box): its folder read-write;
    its executable, idrrun's libraries it loads, the profiler's and the compiler's
    installations, the libraries on its path, all read-only; nothing else of the machine but
    the system's folders."""
    assert prepared.support is not None
    readable = [staged.sealed or staged.executable, *counting.readable,
                *(profiling.readable if profiling is not None else ())]
    return sandbox.box("run", staged.cwd, prepared.support, prepared.uid, environ=launched.env,
                       extra_env={**(profiling.env if profiling is not None else {}),
                                  **counting.env},
                       readable=readable, installations=[Path(p) for p in toolchain.prefixes],
                       hidden=request.hide, cache=settings.cache_dir,
                       gpu=prepared.family.gpu_context(toolchain), room=request.room,
                       protections=probe.protections)


def run_stage(request: RunRequest, toolchain: Toolchain, probe: Probe, prepared: Prepared,
              staged: Staged, plan: RunPlan, reporter: Reporter, notes: Notes,
              held: Held | None = None, ledger: Ledger | None = None) -> RunResult:
    """The run itself, on the CPUs of the lane it holds (if any), its output shown as it comes
    (the build's names renamed, a profiler's own messages filtered), the built-in tracer's file
    read meanwhile by the profile session's follower. ledger: a graded run's account of what is
    read of its box (its regions records first)."""
    profiling = plan.profile
    renamed = build_mod.Renamed(reporter.output, request.source)
    output = profiling.output_filter(renamed) if profiling is not None else renamed
    outside, inside = plan.launch.around_box() if plan.box is not None else ((), plan.launch.argv)
    watch = profiling.watch() if profiling is not None else None
    follower = profiling.follower if profiling is not None else None
    with follower or contextlib.nullcontext():
        p = proc.run(inside, what="run",
                     timeout=plan.timeout, spec=proc.ProcSpec(
                         cwd=staged.cwd, env=plan.launch.env, on_output=output,
                         on_tick=reporter.running, terminal=True,
                         max_output=request.max_output, protections=probe.protections,
                         limits=held.limits(request.limits) if held is not None else request.limits,
                         gpu_run=prepared.family.gpu_context(toolchain),
                         box=plan.box, outer=outside, alone=request.hidden_args))
    output.finish()
    renamed.finish()  # (what the profiler's filter let go when it finished)
    if profiling is not None:
        p = profiling.stopped(p, staged.run_folder, watch)
    notes.add(p.notes)
    nodes, placement = launch.after(plan.launch, p)
    if len(nodes) > 1:
        placement.insert(0, launch.describe_placement(nodes))
    notes.add(placement)
    missing = tuple(f for f in request.get_files if not _written(staged, f))
    ran = RunResult(command=plan.launch.shown, proc=p, missing_files=missing, nodes=nodes,
                    regions=regions.collect(plan.counting, staged.cwd, prepared.uid,
                                            staged.executable, ledger),
                    lane=held.describe() if held is not None else "")
    reporter.ran(request, ran)
    return ran


def _written(staged: Staged, name: str) -> bool:
    if staged.run_folder is None:
        return (staged.cwd / name).exists()
    return boundary.is_file(staged.run_folder, name)


def take_out(request: RunRequest, prepared: Prepared, staged: Staged,
             profiling: ProfileSession | None, wanted: Sequence[str],
             ledger: Ledger | None = None) -> tuple[Path | None, ProfileSession | None]:
    """After a graded run: the files the checks want and the profile's files, copied out of
    the run's folder (regular files of the box's uid, capped, counted against the row's
    `ledger`) into folders of the grader's own; the profile session then reads them there.
    (None, profiling) for a run in its working folder."""
    profiled = profiling is not None and profiling.leaves_files and staged.profile_dir is not None
    if staged.run_folder is None or request.room is None or not (wanted or profiled):
        return None, profiling
    out = boundary.fresh(request.room, "out-")
    fd = boundary.open_dir(staged.run_folder)
    try:
        for name in wanted:
            boundary.take_to(fd, name, out / name, OUTPUT_CAP, prepared.owners, ledger=ledger)
        if profiling is not None and profiled and staged.profile_dir is not None:
            profiling = profiling.taken_from(
                fd, staged.profile_dir.relative_to(staged.run_folder).as_posix(),
                boundary.fresh(request.room, "profile-"), prepared.owners, ledger)
    finally:
        os.close(fd)
    return out, profiling


def _export_box(request: RunRequest, probe: Probe, prepared: Prepared,
                box: Box | None) -> ExportBox | None:
    """For a graded run in a box: the box nsys's export of its report runs in (the run's own
    level, uid, guard, limits and hidden folders); None for a run outside a box."""
    if box is None or request.room is None or prepared.support is None:
        return None
    return ExportBox(room=request.room, support=prepared.support, uid=prepared.uid,
                     protections=probe.protections, limits=request.limits,
                     environ=prepared.environ, hidden=box.hidden)


def collect_stage(request: RunRequest, probe: Probe, prepared: Prepared, plan: RunPlan,
                  profiling: ProfileSession | None, ledger: Ledger | None,
                  reporter: Reporter) -> ProfileReport | None:
    """The run's profile, read after it and shown when asked: the one call after the run into
    profile/session.py."""
    if profiling is None or not profiling.reported:
        return None
    report = profile.collect(profiling.plan, timeout=120, source_name=request.source.name,
                             gpu=probe.gpus[0].name if probe.gpus else "",
                             follower=profiling.follower, ledger=ledger,
                             boxed=_export_box(request, probe, prepared, plan.box))
    if profiling.show_profile:
        reporter.profile(report)
    return report


def execute(
    request: RunRequest,
    toolchain: Toolchain,
    probe: Probe,
    settings: Settings,
    reporter: Reporter,
    environ: Mapping[str, str] | None = None,
    wanted: Sequence[str] = (),
) -> Outcome:
    """Build and run one resolved request; every expected failure is in the Outcome.
    wanted: files the program writes that its checks read (taken out of a graded run)."""
    reporter.started(request, toolchain)
    notes = Notes(reporter)
    notes.add([*probe.warnings, *toolchain.machine_notes, *toolchain.notes])
    prepared = prepare(request, toolchain, environ)
    built = compile_stage(request, toolchain, probe, settings, prepared, notes)
    reporter.built(request, built)
    if not built.ok:
        return Outcome(request, toolchain, built, None, failures.compile_failure(built, request),
                       notes=tuple(notes.all))
    if request.object_only:
        object_file_stage(request, built, notes)
    if request.object_only or not request.execute:
        return Outcome(request, toolchain, built, None, None, notes=tuple(notes.all))
    label = Path(request.keep).stem if request.keep else Path(request.source.name).stem
    staged = stage_program(request, built, prepared, label)
    # What is read of a graded run's box, all together (run/evidence.py).
    ledger = evidence.Ledger() if staged.run_folder is not None else None
    with profile_stage(request, settings, staged, label) as profiling:
        try:
            with lane_stage(request) as held:
                plan = plan_run(request, toolchain, settings, probe, prepared, staged, profiling,
                                notes, held)
                ran = run_stage(request, toolchain, probe, prepared, staged, plan, reporter,
                                notes, held, ledger)
            outputs, profiling = take_out(request, prepared, staged, plan.profile, wanted, ledger)
        finally:
            remove_staged(staged)
        report = collect_stage(request, probe, prepared, plan, profiling, ledger, reporter)
    ran = dataclasses.replace(ran, outputs=outputs)
    if ledger is not None and ledger.refused:
        ran = dataclasses.replace(ran, refused=ledger.refused)
    failure = failures.run_failure(ran, request, built.frames, toolchain.target) if ran.failed else None
    return Outcome(request, toolchain, built, ran, failure, notes=tuple(notes.all), profile=report)
