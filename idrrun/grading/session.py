"""A grading session: everything a grading decides once before its first row, opened in one
place for `idrrun grade` and `idrrun course check` (and what `idrrun classroom collect` left,
the collection's record), then read by every row (grader.py) as one frozen value.

    open_session(Opening) -> Session: the settings under the grader's policy, the exercises
    (drawn with the grader's seed), the sandbox level, the probe, the GPU lanes, the scratch
    root (what killed gradings left removed; through srun, one that every box's user can reach
    and that a job step on a node sees), the submissions read once, the grader's key, the
    rows resumed from an earlier report, the cluster's job steps of a killed grading cancelled,
    the collection's times of submission and its deadline.

The order is the order of what can refuse a grading: a setting, an exercise, the machine's
sandbox, then the class; nothing is run before all of them said yes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import files, toolchains
from ..checks import draw, specs
from ..checks.specs import Exercise
from ..errors import UsageError, did_you_mean
from ..model import Lanes, Language, Probe, RunRequest, Settings, Toolchain
from ..pipeline import Job, prepare
from ..request import config, policy
from ..run import isolation, launch, lanes as lanes_mod, rooms
from . import discover, exchange, state
from .discover import Submission, exposed
from . import rows
from .rows import GradeRow

# The sandbox level of the course's own files (course check): nothing hostile to wall off.
OWN_COURSE = "none (the course's own files)"


@dataclass(frozen=True)
class Opening:
    """What a front end asks of a grading, as typed values (its command line)."""

    workdir: Path
    exercises: tuple[str, ...] = ()  # grade: its one exercise; course check: () for all
    config: Path | None = None  # the teacher's, read where ./idrrun.toml would be
    compiler: str | None = None
    jobs: int = 1
    launcher: str | None = None
    timeout: float | None = None  # the grader's time limit (None: each exercise's)
    unsafe: bool = False
    seed_file: Path | None = None
    # The course's own files (course check): no sandbox, the settings as they are, no class.
    own_course: bool = False
    submissions: tuple[Path, ...] = ()
    language: Language | None = None
    report: Path | None = None
    fresh: bool = False  # grade everything again, whatever the report holds
    deadline: dt.datetime | None = None  # the teacher's, over the collection's


@dataclass(frozen=True)
class Session:
    """One grading, as every row reads it. Made by open_session; a test builds one by hand."""

    settings: Settings
    probe: Probe
    sandbox: str = "namespaces"  # the machine's level (run/sandbox.py), or "none (...)"
    lanes: Lanes | None = None
    jobs: int = 1
    timeout: float | None = None
    exercises: tuple[Exercise, ...] = ()  # with their hidden sets drawn
    submissions: tuple[Submission, ...] = ()  # each read once, into the grader's copy
    key: bytes = b""  # the grader's key: the state's rows are signed with it
    # Rows of an earlier grading with the same report, kept (state.resume), by submission path.
    resumed: Mapping[str, GradeRow] = field(default_factory=dict)
    lateness: exchange.Lateness | None = None  # when each was submitted, and the deadline
    notes: tuple[str, ...] = ()  # what to tell the teacher, in order

    @property
    def policy_key(self) -> str:
        """What this grading forces on every row (state.policy_digest), for the rows' keys:
        a row graded under another time limit, memory cap or compiler is not resumed."""
        return state.policy_digest(self.settings, self.probe, self.sandbox, self.timeout)

    def job(self, request: RunRequest, toolchain: Toolchain) -> Job:
        """A resolved request's Job in this grading (its probe and settings), shown to nobody."""
        return prepare(request, toolchain, self.probe, self.settings)


def open_session(opening: Opening) -> Session:
    """The grading's session, every step that may refuse it taken now (UsageError)."""
    notes = unread_config(opening.workdir, opening.config)
    settings = _settings(opening)
    exercises, found = _exercises(opening, settings)
    notes += found
    level = _sandbox(opening, exercises)
    probe = toolchains.probe(settings, opening.compiler)
    if not opening.own_course:
        notes.insert(0, isolation.sandbox_support().describe())
    exercises, drawn = _drawn(exercises, settings, opening.seed_file)
    notes += drawn
    lanes, lane_notes = lanes_mod.for_machine(len(probe.gpus), settings)
    notes += lane_notes
    if opening.own_course:
        return Session(settings, probe, level, lanes, opening.jobs, opening.timeout,
                       tuple(exercises), notes=tuple(notes))
    rooms.scratch_root(settings)  # a scratch folder of its own: refused now, not per row
    notes += cache_on_the_nodes(settings)
    notes += [f"removed what a killed grading left: {orphan}"
              for orphan in rooms.remove_orphans(settings)]
    subs = discover.discover(opening.submissions, exercises[0], opening.language,
                             into=rooms.intake_room(settings))
    session = Session(settings, probe, level, lanes, opening.jobs, opening.timeout,
                      tuple(exercises), tuple(subs), state.grading_key(settings))
    resumed: dict[str, GradeRow] = {}
    if opening.report is not None and not opening.fresh:
        resumed, said = state.resume(opening.report, exercises[0], subs, session.key,
                                     session.policy_key)
        notes += said
    if opening.report is not None and settings.launcher.kind == "srun":
        notes += adopt_cluster_steps(opening.report)
    lateness, said = _lateness(opening, subs)
    return dataclasses.replace(session, resumed=resumed, lateness=lateness,
                               notes=tuple(notes + said))


# A grading through srun whose cache the nodes do not see: every row would fail on its node
# ("couldn't chdir ... No such file or directory"), as the student's compile failure.
CACHE_NOT_ON_THE_NODES = (
    "grading through srun: a job step on node {node} does not see {folder}, the grader's "
    "scratch folder in its cache {cache}: the cache must be on the file system the nodes share "
    "(a login node's /tmp is its own): set IDRRUN_CACHE_DIR to a folder there, e.g. "
    "IDRRUN_CACHE_DIR=/opt/idrrun/grader-cache (docs/teachers-day.md), or cache_dir in the "
    "file given with --config")


def cache_on_the_nodes(settings: Settings) -> list[str]:
    """UsageError when a node does not see the grader's scratch folder (one job step asks);
    a note when the step could not say (the rows will)."""
    if settings.launcher.kind != "srun":
        return []
    folder = rooms.scratch_root(settings)
    seen, where = launch.node_sees(settings, folder)
    if seen is False:
        raise UsageError(CACHE_NOT_ON_THE_NODES.format(node=where, folder=folder,
                                                       cache=settings.cache_dir))
    return [] if seen else [f"could not check that the nodes see the cache {settings.cache_dir}: {where}"]


def unread_config(workdir: Path, given: Path | None) -> list[str]:
    """The grader's note that ./idrrun.toml was left unread, when there is one."""
    found = config.project_file(workdir) if given is None else None
    return [f"{found}: not read: the grader reads no config from the folder it runs in "
            "(give the teacher's with --config FILE)"] if found is not None else []


def _settings(opening: Opening) -> Settings:
    """The teacher's settings (never the working folder's file); a class's under the grader's
    policy (request/policy.py: the launcher, a memory cap per program)."""
    settings = config.load(opening.workdir,
                           project=opening.config if opening.config is not None else False)
    if opening.own_course:
        return settings
    return policy.grading_settings(settings, opening.launcher, opening.jobs)


def _exercises(opening: Opening, settings: Settings) -> tuple[list[Exercise], list[str]]:
    """The exercises graded, and what to tell the teacher of them."""
    if opening.own_course:
        folder = specs.exercises_folder_or_fail(settings, opening.workdir)
        return chosen_exercises(folder, opening.exercises), []
    exercise, notes = exercise_for_grading(opening.exercises[0], settings, opening.workdir)
    if opening.language is not None and opening.language not in exercise.sources:
        # The teacher's --language must be one of the exercise's (a student's file or line that
        # chooses another is that student's fail: grader.py).
        raise UsageError(f"--language {opening.language}: exercise {exercise.name!r} has no "
                         f"{opening.language} version (it has: {', '.join(exercise.sources)})")
    return [exercise], notes


def chosen_exercises(folder: Path, names: Sequence[str]) -> list[Exercise]:
    """The exercises of the course in `folder` asked for (all when none is named: only those
    are read, so that another spec being written does not stop the check of this one)."""
    if not names:
        return specs.all_exercises(folder)
    known = {p.stem for p in folder.glob("*.toml")}
    unknown = set(names) - known
    if unknown:
        raise UsageError(f"unknown exercise(s) in {folder}: " + ", ".join(
            f"{name}{did_you_mean(name, known)}" for name in sorted(unknown)))
    return [specs.load(folder / f"{n}.toml") for n in dict.fromkeys(names)]


def exercise_for_grading(name: str, settings: Settings, workdir: Path) -> tuple[Exercise, list[str]]:
    """The exercise NAME as a grader takes it: from the configuration or idrrun's own course,
    never from the working folder, which may be the submissions' (a spec handed in would decide
    the grading); a students' copy (no solutions, no grading-only checks) is refused. Returns
    it and what to tell the teacher."""
    exercise = specs.find(name, settings, None)
    notes = []
    walked = specs.locate_examples(settings, workdir)
    # (Not when it is the course taken anyway: idrrun's own, graded from its checkout.)
    if walked is not None and walked.origin == "found" and \
            walked.path.resolve() != exercise.path.parent.resolve():
        notes.append(f"{walked.path} was not read (a grader reads no course from its working "
                     f"folder): give it with IDRRUN_EXAMPLES or examples_dir in --config")
    if exercise.students:
        raise UsageError(f"{exercise.path} is from a students' copy of the course (no solutions, "
                         "no grading-only checks): grade with the teacher's course (examples_dir "
                         "or IDRRUN_EXAMPLES)")
    return exercise, notes


def _sandbox(opening: Opening, exercises: Sequence[Exercise]) -> str:
    """The level the rows are graded at (OWN_COURSE for the course's own files)."""
    if opening.own_course:
        return OWN_COURSE
    return sandbox_level(exercises[0], opening.submissions, opening.unsafe)


def sandbox_level(exercise: Exercise, submissions: Sequence[Path], unsafe: bool) -> str:
    """The level a class is graded at (run/sandbox.py), as the report names it; UsageError
    where grading would not be safe: no sandbox at all (unless unsafe), or, without namespaces,
    a course or submissions that other users (a box's uid) can read."""
    support = isolation.sandbox_support()
    if support.level == "none" and not unsafe:
        raise UsageError(f"cannot grade safely here: {support.why}. Submissions would run as "
                         "you, seeing your files: install bubblewrap (or run as root), or give "
                         "--unsafe to grade anyway (the report says so)")
    if support.level == "uid" and not unsafe:
        open_to_all = exposed(exercise, submissions)
        if open_to_all:
            shown = ", ".join(str(p) for p in open_to_all[:3])
            raise UsageError(f"cannot grade safely here: without namespaces ({support.why}) a "
                             f"submission can read every file other users can, and these are "
                             f"readable by them: {shown}. Make them private (chmod -R o-rwx, on "
                             f"the course and the submissions), install bubblewrap, or give "
                             f"--unsafe to grade anyway")
    return support.level if support.level != "none" else "none (--unsafe)"


def _drawn(exercises: Sequence[Exercise], settings: Settings,
           seed_file: Path | None) -> tuple[list[Exercise], list[str]]:
    """The exercises with their hidden argument sets drawn with the grader's seed, where a
    spec has ranges ([args.draw]); the seed itself is never said, nor read when none draws."""
    if all(e.draw is None for e in exercises):
        return list(exercises), []
    seed, origin = state.grading_seed(settings, seed_file)
    out = [draw.drawn(e, seed) for e in exercises]
    return out, [f"hidden argument sets: {len(e.hidden_args)}, the spec's ranges of {e.name} "
                 f"drawn with the seed {origin}" for e in out if e.draw is not None]


def _lateness(opening: Opening,
              subs: Sequence[Submission]) -> tuple[exchange.Lateness | None, list[str]]:
    """When each submission was handed in, and the deadline: the record of `idrrun classroom
    collect` when the submissions are the ones it collected (OUT/submissions/*, beside
    OUT/collected.csv), the teacher's --deadline over its own."""
    collected = collection_of(opening.submissions)
    if collected is None:
        if opening.deadline is None:
            return None, []
        times = exchange.modified([(s.student, s.path) for s in subs])
        return exchange.Lateness(opening.deadline, times), [
            f"deadline {rows.stamp(opening.deadline.timestamp())}: the times of submission "
            "are the files' modification times, which their owners can set (idrrun classroom "
            "collect records times no student can set)"]
    record = exchange.read_collection(collected)
    deadline = opening.deadline or record.deadline
    said = f"submitted: the times {collected / exchange.COLLECTED} recorded" + (
        f"; deadline {rows.stamp(deadline.timestamp())}" if deadline else "; no deadline")
    return exchange.Lateness(deadline, record.submitted), [said]


def collection_of(paths: Sequence[Path]) -> Path | None:
    """The folder of `idrrun classroom collect` the submissions all come from, if they do."""
    parents = {p.absolute().parent for p in paths}
    if len(parents) != 1:
        return None
    [folder] = parents
    if folder.name != "submissions" or not (folder.parent / exchange.COLLECTED).is_file():
        return None
    return folder.parent


def cluster_steps_path(report: Path) -> Path:
    """Beside the report while a grading runs: the name of its cluster job steps' session."""
    return report.with_name(f".{report.name}.idrrun-session")


def adopt_cluster_steps(report: Path) -> list[str]:
    """A grader killed outright (SIGKILL, a lost login node) cannot cancel its job steps: they
    run on until their time limit. The next grading with the same report cancels them first,
    then notes its own job steps' session for the one after. Returns what to tell the user."""
    path = cluster_steps_path(report)
    notes = []
    try:
        earlier = path.read_text(encoding="utf-8").strip()
    except OSError:
        earlier = ""
    if re.fullmatch(r"[0-9a-f]{8}", earlier) and earlier != launch.SESSION:
        cancelled, gone = launch.cancel_session(earlier)
        if cancelled:
            notes.append(f"cancelled {len(cancelled)} job steps left running by an earlier, "
                         f"killed grading ({', '.join(cancelled)})")
        if not gone:
            notes.append(f"job steps of an earlier grading (idrrun-{earlier}-*) are still listed by squeue")
    files.write_atomic(path, launch.SESSION + "\n")
    return notes
