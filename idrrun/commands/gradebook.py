"""`idrrun gradebook REPORT... --roster FILE`: the scores of graded exercises, for the LMS.

Its own command rather than an option of `idrrun grade`: an LMS's import file holds a course's
exercises, and `grade` grades one; this reads every report given, so one run writes the whole
gradebook, from files the grader keeps anyway, again whenever a report changes (a regrading, a
late submission) without grading anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ..cli import EXIT_FAILED, EXIT_OK
from ..escape import terminal_line
from ..errors import UsageError
from ..files import write_atomic
from ..checks.score import points
from ..checks.words import plural
from ..grading import grades, gradebook, names
from .common import Parser, print_json


def _points(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of points, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of points above 0, got {text!r}")
    return value


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"expected a percentage from 0 to 100, got {text!r}")
    return value


def _canvas_assignment(text: str) -> tuple[str, str]:
    exercise, _, number = text.partition("=")
    if not exercise.strip() or not number.isascii() or not number.isdigit():
        raise argparse.ArgumentTypeError(
            f"expected EXERCISE=ID, Canvas's number of the assignment (its address ends in "
            f"/assignments/ID; its export's column is 'NAME (ID)'), got {text!r}")
    return exercise.strip(), str(int(number))


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="idrrun gradebook",
               description="Write the scores of graded exercises (the reports of idrrun grade) "
                           "as files an LMS imports: one row per student of the roster, one "
                           "column per exercise. Run it again after a regrading: the files are "
                           "written anew from the reports, never appended to.",
               epilog="Exit codes: 0 written; 1 written, but some graded submissions match no "
                      "student of the roster (they are listed, not written); 2 usage error.")
    p.add_argument("reports", nargs="+", type=Path, metavar="REPORT",
                   help="reports of idrrun grade (.json or .csv), one or more per exercise; the "
                        "teacher's adjustments beside each (REPORT.adjustments.csv: "
                        "student,points,reason) are added to its grades")
    p.add_argument("--roster", type=Path, required=True, metavar="FILE.csv",
                   help="the class: a CSV whose first line names its columns: submission (the "
                        "name idrrun grade gives a submission), and any of id, email, name, "
                        "first_name, last_name, login, section, canvas_id; a name alone is "
                        "split into first and last name where it tells them apart (two words, "
                        "'Last, First', a last name in capitals), else said and left whole")
    p.add_argument("--moodle", type=Path, metavar="FILE.csv",
                   help="Moodle's grade import (Grades > Import > CSV file; map Email address "
                        "or ID number)")
    p.add_argument("--canvas", type=Path, metavar="FILE.csv",
                   help="Canvas's gradebook import (Grades > Import)")
    p.add_argument("--canvas-assignment", type=_canvas_assignment, action="append", default=[],
                   metavar="EXERCISE=ID",
                   help="the Canvas assignment that EXERCISE's column updates (repeat it, one per "
                        "exercise): the column is written 'EXERCISE (ID)', as Canvas's export "
                        "writes it; without it Canvas finds the assignment by its title, or makes "
                        "a new one")
    p.add_argument("--csv", type=Path, metavar="FILE.csv",
                   help="a plain CSV: the grade, out of, points not evaluated, verdict, the "
                        "teacher's adjustment and its reason, and the points earned on each check")
    p.add_argument("--missing", choices=("blank", "zero"), default="blank",
                   help="a roster student with no graded submission: no grade (default), or 0")
    p.add_argument("--incomplete", choices=grades.INCOMPLETE_POLICIES, default="evaluated",
                   help="where some points could not be evaluated (e.g. GPU checks graded on a "
                        "host): evaluated (default) grades out of the points evaluated there, "
                        "which the column's name says ('intro_pi (14 of 18 points evaluated)'); "
                        "earned: the points earned out of every point, those not evaluated "
                        "counted as not earned; blank: no grade")
    p.add_argument("--out-of", type=_points, metavar="N",
                   help="every grade out of N points (e.g. 20, 100) instead of the exercise's own")
    p.add_argument("--late-penalty", type=_percent, default=0.0, metavar="PERCENT",
                   help="the late policy: take PERCENT of the grade off for each day (begun) a "
                        "submission came after the deadline (the reports' late column: idrrun "
                        "grade of a collected class, or with --deadline). Default 0: late "
                        "submissions are shown (a late column, a note), their grades unchanged")
    p.add_argument("--json", action="store_true",
                   help="print what was written (grades, notes) as JSON on stdout")
    return p


def main(tokens: Sequence[str]) -> int:
    args = parser().parse_args(list(tokens))
    outputs = {name: getattr(args, name) for name in gradebook.FORMATS
               if getattr(args, name) is not None}
    if not outputs:
        raise UsageError("idrrun gradebook: give at least one of --moodle, --canvas, --csv")
    if args.canvas_assignment and args.canvas is None:
        raise UsageError("idrrun gradebook: --canvas-assignment names Canvas's assignments: give "
                         "--canvas FILE.csv too")
    roster = gradebook.read_roster(args.roster)
    marked, said = _read_reports(args.reports)
    book = gradebook.gradebook(roster, marked, gradebook.Policy(args.missing, args.incomplete,
                                                                args.out_of, args.late_penalty),
                               args.canvas_assignment)
    if args.moodle is not None or args.canvas is not None:
        said += gradebook.roster_notes(book)
    texts = {name: gradebook.FORMATS[name](book) for name in outputs}  # all checked, then written
    for name, path in outputs.items():
        write_atomic(path, texts[name])
    if args.json:
        print_json({"exercises": list(book.exercises), "out_of": book.possible,
                    "columns": {e: book.column(e) for e in book.exercises},
                    "canvas_columns": {e: book.canvas_column(e) for e in book.exercises},
                    "said": said,
                    "files": {name: str(path) for name, path in outputs.items()},
                    "grades": {s.submission: {e: book.cells[s.submission, e] for e in book.exercises}
                               for s in book.students},
                    "notes": list(book.notes),
                    "not_in_roster": [{"submission": r.student, "exercise": r.exercise,
                                       "report": r.report} for r in book.unmatched]})
    else:
        _say(book, outputs, said)
    return EXIT_FAILED if book.unmatched else EXIT_OK


def _read_reports(paths: Sequence[Path]) -> tuple[list[gradebook.Marked], list[str]]:
    """The rows of every report given, and what to say of the files beside them (a statistics
    file a glob named, the adjustments)."""
    left_out = [gradebook.beside_a_report(path) for path in paths]
    reports = [path for path, why in zip(paths, left_out) if not why]
    if not reports:
        raise UsageError("idrrun gradebook: no report among " + ", ".join(str(p) for p in paths))
    marked: list[gradebook.Marked] = []
    said = [why for why in left_out if why]
    for path in reports:
        rows = gradebook.read_report(path)
        said += gradebook.adjustment_notes(path, rows)
        marked += rows
    return marked, said


def _out(text: str) -> None:
    """A line on the terminal: names and paths are files' names, printed neutralised, their
    bytes that are not UTF-8 as every report writes them (names.py)."""
    print(terminal_line(names.decodable(text)))


def _say(book: gradebook.Gradebook, outputs: dict[str, Path], said: Sequence[str]) -> None:
    _out(f"gradebook: {plural(len(book.students), 'student')}, "
        f"{plural(len(book.exercises), 'exercise')} "
        f"({', '.join(_out_of(book, e) for e in book.exercises)})")
    for name, path in outputs.items():
        _out(f"{name}: {path}")
    for line in said:
        _out(line)
    if book.notes:
        print("cells to look at:")
    for note in book.notes:
        _out(f"  {note}")
    for r in book.unmatched:
        # Submission names are students' file names: printed neutralised.
        _out(f"  not in the roster, not written: {r.student} ({r.exercise}, {r.report})")


def _out_of(book: gradebook.Gradebook, exercise: str) -> str:
    """"loops_dot /14"; "intro_pi /17 (17 of 18 points evaluated)" where not every point could be."""
    column = book.column(exercise)
    return f"{exercise} /{points(book.possible[exercise])}" + \
        (column.removeprefix(exercise) if column != exercise else "")
