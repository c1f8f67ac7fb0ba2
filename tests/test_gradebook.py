"""The gradebook, without processes: rosters read as spreadsheets write them, the Moodle and
Canvas files against their importers' documented columns, what a cell holds when there is no
plain score, reports read back as they were graded."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from idrrun.errors import UsageError
from idrrun.grading import gradebook, report
from test_marks import _checks, _exercise, _row

ROSTER = """submission,id,email,name,first_name,last_name,login,section,canvas_id
ann,20230001,ann@uni.example,,Ann,Martin,amartin,G1,
bob,20230002,bob@uni.example,Bob Durand,,,,G1,1042
cy,20230003,cy@uni.example,Cy Li,,,,G2,
"""


def _marked(student: str, exercise: str, earned: float | None, possible: float = 14,
            not_evaluated: float = 0, verdict: str = "fail") -> gradebook.Marked:
    return gradebook.Marked(student, exercise, verdict, earned, possible if earned is not None else None,
                            not_evaluated, "r.json")


def _book(tmp_path: Path, policy: gradebook.Policy = gradebook.Policy()) -> gradebook.Gradebook:
    (tmp_path / "roster.csv").write_text(ROSTER)
    roster = gradebook.read_roster(tmp_path / "roster.csv")
    rows = [_marked("ann", "loops_dot", 12), _marked("bob", "loops_dot", 8, not_evaluated=2),
            _marked("zed", "loops_dot", 14, verdict="pass"),
            _marked("ann", "intro_pi", 17, 17, verdict="pass"), _marked("bob", "intro_pi", None, verdict="error")]
    return gradebook.gradebook(roster, rows, policy)


def _read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_moodle_csv_has_the_columns_of_moodles_grade_import(tmp_path: Path) -> None:
    # Moodle imports the columns of its own "Plain text file" export (docs.moodle.org/en/
    # Grade_import: "The import file format is the same as the corresponding export format"),
    # matched on "Email address" -> useremail or "ID number" -> useridnumber; an empty cell is
    # no grade (grade/import/csv/classes/load_data.php).
    rows = _read(gradebook.moodle_csv(_book(tmp_path)))
    assert rows[0] == ["First name", "Last name", "ID number", "Email address", "loops_dot", "intro_pi"]
    assert rows[1:] == [["Ann", "Martin", "20230001", "ann@uni.example", "12", "17"],
                        ["Bob Durand", "", "20230002", "bob@uni.example", "8", ""],
                        ["Cy Li", "", "20230003", "cy@uni.example", "", ""]]


def test_canvas_csv_has_the_columns_of_canvas_gradebook_import(tmp_path: Path) -> None:
    # Canvas's gradebook importer (instructure/canvas-lms app/models/gradebook_importer.rb): a
    # header whose first cells are Student, ID, then SIS User ID, SIS Login ID, and Section as
    # the last student column; a second row starting "Points Possible"; blank is no score.
    rows = _read(gradebook.canvas_csv(_book(tmp_path, gradebook.Policy(missing="zero", incomplete="earned"))))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "loops_dot", "intro_pi"]
    assert rows[1] == ["Points Possible", "", "", "", "", "14", "17"]
    assert rows[2:] == [["Martin, Ann", "", "20230001", "amartin", "G1", "12", "17"],
                        ["Bob Durand", "1042", "20230002", "", "G1", "8", ""],
                        ["Cy Li", "", "20230003", "", "G2", "0", "0"]]


def test_gradebook_policies_and_what_it_says(tmp_path: Path) -> None:
    book = _book(tmp_path)
    assert [s.submission for s in book.students] == ["ann", "bob", "cy"]  # one row each, roster order
    assert [r.student for r in book.unmatched] == ["zed"]
    notes = "\n".join(book.notes)
    # Most of the class had every point evaluated: bob's 2 not evaluated count as not earned.
    assert "bob, loops_dot: 2 points not evaluated for this submission, counted as not earned: " \
        "look at its row" in notes
    assert "bob, intro_pi: not graded (error" in notes and "cy, loops_dot: no submission" in notes
    scaled = _book(tmp_path, gradebook.Policy(out_of=20))
    assert scaled.cells["ann", "loops_dot"] == round(12 * 20 / 14, 2) and scaled.possible["intro_pi"] == 20
    plain = _read(gradebook.plain_csv(book))
    assert plain[0][:8] == ["submission", "id", "email", "name", "loops_dot", "loops_dot out of",
                            "loops_dot not evaluated", "loops_dot verdict"]
    assert plain[2][4:8] == ["8", "14", "2", "fail"] and plain[3][4:8] == ["", "14", "", "no submission"]
    blank = _book(tmp_path, gradebook.Policy(incomplete="blank"))
    assert blank.cells["bob", "loops_dot"] is None and blank.cells["ann", "loops_dot"] == 12


@pytest.mark.parametrize("roster, message", [
    ("id,email\n1,a@x\n", "roster.csv:1: a roster's first line names its columns"),
    ("submission,mail\nann,a@x\n", "unknown: mail"),
    ("submission,id\nann,1\nbob,1\n", "roster.csv:3: id '1' is already on line 2"),
    ("submission,id\nann,1\nann,2\n", "roster.csv:3: submission 'ann' is already on line 2"),
])
def test_a_wrong_roster_is_named_by_its_line(tmp_path: Path, roster: str, message: str) -> None:
    (tmp_path / "roster.csv").write_text(roster)
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        gradebook.read_roster(tmp_path / "roster.csv")


def test_a_spreadsheets_roster_reads_too(tmp_path: Path) -> None:
    # Excel's UTF-8 CSV starts with a byte-order mark; a French one separates with ";".
    (tmp_path / "roster.csv").write_text("\ufeffSubmission;ID;E-mail;Name\nann;1;ann@x;Ann Émile\n"
                                         .replace("E-mail", "Email"), encoding="utf-8")
    (ann,) = gradebook.read_roster(tmp_path / "roster.csv")
    assert (ann.submission, ann.id, ann.email, ann.name) == ("ann", "1", "ann@x", "Ann Émile")


def test_an_lms_file_needs_a_way_to_find_each_student(tmp_path: Path) -> None:
    (tmp_path / "roster.csv").write_text("submission,name\nann,Ann\n")
    book = gradebook.gradebook(gradebook.read_roster(tmp_path / "roster.csv"),
                               [_marked("ann", "loops_dot", 3)], gradebook.Policy())
    with pytest.raises(UsageError, match="roster line 2 \\(ann\\): Moodle finds a student by email or id"):
        gradebook.moodle_csv(book)
    assert _read(gradebook.canvas_csv(book))[2][:1] == ["Ann"]  # Canvas matches names too
    with pytest.raises(UsageError, match="in two reports"):
        gradebook.gradebook(book.students, [_marked("ann", "e", 1), _marked("ann", "e", 2)], gradebook.Policy())
    with pytest.raises(UsageError, match="scored out of 14 and 16"):
        gradebook.gradebook(book.students, [_marked("ann", "e", 1), _marked("bob", "e", 2, 16)],
                            gradebook.Policy())


def test_reports_read_back_as_graded(tmp_path: Path) -> None:
    ex = _exercise(tmp_path)
    row = _row(ex, _checks())
    weird = report.GradeRow("=cmd", ex.name, "c", "error", 0, 0, "/class/=cmd.c", error="unreadable")
    for suffix in (".csv", ".json"):
        path = tmp_path / f"r{suffix}"
        report.write_report([row, weird], path, b"k" * 32)
        ann, cmd = gradebook.read_report(path)
        assert (ann.student, ann.score, ann.possible, ann.not_evaluated) == ("ann", 16, 18, 2)
        assert (cmd.student, cmd.score, cmd.verdict) == ("=cmd", None, "error")
    (tmp_path / "old.json").write_text('[{"student": "ann", "exercise": "x", "verdict": "pass"}]')
    with pytest.raises(UsageError, match="no score"):
        gradebook.read_report(tmp_path / "old.json")
