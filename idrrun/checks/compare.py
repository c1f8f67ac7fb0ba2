"""A run's figures beside the solution's: for the checks that come from the GPU trace or the
compiler's report, what the student's program did and what the solution did with the same
arguments and toolchain. Pure: the trace, the compiler's report and the output come in.

    figures(exercise, trace, traced, acc, output) -> RunFigures   (one run; cached for the solution)
    compare(exercise, yours, solution) -> Comparison               (the table "you / the solution")

What each figure can say, honestly:
- the trace has every copy with its size and direction, never the array it moved (neither
  CUPTI's memcpy records nor nsys's export name it; gcc's runtime does not tell the profiling
  interface either): copies are grouped by direction and size;
- the compiler's report names the arrays: nvhpc's -Minfo gives every data clause of every
  construct (explicit or implicit); gcc's dumps, as idrrun reads them, the implicit ones only.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import AccReport, Comparison, Figure
from ..profile.model import DTOH, HTOD, RunShape, Trace
from ..profile.seen import run_shape
from ..profile.summary import trace_values
from . import regex, registry
from .evidence import human_bytes, parse_number
from .specs import Exercise

# Copy sizes shown one by one (the most bytes first, on either side); the rest in one row.
COPY_ROWS = 4
_DIRECTIONS = {HTOD: "host → device", DTOH: "device → host"}


@dataclass(frozen=True)
class RunFigures:
    """What one run's trace and compiler report say, in the terms of the exercise's checks."""

    traced: bool  # the run was profiled with a GPU build (a trace, or no GPU work at all)
    iterations: float | None = None  # the run's count (the data check's per_iteration pattern)
    bytes_h2d: float = 0.0
    bytes_d2h: float = 0.0
    # (direction, bytes of one copy, how many): host<->device copies grouped by size.
    copies: tuple[tuple[str, int, int], ...] = ()
    kernels: int = 0  # launches
    distinct_kernels: int = 0
    queues: int = 0
    gpu_busy: float = 0.0
    compiled: bool = False  # a compiler report was read
    regions: int = 0
    omp_targets: int = 0
    implicit: tuple[str, ...] = ()  # arrays moved without a clause naming them
    # (array, clause, line, implicit) as the report gives them (nvhpc -Minfo).
    moves: tuple[tuple[str, str, int, bool], ...] = ()
    method: str = ""  # how the compiler's report was read
    # The run's kernels and copies in a few figures, for the diagnosis of a student's run
    # beside it (profile/diagnose.py): what the fixed kernel takes.
    shape: RunShape | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunFigures:
        """The figures a cache kept (as_dict); a field it lacks keeps its default."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name in ("copies", "moves"):
                value = tuple(tuple(item) for item in value)
            elif name == "implicit":
                value = tuple(value)
            elif name == "shape":
                value = RunShape.from_dict(value) if isinstance(value, Mapping) else None
            if name in known:
                values[name] = value
        return cls(**values)


def _traced(exercise: Exercise) -> bool:
    """Some check reads the GPU trace: the trace's figures are compared."""
    return any(k.needs_trace for k in registry.kinds_of(c.kind for c in exercise.checks))


def _report_rows(exercise: Exercise) -> frozenset[str]:
    """The compiler report's rows the exercise's checks show beside the solution's
    (Kind.report_rows)."""
    return frozenset().union(*(k.report_rows for k in registry.kinds_of(
        c.kind for c in exercise.checks)))


def wanted(exercise: Exercise) -> bool:
    """The exercise has checks whose figures are compared with the solution's: those of the
    trace, and those of the compiler's report."""
    return _traced(exercise) or bool(_report_rows(exercise))


def _iterations(exercise: Exercise, output: str) -> float | None:
    """The iteration count the exercise's data check divides by, read from the output."""
    for spec in exercise.checks:
        if spec.per_iteration is not None:
            found = regex.findall(spec.per_iteration, output)
            count = parse_number(found[-1]) if found else None
            return count or None
    return None


def figures(exercise: Exercise, trace: Trace | None, traced: bool, acc: AccReport | None,
            output: str) -> RunFigures:
    """One run's figures. traced: it was profiled on a GPU build (trace None then means the GPU
    did nothing); acc: the compiler's report, when one was read."""
    out = RunFigures(traced=traced, iterations=_iterations(exercise, output))
    if traced:
        values = trace_values(trace)
        copies = Counter((c.direction, c.bytes) for c in (trace.copies if trace else ())
                         if c.direction in _DIRECTIONS)
        out = dataclasses.replace(
            out, bytes_h2d=values["bytes_h2d"], bytes_d2h=values["bytes_d2h"],
            copies=tuple((d, size, n) for (d, size), n in sorted(copies.items())),
            kernels=int(values["kernels"]), queues=int(values["queues"]),
            distinct_kernels=len({k.name for k in trace.kernels}) if trace else 0,
            gpu_busy=values["gpu_busy"], shape=run_shape(trace))
    if acc is not None:
        out = dataclasses.replace(
            out, compiled=True, regions=acc.regions, omp_targets=acc.omp_targets,
            implicit=tuple(dict.fromkeys(i.variable for i in acc.implicit)), method=acc.method,
            moves=tuple((m.variable, m.clause, m.line, m.implicit) for m in acc.moves))
    return out


def _count(n: float, iterations: float | None, what: str = "") -> str:
    """'4 per iteration' where the run counted its iterations and it happens each time, else
    the number in all."""
    tail = f" {what}" if what else ""
    if iterations and n >= iterations:
        return f"{n / iterations:.3g}{tail} per iteration"
    return f"{n:.0f}{tail} in all" if iterations else f"{n:.0f}{tail}"


def _moved(f: RunFigures, per_iteration: bool) -> str:
    total = f.bytes_h2d + f.bytes_d2h
    if not total:
        return "none"
    per = f.iterations if per_iteration and f.iterations else 1.0
    return (f"{human_bytes(total / per)} (host → device {human_bytes(f.bytes_h2d / per)}, "
            f"device → host {human_bytes(f.bytes_d2h / per)})")


def _row(label: str, cells: Sequence[str], source: str) -> Figure:
    yours, solution = cells
    return Figure(label, yours, solution, source)


def _copy_rows(yours: RunFigures, solution: RunFigures) -> list[Figure]:
    """Copies by direction and size, the sizes that move most bytes (on either side) first."""
    runs = (yours, solution)
    sides = [{(d, size): n for d, size, n in f.copies} for f in runs]
    keys = sorted({k for side in sides for k in side},
                  key=lambda k: (-k[1] * max(side.get(k, 0) for side in sides), k[0] != HTOD, k))
    rows = [_row(f"{_DIRECTIONS[direction]} copies of {human_bytes(size)}",
                 [_count(side[(direction, size)], f.iterations) if (direction, size) in side
                  else "none" for side, f in zip(sides, runs)], "trace")
            for direction, size in keys[:COPY_ROWS]]
    rest = keys[COPY_ROWS:]
    if rest:
        counts = [sum(side.get(k, 0) for k in rest) for side in sides]
        rows.append(_row("other copies (smaller)",
                         [_count(n, f.iterations, "copies") if n else "none"
                          for n, f in zip(counts, runs)], "trace"))
    return rows


def _trace_rows(yours: RunFigures, solution: RunFigures) -> list[Figure]:
    runs = (yours, solution)
    per = bool(yours.iterations and solution.iterations)
    rows = [_row("data moved per iteration" if per else "data moved",
                 [_moved(f, per) for f in runs], "trace")]
    rows += _copy_rows(yours, solution)
    rows += [_row("kernel launches", [_count(f.kernels, f.iterations) +
                                      (f" ({f.distinct_kernels} kernels)" if f.kernels else "")
                                      for f in runs], "trace"),
             _row("queues with work", [str(f.queues) for f in runs], "trace"),
             _row("GPU busy", [f"{100 * f.gpu_busy:.0f} %" for f in runs], "trace")]
    return rows


def _clauses(moves: Sequence[tuple[str, str, int, bool]], name: str) -> str:
    """'copy (line 49); implicit copyin (lines 55, 64)' for one array."""
    lines: dict[str, list[int]] = {}
    for variable, clause, line, implicit in moves:
        if variable.casefold() == name:
            lines.setdefault(("implicit " if implicit else "") + clause, []).append(line)
    if not lines:
        return "none"
    return "; ".join(f"{clause} (line{'s' if len(at) > 1 else ''} {', '.join(map(str, at))})"
                     for clause, at in lines.items())


def _compiler_rows(exercise: Exercise, yours: RunFigures, solution: RunFigures) -> list[Figure]:
    shown = _report_rows(exercise)
    rows = []
    if "regions" in shown:
        rows.append(Figure("compute regions", str(yours.regions), str(solution.regions), "compiler"))
    if "omp_targets" in shown:
        rows.append(Figure("target regions", str(yours.omp_targets), str(solution.omp_targets),
                           "compiler"))
    if "implicit" in shown:
        rows.append(Figure("arrays moved implicitly", ", ".join(yours.implicit) or "none",
                           ", ".join(solution.implicit) or "none", "compiler"))
    if yours.moves or solution.moves:
        # One row per array, its name as first written (Fortran's names match whatever the case).
        names: dict[str, str] = {}
        for f in (yours, solution):
            for m in f.moves:
                names.setdefault(m[0].casefold(), m[0])
        rows += [Figure(f"array {shown}", _clauses(yours.moves, key), _clauses(solution.moves, key),
                        "compiler") for key, shown in names.items()]
    return rows


# What the rows from the compiler's report can and cannot say, in the student's words (how
# idrrun reads the report, e.g. gcc's tree dumps, is no concern of theirs).
MOVES_NOTE = ("The arrays and their clauses are as the compiler reports them: each one's lines "
              "are those of its own source.")
IMPLICIT_NOTE = ("The arrays moved implicitly are those the compiler names: it reports the arrays "
                 "no clause names, not every array each region moves.")


def _notes(yours: RunFigures, solution: RunFigures, trace: bool, compiler: bool,
           implicit: bool = False) -> list[str]:
    """Notes on the rows shown: none about a row that is not there."""
    notes = []
    if trace:
        notes.append("From the GPU traces of both runs: a copy's size and direction are known, "
                     "not the array it moved, so copies are grouped by size.")
    if compiler and (yours.moves or solution.moves):
        notes.append(MOVES_NOTE)
    elif compiler and implicit:
        notes.append(IMPLICIT_NOTE)
    return notes


def compare(exercise: Exercise, yours: RunFigures, solution: RunFigures) -> Comparison | None:
    """The table "you / the solution" for the exercise's trace and compiler checks; None when
    neither side has what they need (no trace, no report) or the exercise has no such check."""
    shown = _report_rows(exercise)
    trace = _traced(exercise) and yours.traced and solution.traced
    compiler = bool(shown) and yours.compiled and solution.compiled
    rows = (_trace_rows(yours, solution) if trace else []) + \
        (_compiler_rows(exercise, yours, solution) if compiler else [])
    if not rows:
        return None
    return Comparison(tuple(rows), tuple(_notes(yours, solution, trace, compiler,
                                                "implicit" in shown)))


def as_dict(comparison: Comparison) -> dict[str, Any]:
    """For the grader's report and state (timelines as paths)."""
    return {"figures": [dataclasses.asdict(f) for f in comparison.figures],
            "notes": list(comparison.notes),
            "timeline": str(comparison.timeline) if comparison.timeline else None,
            "solution_timeline": str(comparison.solution_timeline)
            if comparison.solution_timeline else None}


def from_dict(data: Mapping[str, Any] | None) -> Comparison | None:
    """as_dict's inverse; None for None (a row without a comparison)."""
    if not data:
        return None
    return Comparison(tuple(Figure(str(f["label"]), str(f["yours"]), str(f["solution"]),
                                   str(f.get("source", ""))) for f in data.get("figures") or []),
                      tuple(str(n) for n in data.get("notes") or []),
                      Path(data["timeline"]) if data.get("timeline") else None,
                      Path(data["solution_timeline"]) if data.get("solution_timeline") else None)
