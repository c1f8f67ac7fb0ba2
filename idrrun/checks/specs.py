"""Exercise specs: examples/NAME.toml, read into typed values (format: examples/README.md).

A wrong spec stops with a SpecError that names the file and the field.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..model import Settings
from . import regex

CHECK_KINDS = ("exit_ok", "value", "line", "matches_solution", "uses_openacc",
               "no_implicit_data", "source", "ran_on_gpu", "queues", "data_moved", "gpu_busy",
               "image", "uses_openmp", "regions_ran")
# Checks that need a GPU trace (profiling); "incomplete" when none was recorded.
TRACE_KINDS = ("ran_on_gpu", "queues", "data_moved", "gpu_busy")
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
# Checks of what the program printed or wrote: evaluated again for each hidden argument set.
OUTPUT_KINDS = ("exit_ok", "value", "line", "matches_solution", "image")
SPEC_LANGUAGES = ("c", "c++", "fortran", "cuda")
# [args.draw]: at most this many argument sets drawn (each one a run of every submission).
MAX_DRAWN_SETS = 20


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
    min_share: float | None = None  # gpu_busy: the least fraction of the run the GPU is busy
    # image: a picture the program writes, compared with the solution's (images.image_check)
    file: str | None = None
    min_psnr: float | None = None
    max_diff: float | None = None
    raw: tuple[int, int, str] | None = None  # width, height, dtype of a raw file
    # Evaluated by `idrrun grade` (and `idrrun course check`) only: a notebook's --check and the
    # students' copy of the course do not carry it (e.g. a check that would give the answer away).
    grading_only: bool = False


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
    # From a students' copy of the course (`idrrun course init --students`): no solutions (but
    # those its notebooks show), no grading-only data.
    students: bool = False

    def without_grading_only(self) -> Exercise:
        """The exercise as a notebook checks it: no hidden argument sets (fixed or drawn), no
        grading-only checks."""
        return dataclasses.replace(self, hidden_args=(), draw=None,
                                   checks=tuple(c for c in self.checks if not c.grading_only))

    @property
    def needs_solution(self) -> bool:
        return any(c.kind in ("matches_solution", "image") for c in self.checks)

    @property
    def needs_trace(self) -> bool:
        return any(c.kind in TRACE_KINDS for c in self.checks)

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


def _err(path: Path, where: str, message: str) -> SpecError:
    return SpecError(f"{path}: field '{where}': {message}")


def _str(data: Mapping[str, Any], key: str, path: Path, where: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or (default is None and not value):
        raise _err(path, where, f"expected a string, got {value!r}")
    return value


def _num(data: Mapping[str, Any], key: str, path: Path, where: str, default: float | None) -> float | None:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _err(path, where, f"expected a number, got {value!r}")
    return float(value)


def _args(value: Any, path: Path, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise _err(path, where, f"expected a list of arguments, got {value!r}")
    return tuple(str(v) for v in value)


def _bound(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _range(raw: Any, path: Path, where: str) -> ArgRange:
    if not isinstance(raw, list) or len(raw) not in (2, 3) or not all(_bound(v) for v in raw):
        raise _err(path, where, f"expected [low, high] or [low, high, step] (numbers), got {raw!r}")
    if not all(math.isfinite(v) for v in raw):
        raise _err(path, where, f"expected finite numbers, got {raw!r}")
    low, high = raw[0], raw[1]
    if low > high:
        raise _err(path, where, f"low {low} is above high {high}")
    if len(raw) == 2:
        return ArgRange(low, high)
    if not all(isinstance(v, int) for v in raw):
        raise _err(path, where, f"a step needs whole numbers: [low, high, step], got {raw!r}")
    if raw[2] < 1:
        raise _err(path, where, f"the step must be 1 or more, got {raw[2]}")
    return ArgRange(low, high, raw[2])


def _draw(raw: Any, path: Path) -> HiddenDraw | None:
    """[args.draw]: sets = N, ranges = [[low, high], ...] (one per argument)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _err(path, "args.draw", "expected a table [args.draw] with 'sets' and 'ranges'")
    unknown = sorted(set(raw) - {"sets", "ranges"})
    if unknown:
        raise _err(path, f"args.draw.{unknown[0]}", "unknown field (known: sets, ranges)")
    sets = raw.get("sets")
    if isinstance(sets, bool) or not isinstance(sets, int) or not 1 <= sets <= MAX_DRAWN_SETS:
        raise _err(path, "args.draw.sets", f"expected a number of argument sets from 1 to "
                                           f"{MAX_DRAWN_SETS}, got {sets!r}")
    ranges = raw.get("ranges")
    if not isinstance(ranges, list) or not ranges:
        raise _err(path, "args.draw.ranges", f"expected one range per argument, e.g. "
                                             f"[[1000, 200000], [0.5, 2.0]], got {ranges!r}")
    return HiddenDraw(sets, tuple(_range(r, path, f"args.draw.ranges[{i}]")
                                  for i, r in enumerate(ranges)))


def _regex(value: str, path: Path, where: str) -> str:
    try:
        regex.compile(value)
    except regex.PatternError as exc:
        raise _err(path, where, f"not a valid regular expression (RE2 syntax: no backreferences "
                                f"nor lookarounds): {exc}") from None
    return value


def _check(raw: Any, index: int, path: Path) -> CheckSpec:
    where = f"check[{index}]"
    if not isinstance(raw, dict):
        raise _err(path, where, "expected a table [[check]]")
    kind = raw.get("kind")
    if kind not in CHECK_KINDS:
        raise _err(path, f"{where}.kind", f"expected one of {', '.join(CHECK_KINDS)}, got {kind!r}")
    known = {"kind", "label", "pattern", "expected", "abs_tol", "rel_tol", "regex", "exact",
             "min", "max_bytes", "per_iteration", "reason", "file", "min_psnr", "max_diff",
             "width", "height", "dtype", "grading_only"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise _err(path, f"{where}.{unknown[0]}", "unknown field")
    label = raw.get("label", kind)
    if not isinstance(label, str):
        raise _err(path, f"{where}.label", "expected a string")
    grading_only = raw.get("grading_only", False)
    if not isinstance(grading_only, bool):
        raise _err(path, f"{where}.grading_only", f"expected true or false, got {grading_only!r}")
    spec = CheckSpec(
        kind=kind, label=label,
        abs_tol=_num(raw, "abs_tol", path, f"{where}.abs_tol", 0.0) or 0.0,
        rel_tol=_num(raw, "rel_tol", path, f"{where}.rel_tol", 1e-9) or 0.0,
        reason=str(raw.get("reason", "")),
        grading_only=grading_only,
    )
    fields: dict[str, Any] = {}
    if kind in ("value", "matches_solution"):
        pattern = _regex(_str(raw, "pattern", path, f"{where}.pattern"), path, f"{where}.pattern")
        if regex.groups(pattern) < 1:
            raise _err(path, f"{where}.pattern", "needs a group ( ) around the number")
        fields["pattern"] = pattern
    if kind == "value":
        fields["expected"] = _num(raw, "expected", path, f"{where}.expected", None)
        if fields["expected"] is None:
            raise _err(path, f"{where}.expected", "a value check needs the expected number")
    if kind == "line":
        if ("regex" in raw) == ("exact" in raw):
            raise _err(path, where, "a line check needs exactly one of 'regex' or 'exact'")
        if "regex" in raw:
            fields["regex"] = _regex(_str(raw, "regex", path, f"{where}.regex"), path, f"{where}.regex")
        else:
            fields["exact"] = _str(raw, "exact", path, f"{where}.exact")
    if kind == "source":
        fields["regex"] = _regex(_str(raw, "regex", path, f"{where}.regex"), path, f"{where}.regex")
    if kind == "queues":
        minimum = _num(raw, "min", path, f"{where}.min", 1)
        fields["minimum"] = int(minimum or 1)
    if kind == "regions_ran":
        minimum = _num(raw, "min", path, f"{where}.min", 1)
        if minimum is None or minimum < 1 or minimum != int(minimum):
            raise _err(path, f"{where}.min", "a regions_ran check needs min, a whole number ≥ 1")
        fields["minimum"] = int(minimum)
    if kind == "data_moved":
        fields["max_bytes"] = _num(raw, "max_bytes", path, f"{where}.max_bytes", None)
        if fields["max_bytes"] is None:
            raise _err(path, f"{where}.max_bytes", "a data_moved check needs max_bytes")
        if "per_iteration" in raw:
            pattern = _regex(_str(raw, "per_iteration", path, f"{where}.per_iteration"), path,
                             f"{where}.per_iteration")
            if regex.groups(pattern) < 1:
                raise _err(path, f"{where}.per_iteration", "needs a group ( ) around the count")
            fields["per_iteration"] = pattern
    if kind == "gpu_busy":
        share = _num(raw, "min", path, f"{where}.min", None)
        if share is None or not 0 < share <= 1:
            raise _err(path, f"{where}.min", "a gpu_busy check needs min, a fraction in (0, 1]")
        fields["min_share"] = share
    if kind == "image":
        name = _str(raw, "file", path, f"{where}.file")
        if "/" in name or name.startswith("."):
            raise _err(path, f"{where}.file", "a file name in the program's folder, e.g. blur.pgm")
        fields["file"] = name
        fields["min_psnr"] = _num(raw, "min_psnr", path, f"{where}.min_psnr", None)
        fields["max_diff"] = _num(raw, "max_diff", path, f"{where}.max_diff", None)
        if "width" in raw or "height" in raw or "dtype" in raw:
            width = _num(raw, "width", path, f"{where}.width", None)
            height = _num(raw, "height", path, f"{where}.height", None)
            dtype = _str(raw, "dtype", path, f"{where}.dtype")
            if not width or not height:
                raise _err(path, where, "a raw image needs width, height and dtype")
            fields["raw"] = (int(width), int(height), dtype)
    return CheckSpec(**{**spec.__dict__, **fields})


def _model(data: Mapping[str, Any], path: Path) -> str:
    model = data.get("model", "openacc")
    if model not in ("openacc", "openmp"):
        raise _err(path, "model", f"expected openacc or openmp, got {model!r}")
    return str(model)


def load(path: Path) -> Exercise:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such exercise spec") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    name = _str(data, "name", path, "name")
    if name != path.stem:
        raise _err(path, "name", f"must equal the file name {path.stem!r}, got {name!r}")
    base = path.parent
    students = data.get("students", False)
    if not isinstance(students, bool):
        raise _err(path, "students", f"expected true or false, got {students!r}")
    sources: dict[str, SourcePair] = {}
    raw_sources = data.get("sources")
    if not isinstance(raw_sources, dict) or not raw_sources:
        raise _err(path, "sources", "expected [sources.c] and/or [sources.fortran] tables")
    for language, pair in raw_sources.items():
        where = f"sources.{language}"
        if language not in SPEC_LANGUAGES:
            raise _err(path, where, f"unknown language (known: {', '.join(SPEC_LANGUAGES)})")
        if not isinstance(pair, dict):
            raise _err(path, where, "expected a table with 'exercise' and 'solution'")
        files: dict[str, Path | None] = {"solution": None}
        for role in ("exercise", "solution"):
            if role == "solution" and students and role not in pair:
                continue  # a students' course carries no solution
            rel = _str(pair, role, path, f"{where}.{role}")
            file = base / rel
            if not file.is_file():
                raise _err(path, f"{where}.{role}", f"no such file {rel} (relative to {base})")
            files[role] = file
        exercise_file = files["exercise"]
        assert exercise_file is not None
        sources[language] = SourcePair(exercise_file, files["solution"])
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise _err(path, "args", "expected a table with 'host' and 'gpu' lists")
    raw_checks = data.get("check", [])
    if not isinstance(raw_checks, list) or not raw_checks:
        raise _err(path, "check", "expected at least one [[check]] table")
    options = data.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise _err(path, "options", "expected a list of compiler flags")
    known = {"name", "title", "topic", "timeout", "options", "sources", "args", "check", "ranks",
             "files", "model", "students"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise _err(path, unknown[0], "unknown field")
    host_args = _args(args.get("host"), path, "args.host")
    unknown_args = sorted(set(args) - {"host", "gpu", "hidden", "draw"})
    if unknown_args:
        raise _err(path, f"args.{unknown_args[0]}", "unknown field (known: host, gpu, hidden, draw)")
    hidden = args.get("hidden", [])
    if not isinstance(hidden, list) or not all(isinstance(h, list) for h in hidden):
        raise _err(path, "args.hidden", "expected a list of argument lists, e.g. [[\"317\"], [\"50\"]]")
    ranks = data.get("ranks")
    if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1):
        raise _err(path, "ranks", f"expected a number of MPI ranks >= 1, got {ranks!r}")
    files = data.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise _err(path, "files", "expected a list of data files (relative to the spec)")
    for f in files:
        if not (base / f).is_file():
            raise _err(path, "files", f"no such file {f} (relative to {base})")
    return Exercise(
        name=name,
        title=_str(data, "title", path, "title", default=name),
        topic=_str(data, "topic", path, "topic", default=name.split("_")[0]),
        path=path,
        timeout=_num(data, "timeout", path, "timeout", 60.0) or 60.0,
        options=tuple(options),
        sources=sources,
        host_args=host_args,
        gpu_args=_args(args.get("gpu"), path, "args.gpu") or host_args,
        checks=tuple(_check(c, i, path) for i, c in enumerate(raw_checks)),
        hidden_args=tuple(_args(h, path, f"args.hidden[{i}]") for i, h in enumerate(hidden)),
        draw=_draw(args.get("draw"), path),
        ranks=ranks,
        files=tuple(base / f for f in files),
        model=_model(data, path),
        students=students,
    )


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
        known = ", ".join(sorted(p.stem for p in folder.glob("*.toml"))) or "none"
        raise SpecError(f"unknown exercise {name!r} in {folder} (known: {known})")
    return load(folder / f"{name}.toml")


def all_exercises(folder: Path) -> list[Exercise]:
    return [load(p) for p in sorted(folder.glob("*.toml"))]


def exercises_folder_or_fail(settings: Settings, workdir: Path) -> Path:
    folder = examples_dir(settings, workdir)
    if folder is None:
        raise SpecError("no examples/ folder found (set examples_dir or IDRRUN_EXAMPLES)")
    return folder
