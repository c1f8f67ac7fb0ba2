"""Exercise specs: examples/NAME.toml, read into typed values (format: examples/README.md).

A wrong spec stops with a SpecError that names the file and the field.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError, did_you_mean
from ..model import RelativeTimeout, Settings
from . import registry, words
from .spec_fields import (Table, Visibility, check_no_cycle, read_arg_table, read_args,
                          read_counts_when, read_data_files, read_flag, read_hidden_args,
                          read_model, read_number, read_options, read_points, read_ranks,
                          read_source_file, read_start_args, read_string, read_toml,
                          read_visibility, spec_error)

# A check kind is one record of checks/registry.py (its fields, evaluator, needs, words);
# CHECK_KINDS, OUTPUT_KINDS, TRACE_KINDS and TIMED_KINDS are read from there (__getattr__).
# The kind of idrrun's own row that says the program did not build: the verdict's one row then,
# and no check earns anything (checks/score.py).
BUILD_ROW = "build"
# idrrun's own course: in the wheel as idrrun/course/{examples,notebooks}, the students' copy
# (hatch_build.py), or, when idrrun runs from a checkout (pip install -e), the checkout's whole
# examples/ and notebooks/.
_PACKAGE = Path(__file__).resolve().parents[1]
INSTALLED_COURSE = _PACKAGE / "course"
_CHECKOUT = _PACKAGE.parent


def _course_roots() -> tuple[Path, ...]:
    roots = [INSTALLED_COURSE] if (INSTALLED_COURSE / "examples").is_dir() else []
    # A checkout, not just any folder above site-packages that happens to hold an examples/.
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "examples").is_dir():
        roots.append(_CHECKOUT)
    return tuple(roots)


# Where the course lives (its specs, solutions and notebooks), installed or in the checkout:
# grading hides these folders from every box.
COURSE_DIRS: tuple[Path, ...] = tuple(root / sub for root in _course_roots()
                                      for sub in ("examples", "notebooks") if (root / sub).is_dir())
SPEC_LANGUAGES = ("c", "c++", "fortran", "cuda")
# [args.draw]: at most this many argument sets drawn (each one a run of every submission).
MAX_DRAWN_SETS = 20


def __getattr__(name: str) -> tuple[str, ...]:
    """CHECK_KINDS, OUTPUT_KINDS (evaluated again on each hidden run), TRACE_KINDS (need a GPU
    trace), TIMED_KINDS (a time or a share of time): read from the registry of kinds."""
    if name == "CHECK_KINDS":
        return registry.names()
    if name == "OUTPUT_KINDS":
        return registry.hidden_names()
    if name == "TRACE_KINDS":
        return registry.names("trace")
    if name == "TIMED_KINDS":
        return registry.timed_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class CheckSpec:
    kind: str
    label: str
    pattern: str | None = None
    expected: float | None = None
    abs_tol: float = 0.0
    rel_tol: float = 1e-9
    regex: str | None = None
    exact: str | None = None
    minimum: int | None = None
    max_bytes: float | None = None
    # data_moved: a regex whose group 1 is the iteration count the program prints; max_bytes is
    # then a bound per iteration.
    per_iteration: str | None = None
    reason: str = ""
    # What the check looks for, in words a student reads ("a line 'rank 0 -> device N'"),
    # when its pattern is not a plain one (checks/words.py derives the words otherwise).
    expect: str = ""
    min_share: float | None = None  # gpu_busy: the least fraction of the run the GPU is busy
    # gpu_busy: the least share as a ratio to the solution's, measured the same way on the same
    # GPU (min_ratio); speed: the scale of its points, (all at or below, none at or above), as
    # ratios of the run's time to the solution's (checks/ratio.py).
    min_ratio: float | None = None
    scale: tuple[float, float] | None = None
    # image: a picture the program writes, compared with the solution's (images.image_check)
    file: str | None = None
    min_psnr: float | None = None
    max_diff: float | None = None
    raw: tuple[int, int, str] | None = None  # width, height, dtype of a raw file
    # Evaluated by `idrrun grade` (and `idrrun course check`) only: a notebook's --check and the
    # students' copy of the course do not carry it (e.g. a check that would give the answer away).
    grading_only: bool = False
    # What passing it is worth in a grading's score: on the main run, and on each hidden run
    # (output kinds only; None: as on the main run). The verdict does not depend on them.
    points: float = 1.0
    hidden_points: float | None = None
    # The checks (their [[check]] indices) that must pass on the main run for this one's points
    # to count (spec: counts_when = [labels]): the values of a serial program are right, and
    # they are worth something only once the work runs where the exercise asks. The verdict
    # does not depend on them (checks/score.py).
    counts_when: tuple[int, ...] = ()
    # The checks whose each an equal part of this one's points waits for (spec:
    # counts_in_part = [labels]): the values of a half port count half (checks/score.py).
    counts_in_part: tuple[int, ...] = ()
    visibility: Visibility | None = None  # None: the exercise's
    index: int = -1  # its place among the spec's [[check]] tables (check[index])

    @property
    def points_hidden(self) -> float:
        """What passing it is worth on each hidden run."""
        return self.points if self.hidden_points is None else self.hidden_points


@dataclass(frozen=True)
class ArgRange:
    """One argument of a drawn set: a whole number among low, low + step, ... up to high, or,
    when a bound is a float, a number in [low, high] (checks/draw.py)."""

    low: int | float
    high: int | float
    step: int = 1

    @property
    def whole(self) -> bool:
        return isinstance(self.low, int) and isinstance(self.high, int)


@dataclass(frozen=True)
class HiddenDraw:
    """[args.draw]: `sets` hidden argument sets drawn when grading, one value per range, with
    the grader's seed (checks/draw.py)."""

    sets: int
    ranges: tuple[ArgRange, ...]


@dataclass(frozen=True)
class SourcePair:
    exercise: Path
    solution: Path | None  # None in a students' course (spec field `students = true`)


# A run's time limit when the spec gives none (seconds).
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    topic: str
    path: Path
    timeout: float
    options: tuple[str, ...]
    sources: Mapping[str, SourcePair]
    host_args: tuple[str, ...]
    gpu_args: tuple[str, ...]
    checks: tuple[CheckSpec, ...] = field(default=())
    # Grading only: more argument sets the program is run with, so that printing the expected
    # value does not pass. Students' copies of the course do not carry them.
    hidden_args: tuple[tuple[str, ...], ...] = ()
    # Grading only: the ranges more sets are drawn from with the grader's seed (draw.drawn adds
    # them to hidden_args); None once drawn, or when the spec has none.
    draw: HiddenDraw | None = None
    ranks: int | None = None  # MPI ranks the program is run with (-m N)
    model: str = "openacc"  # "openmp": built with -t (OpenMP target offload), not -a
    files: tuple[Path, ...] = ()  # data files copied beside the program before it runs
    # [args] start: the arguments `idrrun course check` runs the start file with, "host" (its
    # host arguments on any machine: a start file is a serial program, which at the GPU sizes
    # would run for minutes only to fail its checks), "gpu" (the start file passes some check
    # at the host sizes and fails only at the GPU's) or a list of its own (a start file whose
    # cost on a GPU does not follow the arguments, e.g. fixed-size arrays moved at every step).
    start_args: str | tuple[str, ...] = "host"
    # From a students' copy of the course (`idrrun course init --students`): no solutions (but
    # those its notebooks show), no grading-only data.
    students: bool = False
    visibility: Visibility = "shown"  # what a student sees of a check that says nothing
    # A students' copy whose grading-only parts were removed: grading runs more than it holds.
    more_at_grading: bool = False
    # A limit relative to the solution's time (`timeout` as a phrase); `timeout` is then its
    # "at most", the limit wherever the solution's time is not known (a notebook's --check).
    relative_timeout: RelativeTimeout | None = None
    # Why a program of this exercise can be far slower than its solution, in the lesson's words
    # ("the start file moves both arrays at every construct..."): what a run stopped at the
    # relative limit is told. "": the trace's first hint, or a question, says it instead.
    slow: str = ""
    # The most a submission whose result is wrong earns (a check of what it prints or writes
    # fails), as a share of the points evaluated: a full port with a wrong answer earns less
    # than a right one that leaves a loop on the host (checks/score.py). 1: no such bound.
    wrong_result: float = 0.4  # WRONG_RESULT

    def shown(self, check: CheckSpec) -> Visibility:
        """What a student sees of this check: its own visibility, else the exercise's."""
        return check.visibility or self.visibility

    def graded_only(self, check: CheckSpec) -> bool:
        """Never run in a notebook nor kept in a students' copy: grading only, or hidden."""
        return check.grading_only or self.shown(check) == "hidden"

    def check_at(self, index: int) -> CheckSpec | None:
        """The spec's check[index] (CheckResult.check), when it has one."""
        return next((c for c in self.checks if c.index == index and index >= 0), None)

    def without_grading_only(self) -> Exercise:
        """The exercise as a notebook checks it: no hidden argument sets (fixed or drawn), no
        grading-only or hidden checks; it says whether grading runs more."""
        kept = tuple(c for c in self.checks if not self.graded_only(c))
        more = self.more_at_grading or bool(self.hidden_args) or self.draw is not None or \
            len(kept) < len(self.checks)
        return dataclasses.replace(self, hidden_args=(), draw=None, checks=kept,
                                   more_at_grading=more)

    @property
    def needs_solution(self) -> bool:
        return any(_kind(c.kind).needs_solution for c in self.checks)

    @property
    def needs_trace(self) -> bool:
        return any(_kind(c.kind).needs_trace for c in self.checks)

    def as_start_file(self) -> Exercise:
        """The exercise as `idrrun course check` checks its start file: at its host arguments
        on any machine, unless the spec says the start file needs the GPU's or gives its own
        ([args] start)."""
        if self.start_args == "gpu":
            return self
        if isinstance(self.start_args, tuple):
            return dataclasses.replace(self, host_args=self.start_args, gpu_args=self.start_args)
        return dataclasses.replace(self, gpu_args=self.host_args)

    @property
    def compares_host(self) -> bool:
        """A check compares the GPU's output with the same build's on the host."""
        return any(_kind(c.kind).needs_host for c in self.checks)

    @property
    def timed(self) -> bool:
        """Some check's figure is a time or a share of time (Kind.timed)."""
        return any(_kind(c.kind).timed is not None for c in self.checks)

    @property
    def solution_files(self) -> tuple[str, ...]:
        """Files the solution writes that checks compare with (image checks)."""
        return tuple(c.file for c in self.checks if c.file is not None)

    @property
    def folders(self) -> tuple[Path, ...]:
        """Where the spec and its sources live, and the course's notebooks beside them (their
        solution cells): what a graded program must not see."""
        out = [self.path.parent]
        for pair in self.sources.values():
            for p in (pair.exercise, pair.solution):
                if p is not None and p.parent not in out:
                    out.append(p.parent)
        notebooks = self.path.parent.parent / "notebooks"
        if self.path.parent.name == "examples" and notebooks.is_dir():
            out.append(notebooks)
        return tuple(out)


# `timeout = "20x solution, at least 5 s, at most 180 s"` (the last two optional, any order).
_RELATIVE = re.compile(r"(?P<factor>\d+(?:\.\d+)?)\s*x\s+solution")
_BOUND = re.compile(r"at\s+(?P<side>least|most)\s+(?P<seconds>\d+(?:\.\d+)?)\s*s")
_TIMEOUT_FORMS = 'seconds (timeout = 120) or "20x solution, at least 5 s, at most 180 s"'


def _timeout(data: Mapping[str, Any], path: Path) -> tuple[float, RelativeTimeout | None]:
    """`timeout`: (the absolute limit, the limit relative to the solution's time or None)."""
    value = data.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(value, str):
        seconds = read_number(data, "timeout", path, "timeout", DEFAULT_TIMEOUT)
        if seconds is None or seconds <= 0:
            raise spec_error(path, "timeout", f"expected {_TIMEOUT_FORMS}, got {value!r}")
        return seconds, None
    first, *rest = (part.strip() for part in value.split(","))
    relative = _RELATIVE.fullmatch(first)
    bounds = [_BOUND.fullmatch(part) for part in rest]
    sides = [b["side"] for b in bounds if b is not None]
    if relative is None or None in bounds or len(set(sides)) < len(sides):
        raise spec_error(path, "timeout", f"expected {_TIMEOUT_FORMS}, got {value!r}")
    given = {b["side"]: float(b["seconds"]) for b in bounds if b is not None}
    factor, at_most = float(relative["factor"]), given.get("most", DEFAULT_TIMEOUT)
    at_least = given.get("least", 0.0)
    if factor <= 0 or at_most <= 0 or at_least > at_most:
        raise spec_error(path, "timeout", f"a factor above 0 and at least ≤ at most, got {value!r}")
    return at_most, RelativeTimeout(factor, at_least)


def _bound(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _range(raw: Any, path: Path, where: str) -> ArgRange:
    if not isinstance(raw, list) or len(raw) not in (2, 3) or not all(_bound(v) for v in raw):
        raise spec_error(path, where, f"expected [low, high] or [low, high, step] (numbers), got {raw!r}")
    if not all(math.isfinite(v) for v in raw):
        raise spec_error(path, where, f"expected finite numbers, got {raw!r}")
    low, high = raw[0], raw[1]
    if low > high:
        raise spec_error(path, where, f"low {low} is above high {high}")
    if len(raw) == 2:
        return ArgRange(low, high)
    if not all(isinstance(v, int) for v in raw):
        raise spec_error(path, where, f"a step needs whole numbers: [low, high, step], got {raw!r}")
    if raw[2] < 1:
        raise spec_error(path, where, f"the step must be 1 or more, got {raw[2]}")
    return ArgRange(low, high, raw[2])


def _draw(raw: Any, path: Path) -> HiddenDraw | None:
    """[args.draw]: sets = N, ranges = [[low, high], ...] (one per argument)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise spec_error(path, "args.draw", "expected a table [args.draw] with 'sets' and 'ranges'")
    unknown = sorted(set(raw) - {"sets", "ranges"})
    if unknown:
        raise spec_error(path, f"args.draw.{unknown[0]}", "unknown field (known: sets, ranges)")
    sets = raw.get("sets")
    if isinstance(sets, bool) or not isinstance(sets, int) or not 1 <= sets <= MAX_DRAWN_SETS:
        raise spec_error(path, "args.draw.sets", f"expected a number of argument sets from 1 to "
                                           f"{MAX_DRAWN_SETS}, got {sets!r}")
    ranges = raw.get("ranges")
    if not isinstance(ranges, list) or not ranges:
        raise spec_error(path, "args.draw.ranges", f"expected one range per argument, e.g. "
                                             f"[[1000, 200000], [0.5, 2.0]], got {ranges!r}")
    return HiddenDraw(sets, tuple(_range(r, path, f"args.draw.ranges[{i}]")
                                  for i, r in enumerate(ranges)))


def _grading_fields(t: Table, kind: registry.Kind) -> dict[str, Any]:
    """What a check is worth and who sees it: points, hidden_points, visibility."""
    hidden = read_points(t, "hidden_points", None)
    if hidden is not None and not kind.hidden_runs:
        output = ", ".join(registry.hidden_names())
        raise t.err("hidden_points", f"only checks of what the program prints or writes run on "
                                     f"hidden cases ({output}), not {kind.name}")
    return {"points": read_points(t, "points", 1.0), "hidden_points": hidden,
            "visibility": read_visibility(t.raw, t.path, f"{t.where}.visibility")}


# The keys every [[check]] may have; a kind reads its own besides (Kind.keys).
COMMON_FIELDS = frozenset({"kind", "label", "abs_tol", "rel_tol", "reason", "expect",
                           "grading_only", "points", "hidden_points", "visibility", "counts_when",
                           "counts_in_part"})


def _kind(name: str) -> registry.Kind:
    kind = registry.get(name)
    if kind is None:
        raise SpecError(f"unknown check kind {name!r}")
    return kind


def _check(raw: Any, index: int, path: Path) -> CheckSpec:
    """One [[check]] table: the fields every check has, then its kind's own (Kind.fields)."""
    if not isinstance(raw, dict):
        raise spec_error(path, f"check[{index}]", "expected a table [[check]]")
    t = Table(raw, path, f"check[{index}]")
    kind = registry.get(raw["kind"]) if isinstance(raw.get("kind"), str) else None
    if kind is None:
        raise t.err("kind", f"expected one of {', '.join(registry.names())}, got {raw.get('kind')!r}")
    unknown = sorted(set(raw) - COMMON_FIELDS - kind.keys)
    if unknown:
        others = {key for other in registry.all_kinds() for key in other.keys}
        raise t.err(unknown[0], f"not a field of a {kind.name} check" if unknown[0] in others
                    else "unknown field")
    grading_only = raw.get("grading_only", False)
    if not isinstance(grading_only, bool):
        raise t.err("grading_only", f"expected true or false, got {grading_only!r}")
    for key in ("label", "expect"):
        if not isinstance(raw.get(key, ""), str):
            raise t.err(key, "expected a string")
    fields = kind.fields(t) if kind.fields is not None else {}
    label = raw.get("label") or words.default_label(kind.name, fields.get("pattern"),
                                                    fields.get("exact"), fields.get("file"))
    return CheckSpec(kind=kind.name, label=label, abs_tol=t.number("abs_tol", 0.0) or 0.0,
                     rel_tol=t.number("rel_tol", 1e-9) or 0.0, reason=str(raw.get("reason", "")),
                     expect=str(raw.get("expect", "")), grading_only=grading_only, index=index,
                     **_grading_fields(t, kind), **fields)


_SPEC_FIELDS = frozenset({"name", "title", "topic", "timeout", "options", "sources", "args",
                          "check", "ranks", "files", "model", "students", "visibility",
                          "more_at_grading", "slow", "wrong_result"})
# A wrong result's most, when the spec does not say (examples/README.md, "Points").
WRONG_RESULT = 0.4


def _wrong_result(data: Mapping[str, Any], path: Path) -> float:
    share = read_number(data, "wrong_result", path, "wrong_result", WRONG_RESULT)
    if share is None or not 0 <= share <= 1:
        raise spec_error(path, "wrong_result", f"expected a share of the points from 0 to 1, "
                                               f"got {data.get('wrong_result')!r}")
    return share


def load(path: Path) -> Exercise:
    """The spec at `path`, every field checked (a SpecError names the file and the field)."""
    data = read_toml(path)
    unknown = sorted(set(data) - _SPEC_FIELDS)
    if unknown:
        raise spec_error(path, unknown[0], "unknown field")
    name = read_string(data, "name", path, "name")
    if name != path.stem:
        raise spec_error(path, "name", f"must equal the file name {path.stem!r}, got {name!r}")
    students = read_flag(data, "students", path)
    args = read_arg_table(data, path)
    host_args = read_args(args.get("host"), path, "args.host")
    timeout, relative_timeout = _timeout(data, path)
    return _reachable(Exercise(
        name=name,
        title=read_string(data, "title", path, "title", default=name),
        topic=read_string(data, "topic", path, "topic", default=name.split("_")[0]),
        path=path,
        timeout=timeout,
        relative_timeout=relative_timeout,
        slow=read_string(data, "slow", path, "slow", default=""),
        wrong_result=_wrong_result(data, path),
        options=read_options(data, path),
        sources=_sources(data, path, students),
        host_args=host_args,
        gpu_args=read_args(args.get("gpu"), path, "args.gpu") or host_args,
        checks=_checks(data, path),
        hidden_args=read_hidden_args(args, path),
        draw=_draw(args.get("draw"), path),
        ranks=read_ranks(data, path),
        files=read_data_files(data, path),
        start_args=read_start_args(args, path),
        model=read_model(data, path),
        students=students,
        visibility=_exercise_visibility(data, path),
        more_at_grading=read_flag(data, "more_at_grading", path),
    ))


def _reachable(exercise: Exercise) -> Exercise:
    """The exercise, when every point it promises can be earned: hidden points need a hidden
    case (fixed or drawn), a check of one model's evidence needs that model. A students' copy
    has had its hidden cases removed: grading runs them."""
    hidden_cases = bool(exercise.hidden_args) or exercise.draw is not None or \
        exercise.students or exercise.more_at_grading
    for c in exercise.checks:
        if c.hidden_points and not hidden_cases:
            raise spec_error(exercise.path, f"check[{c.index}].hidden_points",
                       f"{c.label!r} promises {c.hidden_points:g} points on each hidden run, and "
                       "the exercise has no hidden case: add [args.draw] (or [args] hidden), or "
                       "remove hidden_points")
        model = _kind(c.kind).model
        if model is not None and model != exercise.model:
            raise spec_error(exercise.path, f"check[{c.index}].kind",
                       f"a {c.kind} check reads what an {model} program shows, and the exercise's "
                       f"model is {exercise.model}: it could never pass")
    return exercise


def _exercise_visibility(data: Mapping[str, Any], path: Path) -> Visibility:
    """What students see of the checks that do not say: shown or summary. Not hidden: a
    notebook would have nothing to check; hide checks one by one."""
    value = read_visibility(data, path, "visibility") or "shown"
    if value == "hidden":
        raise spec_error(path, "visibility", "an exercise's checks are shown or summary; hide "
                                       "checks one by one (visibility = \"hidden\" in [[check]])")
    return value


def _sources(data: Mapping[str, Any], path: Path, students: bool) -> dict[str, SourcePair]:
    """[sources.LANGUAGE]: exercise and solution files, relative to the spec (a students'
    course carries no solution)."""
    raw_sources = data.get("sources")
    if not isinstance(raw_sources, dict) or not raw_sources:
        raise spec_error(path, "sources", "expected [sources.c] and/or [sources.fortran] tables")
    sources: dict[str, SourcePair] = {}
    for language, pair in raw_sources.items():
        where = f"sources.{language}"
        if language not in SPEC_LANGUAGES:
            raise spec_error(path, where, f"unknown language (known: {', '.join(SPEC_LANGUAGES)})")
        if not isinstance(pair, dict):
            raise spec_error(path, where, "expected a table with 'exercise' and 'solution'")
        solution = None if students and "solution" not in pair else \
            read_source_file(pair, "solution", path, where)
        sources[language] = SourcePair(read_source_file(pair, "exercise", path, where), solution)
    return sources


def _checks(data: Mapping[str, Any], path: Path) -> tuple[CheckSpec, ...]:
    raw_checks = data.get("check", [])
    if not isinstance(raw_checks, list) or not raw_checks:
        raise spec_error(path, "check", "expected at least one [[check]] table")
    checks = tuple(_check(c, i, path) for i, c in enumerate(raw_checks))
    needs = {c.index: read_counts_when(raw_checks[c.index], c, checks, path) for c in checks}
    parts = {c.index: read_counts_when(raw_checks[c.index], c, checks, path, "counts_in_part")
             for c in checks}
    check_no_cycle({i: needs[i] + parts[i] for i in needs}, checks, path)
    return tuple(dataclasses.replace(c, counts_when=needs[c.index], counts_in_part=parts[c.index])
                 for c in checks)


@dataclass(frozen=True)
class ExamplesFolder:
    path: Path
    origin: str  # "configured", "found", "installed", "checkout": how it was found

    def describe(self) -> str:
        return {"configured": "configured (examples_dir, IDRRUN_EXAMPLES)",
                "found": "found walking up from the working directory",
                "installed": "the course installed with idrrun",
                "checkout": "the checkout idrrun runs from"}[self.origin]


def locate_examples(settings: Settings, workdir: Path | None) -> ExamplesFolder | None:
    """Where the exercises come from: the configured folder, else the first examples/ holding
    specs found walking up from workdir (a course copy, `idrrun course init`; never for a
    grader, workdir None: its working folder may be the submissions'), else the course idrrun
    carries (installed with the wheel, or the checkout's)."""
    if settings.examples_dir is not None:
        return ExamplesFolder(settings.examples_dir, "configured")
    for folder in (workdir, *workdir.parents) if workdir is not None else ():
        candidate = folder / "examples"
        if candidate.is_dir() and any(candidate.glob("*.toml")):
            return ExamplesFolder(candidate, "found")
    for root in _course_roots():
        return ExamplesFolder(root / "examples", "installed" if root == INSTALLED_COURSE else "checkout")
    return None


def course_root() -> Path | None:
    """The folder holding idrrun's own course (examples/ and notebooks/), installed or in the
    checkout; None when idrrun carries none."""
    roots = _course_roots()
    return roots[0] if roots else None


def examples_dir(settings: Settings, workdir: Path | None) -> Path | None:
    """The folder the exercises are read from (locate_examples)."""
    found = locate_examples(settings, workdir)
    return found.path if found is not None else None


def find(name: str, settings: Settings, workdir: Path | None) -> Exercise:
    """The exercise NAME from locate_examples(settings, workdir)."""
    folder = examples_dir(settings, workdir)
    if folder is None:
        raise SpecError(f"unknown exercise {name!r}: no examples/ folder found "
                        "(set examples_dir in idrrun.toml or IDRRUN_EXAMPLES)")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or not (folder / f"{name}.toml").is_file():
        names = sorted(p.stem for p in folder.glob("*.toml"))
        raise SpecError(f"unknown exercise {name!r}{did_you_mean(name, names)} in {folder} "
                        f"(known: {', '.join(names) or 'none'})")
    return load(folder / f"{name}.toml")


def all_exercises(folder: Path) -> list[Exercise]:
    return [load(p) for p in sorted(folder.glob("*.toml"))]


def exercises_folder_or_fail(settings: Settings, workdir: Path) -> Path:
    folder = examples_dir(settings, workdir)
    if folder is None:
        raise SpecError("no examples/ folder found (set examples_dir or IDRRUN_EXAMPLES)")
    return folder
