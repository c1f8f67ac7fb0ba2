"""A grading's report as people read it: CSV (every cell inert) or JSON, written after every row
beside the signed state a resumed grading reads (state.py); a score on one line.

    write_report(rows, path, key); render_report(rows, path) -> text; score_text(score)
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

from .. import escape, files
from ..checks.score import Score, points
from ..errors import UsageError
from . import grades, names, state
from .rows import GradeRow, by_check, record


REPORT_FIELDS = ("student", "exercise", "language", "verdict", "score", "points", "not_evaluated",
                 "evaluated", "adjustment", "adjustment_reason", "reasons", "build_seconds",
                 "run_seconds", "submission", "sandbox", "node", "build_node", "lane", "submitted",
                 "late", "late_seconds")
# A CSV report's column for the points earned on one check: "check: pi".
CHECK_COLUMN = "check: "


# A CSV cell no spreadsheet reads as a formula, and back (escape.py; the gradebook reads it).
inert, uninert = escape.csv_cell, escape.csv_uncell


def render_report(rows: Sequence[GradeRow], path: Path) -> str:
    """The report as people read it. JSON keeps every value as it is; in CSV every cell is
    inert and quoted (a spreadsheet set to another separator, the semicolon of a French Excel,
    would otherwise cut a cell at a student's ";" and start a new one)."""
    if path.suffix.lower() == ".json":
        return json.dumps([names.decodable_data(record(r)) for r in rows], indent=2) + "\n"
    if path.suffix.lower() == ".csv":
        checks = list(dict.fromkeys(CHECK_COLUMN + label for r in rows
                                    for label in (by_check(r.score) if r.score else {})))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=[*REPORT_FIELDS, *checks], quoting=csv.QUOTE_ALL)
        writer.writeheader()
        for r in rows:
            cells = r.as_dict()
            earned = cells.pop("by_check")
            assert isinstance(earned, dict)
            cells |= {CHECK_COLUMN + label: value for label, value in earned.items()}
            writer.writerow({key: inert(value) for key, value in cells.items()})
        # One rule for every byte that is not UTF-8 (names.py), in every cell at once.
        return names.decodable(buf.getvalue())
    raise UsageError(f"--report {path}: use a .csv or .json file name")


def write_report(rows: Sequence[GradeRow], path: Path, key: bytes) -> None:
    """The report, and the state a resumed grading reads (state_path, every row signed with
    the grader's key), both written atomically."""
    state.write_state(rows, path, key)
    files.write_atomic(path, render_report(rows, path))



def score_text(s: Score, adjustment: grades.Adjustment | None = None) -> str:
    """A score on one line, out of the points evaluated here: "15/18", "17/17 (1 of 18 not
    evaluated)", "13/17 (1 of 18 not evaluated) +1.5"."""
    text = f"{points(s.earned)}/{points(s.evaluated)}"
    if s.not_evaluated:
        text += f" ({points(s.not_evaluated)} of {points(s.possible)} not evaluated)"
    if adjustment is not None:
        text += f" {grades.signed(adjustment.points)}"
    return text
