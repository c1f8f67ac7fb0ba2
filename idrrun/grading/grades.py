"""What a grade is: a graded row's points on its class's scale, with the teacher's adjustment.
Pure, but for reading the teacher's adjustments file.

    scale(rows) -> the points a class is graded out of; grade(...) -> (the grade or None, a note)
    read_adjustments(path) -> {student: Adjustment}; adjustments_path(report)

Where some checks cannot be evaluated (a class graded on a host without a GPU: the GPU-trace
checks), a grade is out of the points evaluated here: the `scale` is the points most of the
class's rows had evaluated (14 of intro_pi's 18 on a host). A row that had more evaluated than
that (a program that did not build loses its GPU checks rather than leaving them unjudged;
a row kept from a grading on a GPU) is brought to the scale in proportion; a row that had fewer
(a check of ours could not judge it) is never scaled up: its points not evaluated count as not
earned, and the note says to look at it. So every graded student has a number, wherever the
class was graded, and the gradebook's column says what it is out of.

The other policies, for a teacher who asks: `earned` (out of every point, those not evaluated
counted as not earned), `blank` (no grade where any point was not evaluated).

A teacher's adjustment is points added or removed, with a reason, in a CSV beside the report
(REPORT.adjustments.csv: student,points,reason). idrrun never writes it: a regrading keeps it,
the report, the feedback and the gradebook add it to the grade (kept within 0 and the scale).
"""

from __future__ import annotations

import collections
import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..checks import registry
from ..checks.score import points
from ..checks.specs import Exercise
from ..checks.words import listing, plural
from ..errors import UsageError

Incomplete = Literal["evaluated", "earned", "blank"]
INCOMPLETE_POLICIES: tuple[Incomplete, ...] = ("evaluated", "earned", "blank")


@dataclass(frozen=True)
class Adjustment:
    """A teacher's points for one student (the sum of their lines) and why."""

    student: str
    points: float
    reason: str
    lines: tuple[int, ...] = ()  # where, in the adjustments file


def scale(rows: Sequence[tuple[float, float]], policy: Incomplete = "evaluated") -> float:
    """What a class's rows (each (possible, not evaluated)) are graded out of: the points most
    of them had evaluated (the largest of equally common ones), or every point (`earned`,
    `blank`)."""
    if not rows:
        return 0.0
    if policy != "evaluated":
        return max(possible for possible, _ in rows)
    tally = collections.Counter(round(possible - left, 6) for possible, left in rows)
    return max(tally, key=lambda value: (tally[value], value))


def grade(earned: float, possible: float, not_evaluated: float, out_of: float,
          policy: Incomplete = "evaluated",
          adjustment: Adjustment | None = None) -> tuple[float | None, str]:
    """A row's grade out of `out_of` (scale()) and what to say of it ("" when nothing)."""
    notes = []
    evaluated = possible - not_evaluated
    if policy == "blank" and not_evaluated:
        return None, (f"{plural(not_evaluated, 'point')} not evaluated here: grade where every "
                      "check can run (e.g. on a GPU), or leave --incomplete at its default")
    if policy == "evaluated" and evaluated > out_of + 1e-9:
        value = earned * out_of / evaluated
        if earned:  # nothing earned is 0 on any scale: nothing to look at
            notes.append(f"{points(earned)} of {points(evaluated)} evaluated, brought to the "
                         f"class's {points(out_of)}")
    else:
        value = earned
        missing = not_evaluated if policy != "evaluated" else out_of - evaluated
        if missing > 1e-9:
            notes.append(f"{plural(missing, 'point')} not evaluated for this submission, counted "
                         "as not earned" + ("" if policy != "evaluated" else ": look at its row"))
    if adjustment is not None and adjustment.points:
        value += adjustment.points
        notes.append(f"adjusted {signed(adjustment.points)}: {adjustment.reason}")
        if not 0 <= value <= out_of:
            value = min(max(value, 0.0), out_of)
            notes.append(f"kept within 0 and {points(out_of)}")
    return round(value, 2), "; ".join(notes)


def __getattr__(name: str) -> tuple[str, ...]:
    """GPU_KINDS, the kinds only a GPU can judge (Kind.needs_gpu: a run built for the host has
    no GPU trace, and no GPU run to compare with the host's; checks/verdict.py, output_kinds.py
    mark their results gpu_only): read from the registry of kinds when asked, a plug-in's kinds
    among them."""
    if name == "GPU_KINDS":
        return registry.gpu_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def before_grading(exercise: Exercise, possible: float, gpu: bool) -> str:
    """What a grader is told before grading starts when this machine cannot evaluate every
    point: "this machine has no GPU: 4 of 18 points (runs on the GPU, data moved) cannot be
    evaluated here; grades are out of the 14 evaluated"; "" when it can."""
    only_gpu = set(registry.gpu_names())
    needs = [c for c in exercise.checks if c.kind in only_gpu and c.points]
    left = sum(c.points for c in needs)
    if gpu or not left:
        return ""
    return (f"this machine has no GPU: {points(left)} of {plural(possible, 'point')} "
            f"({listing([c.label for c in needs])}) cannot be evaluated here; grades are out of "
            f"the {points(possible - left)} evaluated")


def signed(value: float) -> str:
    """+2, -0.5: an adjustment as a teacher writes it."""
    return ("+" if value >= 0 else "-") + points(abs(value))


def adjustments_path(report: Path) -> Path:
    """The teacher's adjustments beside a report: grades/intro_pi.json ->
    grades/intro_pi.adjustments.csv (one file for the .csv and the .json report)."""
    return report.with_name(f"{report.stem}.adjustments.csv")


ADJUSTMENT_COLUMNS = ("student", "points", "reason")


def separator(text: str) -> str:
    """A teacher's CSV's separator: ";" when its first line has more of them than commas (a
    spreadsheet set to French or German writes that), else ","."""
    first = text.splitlines()[0] if text else ""
    return ";" if first.count(";") > first.count(",") else ","


def read_adjustments(path: Path) -> dict[str, Adjustment]:
    """The teacher's adjustments, by student ({} when there is no such file): a CSV whose first
    line is student,points,reason; a student's lines add up (their reasons joined)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read: {exc}") from None
    reader = csv.reader(io.StringIO(text), delimiter=separator(text))
    header = [h.strip().lower() for h in next(reader, [])]
    if header[:3] != list(ADJUSTMENT_COLUMNS):
        raise UsageError(f"{path}:1: an adjustments file's first line is "
                         f"{','.join(ADJUSTMENT_COLUMNS)}")
    found: dict[str, Adjustment] = {}
    for number, cells in enumerate(reader, 2):
        if not any(c.strip() for c in cells):
            continue
        student, amount, reason = ([c.strip() for c in cells] + ["", "", ""])[:3]
        try:
            value = float(amount.replace(",", ".") if separator(text) == ";" else amount)
        except ValueError:
            value = math.nan
        if not student or not math.isfinite(value) or not reason:
            raise UsageError(f"{path}:{number}: a line is a student, points added (2) or removed "
                             f"(-2), and the reason; got {','.join(cells)!r}")
        was = found.get(student)
        found[student] = Adjustment(student, value + (was.points if was else 0.0),
                                    f"{was.reason}; {reason}" if was else reason,
                                    (*(was.lines if was else ()), number))
    return found


def unknown_students(adjustments: dict[str, Adjustment], students: Sequence[str],
                     path: Path) -> list[str]:
    """What to say of adjustments for students who are not in the rows."""
    known = set(students)
    return [f"{path}:{a.lines[0]}: no graded submission named {a.student!r}: adjustment not "
            f"used" for a in adjustments.values() if a.student not in known]
