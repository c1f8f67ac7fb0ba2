"""An exercise of the teacher's own: `idrrun course new` writes one that `idrrun course check`
passes, and what is wrong with an exercise is said where to change it (the spec's line)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from idrrun.checks import specs
from idrrun.grading import course
from idrrun.grading import rows as rows_mod
from test_gradebook_class import SEED, idrrun
from test_marks import _checks, _exercise, _row


@pytest.mark.slow
def test_course_new_writes_an_exercise_that_course_check_passes(tmp_path: Path) -> None:
    r = idrrun("course", "new", "loops_dot", "--dir", "mine", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    examples = tmp_path / "mine" / "examples"
    assert f"export IDRRUN_EXAMPLES={examples}\n  idrrun course references --exercise loops_dot\n" \
           "  idrrun course check --exercise loops_dot" in r.stdout
    exercise = specs.load(examples / "loops_dot.toml")
    assert set(exercise.sources) == {"c", "fortran"} and exercise.draw is not None
    assert {c.visibility for c in exercise.checks} == {None, "summary"}
    r = idrrun("course", "check", "--exercise", "loops_dot", cwd=tmp_path, examples=examples)
    assert r.returncode == 1 and "run `idrrun course references`" in r.stdout, r.stdout + r.stderr
    r = idrrun("course", "references", "--exercise", "loops_dot", cwd=tmp_path, examples=examples)
    assert r.returncode == 0 and (examples / "reference" / "loops_dot" / "reference.toml").is_file(), r.stdout
    r = idrrun("course", "check", "--exercise", "loops_dot", cwd=tmp_path, examples=examples)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("│ yes │") == 2, r.stdout
    # Never over a teacher's files; a name that is not topic_name is refused.
    again = idrrun("course", "new", "loops_dot", "--dir", "mine", "-l", "c", cwd=tmp_path)
    assert again.returncode == 2 and "exists; nothing was written" in again.stderr
    assert idrrun("course", "new", "Dot", cwd=tmp_path).returncode == 2
    # What is wrong is said where to change it: a check the start file passes.
    spec = examples / "loops_dot.toml"
    spec.write_text(spec.read_text().replace('kind = "no_implicit_data"', 'kind = "exit_ok"'))
    start = examples / "C" / "loops_dot_exercise.c"
    start.write_text((examples / "C" / "loops_dot_solution.c").read_text())
    r = idrrun("course", "check", "--exercise", "loops_dot", "-l", "c", cwd=tmp_path,
               examples=examples)
    assert r.returncode == 1 and f"{spec}:" in r.stdout and "the start file passes every check" in r.stdout



def test_course_check_findings_name_the_spec_line_to_change(tmp_path: Path) -> None:
    ex = _exercise(tmp_path)
    text = (tmp_path / "demo_dot.toml").read_text().splitlines()
    sol = dataclasses.replace(_row(ex, _checks(dot2="fail")), status="fail")
    start = rows_mod.GradeRow("start", ex.name, "c", "pass", 0.1, 0.1, "ex.c", checks=_checks(gpu="pass"))
    found = course.findings(course.CourseRow(ex.name, "c", sol, start), ex)
    hidden = next(f for f in found if "dot (hidden run 2)" in f)
    line = int(hidden.split(":")[1])
    assert hidden.startswith(f"{ex.path}:") and text[line - 1].startswith("[[check]]")
    assert "hidden case 2, arguments 98765" in hidden and "args.hidden[1]" in hidden
    assert any("the start file passes every check" in f for f in found)


