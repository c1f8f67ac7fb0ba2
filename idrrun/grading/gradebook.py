"""A gradebook: the scores of one or more graded exercises (their reports), one row per student
of a roster, in the CSV forms that Moodle and Canvas import, and a plain one.

    read_roster(path) -> [Student]; read_report(path) -> [Marked]
    gradebook(roster, reports, policy) -> Gradebook; moodle_csv / canvas_csv / plain_csv(book)

A pure function of its files: written again from the reports each time, it is updated, never
appended to, so no student ever gets two rows. The roster decides who has a row (the LMS rejects
or invents a student it does not know); a graded submission that matches no roster line is not
written and is said. What no grade can be given for (no submission, an error row, points that
could not be evaluated here) is a blank cell, which both LMSs read as "no grade", unless the
policy says otherwise.

The formats, as their importers read them:
- Moodle, "Import grades from CSV" (docs.moodle.org/en/Grade_import; the importer is
  grade/import/csv/classes/load_data.php in moodle/moodle): the columns of Moodle's own
  "Plain text file" export, First name, Last name, ID number, Email address, then one column per
  exercise. The teacher maps "Email address" to "useremail" or "ID number" to "useridnumber" at
  import (Map from / Map to), and each exercise's column to a grade item or a new one; a cell
  that is empty or "-" is no grade. Every row must be a user of the course: Moodle stops the
  whole import at the first one it cannot find.
- Canvas, Grades > Import (community.canvaslms.com, "How do I import grades in the Gradebook?";
  the importer is app/models/gradebook_importer.rb in instructure/canvas-lms): the columns of
  Canvas's own export, Student, ID, SIS User ID, SIS Login ID, Section, then one column per
  exercise (a title it does not know makes a new assignment; the same title again updates it),
  and a second row "Points Possible" that gives each new assignment its points. Canvas finds a
  student by ID (its own user id), else SIS User ID, else SIS Login ID, else the name; a blank
  cell is no score.
Student names come from the roster only (the teacher's file), never from what students handed
in, so no cell needs the spreadsheet-formula guard of the reports.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .. import escape
from ..checks.score import points
from ..errors import UsageError
from .report import uninert

# The roster's columns: `submission` (the name `idrrun grade` gives a submission: alice for
# alice.c, alice.ipynb or the folder alice/) and what the LMSs identify students by.
ROSTER_COLUMNS = ("submission", "id", "email", "name", "first_name", "last_name", "login",
                  "section", "canvas_id")
# Moodle's "Plain text file" export, whose columns its CSV import reads (module docstring).
MOODLE_COLUMNS = ("First name", "Last name", "ID number", "Email address")
# Canvas's gradebook export, whose columns its import reads (module docstring).
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
PLAIN_COLUMNS = ("submission", "id", "email", "name")
Missing = Literal["blank", "zero"]
Incomplete = Literal["blank", "earned"]


@dataclass(frozen=True)
class Student:
    """A line of the roster (line: where, for messages)."""

    submission: str
    id: str = ""
    email: str = ""
    name: str = ""
    first_name: str = ""
    last_name: str = ""
    login: str = ""
    section: str = ""
    canvas_id: str = ""
    line: int = 0


@dataclass(frozen=True)
class Marked:
    """A graded row of a report, as far as a gradebook needs it (score None: not graded)."""

    student: str
    exercise: str
    verdict: str
    score: float | None
    possible: float | None
    not_evaluated: float | None
    report: str


@dataclass(frozen=True)
class Policy:
    """What a cell holds when there is no plain score: a roster student with no submission
    (blank, or zero); a score with points not evaluated here (blank, or the points earned, the
    rest counted as not earned); and every score out of `out_of` points instead of the
    exercise's own."""

    missing: Missing = "blank"
    incomplete: Incomplete = "blank"
    out_of: float | None = None


@dataclass(frozen=True)
class Gradebook:
    exercises: tuple[str, ...]
    possible: dict[str, float]  # each exercise's points, as written (out_of when given)
    students: tuple[Student, ...]
    cells: dict[tuple[str, str], float | None]  # (submission, exercise) -> the grade, or none
    rows: dict[tuple[str, str], Marked]  # (submission, exercise) -> its report's row
    notes: tuple[str, ...] = ()  # why some cells are blank, per student and exercise
    unmatched: tuple[Marked, ...] = field(default=())  # graded, but in no roster line


def _sniff(text: str) -> str:
    """The roster's separator: ";" when its first line has more of them than commas (a
    spreadsheet set to French or German writes that), else ","."""
    first = text.splitlines()[0] if text else ""
    return ";" if first.count(";") > first.count(",") else ","


def read_roster(path: Path) -> list[Student]:
    """The roster: CSV with a header line naming its columns (ROSTER_COLUMNS, any order and
    case; `submission` required), one line per student."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark is fine
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--roster {path}: cannot be read: {exc}") from None
    reader = csv.reader(io.StringIO(text), delimiter=_sniff(text))
    header = [h.strip().lower().replace(" ", "_") for h in next(reader, [])]
    unknown = [h for h in header if h not in ROSTER_COLUMNS]
    if "submission" not in header or unknown:
        raise UsageError(f"{path}:1: a roster's first line names its columns: submission (the "
                         f"name idrrun grade gives a submission), and any of "
                         f"{', '.join(ROSTER_COLUMNS[1:])}" +
                         (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    students: list[Student] = []
    seen: dict[tuple[str, str], int] = {}
    for number, cells in enumerate(reader, 2):
        if any(c.strip() for c in cells):
            students.append(_student(path, number, header, cells, seen))
    return students


def _student(path: Path, number: int, header: Sequence[str], cells: Sequence[str],
             seen: dict[tuple[str, str], int]) -> Student:
    """A roster line; `seen` holds the identities of the lines above (one line per student)."""
    values = {h: (cells[i].strip() if i < len(cells) else "") for i, h in enumerate(header)}
    student = Student(**values, line=number)
    if not student.submission:
        raise UsageError(f"{path}:{number}: no submission name")
    for key in ("submission", "id", "email", "login", "canvas_id"):
        value = getattr(student, key)
        if value and (key, value) in seen:
            raise UsageError(f"{path}:{number}: {key} {value!r} is already on line "
                             f"{seen[key, value]}: one line per student")
        seen[key, value] = number
    return student


def _number(value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(str(value))
    except ValueError:
        raise UsageError(f"not a number: {value!r}") from None
    return number if math.isfinite(number) else None


def read_report(path: Path) -> list[Marked]:
    """The rows of a report of `idrrun grade` (.json, or .csv: the JSON keeps names exact)."""
    try:
        text = path.read_text(encoding="utf-8")
        records = json.loads(text) if path.suffix.lower() == ".json" else \
            [{k: uninert(v or "") for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: not a report of idrrun grade: {exc}") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise UsageError(f"{path}: not a report of idrrun grade (a list of rows)")
    out = []
    for r in records:
        if "points" not in r or "student" not in r or "exercise" not in r:
            raise UsageError(f"{path}: its rows have no score: a report of an older idrrun; run "
                             f"the same idrrun grade command again (it scores the rows)")
        try:
            out.append(Marked(str(r["student"]), str(r["exercise"]), str(r.get("verdict", "")),
                              _number(r.get("score")), _number(r["points"]),
                              _number(r.get("not_evaluated")) or 0.0, str(path)))
        except UsageError as exc:
            raise UsageError(f"{path}: {r['student']}: {exc}") from None
    return out


def _possible(exercise: str, rows: Sequence[Marked]) -> float:
    totals = sorted({r.possible for r in rows if r.possible is not None})
    if len(totals) > 1:
        raise UsageError(f"{exercise}: its rows are scored out of {' and '.join(map(points, totals))} "
                         f"(another spec, or other hidden cases): grade them again together")
    return totals[0] if totals else 0.0


def _cell(row: Marked | None, policy: Policy, possible: float) -> tuple[float | None, str]:
    """A student's grade for one exercise, or None, and why it is none."""
    if row is None:
        return (0.0, "no submission: 0") if policy.missing == "zero" else (None, "no submission")
    if row.score is None or row.possible is None:
        return None, f"not graded ({row.verdict}: see {row.report})"
    if row.not_evaluated and policy.incomplete == "blank":
        return None, (f"{points(row.not_evaluated)} points not evaluated here: grade where every "
                      f"check can run (e.g. on a GPU), or give --incomplete earned")
    earned = row.score
    if policy.out_of is not None and possible:
        earned = earned * policy.out_of / possible
    note = f"{points(row.not_evaluated)} points not evaluated, counted as not earned" \
        if row.not_evaluated else ""
    return round(earned, 2), note


def _by_student(reports: Sequence[Marked]) -> dict[tuple[str, str], Marked]:
    """The rows by (submission, exercise): one each."""
    by_key: dict[tuple[str, str], Marked] = {}
    for r in reports:
        earlier = by_key.get((r.student, r.exercise))
        if earlier is not None:
            raise UsageError(f"{r.exercise}: {r.student} is in two reports ({earlier.report}, "
                             f"{r.report}): give one report per submission")
        by_key[r.student, r.exercise] = r
    return by_key


def gradebook(roster: Sequence[Student], reports: Sequence[Marked], policy: Policy) -> Gradebook:
    """Every roster student's grade for every exercise of the reports (in the order met)."""
    exercises = tuple(dict.fromkeys(r.exercise for r in reports))
    known = {s.submission for s in roster}
    by_key = _by_student(reports)
    possible = {e: _possible(e, [r for r in reports if r.exercise == e]) for e in exercises}
    cells: dict[tuple[str, str], float | None] = {}
    notes = []
    for student in roster:
        for exercise in exercises:
            value, why = _cell(by_key.get((student.submission, exercise)), policy, possible[exercise])
            cells[student.submission, exercise] = value
            if why:
                notes.append(f"{student.submission}, {exercise}: {why}")
    written = {e: policy.out_of if policy.out_of is not None else possible[e] for e in exercises}
    return Gradebook(exercises, written, tuple(roster), cells,
                     {k: v for k, v in by_key.items() if k[0] in known}, tuple(notes),
                     tuple(r for r in reports if r.student not in known))


def _grade(value: float | None) -> str:
    return "" if value is None else points(value)


def _csv(rows: Sequence[Sequence[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)  # RFC 4180 quoting, CRLF line ends
    return buf.getvalue()


def _require(book: Gradebook, lms: str, keys: Sequence[str]) -> None:
    for s in book.students:
        if not any(getattr(s, k) for k in keys):
            raise UsageError(f"roster line {s.line} ({s.submission}): {lms} finds a student by "
                             f"{' or '.join(keys)}: give one")


def moodle_csv(book: Gradebook) -> str:
    """Moodle's grade import (module docstring): names, ID number, email, a column per
    exercise."""
    _require(book, "Moodle", ("email", "id"))
    rows = [[*MOODLE_COLUMNS, *book.exercises]]
    for s in book.students:
        rows.append([s.first_name or s.name, s.last_name, s.id, s.email,
                     *(_grade(book.cells[s.submission, e]) for e in book.exercises)])
    return _csv(rows)


def canvas_csv(book: Gradebook) -> str:
    """Canvas's gradebook import (module docstring): the student columns, a column per
    exercise, the Points Possible row."""
    _require(book, "Canvas", ("canvas_id", "id", "login", "name"))
    rows = [[*CANVAS_COLUMNS, *book.exercises],
            [CANVAS_POINTS_ROW, "", "", "", "", *(points(book.possible[e]) for e in book.exercises)]]
    for s in book.students:
        # Canvas's own export writes "Last, First" (its sortable name), which it matches too.
        name = f"{s.last_name}, {s.first_name}" if s.last_name and s.first_name else \
            s.name or s.first_name or s.last_name
        rows.append([name, s.canvas_id, s.id, s.login, s.section,
                     *(_grade(book.cells[s.submission, e]) for e in book.exercises)])
    return _csv(rows)


def plain_csv(book: Gradebook) -> str:
    """For the teacher: who, then for each exercise the grade, out of, the points not
    evaluated here and the verdict."""
    header = list(PLAIN_COLUMNS)
    for e in book.exercises:
        header += [e, f"{e} out of", f"{e} not evaluated", f"{e} verdict"]
    rows = [header]
    for s in book.students:
        row = [s.submission, s.id, s.email, s.name or " ".join(p for p in (s.first_name, s.last_name) if p)]
        for e in book.exercises:
            marked = book.rows.get((s.submission, e))
            row += [_grade(book.cells[s.submission, e]), points(book.possible[e]),
                    points(marked.not_evaluated or 0.0) if marked is not None else "",
                    marked.verdict if marked is not None else "no submission"]
        rows.append(row)
    # The teacher's spreadsheet: a submission's name is a student's, never a formula there.
    return _csv([[str(escape.csv_cell(cell)) for cell in row] for row in rows])


FORMATS = {"moodle": moodle_csv, "canvas": canvas_csv, "csv": plain_csv}
