"""The gradebook, without processes: rosters read as spreadsheets write them, the Moodle and
Canvas files against their importers' documented columns, what a cell holds when there is no
plain score, reports read back as they were graded."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH
from idrrun import escape
from idrrun.errors import UsageError
from idrrun.grading import gradebook, grades, names, report
from idrrun.grading import feedback as feedback_mod
from idrrun.grading import rows as rows_mod
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


def test_how_late_in_words() -> None:
    assert [rows_mod.late_by(s) for s in (None, 0, 0.4, 12, 250, 7500, 3 * 86400 + 7200 + 59)] == [
        "", "", "1 s", "12 s", "4 min 10 s", "2 h 05 min", "3 d 2 h"]


def test_late_columns_and_the_late_policy(tmp_path: Path) -> None:
    """A late submission is a column and a note; its grade changes only with a late policy
    (a share of the grade per day begun). Canvas gets no column (it would be a new assignment)."""
    (tmp_path / "roster.csv").write_text(ROSTER)
    roster = gradebook.read_roster(tmp_path / "roster.csv")
    on_time = dataclasses.replace(_marked("ann", "loops_dot", 12), submitted="2026-12-01T10:00:00+00:00")
    late = dataclasses.replace(_marked("bob", "loops_dot", 12), submitted="2026-12-02T19:00:00+00:00",
                               late="1 d 1 h", late_seconds=90000.0)
    book = gradebook.gradebook(roster, [on_time, late], gradebook.Policy())
    assert book.cells["ann", "loops_dot"] == book.cells["bob", "loops_dot"] == 12
    assert "bob, loops_dot: submitted 1 d 1 h after the deadline (no late penalty: the grade is unchanged)" \
        in book.notes
    moodle = _read(gradebook.moodle_csv(book))
    assert moodle[0][-1] == "loops_dot late" and [r[-1] for r in moodle[1:]] == ["", "1 d 1 h", ""]
    plain = {r["submission"]: r for r in csv.DictReader(io.StringIO(gradebook.plain_csv(book)))}
    assert plain["bob"]["loops_dot late"] == "1 d 1 h" and plain["cy"]["loops_dot late"] == ""
    assert plain["bob"]["loops_dot submitted"] == "2026-12-02T19:00:00+00:00"
    assert "late" not in " ".join(_read(gradebook.canvas_csv(book))[0])
    # 10 % a day begun: 25 hours late is two days, 20 % off.
    book = gradebook.gradebook(roster, [on_time, late], gradebook.Policy(late_penalty=10))
    assert book.cells["ann", "loops_dot"] == 12 and book.cells["bob", "loops_dot"] == 9.6
    # Reports without times of submission: no late column at all.
    book = gradebook.gradebook(roster, [_marked("ann", "loops_dot", 12)], gradebook.Policy())
    assert "late" not in " ".join(_read(gradebook.moodle_csv(book))[0])


def test_moodle_csv_has_the_columns_of_moodles_grade_import(tmp_path: Path) -> None:
    # Moodle imports the columns of its own "Plain text file" export (docs.moodle.org/en/
    # Grade_import: "The import file format is the same as the corresponding export format"),
    # matched on "Email address" -> useremail or "ID number" -> useridnumber; an empty cell is
    # no grade (grade/import/csv/classes/load_data.php).
    rows = _read(gradebook.moodle_csv(_book(tmp_path)))
    assert rows[0] == ["First name", "Last name", "ID number", "Email address", "loops_dot", "intro_pi"]
    assert rows[1:] == [["Ann", "Martin", "20230001", "ann@uni.example", "12", "17"],
                        ["Bob", "Durand", "20230002", "bob@uni.example", "8", ""],
                        ["Cy", "Li", "20230003", "cy@uni.example", "", ""]]


def test_canvas_csv_has_the_columns_of_canvas_gradebook_import(tmp_path: Path) -> None:
    # Canvas's gradebook importer (instructure/canvas-lms app/models/gradebook_importer.rb): a
    # header whose first cells are Student, ID, then SIS User ID, SIS Login ID, and Section as
    # the last student column; a second row starting "Points Possible"; blank is no score.
    rows = _read(gradebook.canvas_csv(_book(tmp_path, gradebook.Policy(missing="zero", incomplete="earned"))))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "loops_dot", "intro_pi"]
    assert rows[1] == ["Points Possible", "", "", "", "", "14", "17"]
    assert rows[2:] == [["Martin, Ann", "", "20230001", "amartin", "G1", "12", "17"],
                        ["Durand, Bob", "1042", "20230002", "", "G1", "8", ""],
                        ["Li, Cy", "", "20230003", "", "G2", "0", "0"]]


# The roster of docs/teachers-day.md: one `name` column, as a class list gives it.
SINGLE_NAME_ROSTER = """submission,login,email,name
ann,ann,ann@example.org,Ann Smith
ben,ben,ben@example.org,Ben Jones
cle,cle,cle@example.org,MARTIN Cl\u00e9a
dan,dan,dan@example.org,"Moreau, Dan"
eve,eve,eve@example.org,Jean-Eve DE LA FONTAINE
"""


def _single_name_book(tmp_path: Path, roster: str = SINGLE_NAME_ROSTER,
                      canvas_ids: tuple[tuple[str, str], ...] = ()) -> gradebook.Gradebook:
    (tmp_path / "roster.csv").write_text(roster, encoding="utf-8")
    students = gradebook.read_roster(tmp_path / "roster.csv")
    rows = [_marked(s.submission, "loops_dot", 7) for s in students] + [_marked("ann", "intro_pi", 17, 17)]
    return gradebook.gradebook(students, rows, gradebook.Policy(), canvas_ids)


def test_a_single_name_roster_gives_each_lms_first_and_last_names(tmp_path: Path) -> None:
    # Moodle's export (and so its import) has "First name" and "Last name" apart; Canvas's
    # export writes the student's sortable name, "Last, First" (user.rb's last_name_first),
    # and its importer matches a row's Student against the name and the sortable name.
    book = _single_name_book(tmp_path)
    moodle = _read(gradebook.moodle_csv(book))
    assert [row[:4] for row in moodle[1:]] == [["Ann", "Smith", "", "ann@example.org"],
                                               ["Ben", "Jones", "", "ben@example.org"],
                                               ["Cl\u00e9a", "MARTIN", "", "cle@example.org"],
                                               ["Dan", "Moreau", "", "dan@example.org"],
                                               ["Jean-Eve", "DE LA FONTAINE", "", "eve@example.org"]]
    canvas = _read(gradebook.canvas_csv(book))
    assert [row[:5] for row in canvas[2:]] == [["Smith, Ann", "", "", "ann", ""],
                                               ["Jones, Ben", "", "", "ben", ""],
                                               ["MARTIN, Cl\u00e9a", "", "", "cle", ""],
                                               ["Moreau, Dan", "", "", "dan", ""],
                                               ["DE LA FONTAINE, Jean-Eve", "", "", "eve", ""]]
    assert gradebook.roster_notes(book) == []  # every name told apart: nothing to say


def test_a_name_that_cannot_be_split_keeps_only_what_identifies_the_student(tmp_path: Path) -> None:
    # One word, or more than two with nothing to tell the last name by ("Mary Ann Smith":
    # Mary Ann, or Ann Smith?): Moodle's names left empty (it finds a student by the column
    # the teacher maps, email or ID number), Canvas's Student the name as it is (matched too).
    roster = "submission,id,email,name\nann,1,ann@x,Ann\nmas,2,mas@x,Mary Ann Smith\nbob,3,bob@x,Bob Li\n"
    book = _single_name_book(tmp_path, roster)
    moodle = _read(gradebook.moodle_csv(book))
    assert [row[:4] for row in moodle[1:]] == [["", "", "1", "ann@x"], ["", "", "2", "mas@x"],
                                               ["Bob", "Li", "3", "bob@x"]]
    canvas = _read(gradebook.canvas_csv(book))
    assert [row[:3] for row in canvas[2:]] == [["Ann", "", "1"], ["Mary Ann Smith", "", "2"],
                                               ["Li, Bob", "", "3"]]
    notes = gradebook.roster_notes(book)
    assert len(notes) == 2 and notes[0].startswith("roster line 2 (ann): the name 'Ann' is not split into "
                                                   "first and last name"), notes
    assert "roster line 3 (mas): the name 'Mary Ann Smith'" in notes[1] and "first_name" in notes[1]


def test_names_in_the_lms_files_are_data_not_formulas(tmp_path: Path) -> None:
    # A roster is often the LMS's own export, its names as students typed them.
    roster = ('submission,email,name\nann,ann@x,"=HYPERLINK(""http://x"") Smith"\n'
              "bob,-bob@x,@cmd\n")
    book = _single_name_book(tmp_path, roster)
    moodle = _read(gradebook.moodle_csv(book))
    assert moodle[1][:2] == ['\'=HYPERLINK("http://x")', "Smith"] and moodle[2][:4] == ["", "", "", "'-bob@x"]
    canvas = _read(gradebook.canvas_csv(book))
    assert canvas[2][0] == 'Smith, =HYPERLINK("http://x")' and canvas[3][0] == "'@cmd"
    notes = "\n".join(gradebook.roster_notes(book))
    assert "roster line 3 (bob): its email '-bob@x' starts like a spreadsheet formula" in notes, notes
    assert "roster line 3 (bob): its name '@cmd' starts like" in notes and "(ann): its" not in notes


def test_canvas_assignment_ids_name_the_assignment_each_column_updates(tmp_path: Path) -> None:
    # Canvas's importer reads a header "Title (123)" as assignment 123 (Assignment.title_and_id,
    # /\A(.*)\s\((\d+)\)\z/), else finds an assignment by its title, else makes a new one.
    book = _single_name_book(tmp_path, canvas_ids=(("loops_dot", "123"),))
    canvas = _read(gradebook.canvas_csv(book))
    assert canvas[0][5:] == ["loops_dot (123)", "intro_pi"] and canvas[1][5:] == ["14", "17"]
    assert _read(gradebook.moodle_csv(book))[0][4:] == ["loops_dot", "intro_pi"]  # Moodle's own
    assert _read(gradebook.canvas_csv(_single_name_book(tmp_path)))[0][5:] == ["loops_dot", "intro_pi"]
    for ids, message in [((("loop_dot", "123"),), "--canvas-assignment loop_dot=123: no report of loop_dot"),
                         ((("loops_dot", "1"), ("loops_dot", "2")), "loops_dot is given twice"),
                         ((("loops_dot", "5"), ("intro_pi", "5")), "intro_pi=5: 5 is loops_dot's")]:
        with pytest.raises(UsageError, match=message):
            _single_name_book(tmp_path, canvas_ids=ids)


def test_gradebook_canvas_assignment_on_the_command_line(tmp_path: Path) -> None:
    ex = _exercise(tmp_path)
    report.write_report([_row(ex, _checks())], tmp_path / "r.json", b"k" * 32)
    (tmp_path / "roster.csv").write_text("submission,login,email,name\nann,ann,ann@x,Ann\n")

    def gradebook_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "idrrun.cli", "gradebook", "r.json",
                               "--roster", "roster.csv", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60, env=dict(os.environ, PYTHONPATH=PYTHONPATH))

    r = gradebook_cli("--canvas", "c.csv", "--moodle", "m.csv", "--canvas-assignment", f"{ex.name}=4711")
    assert r.returncode == 0, r.stdout + r.stderr
    # Graded where 2 of its 18 points could not be evaluated: the column says so, and the id
    # still ends it (Canvas reads the title up to " (4711)").
    assert _read((tmp_path / "c.csv").read_text())[0][5:] == [f"{ex.name} (16 of 18 points evaluated) (4711)"]
    assert "roster line 2 (ann): the name 'Ann' is not split" in r.stdout
    r = gradebook_cli("--canvas", "c.csv", "--canvas-assignment", f"{ex.name}=assignments/4711")
    assert r.returncode == 2, r.stderr
    assert "expected EXERCISE=ID, Canvas's number of the assignment" in r.stderr, r.stderr
    r = gradebook_cli("--moodle", "m.csv", "--canvas-assignment", f"{ex.name}=4711")
    assert r.returncode == 2 and "--canvas-assignment names Canvas's assignments: give --canvas" in r.stderr


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
    weird = rows_mod.GradeRow("=cmd", ex.name, "c", "error", 0, 0, "/class/=cmd.c", error="unreadable")
    for suffix in (".csv", ".json"):
        path = tmp_path / f"r{suffix}"
        report.write_report([row, weird], path, b"k" * 32)
        ann, cmd = gradebook.read_report(path)
        assert (ann.student, ann.score, ann.possible, ann.not_evaluated) == ("ann", 16, 18, 2)
        assert (cmd.student, cmd.score, cmd.verdict) == ("=cmd", None, "error")
    (tmp_path / "old.json").write_text('[{"student": "ann", "exercise": "x", "verdict": "pass"}]')
    with pytest.raises(UsageError, match="no score"):
        gradebook.read_report(tmp_path / "old.json")


def _host_class() -> list[gradebook.Marked]:
    """intro_pi graded on a host: 4 of its 18 points need a GPU. A program that did not build
    lost them instead (nothing left unjudged); one row could not be graded."""
    return [_marked("ann", "intro_pi", 14, 18, 4, "incomplete"),
            _marked("bob", "intro_pi", 10, 18, 4), _marked("cy", "intro_pi", 0, 18, 0),
            _marked("dee", "intro_pi", 2, 18, 0), _marked("eve", "intro_pi", 3, 18, 4),
            _marked("fay", "intro_pi", None, verdict="error")]


HOST_ROSTER = "submission,id,email,name\n" + "".join(
    f"{s},{i},{s}@uni.example,{s.title()}\n" for i, s in enumerate(("ann", "bob", "cy", "dee", "eve", "fay", "gus")))


def test_a_class_graded_on_a_host_has_a_number_for_every_graded_student(tmp_path: Path) -> None:
    (tmp_path / "roster.csv").write_text(HOST_ROSTER)
    roster = gradebook.read_roster(tmp_path / "roster.csv")
    book = gradebook.gradebook(roster, _host_class(), gradebook.Policy())
    # Out of the 14 points evaluated here, said in the column Moodle and Canvas read.
    moodle = _read(gradebook.moodle_csv(book))
    assert moodle[0][4] == "intro_pi (14 of 18 points evaluated)"
    # dee's build lost its 18 points (2 earned by its source): brought to the class's 14.
    assert [row[4] for row in moodle[1:]] == ["14", "10", "0", "1.56", "3", "", ""]
    canvas = _read(gradebook.canvas_csv(book))
    assert canvas[0][5] == "intro_pi (14 of 18 points evaluated)" and canvas[1][5] == "14"
    notes = "\n".join(book.notes)
    assert "dee, intro_pi: 2 of 18 evaluated, brought to the class's 14" in notes
    assert "ann, intro_pi" not in notes and "cy, intro_pi" not in notes  # nothing to look at
    assert "fay, intro_pi: not graded" in notes
    # Asked for: the points earned out of every point, or no grade where any was not evaluated.
    earned = gradebook.gradebook(roster, _host_class(), gradebook.Policy(incomplete="earned"))
    assert [earned.cells[s, "intro_pi"] for s in ("ann", "cy", "dee")] == [14, 0, 2]
    assert earned.column("intro_pi") == "intro_pi" and earned.possible["intro_pi"] == 18
    blank = gradebook.gradebook(roster, _host_class(), gradebook.Policy(incomplete="blank"))
    assert [blank.cells[s, "intro_pi"] for s in ("ann", "cy", "dee")] == [None, 0, 2]
    scaled = gradebook.gradebook(roster, _host_class(), gradebook.Policy(out_of=20))
    assert scaled.cells["bob", "intro_pi"] == round(10 * 20 / 14, 2) and scaled.possible["intro_pi"] == 20
    # Every point evaluated (a GPU machine): the column is the exercise's name.
    gpu = [gradebook.Marked(m.student, m.exercise, m.verdict, m.score, m.possible, 0, m.report)
           for m in _host_class()]
    assert gradebook.gradebook(roster, gpu, gradebook.Policy()).column("intro_pi") == "intro_pi"


def test_a_grade_rule_never_scales_up_and_keeps_adjustments_in_bounds() -> None:
    assert grades.scale([(18, 4), (18, 4), (18, 0)]) == 14
    assert grades.scale([(18, 4), (18, 0)]) == 18  # as common: the larger
    assert grades.scale([(18, 4)], "earned") == 18 and grades.scale([]) == 0
    # A row with less evaluated than the class (our check could not judge it) is not scaled up.
    assert grades.grade(3, 18, 15, 14) == (3, "11 points not evaluated for this submission, "
                                              "counted as not earned: look at its row")
    plus = grades.Adjustment("ann", 2, "oral exam")
    assert grades.grade(10, 18, 4, 14, adjustment=plus) == (12, "adjusted +2: oral exam")
    value, note = grades.grade(13, 18, 4, 14, adjustment=plus)
    assert value == 14 and note == "adjusted +2: oral exam; kept within 0 and 14"
    assert grades.grade(1, 18, 4, 14, adjustment=grades.Adjustment("a", -3, "late"))[0] == 0
    assert grades.grade(1, 18, 1, 17, "blank")[0] is None
    assert grades.grade(1, 18, 1, 17, "blank")[1].startswith("1 point not evaluated here")


ADJUSTMENTS = """student,points,reason
bob,+2,explained the reduction at the oral
bob,-0.5,late by a day
cy;x,1,a name with a semicolon
"""


def test_adjustments_beside_the_report_reach_the_gradebook(tmp_path: Path) -> None:
    ex = _exercise(tmp_path)
    bob = dataclasses.replace(_row(ex, _checks(reduction="fail")), student="bob", submission="/c/bob.c")
    report.write_report([_row(ex, _checks()), bob], tmp_path / "r.json", b"k" * 32)
    (tmp_path / "r.adjustments.csv").write_text(ADJUSTMENTS)
    found = grades.read_adjustments(tmp_path / "r.adjustments.csv")
    assert found["bob"].points == 1.5 and found["bob"].reason == \
        "explained the reduction at the oral; late by a day" and found["bob"].lines == (2, 3)
    (tmp_path / "roster.csv").write_text("submission,email\nann,ann@x\nbob,bob@x\n")
    rows = gradebook.read_report(tmp_path / "r.json")
    book = gradebook.gradebook(gradebook.read_roster(tmp_path / "roster.csv"), rows, gradebook.Policy())
    assert book.cells["ann", "demo_dot"] == 16 and book.cells["bob", "demo_dot"] == 15.5  # 14 + 1.5
    assert "bob, demo_dot: adjusted +1.5: explained the reduction" in "\n".join(book.notes)
    plain = _read(gradebook.plain_csv(book))
    header = plain[0]
    bob_row = dict(zip(header, plain[2]))
    assert bob_row["demo_dot adjustment"] == "+1.5" and bob_row["demo_dot: reduction"] == "0"
    assert bob_row["demo_dot: dot"] == "5" and bob_row["demo_dot: ran_on_gpu"] == ""  # not evaluated
    said = gradebook.adjustment_notes(tmp_path / "r.json", rows)
    assert any("r.adjustments.csv:4: no graded submission named 'cy;x'" in s for s in said), said
    assert any("changed since" in s and "bob" in s for s in said), said
    # A teacher's mistake names its line.
    (tmp_path / "r.adjustments.csv").write_text("student,points,reason\nbob,two,oral\n")
    with pytest.raises(UsageError, match="r.adjustments.csv:2: a line is a student, points"):
        gradebook.read_report(tmp_path / "r.json")
    (tmp_path / "r.adjustments.csv").write_text("name,points\n")
    with pytest.raises(UsageError, match="r.adjustments.csv:1: an adjustments file's first line"):
        gradebook.read_report(tmp_path / "r.json")
    # A French spreadsheet's: ";" and a decimal comma.
    (tmp_path / "r.adjustments.csv").write_text("student;points;reason\nbob;-0,5;late\n")
    assert grades.read_adjustments(tmp_path / "r.adjustments.csv")["bob"].points == -0.5


def test_a_name_that_is_not_utf8_survives_csv_and_json_reports_into_the_gradebook(tmp_path: Path) -> None:
    ex = _exercise(tmp_path)
    raw = os.fsdecode(b"caf\xe9\tn\\o")  # a Latin-1 file name, a tab, a backslash
    name = names.student_name(raw)
    assert name == "caf\\xe9\\x09n\\\\o" and name.isprintable()
    row = dataclasses.replace(_row(ex, _checks()), student=name,
                              submission=os.fsdecode(b"/class/caf\xe9\tn\\o.c"))
    (tmp_path / "roster.csv").write_text(f"submission,email\n\"{name}\",cafe@x\n", encoding="utf-8")
    roster = gradebook.read_roster(tmp_path / "roster.csv")
    for suffix in (".csv", ".json"):
        path = tmp_path / f"r{suffix}"
        report.write_report([row], path, b"k" * 32)
        path.read_bytes().decode("utf-8")  # UTF-8 through and through
        (marked,) = gradebook.read_report(path)
        assert marked.student == name
        book = gradebook.gradebook(roster, [marked], gradebook.Policy())
        assert not book.unmatched and _read(gradebook.moodle_csv(book))[1][3:] == ["cafe@x", "16"]
    assert "/class/caf\\xe9\tn\\o.c" in (tmp_path / "r.csv").read_text()
    # A report an older idrrun wrote with the raw bytes reads too, by the same rule.
    (tmp_path / "old.csv").write_bytes(b'"student","exercise","verdict","score","points"\n'
                                       b'"caf\xe9","demo_dot","pass","3","18"\n')
    assert [m.student for m in gradebook.read_report(tmp_path / "old.csv")] == ["caf\\xe9"]
    # The feedback: UTF-8, the name as the reports write it, in a file of its own.
    feedback_mod.write_feedback([row], ex, tmp_path / "fb")
    (feedback,) = (tmp_path / "fb").iterdir()
    # In Markdown as escape.markdown_text writes it: its backslashes escaped, read as the name.
    assert f"Student: {escape.markdown_text(name)}" in feedback.read_bytes().decode("utf-8")


def test_names_are_escaped_by_one_reversible_rule() -> None:
    tricky = ["a\\x41", "aA", "a\x41", os.fsdecode(b"a\x85"), "a\x85", "a\\x85", "a\\\\x85", "é"]
    written = [names.student_name(t) for t in tricky]
    assert len(set(written)) == len(set(tricky)) and written[-1] == "é"
    assert all(w.isprintable() for w in written)
    assert names.decodable(os.fsdecode(b"x\xff\\y\n")) == "x\\xff\\y\n"  # text keeps its lines
    # --json too: a path that is not UTF-8 is written by the same rule, as JSON every reader takes.
    r = subprocess.run([sys.executable, "-c", "import os; from idrrun.commands.common import print_json; "
                        "print_json({'rows': [{'submission': os.fsdecode(b'/c/caf\\xe9.c')}]})"],
                       capture_output=True, env=dict(os.environ, PYTHONPATH=PYTHONPATH), timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.decode("utf-8")) == {"rows": [{"submission": "/c/caf\\xe9.c"}]}
