"""The one pipeline behind %%idrrun, %idrrunfile, `idrrun run` and grading.

    RunRequest -> Toolchain -> BuildResult -> RunResult (-> Verdict, checking.py)

Front ends resolve the RunRequest and its Toolchain (request/resolve.py), make a Reporter
(display.py) and call `execute`: a ladder of small stages, each a function of the previous
stage's value (as nbclient's execute_cell):

    prepare -> compile -> stage_program -> plan_run -> run -> collect

A graded request (RunRequest.room) compiles and runs in fresh folders of its room, given to
a fresh uid, and whatever the program wrote is read back only through run/boundary.py.
Expected failures come back in Outcome.failure, as a FailureKind; only misconfiguration
raises (errors.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from . import build as build_mod
from . import files
from .annotate import Listing
from .model import (
    BuildResult,
    DependencyList,
    Failure,
    FailureKind,
    Preprocessing,
    Probe,
    RunRequest,
    RunResult,
    SandboxSupport,
    Settings,
    Source,
    StackFrame,
    Toolchain,
    Verdict,
)
from .profile import regions
from .profile import session as profile
from .profile.model import ExportBox, ProfilePlan, ProfileReport
from .profile.tracefile import Follower
from .errors import UsageError
from .run import boundary, evidence, isolation, lanes, launch, proc, sandbox, tools
from .run.evidence import Ledger
from .run.lanes import Held
from .run.sandbox import Box
from .toolchains import explain, family_of
from .toolchains.diagnostics import student_symbol
from .toolchains.family import Family


PROFILE_DIR = "idrrun-profile"  # profiled runs keep their report here, in the working directory
# What the grader takes out of a graded run's folder for its checks and its profile, at most.
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


STACK_OVERFLOW = ("the stack overflowed, most likely: {where} on the stack (its local arrays, as the "
                  "compiler measured them), and the program's stack is {stack}. Raise it with "
                  "--stack (e.g. --stack 8GiB, or --stack unlimited), or allocate these arrays "
                  "(malloc, ALLOCATABLE)")


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
    elif result.refused:
        kind, what = FailureKind.COMPILE_ERROR, "refused"
        hint = result.refused
    else:
        kind, what = FailureKind.COMPILE_ERROR, p.describe()
        hint = explain.compile_hint(p.output, request.source) or (
            f"fix the first error above; line numbers are those of {request.source.name}"
            if p.returncode else "the compiler produced no output file")
    return Failure(kind=kind, what=what, command=build_mod.shown_command(result.command, request.source),
                   output=result.output, hint=hint, compile_step=True)


_MAX_HELD = 4096  # the longest path a piece of output may end with and be held for


class Renamed:
    """The program's output as shown, the build's name of the source renamed (gfortran's "At
    line 7 of file source.f90", an assert's "prog: source.c:3"): a piece at the end of what
    came that may be the start of that name waits for what follows (finish() lets it go)."""

    def __init__(self, sink: Callable[[str], None], source: Source) -> None:
        self._sink = sink
        self._source = source
        self._temporary = build_mod.source_file_name(source)
        self._held = ""

    def __call__(self, text: str) -> None:
        text = self._held + text
        keep = self._unfinished(text)
        self._held = text[len(text) - keep:] if keep else ""
        if len(text) > keep:
            self._sink(build_mod.rename_paths(text[:len(text) - keep], self._source))

    def _unfinished(self, text: str) -> int:
        """How many characters at the end of `text` may be the start of the temporary name, or
        of a path to it (a folder and maybe the name's start: `/b/.k.tmp-x/sou`)."""
        token = re.split(r"[\s'\"`(]", text[-_MAX_HELD:])[-1]
        last = token.rsplit("/", 1)[-1]
        if "/" in token and self._temporary.startswith(last) and len(last) < len(self._temporary):
            return len(token)
        return len(last) if last and self._temporary.startswith(last) and \
            len(last) < len(self._temporary) else 0

    def finish(self) -> None:
        if self._held:
            self._sink(build_mod.rename_paths(self._held, self._source))
            self._held = ""



def _segv_hint(frames: Sequence[StackFrame], stack: int | None) -> str:
    """A SIGSEGV's hint: a stack overflow when the compiler measured a frame of at least half
    the stack (a run-away recursion of small frames stays a bad access); array bounds otherwise,
    and the stack too where the frame sizes are unknown or only known at run time."""
    big = [f for f in frames if stack is not None and f.size >= stack // 2]
    if big:
        where = ", ".join(f"{_function(f)} keeps {_fmt_size(f.size)}" for f in big[:3])
        return STACK_OVERFLOW.format(where=where, stack=_fmt_size(stack or 0))
    dynamic = [f for f in frames if f.dynamic]
    if not frames or dynamic:
        sized = f" ({', '.join(_function(f) for f in dynamic[:3])} size arrays at run time)" \
            if dynamic else ""
        return f"{_SIGNAL_HINTS['SIGSEGV']}; or its stack overflowed{sized}: --stack raises the limit"
    return _SIGNAL_HINTS["SIGSEGV"]


def _function(frame: StackFrame) -> str:
    name = student_symbol(frame.function) or frame.function
    return f"{name} (line {frame.line})" if frame.line is not None else name


def _fmt_size(n: int) -> str:
    """1073741824 -> "1 GiB", 3200000016 -> "3.0 GiB", 200 -> "200 B"."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def run_failure(result: RunResult, request: RunRequest,
                frames: Sequence[StackFrame] = ()) -> Failure | None:
    """The run's failure, None when it went well. frames: the program's largest stack frames
    (BuildResult.frames), which tell a stack overflow from a bad access."""
    p = result.proc
    if p.ok and not result.missing_files and not result.refused:
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
        hint = explain.run_hint(p.output, request.source) or (
            _segv_hint(frames, request.limits.stack) if p.signal_name == "SIGSEGV" else
            _SIGNAL_HINTS.get(p.signal_name, "the program was stopped by a signal"))
    elif p.returncode != 0:
        kind, what = FailureKind.EXIT_STATUS, f"exit code {p.returncode}"
        hint = explain.run_hint(p.output, request.source) or \
            "the program returned a non-zero status, which means failure"
    elif result.refused:
        kind, what, limit = FailureKind.LIMIT, f"{evidence.EVIDENCE_LIMIT} limit reached", \
            evidence.EVIDENCE_LIMIT
        hint = f"the program left more than the grader reads: {result.refused}"
    else:
        kind, what = FailureKind.MISSING_FILES, "missing output files"
        hint = f"--get named files the program did not write: {', '.join(result.missing_files)}"
    return Failure(kind=kind, what=what,
                   command=build_mod.shown_command(result.command, request.source),
                   output=build_mod.rename_paths(p.output, request.source), hint=hint, limit=limit)


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


@dataclass(frozen=True)
class Planned:
    """The run's command, environment, profile and box, decided before it starts."""

    how: launch.Launch
    profile: ProfilePlan | None
    box: Box | None
    timeout: float
    counting: regions.Counting = regions.Counting()  # a checked OpenACC run's regions


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
    via = launch.compile_launch(request, settings, prepared.environ)
    built = build_mod.build(
        request, toolchain, settings.cache_dir, probe.protections, preprocess, prepared.uid,
        launcher=via.launcher if via is not None else (), env=via.env if via is not None else None,
        dependencies=family.dependencies(toolchain, product) if graded else DependencyList(),
        feedback_files=family.feedback_files(toolchain) if graded else (),
        stack_usage=family.stack_usage(toolchain))
    if via is not None:
        nodes, placed = launch.after(via, built.proc)
        built = dataclasses.replace(built, nodes=nodes)
        notes.add(placed)
    return built


def stage_program(request: RunRequest, built: BuildResult, prepared: Prepared,
                  extra_dirs: Sequence[str] = ()) -> Staged:
    """Where the program runs: its working folder, or for a graded request a fresh folder of
    its room holding a copy of the submission's files (and `extra_dirs`, made before the box
    gets it), the executable sealed in a folder of its own that the box can run, not change."""
    assert built.executable is not None
    if request.room is None:
        return Staged(built.executable, request.workdir)
    uid_level = prepared.support is not None and prepared.support.level == "uid"
    folder = boundary.box_folder(request.room, "run-", prepared.uid, prepared.uid,
                                 files_from=request.workdir, make_dirs=tuple(extra_dirs),
                                 tmp=build_mod.BOX_TMP if uid_level else "")
    sealed = boundary.sealed_folder(request.room, "bin-", prepared.uid)
    executable = boundary.seal(built.executable, sealed, build_mod.EXECUTABLE, prepared.uid)
    return Staged(executable, folder, folder, sealed)


def plan_run(request: RunRequest, toolchain: Toolchain, settings: Settings, probe: Probe,
             prepared: Prepared, staged: Staged, pplan: ProfilePlan | None, notes: Notes,
             held: Held | None = None) -> Planned:
    family = prepared.family
    if pplan is not None and request.room is not None and prepared.uid >= 0:
        pplan = _placed_libraries(pplan, request.room / "tools")
    if pplan is not None and request.show_profile and pplan.kind == "none":
        # A profile that is taken shows its plan's notes itself (ProfileReport.notes): said
        # once, there; one that cannot be taken says why here.
        notes.add(pplan.notes)
    counting = regions.plan(request, settings.cache_dir, staged.cwd,
                            request.room / "tools" if request.room is not None and prepared.uid >= 0
                            else None)
    base_env = {**prepared.environ, **family.run_env(request, toolchain), **counting.env,
                **(held.env if held is not None else {})}
    how = launch.command(request, staged.executable, settings, base_env,
                         regions.under_profiler(counting,
                                                pplan.argv_prefix if pplan is not None else ()),
                         pplan.env if pplan is not None else None)
    notes.add(how.notes)
    box = None
    if prepared.support is not None:
        box = run_box(request, toolchain, settings, probe, prepared, staged, pplan, how, counting)
    return Planned(how, pplan, box, request.timeout + (pplan.grace if pplan is not None else 0.0),
                   counting)


def _placed_libraries(plan: ProfilePlan, folder: Path) -> ProfilePlan:
    """The profile plan with its libraries copied where a box's own uid can load them."""
    placed = {var: tools.place(lib, folder) for var, lib in plan.libraries.items()}
    return dataclasses.replace(plan, libraries=placed,
                               env={**plan.env, **{var: str(p) for var, p in placed.items()}})


def run_box(request: RunRequest, toolchain: Toolchain, settings: Settings, probe: Probe,
            prepared: Prepared, staged: Staged, pplan: ProfilePlan | None,
            how: launch.Launch, counting: regions.Counting = regions.Counting()) -> Box:
    """What the program's box shows: its folder read-write; its executable, idrrun's libraries
    it loads, the profiler's and the compiler's installations, the libraries on its path, all
    read-only; nothing else of the machine but the system's folders."""
    assert prepared.support is not None
    family = prepared.family
    readable: list[Path] = [staged.sealed or staged.executable, *counting.readable]
    if pplan is not None:
        readable += pplan.libraries.values()
        if pplan.installation is not None and not sandbox.in_system_dirs(pplan.installation):
            readable.append(pplan.installation)
    readable += [Path(p) for p in toolchain.prefixes if not sandbox.in_system_dirs(Path(p))]
    readable += sandbox.library_path_dirs(how.env)
    profiler_env = {**(pplan.env if pplan is not None else {}), **counting.env}
    gpu = family.gpu_context(toolchain)
    if not gpu and prepared.support.level == "namespaces":
        # Such a box has no /sys: hwloc (in Open MPI) would warn "failed to find sysfs cpu
        # topology directory" into the output of every rank; it finds the CPUs from cpuid.
        profiler_env = {"HWLOC_COMPONENTS": "-linux", **profiler_env}
    inner_guard = None
    guard = probe.protections.guard if probe.protections is not None else None
    if guard is not None and request.room is not None and prepared.uid >= 0:
        inner_guard = tools.place(guard, request.room / "tools")
    return Box(workdir=staged.cwd, writable=(staged.cwd,), readable=tuple(readable),
               hidden=(*request.hide, *sandbox.package_dirs(), settings.cache_dir),
               env=sandbox.box_env(how.env, profiler_env, prepared.support,
                                   staged.cwd / build_mod.BOX_TMP),
               gpu=gpu, uid=prepared.uid, gid=prepared.uid,
               support=prepared.support, disk_caps=request.room is not None,
               inner_guard=inner_guard)


def run_stage(request: RunRequest, toolchain: Toolchain, probe: Probe, prepared: Prepared,
              staged: Staged, planned: Planned, reporter: Reporter, notes: Notes,
              held: Held | None = None, ledger: Ledger | None = None,
              ) -> tuple[RunResult, Follower | None]:
    """The run itself, on the CPUs of the lane it holds (if any); with the built-in tracer's
    follower, which read its trace meanwhile. ledger: a graded run's account of what is read of
    its box (its regions records first)."""
    how, box, pplan = planned.how, planned.box, planned.profile
    renamed = Renamed(reporter.output, request.source)
    shown = profile.output_filter(pplan, renamed)  # nsys's progress bars: one line
    # The built-in tracer's file, read as it is written; never a box's (read after, by boundary).
    followed = profile.follower(pplan) if staged.run_folder is None else None
    outside, inside = how.around_box() if box is not None else ((), how.argv)
    watch = profile.watch_launch(pplan)
    with followed or contextlib.nullcontext():
        p = proc.run(inside, what="run",
                     timeout=planned.timeout, spec=proc.ProcSpec(
                         cwd=staged.cwd, env=how.env, on_output=shown, terminal=True,
                         max_output=request.max_output, protections=probe.protections,
                         limits=held.limits(request.limits) if held is not None else request.limits,
                         gpu_run=prepared.family.gpu_context(toolchain),
                         box=box, outer=outside, alone=request.hidden_args))
    shown.finish()
    renamed.finish()
    p = profile.stopped(pplan, p, staged.run_folder, watch)
    notes.add(p.notes)
    nodes, placed = launch.after(how, p)
    if len(nodes) > 1:
        placed.insert(0, launch.describe_placement(nodes))
    notes.add(placed)
    missing = tuple(f for f in request.get_files if not _written(staged, f))
    ran = RunResult(command=how.shown, proc=p, missing_files=missing, nodes=nodes,
                    regions=regions.collect(planned.counting, staged.cwd, prepared.uid,
                                            staged.executable, ledger),
                    lane=held.describe() if held is not None else "")
    reporter.ran(request, ran)
    return ran, followed


def _written(staged: Staged, name: str) -> bool:
    if staged.run_folder is None:
        return (staged.cwd / name).exists()
    return boundary.is_file(staged.run_folder, name)


def take_out(request: RunRequest, prepared: Prepared, staged: Staged, pplan: ProfilePlan | None,
             wanted: Sequence[str], ledger: Ledger | None = None,
             ) -> tuple[Path | None, ProfilePlan | None]:
    """After a graded run: the files the checks want and the profile's files, copied out of
    the run's folder (regular files of the box's uid, capped, counted against the row's
    `ledger`) into a folder of the grader's own; the profile plan then points there.
    (None, plan) for a run in its working folder."""
    profiled = pplan is not None and pplan.kind in ("builtin", "nsys")
    if staged.run_folder is None or request.room is None or not (wanted or profiled):
        return None, pplan
    out = boundary.fresh(request.room, "out-")
    fd = boundary.open_dir(staged.run_folder)
    try:
        for name in wanted:
            boundary.take_to(fd, name, out / name, OUTPUT_CAP, prepared.owners, ledger=ledger)
        if pplan is not None and profiled:
            rel = pplan.run_dir.relative_to(staged.run_folder).as_posix()
            moved = boundary.fresh(request.room, "profile-")
            try:
                inner = boundary.open_beneath(fd, rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                inner = -1
            if inner >= 0:
                try:
                    for name in boundary.names(inner):
                        if name.startswith(profile.TRACE_FILE) or name.endswith(".nsys-rep"):
                            boundary.take_to(inner, name, moved / name, OUTPUT_CAP,
                                             prepared.owners, ledger=ledger)
                finally:
                    os.close(inner)
            pplan = profile.relocated(pplan, moved)
    finally:
        os.close(fd)
    return out, pplan


def _export_box(request: RunRequest, probe: Probe, prepared: Prepared,
                box: Box | None) -> ExportBox | None:
    """For a graded run in a box: the box nsys's export of its report runs in (the run's own
    level, uid, guard, limits and hidden folders); None for a run outside a box."""
    if box is None or request.room is None or prepared.support is None:
        return None
    return ExportBox(room=request.room, support=prepared.support, uid=prepared.uid,
                     protections=probe.protections, limits=request.limits,
                     environ=prepared.environ, hidden=box.hidden)


QUIET_PREFIX = ".idrrun-trace-"


def quiet_folder(workdir: Path) -> Path:
    """A fresh folder for a trace taken for the checks only (RunRequest.show_profile False):
    beside the program (a box shows it its working folder), hidden, removed after the run's
    trace is read; nothing of it is left in the student's folder."""
    return Path(tempfile.mkdtemp(prefix=QUIET_PREFIX, dir=workdir))


def _profile_folder(request: RunRequest, staged: Staged, profile_dir: str,
                    label: str) -> tuple[Path, Path | None]:
    """Where the profiler writes, and the folder to remove after the run when it is a trace for
    the checks only: a graded run's profile folder, made in its fresh folder (which no process
    of its new uid has touched yet); the user's idrrun-profile/ for a profile shown; else a
    hidden folder of its own (quiet_folder)."""
    if staged.run_folder is not None:
        return staged.cwd / profile_dir, None
    if request.show_profile:
        return profile.new_run_dir(request.workdir / PROFILE_DIR, label), None
    quiet = quiet_folder(request.workdir)
    return quiet, quiet


def _collected(request: RunRequest, probe: Probe, prepared: Prepared, planned: Planned,
               pplan: ProfilePlan | None, followed: Follower | None, ledger: Ledger | None,
               reporter: Reporter) -> ProfileReport | None:
    """The run's profile, read after it and shown when asked. A trace for the checks only is
    read even when it could not be taken: its report says why (the checks' reason), and
    nothing of it is shown."""
    if pplan is None or (pplan.kind == "none" and request.show_profile):
        return None
    report = profile.collect(pplan, timeout=120, source_name=request.source.name,
                             gpu=probe.gpus[0].name if probe.gpus else "", followed=followed,
                             ledger=ledger, boxed=_export_box(request, probe, prepared, planned.box))
    if request.show_profile:
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
        return Outcome(request, toolchain, built, None, compile_failure(built, request),
                       notes=tuple(notes.all))
    if request.object_only:
        assert built.object_file is not None
        dest = request.workdir / build_mod.object_name(request)
        shutil.copyfile(built.object_file, dest)
        notes.add([f"object file: {dest}"])
        return Outcome(request, toolchain, built, None, None, notes=tuple(notes.all))
    if not request.execute:
        return Outcome(request, toolchain, built, None, None, notes=tuple(notes.all))
    label = Path(request.keep).stem if request.keep else Path(request.source.name).stem
    profile_dir = f"{PROFILE_DIR}/{profile.run_dir_name(label)}"
    staged = stage_program(request, built, prepared,
                           (profile_dir,) if request.profile is not None else ())
    # What is read of a graded run's box, all together (run/evidence.py).
    ledger = evidence.Ledger() if staged.run_folder is not None else None
    quiet: Path | None = None  # the folder of a trace for the checks only, removed after
    try:
        pplan = None
        if request.profile is not None:
            run_dir, quiet = _profile_folder(request, staged, profile_dir, label)
            pplan = profile.plan(request.profile, run_dir, settings.cache_dir,
                                 nsys_command=settings.profiler, timeout=request.timeout,
                                 drawn=request.show_profile)
        # A graded run on a GPU machine holds a lane while it runs (run/lanes.py): a timed one
        # waits for its GPU to be its own.
        with lanes.hold(request.lanes, request.timed, (request.mpi_ranks or 1) > 1) as held:
            planned = plan_run(request, toolchain, settings, probe, prepared, staged, pplan, notes,
                               held)
            ran, followed = run_stage(request, toolchain, probe, prepared, staged, planned,
                                      reporter, notes, held, ledger)
        outputs, pplan = take_out(request, prepared, staged, planned.profile, wanted, ledger)
    finally:
        for folder in (staged.run_folder, staged.sealed):
            if folder is not None:
                boundary.remove(folder)
    ran = dataclasses.replace(ran, outputs=outputs)
    try:
        report = _collected(request, probe, prepared, planned, pplan, followed, ledger, reporter)
    finally:
        if quiet is not None:
            boundary.remove(quiet)
    if ledger is not None and ledger.refused:
        ran = dataclasses.replace(ran, refused=ledger.refused)
    return Outcome(request, toolchain, built, ran, run_failure(ran, request, built.frames),
                   notes=tuple(notes.all), profile=report)
