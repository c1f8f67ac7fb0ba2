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
  import (Map from / Map to; Map from is First name until changed), and each exercise's column
  to a grade item or a new one; a cell that is empty or "-" is no grade. Every row must be a
  user of the course: Moodle stops the whole import at the first one it cannot find. Names are
  never matched, only shown as the export has them: a name that cannot be split is left out
  rather than guessed (split_name).
- Canvas, Grades > Import (community.canvaslms.com, "How do I import grades in the Gradebook?";
  the importer is app/models/gradebook_importer.rb in instructure/canvas-lms): the columns of
  Canvas's own export, Student, ID, SIS User ID, SIS Login ID, Section, then one column per
  exercise, and a second row "Points Possible" that gives each new assignment its points. A
  header "Title (123)" is assignment 123 whatever its title (Assignment.title_and_id in
  app/models/assignment.rb: the digits in parentheses that end it, after a space), as Canvas's
  export writes every column; else the assignment of that title, else a new assignment. Canvas
  finds a student by ID (its own user id), else SIS User ID, else SIS Login ID, else Student
  against her name or her sortable name, "Last, First"; a blank cell is no score.
Every cell of every file goes through escape.csv_cell: a roster is the teacher's file, but often
the LMS's own list, with the names students typed into their profiles.

A grade is grades.py's: by default out of the points evaluated where the class was graded
(every graded student has a number; the column's name says "14 of 18 points evaluated" when
some could not be), with the teacher's adjustments (REPORT.adjustments.csv beside each report,
read again each time) added. The plain CSV adds, per exercise, the points earned on each check.
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
from ..checks.words import plural
from ..errors import UsageError
from . import grades, names
from .report import CHECK_COLUMN, uninert

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
# An exercise's column of how late each submission was ("EXERCISE late"), where it is known.
LATE_COLUMN = "late"
Missing = Literal["blank", "zero"]
Incomplete = grades.Incomplete


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
    by_check: dict[str, float | None] = field(default_factory=dict)  # points earned per check
    # The teacher's adjustment (the file beside the report, as it is now), and the one the
    # report was written with (None: none, or a report of an older idrrun).
    adjustment: grades.Adjustment | None = None
    reported_adjustment: float | None = None
    # When it was handed in, and how late, as the report says ("" and None: not known, or on
    # time; reports of an older idrrun have neither).
    submitted: str = ""
    late: str = ""
    late_seconds: float | None = None


@dataclass(frozen=True)
class Policy:
    """What a cell holds when there is no plain score: a roster student with no submission
    (blank, or zero); a score with points not evaluated here (grades.py: out of the points
    evaluated, the default; the points earned out of every point; or blank); and every grade
    out of `out_of` points instead of the exercise's own."""

    missing: Missing = "blank"
    incomplete: Incomplete = "evaluated"
    out_of: float | None = None
    # The teacher's late policy: this percentage of the grade taken off for each day (begun)
    # a submission came after the deadline; 0, the default, changes no grade (the late
    # columns and notes say it).
    late_penalty: float = 0.0


@dataclass(frozen=True)
class Gradebook:
    exercises: tuple[str, ...]
    possible: dict[str, float]  # each exercise's points, as written (out_of when given)
    students: tuple[Student, ...]
    cells: dict[tuple[str, str], float | None]  # (submission, exercise) -> the grade, or none
    rows: dict[tuple[str, str], Marked]  # (submission, exercise) -> its report's row
    notes: tuple[str, ...] = ()  # why some cells are blank, per student and exercise
    unmatched: tuple[Marked, ...] = field(default=())  # graded, but in no roster line
    # Each exercise's column name (its name, and "14 of 18 points evaluated" when some could
    # not be where it was graded) and its checks (the plain CSV's columns).
    columns: dict[str, str] = field(default_factory=dict)
    checks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The exercises whose reports say when each row was handed in (a deadline was known when
    # they were graded): they get their late columns.
    timed: tuple[str, ...] = ()
    # Canvas's assignment of each exercise the teacher named (--canvas-assignment EXERCISE=ID).
    canvas_ids: dict[str, str] = field(default_factory=dict)

    def column(self, exercise: str) -> str:
        return self.columns.get(exercise, exercise)

    def canvas_column(self, exercise: str) -> str:
        """The exercise's column in Canvas's file: "loops_dot (123)" where its assignment is
        known, which Canvas reads as that assignment whatever its title; else the column."""
        found = self.canvas_ids.get(exercise)
        return f"{self.column(exercise)} ({found})" if found else self.column(exercise)

    def late(self, submission: str, exercise: str) -> str:
        """How late the student's submission of the exercise was ("" on time, or unknown)."""
        row = self.rows.get((submission, exercise))
        return row.late if row is not None else ""


def read_roster(path: Path) -> list[Student]:
    """The roster: CSV with a header line naming its columns (ROSTER_COLUMNS, any order and
    case; `submission` required), one line per student."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark is fine
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--roster {path}: cannot be read: {exc}") from None
    reader = csv.reader(io.StringIO(text), delimiter=grades.separator(text))
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


def beside_a_report(path: Path) -> str:
    """What to say of a file that idrrun grade or the teacher keeps beside a report, given as
    one (a shell's grades/*.csv names them too); "" for anything else."""
    name = path.name.lower()
    if name.endswith((".stats.csv", ".stats.json")):
        return f"{path}: the class statistics beside a report, not a report: left out"
    if name.endswith(".adjustments.csv"):
        return f"{path}: the adjustments beside a report, not a report: left out"
    return ""


def _records(path: Path) -> list[dict[str, object]]:
    """A report's rows as dicts. Its bytes that are not UTF-8 (a report of an older idrrun,
    a student's file name) are read by the one rule of names.py, never refused."""
    try:
        text = names.decodable(path.read_bytes().decode("utf-8", "surrogateescape"))
        records = json.loads(text) if path.suffix.lower() == ".json" else \
            [{k: uninert(v or "") for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a report of idrrun grade: {exc}") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise UsageError(f"{path}: not a report of idrrun grade (a list of rows)")
    return records


def _by_check(record: dict[str, object]) -> dict[str, float | None]:
    """The points earned per check: a JSON report's by_check, a CSV report's "check: " columns."""
    found = record.get("by_check")
    if isinstance(found, dict):
        return {str(k): _number(v) for k, v in found.items()}
    return {k.removeprefix(CHECK_COLUMN): _number(v) for k, v in record.items()
            if isinstance(k, str) and k.startswith(CHECK_COLUMN)}


def read_report(path: Path) -> list[Marked]:
    """The rows of a report of `idrrun grade` (.json, or .csv), each with the teacher's
    adjustment as the file beside the report has it now."""
    adjustments = grades.read_adjustments(grades.adjustments_path(path))
    out = []
    for r in _records(path):
        if "points" not in r or "student" not in r or "exercise" not in r:
            raise UsageError(f"{path}: its rows have no score: a report of an older idrrun; run "
                             f"the same idrrun grade command again (it scores the rows)")
        try:
            out.append(Marked(str(r["student"]), str(r["exercise"]), str(r.get("verdict", "")),
                              _number(r.get("score")), _number(r["points"]),
                              _number(r.get("not_evaluated")) or 0.0, str(path), _by_check(r),
                              adjustments.get(str(r["student"])), _number(r.get("adjustment")),
                              str(r.get("submitted") or ""), str(r.get("late") or ""),
                              _number(r.get("late_seconds"))))
        except UsageError as exc:
            raise UsageError(f"{path}: {r['student']}: {exc}") from None
    return out


def adjustment_notes(path: Path, rows: Sequence[Marked]) -> list[str]:
    """What to say of a report's adjustments: those naming no graded row, and those changed
    since the report (and the feedback) were written."""
    adjustments = grades.read_adjustments(grades.adjustments_path(path))
    notes = grades.unknown_students(adjustments, [r.student for r in rows],
                                    grades.adjustments_path(path))
    changed = [r.student for r in rows if r.score is not None and
               (r.adjustment.points if r.adjustment else None) != r.reported_adjustment]
    if changed:
        notes.append(f"{grades.adjustments_path(path)}: changed since {path} was written "
                     f"({listing_names(changed)}): the gradebook has them; run the same idrrun "
                     "grade command again to write them into the report and the feedback")
    return notes


def listing_names(students: Sequence[str]) -> str:
    shown = ", ".join(students[:5])
    return shown + (f" and {len(students) - 5} more" if len(students) > 5 else "")


def _possible(exercise: str, rows: Sequence[Marked]) -> float:
    totals = sorted({r.possible for r in rows if r.possible is not None})
    if len(totals) > 1:
        raise UsageError(f"{exercise}: its rows are scored out of {' and '.join(map(points, totals))} "
                         f"(another spec, or other hidden cases): grade them again together")
    return totals[0] if totals else 0.0


def _scale(rows: Sequence[Marked], policy: Policy) -> float:
    """What an exercise's grades are out of before --out-of (grades.scale)."""
    return grades.scale([(r.possible, r.not_evaluated or 0.0) for r in rows
                         if r.score is not None and r.possible is not None], policy.incomplete)


def _cell(row: Marked | None, policy: Policy, scale: float) -> tuple[float | None, str]:
    """A student's grade for one exercise, or None, and why it is none (or what to look at)."""
    if row is None:
        return (0.0, "no submission: 0") if policy.missing == "zero" else (None, "no submission")
    if row.score is None or row.possible is None:
        return None, f"not graded ({row.verdict}: see {row.report})"
    value, note = grades.grade(row.score, row.possible, row.not_evaluated or 0.0, scale,
                               policy.incomplete, row.adjustment)
    if value is not None and policy.out_of is not None and scale:
        value = round(value * policy.out_of / scale, 2)
    if row.late_seconds:
        days = math.ceil(row.late_seconds / 86400)
        kept = max(0.0, 1 - policy.late_penalty / 100 * days)
        if value is not None and kept < 1:
            value = round(value * kept, 2)
        late = f"submitted {row.late} after the deadline" + (
            f": {points(policy.late_penalty * days)} % off" if policy.late_penalty else
            " (no late penalty: the grade is unchanged)")
        note = f"{note}; {late}" if note else late
    return value, note


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


def _column(exercise: str, scale: float, possible: float) -> str:
    """An exercise's column: its name, and what it is out of when not every point could be
    evaluated ("intro_pi (14 of 18 points evaluated)"; a new title is a new assignment in
    Canvas, as a grade on another footing should be)."""
    if scale >= possible:
        return exercise
    return f"{exercise} ({points(scale)} of {plural(possible, 'point')} evaluated)"


def _exercises(exercises: Sequence[str], reports: Sequence[Marked], policy: Policy) -> tuple[
        dict[str, float], dict[str, float], dict[str, tuple[str, ...]]]:
    """Each exercise's points, what its grades are out of (before --out-of), and its checks."""
    rows = {e: [r for r in reports if r.exercise == e] for e in exercises}
    return ({e: _possible(e, rows[e]) for e in exercises},
            {e: _scale(rows[e], policy) for e in exercises},
            {e: tuple(dict.fromkeys(label for r in rows[e] for label in r.by_check)) for e in exercises})


def canvas_assignments(given: Sequence[tuple[str, str]], exercises: Sequence[str]) -> dict[str, str]:
    """The Canvas assignment of each exercise, as the teacher gave them (EXERCISE, ID): one per
    exercise, one exercise per assignment, and only exercises of the reports (a typo would
    otherwise be a new assignment in Canvas)."""
    ids: dict[str, str] = {}
    for exercise, number in given:
        option = f"--canvas-assignment {exercise}={number}"
        if exercise not in exercises:
            raise UsageError(f"{option}: no report of {exercise} (the reports grade "
                             f"{', '.join(exercises)})")
        if exercise in ids and ids[exercise] != number:
            raise UsageError(f"{option}: {exercise} is given twice ({ids[exercise]} and {number})")
        other = next((e for e, n in ids.items() if n == number and e != exercise), None)
        if other is not None:
            raise UsageError(f"{option}: {number} is {other}'s: one assignment per exercise")
        ids[exercise] = number
    return ids


def gradebook(roster: Sequence[Student], reports: Sequence[Marked], policy: Policy,
              canvas_ids: Sequence[tuple[str, str]] = ()) -> Gradebook:
    """Every roster student's grade for every exercise of the reports (in the order met);
    `canvas_ids`: Canvas's assignment of an exercise, where the teacher gave it."""
    exercises = tuple(dict.fromkeys(r.exercise for r in reports))
    known = {s.submission for s in roster}
    by_key = _by_student(reports)
    possible, scale, checks = _exercises(exercises, reports, policy)
    cells: dict[tuple[str, str], float | None] = {}
    notes = []
    for student in roster:
        for exercise in exercises:
            value, why = _cell(by_key.get((student.submission, exercise)), policy, scale[exercise])
            cells[student.submission, exercise] = value
            if why:
                notes.append(f"{student.submission}, {exercise}: {why}")
    written = {e: policy.out_of if policy.out_of is not None else scale[e] for e in exercises}
    return Gradebook(exercises, written, tuple(roster), cells,
                     {k: v for k, v in by_key.items() if k[0] in known}, tuple(notes),
                     tuple(r for r in reports if r.student not in known),
                     {e: _column(e, scale[e], possible[e]) for e in exercises}, checks,
                     tuple(e for e in exercises if any(r.submitted for r in reports
                                                       if r.exercise == e)),
                     canvas_assignments(canvas_ids, exercises))


def _grade(value: float | None) -> str:
    return "" if value is None else points(value)


def _csv(rows: Sequence[Sequence[str]]) -> str:
    """A file's rows, RFC 4180 quoting and CRLF line ends, every cell one that no spreadsheet
    reads as a formula (escape.csv_cell): a roster is often the LMS's own list, its names as
    students typed them, and a teacher opens these files in a spreadsheet too."""
    buf = io.StringIO()
    csv.writer(buf).writerows([[str(escape.csv_cell(cell)) for cell in row] for row in rows])
    return buf.getvalue()


def _require(book: Gradebook, lms: str, keys: Sequence[str]) -> None:
    for s in book.students:
        if not any(getattr(s, k) for k in keys):
            raise UsageError(f"roster line {s.line} ({s.submission}): {lms} finds a student by "
                             f"{' or '.join(keys)}: give one")


# A last name written in capitals ("MARTIN Ann", "Jean DE LA FONTAINE"), as French class lists
# write it: a word of two letters or more, every one a capital.
def _capitals(word: str) -> bool:
    return word.isupper() and sum(c.isalpha() for c in word) >= 2


def split_name(name: str) -> tuple[str, str] | None:
    """A full name's first and last names where the name tells them apart: "Last, First" (the
    order of Canvas's sortable name), a last name in capitals at either end, or two words
    (first, then last). None where it does not: one word, or more with nothing to tell by
    ("Mary Ann Smith": Mary Ann, or Ann Smith?). Moodle keeps the two apart and never splits
    a name; Canvas's code takes the last word for the last name (User.name_parts in
    app/models/user.rb), wrong for "Ludwig van Beethoven": a guess would be a wrong name in
    the file, where none is only a blank (Moodle) or the name as it is (Canvas matches it)."""
    if "," in name:
        last, _, first = (part.strip() for part in name.partition(","))
        return (first, last) if first and last and "," not in first else None
    words = name.split()
    capitals = [_capitals(w) for w in words]
    if any(capitals) and not all(capitals):
        count = sum(capitals)
        if all(capitals[:count]):
            return " ".join(words[count:]), " ".join(words[:count])
        if all(capitals[-count:]):
            return " ".join(words[:-count]), " ".join(words[-count:])
        return None
    return (words[0], words[1]) if len(words) == 2 else None


def given_names(student: Student) -> tuple[str, str] | None:
    """The student's first and last names: the roster's first_name and last_name where it has
    them, else its name split (split_name); None where there are none to write."""
    if student.first_name or student.last_name:
        return student.first_name, student.last_name
    return split_name(student.name) if student.name else None


def canvas_student(student: Student) -> str:
    """Canvas's Student cell: "Last, First", as Canvas's export writes a student's sortable
    name (User.last_name_first in instructure/canvas-lms app/models/user.rb), where the roster
    tells the names apart; else the name as the roster has it. Canvas's importer matches the
    cell against a student's name and sortable name alike (process_student in
    app/models/gradebook_importer.rb), after ID, SIS User ID and SIS Login ID."""
    names = given_names(student)
    if names is None:
        return student.name
    return ", ".join(n for n in (names[1], names[0]) if n)


def roster_notes(book: Gradebook) -> list[str]:
    """What to say of the roster before an LMS reads its file: each name that is not split
    (its first and last names left out), each identity that a spreadsheet would read as a
    formula (written with a leading quote: the LMS will not match it as it is)."""
    notes = []
    for s in book.students:
        where = f"roster line {s.line} ({s.submission})"
        if s.name and given_names(s) is None:
            notes.append(f"{where}: the name {s.name!r} is not split into first and last name (two "
                         "words are, or 'Last, First', or a last name in capitals): Moodle's "
                         "file leaves both empty (it finds the student by email or ID number), "
                         "Canvas's has the name as it is; give first_name and last_name columns "
                         "to write them")
        identities = {"id": s.id, "email": s.email, "login": s.login, "name": canvas_student(s)}
        for key, value in identities.items():
            if escape.csv_cell(value) != value:
                notes.append(f"{where}: its {key} {value!r} starts like a spreadsheet formula: "
                             "written with a leading quote, the LMS will not find the student by "
                             "it; correct it in the roster if it is wrong")
    return notes


def moodle_csv(book: Gradebook) -> str:
    """Moodle's grade import (module docstring): names, ID number, email, a column per
    exercise."""
    _require(book, "Moodle", ("email", "id"))
    rows = [[*MOODLE_COLUMNS, *map(book.column, book.exercises),
             *(f"{e} {LATE_COLUMN}" for e in book.timed)]]
    for s in book.students:
        first, last = given_names(s) or ("", "")
        rows.append([first, last, s.id, s.email,
                     *(_grade(book.cells[s.submission, e]) for e in book.exercises),
                     *(book.late(s.submission, e) for e in book.timed)])
    return _csv(rows)


def canvas_csv(book: Gradebook) -> str:
    """Canvas's gradebook import (module docstring): the student columns, a column per
    exercise, the Points Possible row. No late column: Canvas makes a new assignment of every
    column it does not know (lateness there is its own, from the assignment's due date); the
    notes and the other files say who was late."""
    _require(book, "Canvas", ("canvas_id", "id", "login", "name"))
    rows = [[*CANVAS_COLUMNS, *map(book.canvas_column, book.exercises)],
            [CANVAS_POINTS_ROW, "", "", "", "", *(points(book.possible[e]) for e in book.exercises)]]
    for s in book.students:
        rows.append([canvas_student(s), s.canvas_id, s.id, s.login, s.section,
                     *(_grade(book.cells[s.submission, e]) for e in book.exercises)])
    return _csv(rows)


def _plain_cells(marked: Marked | None, checks: Sequence[str], timed: bool) -> list[str]:
    """An exercise's cells of the plain CSV but for the grade and out of (timed: with when it
    was submitted and how late)."""
    if marked is None:
        return ["", "no submission", "", "", *(("", "") if timed else ()), *("" for _ in checks)]
    a = marked.adjustment
    return [points(marked.not_evaluated or 0.0), marked.verdict,
            grades.signed(a.points) if a is not None else "", a.reason if a is not None else "",
            *((marked.submitted, marked.late) if timed else ()),
            *(_grade(marked.by_check.get(label)) for label in checks)]


def plain_csv(book: Gradebook) -> str:
    """For the teacher: who, then for each exercise the grade, out of, the points not
    evaluated here, the verdict, the adjustment and its reason, and the points earned on each
    check."""
    header = list(PLAIN_COLUMNS)
    for e in book.exercises:
        header += [book.column(e), f"{e} out of", f"{e} not evaluated", f"{e} verdict",
                   f"{e} adjustment", f"{e} adjustment reason",
                   *((f"{e} submitted", f"{e} {LATE_COLUMN}") if e in book.timed else ()),
                   *(f"{e}: {label}" for label in book.checks.get(e, ()))]
    rows = [header]
    for s in book.students:
        row = [s.submission, s.id, s.email, s.name or " ".join(p for p in (s.first_name, s.last_name) if p)]
        for e in book.exercises:
            row += [_grade(book.cells[s.submission, e]), points(book.possible[e]),
                    *_plain_cells(book.rows.get((s.submission, e)), book.checks.get(e, ()),
                                  e in book.timed)]
        rows.append(row)
    # The teacher's spreadsheet: a submission's name is a student's, never a formula there.
    return _csv(rows)


FORMATS = {"moodle": moodle_csv, "canvas": canvas_csv, "csv": plain_csv}
