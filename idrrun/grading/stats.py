"""A class's statistics, what a teacher looks at after a grading: per check how many passed,
failed or could not be evaluated, and the spread of the grades (grades.py's, adjustments
included): made from the rows, rendered as JSON or as CSV, and written beside the report.

    class_stats(exercise, rows, adjustments) -> ClassStats; as_dict / as_csv(stats)
    write_stats(stats, stats_path(report)): grades/intro_pi.json -> grades/intro_pi.stats.json
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..checks.score import CheckPoints, Score, points
from .. import files
from . import grades
from .rows import GradeRow


@dataclass(frozen=True)
class CheckStats:
    """One [[check]] over the class: its points (main run and hidden runs together), and how
    many students earned them all (passed), lost some (failed), or had some not evaluated."""

    check: int
    label: str
    worth: float
    passed: int
    failed: int
    not_evaluated: int


@dataclass(frozen=True)
class ClassStats:
    exercise: str
    rows: int  # every row, those that could not be graded included
    verdicts: dict[str, int]  # pass, fail, incomplete, error
    passed_here: int  # incomplete only for checks that need a GPU
    possible: float  # the exercise's points
    out_of: float  # the points the class is graded out of (grades.scale)
    grades: tuple[float, ...]  # every graded row's grade, adjusted
    adjusted: int  # rows with a teacher's adjustment
    checks: tuple[CheckStats, ...]

    @property
    def not_evaluated_here(self) -> float:
        return self.possible - self.out_of

    def spread(self) -> dict[str, float | None]:
        g = self.grades
        return {"min": min(g) if g else None, "median": statistics.median(g) if g else None,
                "max": max(g) if g else None,
                "mean": round(statistics.fmean(g), 2) if g else None}

    def unevaluated_checks(self) -> list[CheckStats]:
        """The checks most graded rows could not have evaluated here (those needing a GPU on a
        host)."""
        return [c for c in self.checks if c.not_evaluated * 2 > len(self.grades)]


def _outcome(items: Sequence[CheckPoints]) -> str:
    if any(i.outcome == "lost" for i in items):
        return "failed"
    return "passed" if all(i.outcome == "earned" for i in items) else "not_evaluated"


def _checks(scores: Sequence[Score]) -> tuple[CheckStats, ...]:
    labels: dict[int, str] = {}
    worth: dict[int, float] = {}
    tally: dict[int, dict[str, int]] = {}
    for s in scores:
        by_check: dict[int, list[CheckPoints]] = {}
        for item in s.items:
            by_check.setdefault(item.check, []).append(item)
        for check, items in by_check.items():
            main = next((i for i in items if not i.hidden), items[0])
            labels.setdefault(check, main.label)
            worth[check] = max(worth.get(check, 0.0), sum(i.worth for i in items))
            counts = tally.setdefault(check, {"passed": 0, "failed": 0, "not_evaluated": 0})
            counts[_outcome(items)] += 1
    return tuple(CheckStats(c, labels[c], worth[c], **tally[c]) for c in sorted(tally))


def class_stats(exercise: str, rows: Sequence[GradeRow],
                adjustments: dict[str, grades.Adjustment]) -> ClassStats:
    """The statistics of a class's rows (those that could not be graded are counted apart)."""
    scores = [(r.student, r.score) for r in rows if r.score is not None]
    out_of = grades.scale([(s.possible, s.not_evaluated) for _, s in scores])
    graded = []
    for student, s in scores:
        value, _ = grades.grade(s.earned, s.possible, s.not_evaluated, out_of,
                                adjustment=adjustments.get(student))
        if value is not None:
            graded.append(value)
    verdicts = {v: sum(r.status == v for r in rows) for v in ("pass", "fail", "incomplete", "error")}
    return ClassStats(exercise, len(rows), verdicts, sum(r.passed_here for r in rows),
                      max((s.possible for _, s in scores), default=0.0), out_of, tuple(graded),
                      sum(student in adjustments for student, _ in scores),
                      _checks([s for _, s in scores]))


def as_dict(stats: ClassStats) -> dict[str, object]:
    return {"exercise": stats.exercise, "rows": stats.rows, "verdicts": stats.verdicts,
            "passed_here": stats.passed_here, "points": stats.possible,
            "out_of": stats.out_of, "not_evaluated_here": stats.not_evaluated_here,
            "graded": len(stats.grades), "adjusted": stats.adjusted, "grades": stats.spread(),
            "checks": [{"check": c.check, "label": c.label, "points": c.worth, "passed": c.passed,
                        "failed": c.failed, "not_evaluated": c.not_evaluated}
                       for c in stats.checks]}


# The statistics as a CSV reader takes them: one line for the grades, then one per check.
CSV_COLUMNS = ("row", "points", "passed", "failed", "not evaluated", "min", "median", "max",
               "mean")


def as_csv(stats: ClassStats) -> str:
    """The first line is the grades (out of, how many passed, failed, incomplete; their
    spread); then a line per check (its points, how many passed, failed, not evaluated)."""
    spread = stats.spread()
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=csv.QUOTE_ALL)
    writer.writerow(CSV_COLUMNS)
    writer.writerow(["grade", points(stats.out_of), stats.verdicts["pass"] + stats.passed_here,
                     stats.verdicts["fail"], stats.verdicts["incomplete"] - stats.passed_here,
                     *("" if spread[k] is None else points(spread[k] or 0.0)
                       for k in ("min", "median", "max", "mean"))])
    for c in stats.checks:
        # A label is the teacher's (the spec's) and never starts a formula; quoted all the same.
        writer.writerow([c.label, points(c.worth), c.passed, c.failed, c.not_evaluated,
                         "", "", "", ""])
    return buf.getvalue()


def stats_path(report: Path) -> Path:
    """Beside the report, in its format: grades/intro_pi.csv -> grades/intro_pi.stats.csv."""
    return report.with_name(f"{report.stem}.stats{report.suffix.lower()}")


def write_stats(summary: ClassStats, path: Path) -> None:
    """The statistics beside the report, in its format (written whole, as the report is)."""
    files.write_atomic(path, json.dumps(as_dict(summary), indent=2) + "\n"
                       if path.suffix == ".json" else as_csv(summary))
