"""A profile session: the one value that lies between profile/stages.py's two stages (plan
before the run, collect after) and that the run's record holds (pipeline.Run.profiling),
always one: a run nothing profiles has NoProfile, the null session.

    folder, quiet = profile_folder(workdir, label, show_profile)  # a run outside a box's
    profiling = ProfileSession.start(session.plan(choice, folder, cache_dir, ...),
                                     follow=..., show_profile=..., work=session.Work(...))
    ... the run: profiling.argv_prefix, .env, .grace; .output_filter(sink), .follower,
        .watch() and .stopped(...) around it; a box shows it .readable ...
    profiling = profiling.placed(tools_dir)          # a graded run's: for its box's user
    profiling = profiling.taken_from(...)            # a graded run's files, out of its box
    session.collect(profiling.plan, follower=profiling.follower, ...)

It owns what the run needs of its profiler: the command prefix, the environment, the
libraries of idrrun's own the program loads (placed where a box's user can load them), the
profiler's installation that a box shows, the grace the profiler may take after the
program's time limit; what happens while the program runs: nsys's progress bars kept out of
the program's output, the built-in tracer's file read as it is written and its report made as
soon as the file says the trace is whole (stages.Ahead: during CUDA's teardown, before the
program's end), the launch mark that tells nsys failing from the program failing; and which files of a box are the profile's.
Each kind of plan is a small class (SESSION_KINDS): what differs between the built-in tracer,
nsys, a profiler that cannot be taken and one idrrun does not read is in their methods, not in
tests of the plan's kind.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import time
from collections.abc import Mapping
from typing import Protocol
from dataclasses import dataclass
from pathlib import Path

from ..model import ProcResult
from ..run import boundary, sandbox, tools
from ..run.allowance import Ledger
from . import nsys as nsys_mod
from . import perfetto
from .model import ProfilePlan
from .stages import Ahead, Work
from .tracefile import Follower

PROFILE_DIR = "idrrun-profile"  # profiled runs keep their report here, in the working directory
QUIET_PREFIX = ".idrrun-trace-"  # a trace taken for the checks only, beside the program
# What the grader takes out of a graded run's folder for its profile, at most per file.
PROFILE_CAP = 256 << 20
NOT_LAUNCHED = ("nsys ended ({how}) before it started the program, so the program did not run "
                "(nsys's own messages are in the run's output: a full disk, a TMPDIR it cannot "
                "write, an option it does not know?)")

_NOT_LAUNCHED_START = NOT_LAUNCHED.split("{", 1)[0]


def run_dir_name(label: str) -> str:
    """The name of one profiled run's folder: LABEL-YYYYmmdd-HHMMSS."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("._") or "run"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def new_run_dir(parent: Path, label: str) -> Path:
    """A fresh folder for one profiled run: PARENT/LABEL-YYYYmmdd-HHMMSS[-N]."""
    base = run_dir_name(label)
    for n in range(1000):
        path = parent / (base if n == 0 else f"{base}-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free run folder under {parent}")


def quiet_folder(workdir: Path) -> Path:
    """A fresh folder for a trace taken for the checks only (RunRequest.show_profile False):
    beside the program (a box shows it its working folder), hidden, removed after the run's
    trace is read; nothing of it is left in the student's folder."""
    return Path(tempfile.mkdtemp(prefix=QUIET_PREFIX, dir=workdir))


class Sink(Protocol):
    """Where a run's output goes as it comes: each piece, then finish() once the run is over
    (what was held waiting for the rest of a line or a name goes then)."""

    def __call__(self, text: str) -> None: ...

    def finish(self) -> None: ...


@dataclass(frozen=True)
class ProfileSession:
    """One run's profile, from before the run until it is collected: a configured profiler
    idrrun does not read (kind "command"), and what every kind does unless it says otherwise.
    Each kind of plan has its session (start): NoProfile (nothing profiles the run),
    Unavailable (one asked for that cannot be taken), Tracer (the built-in tracer), Nsys."""

    plan: ProfilePlan
    # The built-in tracer's file, read as it is written (`with` it around the run); None for
    # another profiler, or a box's file (read after the run, through run/boundary.py).
    follower: Follower | None = None
    show_profile: bool = True  # shown (--profile); False: a trace for the checks only

    @classmethod
    def start(cls, plan: ProfilePlan, *, follow: bool, show_profile: bool,
              work: Work = Work()) -> ProfileSession:
        """The session of `plan`, of its kind; follow: read the built-in tracer's file during
        the run, and make its report as soon as it is whole, for `work` (what collect() will
        be told: the report made then is used only for the same)."""
        return SESSION_KINDS.get(plan.kind, ProfileSession).started(plan, follow, show_profile,
                                                                    work)

    @classmethod
    def started(cls, plan: ProfilePlan, follow: bool, show_profile: bool,
                work: Work) -> ProfileSession:
        return cls(plan, None, show_profile)

    @property
    def argv_prefix(self) -> tuple[str, ...]:
        return self.plan.argv_prefix

    @property
    def env(self) -> Mapping[str, str]:
        return self.plan.env

    @property
    def grace(self) -> float:
        """How long the profiler may go on past the program's time limit (nsys's report)."""
        return self.plan.grace

    @property
    def readable(self) -> tuple[Path, ...]:
        """What a box shows read-only for it: idrrun's libraries the program loads, and the
        profiler's installation when it lies outside the system's folders."""
        installation = self.plan.installation
        return (*self.plan.libraries.values(),
                *((installation,) if installation is not None
                  and not sandbox.in_system_dirs(installation) else ()))

    @property
    def unavailable(self) -> tuple[str, ...]:
        """What to say before the run of a profile asked for that cannot be taken (one that is
        taken says its plan's notes in its report, once)."""
        return ()

    @property
    def reported(self) -> bool:
        """Whether collect() has a report to make."""
        return True

    @property
    def leaves_files(self) -> bool:
        """Whether the profiler writes files the run's folder keeps (the built-in tracer's
        trace, nsys's report): a graded run's are taken out of its box (taken_from)."""
        return False

    def placed(self, folder: Path) -> ProfileSession:
        """The session with its libraries copied into `folder`, where a box's own user can
        load them (tools.place)."""
        libraries = {var: tools.place(lib, folder) for var, lib in self.plan.libraries.items()}
        plan = dataclasses.replace(self.plan, libraries=libraries,
                                   env={**self.plan.env,
                                        **{var: str(p) for var, p in libraries.items()}})
        return dataclasses.replace(self, plan=plan)

    def output_filter(self, sink: Sink) -> Sink:
        """The sink for the profiled program's output: `sink` itself, but under nsys (Nsys)."""
        return sink

    def watch(self) -> int | None:
        """Before the run: a watch of what the run's launch leaves (Nsys); None: nothing to
        watch for."""
        return None

    def stopped(self, result: ProcResult, box_folder: Path | None = None,
                watch: int | None = None) -> ProcResult:
        """The run as it ended, as the profiler tells it (Nsys); as it is for the others."""
        return result

    def start_again(self, result: ProcResult) -> str | None:
        """Why the run, as stopped() tells it, is started once more (the note saying so):
        the profiler failed before it started the program for a reason that passes; None
        for every other run (Nsys says otherwise)."""
        return None

    def taken_from(self, box_folder: int, relative: str, into: Path,
                   owners: tuple[int, ...], ledger: Ledger | None) -> ProfileSession:
        """After a graded run: the profiler's files (the built-in tracer's trace.jsonl of each
        process, nsys's report), read beneath `box_folder` (a descriptor of the run's folder)
        at `relative` and taken out into `into`, a folder of the grader's own (boundary.take_to:
        regular files of the box's users, capped, counted against the row's ledger); the
        session then reads them there."""
        if not self.leaves_files or self.plan.output is None:
            return self
        try:
            inner = boundary.open_beneath(box_folder, relative,
                                          os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            inner = -1
        if inner >= 0:
            try:
                for name in boundary.names(inner):
                    if name.startswith(self.plan.output.name):
                        boundary.take_to(inner, name, into / name, PROFILE_CAP, owners,
                                         ledger=ledger)
            finally:
                os.close(inner)
        output = into / self.plan.output.name
        return dataclasses.replace(self, plan=dataclasses.replace(self.plan, run_dir=into,
                                                                  output=output))


# The plan of a run nothing profiles: no prefix, no environment, no folder it writes in.
NO_PLAN = ProfilePlan(kind="none", argv_prefix=(), env={}, run_dir=Path(os.devnull))


@dataclass(frozen=True)
class NoProfile(ProfileSession):
    """Nothing profiles the run (no --profile, no trace check): the run as it is, no report."""

    plan: ProfilePlan = NO_PLAN
    show_profile: bool = False

    @property
    def reported(self) -> bool:
        return False


@dataclass(frozen=True)
class Unavailable(ProfileSession):
    """A profile asked for that cannot be taken (kind "none": no profiler here, no folder)."""

    @property
    def unavailable(self) -> tuple[str, ...]:
        return self.plan.notes if self.show_profile else ()

    @property
    def reported(self) -> bool:
        """Not for a shown profile (unavailable said why); a trace for the checks only is read
        even then, its report saying why (the checks' reason)."""
        return not self.show_profile


@dataclass(frozen=True)
class Tracer(ProfileSession):
    """The built-in CUPTI tracer: its trace file, read as it is written outside a box."""

    @classmethod
    def started(cls, plan: ProfilePlan, follow: bool, show_profile: bool,
                work: Work) -> ProfileSession:
        if not follow or plan.output is None:
            return cls(plan, None, show_profile)
        prepared = perfetto.Prepared() if plan.drawn else None
        return cls(plan, Follower(plan.output, prepared, ahead=Ahead(plan, work, prepared)),
                   show_profile)

    @property
    def leaves_files(self) -> bool:
        return self.plan.output is not None


@dataclass(frozen=True)
class Nsys(ProfileSession):
    """Nsight Systems in front of the program: its messages kept out of the program's output,
    its launch mark, its report left in the run's folder."""

    @property
    def leaves_files(self) -> bool:
        return self.plan.output is not None

    def output_filter(self, sink: Sink) -> Sink:
        """nsys's end-of-run messages and progress bars become one short line
        (nsys.OutputFilter; call its finish() after the run, then the sink's)."""
        return nsys_mod.OutputFilter(sink)

    def watch(self) -> int | None:
        """Before the run: a watch of the profile's folder (boundary.watch_made), so that the
        launch mark counts once made, even if the program removes it (its name is in its
        environment); None without a mark to watch for."""
        return boundary.watch_made(self.plan.run_dir) if self.plan.launched else None

    def stopped(self, result: ProcResult, box_folder: Path | None = None,
                watch: int | None = None) -> ProcResult:
        """The run as it ended: a program that nsys stopped at its --duration (the program's
        time limit) timed out, though what ended was nsys, with status 128 + SIGKILL; nsys that
        failed before it started the program (no launch mark: a full disk, an unusable TMPDIR,
        a profiler that cannot run here) could not start the program, rather than the program
        failing. box_folder: the graded run's folder, which holds the profile's (its mark is
        read beneath it, no link followed); None for a run in the user's folder. watch:
        watch()'s, from before the run: a mark the kernel saw made counts, whatever the
        program did to it. The mark is removed."""
        plan = self.plan
        seen = watch is not None and boundary.made(watch, plan.launched)
        found = _launched(plan, box_folder) if plan.launched else True
        started = True if seen else found
        if not result.ok and not result.timed_out and not result.interrupted and \
                result.start_error is None and started is False:
            return dataclasses.replace(result, returncode=None,
                                       start_error=NOT_LAUNCHED.format(how=result.describe()))
        if plan.duration is None or result.timed_out or \
                result.returncode != nsys_mod.KILLED_STATUS or result.seconds < plan.duration:
            return result
        return dataclasses.replace(result, timed_out=True)

    def start_again(self, result: ProcResult) -> str | None:
        """nsys that ended before it started the program (no launch mark: stopped()) is
        started once more: 2022.4 loses its own daemon now and then with other sessions beside
        it. A profiler that cannot run here fails the same way twice; a program that ran is
        never run again."""
        if result.start_error is None or not result.start_error.startswith(_NOT_LAUNCHED_START):
            return None
        return nsys_mod.started_again(result.output)


# Each kind of plan's session (a kind not named here: ProfileSession, as "command").
SESSION_KINDS: dict[str, type[ProfileSession]] = {"none": Unavailable, "builtin": Tracer,
                                                  "nsys": Nsys}


def profile_folder(workdir: Path, label: str, show_profile: bool) -> tuple[Path, Path | None]:
    """Where a run in the user's folder has its profiler write, and the folder to remove after
    the run when it is a trace for the checks only: the user's idrrun-profile/LABEL-TIME for a
    profile shown; else a hidden folder of its own (quiet_folder)."""
    if show_profile:
        return new_run_dir(workdir / PROFILE_DIR, label), None
    quiet = quiet_folder(workdir)
    return quiet, quiet


def _launched(plan: ProfilePlan, box_folder: Path | None) -> bool | None:
    """Whether the launch mark is in plan.run_dir (any entry of its name: only the launch, or
    the program after it, makes one), removed once seen; None when the folder cannot be read."""
    base = box_folder if box_folder is not None else plan.run_dir
    try:
        rel = plan.run_dir.relative_to(base).as_posix()
        fd = boundary.open_dir(base)
    except (OSError, ValueError):
        return None
    try:
        inner = fd if rel == "." else \
            boundary.open_beneath(fd, rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                os.stat(plan.launched, dir_fd=inner, follow_symlinks=False)
            except FileNotFoundError:
                return False
            boundary.discard(inner, plan.launched)
            return True
        finally:
            if inner != fd:
                os.close(inner)
    except OSError:
        return None
    finally:
        os.close(fd)
