"""A class of six graded with points and a roster on a teacher's exercise (`idrrun course
new`), the LMS gradebooks written from the report, a regrading that updates them; what a
student's notebook shows of the same exercise."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Kernel, PYTHONPATH, ROOT, has_gpu
from idrrun.checks import draw, specs
from idrrun.checks.visibility import MORE_AT_GRADING, SUMMARY_ONLY
from idrrun.grading import gradebook, grades
from idrrun.grading import report as report_mod

SEED = "spring-term"


def idrrun(*args: str, cwd: Path, examples: Path | None = None) -> subprocess.CompletedProcess[str]:
    # The seed from the grader's environment: never on a command line (issue 33).
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_GRADING_SEED=SEED)
    if examples is not None:
        env["IDRRUN_EXAMPLES"] = str(examples)
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def _class(folder: Path, examples: Path) -> dict[str, int]:
    """Six submissions of loops_dot (out of 14: 10 on the main run, 2 on each hidden case);
    returns each one's expected score."""
    solution = (examples / "C" / "loops_dot_solution.c").read_text()
    start = (examples / "C" / "loops_dot_exercise.c").read_text()
    own = """#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000000;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (int i = 0; i < n; i++) {
        a[i] = (double)(i % 13);
        b[i] = 0.5 * (double)(i % 7);
    }
    double s = 0.0;
#pragma acc parallel loop copyin(a[0:n], b[0:n]) reduction(+:s)
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    printf("n = %d\\ndot = %.1f\\n", n, s);
    free(a);
    free(b);
    return 0;
}
"""
    # A classmate's copy, its variables renamed.
    renamed = re.sub(r"\b[abs]\b", lambda m: {"a": "u", "b": "v", "s": "total"}[m.group()], own)
    assert renamed.count("total") == 4 and "a[" not in renamed and "**argv" in renamed
    near_miss = solution.replace(" copyin(x[0:n], y[0:n])", "")
    wrong = solution.replace("dot += x[i] * y[i];", "dot += x[i] + y[i];")
    assert near_miss != solution and wrong != solution
    folder.mkdir()
    # carol: a wrong result on a run earns at most 40 % of the points (checks/score.py wrong_result)
    subs = {"ann": (own, 14), "bob": (near_miss, 12), "carol": (wrong, 5.6), "dave": (renamed, 14),
            "erin": (solution, 14), "frank": (start, 0)}
    for name, (text, _) in subs.items():
        (folder / f"{name}.c").write_text(text)
    return {name: points for name, (_, points) in subs.items()}


ROSTER = """submission,id,email,first_name,last_name,section
ann,20230001,ann@uni.example,Ann,Martin,G1
bob,20230002,bob@uni.example,Bob,Durand,G1
carol,20230003,carol@uni.example,Carol,Petit,G1
dave,20230004,dave@uni.example,Dave,Moreau,G2
erin,20230005,erin@uni.example,Erin,Leroy,G2
frank,20230006,frank@uni.example,Frank,Roux,G2
gina,20230007,gina@uni.example,Gina,Blanc,G2
"""


@pytest.mark.slow
def test_a_class_graded_with_points_and_a_roster_into_moodle_and_canvas(tmp_path: Path) -> None:
    assert idrrun("course", "new", "loops_dot", "--dir", "course", "-l", "c", cwd=tmp_path).returncode == 0
    examples = tmp_path / "course" / "examples"
    expected = _class(tmp_path / "class", examples)
    (tmp_path / "roster.csv").write_text(ROSTER)
    subs = sorted(str(p) for p in (tmp_path / "class").iterdir())
    report, feedback = tmp_path / "grades" / "loops_dot.json", tmp_path / "feedback"

    def grade(*extra: str) -> subprocess.CompletedProcess[str]:
        r = idrrun("grade", "loops_dot", *subs, "-j", "2", "--report", str(report),
                   "--feedback", str(feedback), *extra, cwd=tmp_path, examples=examples)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    r = grade()
    rows = {row["student"]: row for row in json.loads(report.read_text())}
    assert {s: (r["score"], r["points"], r["not_evaluated"]) for s, r in rows.items()} == \
        {s: (p, 14, 0) for s, p in expected.items()}, {s: r["reasons"] for s, r in rows.items()}
    assert "data clauses" in rows["bob"]["reasons"] and "dot (hidden run 1)" in rows["carol"]["reasons"]
    assert "│ 12/14 " in r.stdout and "│ 0/14 " in r.stdout

    # Feedback: the score, the summarised check without its regex, no hidden value anywhere.
    drawn = draw.drawn(specs.load(examples / "loops_dot.toml"), SEED).hidden_args
    assert rows["ann"]["hidden_args"] == [list(a) for a in drawn]
    for path in feedback.iterdir():
        text = path.read_text()
        assert not any(a in text for (a,) in drawn) and "reduction\\s" not in text, text
    bob = (feedback / "bob.md").read_text()
    assert "Score: **12/14**" in bob and f"| reduction | 2/2 | pass |  |  | {SUMMARY_ONLY} |" in bob
    assert "| data clauses | 0/2 | fail |" in bob

    book = tmp_path / "book"
    r = idrrun("gradebook", str(report), "--roster", "roster.csv", "--moodle", "book/moodle.csv",
               "--canvas", "book/canvas.csv", "--csv", "book/plain.csv", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gina, loops_dot: no submission" in r.stdout

    def table(name: str) -> list[list[str]]:
        with (book / name).open(newline="") as fh:
            return list(csv.reader(fh))

    moodle = table("moodle.csv")
    assert moodle[0] == [*gradebook.MOODLE_COLUMNS, "loops_dot"]
    assert moodle[0][:4] == ["First name", "Last name", "ID number", "Email address"]
    assert [row[3] for row in moodle[1:]] == [f"{s}@uni.example" for s in
                                             ("ann", "bob", "carol", "dave", "erin", "frank", "gina")]
    assert {row[3].split("@")[0]: row[4] for row in moodle[1:]} == \
        {**{s: str(p) for s, p in expected.items()}, "gina": ""}
    canvas = table("canvas.csv")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "loops_dot"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "14"]
    assert canvas[2] == ["Martin, Ann", "", "20230001", "", "G1", "14"] and len(canvas) == 9

    # A regrading after the deadline: bob's fixed program, every detail in the feedback. The
    # gradebook written again has the same rows, bob's updated.
    (tmp_path / "class" / "bob.c").write_text((examples / "C" / "loops_dot_solution.c").read_text())
    grade("--fresh", "--visibility", "full")
    assert "(arguments: " in (feedback / "bob.md").read_text()
    r = idrrun("gradebook", str(report), "--roster", "roster.csv", "--moodle", "book/moodle.csv",
               "--canvas", "book/canvas.csv", "--missing", "zero", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    again = table("moodle.csv")
    assert len(again) == len(moodle) == 8 and [row[3] for row in again] == [row[3] for row in moodle]
    assert {row[3].split("@")[0]: row[4] for row in again[1:]} == \
        {**{s: str(p) for s, p in expected.items()}, "bob": "14", "gina": "0"}
    assert len(table("canvas.csv")) == 9


def test_a_notebook_check_shows_what_the_spec_lets_students_see(kernel: Kernel, tmp_path: Path) -> None:
    assert idrrun("course", "new", "loops_dot", "--dir", str(tmp_path), "-l", "c", cwd=tmp_path).returncode == 0
    examples = tmp_path / "examples"
    (kernel.cwd / "idrrun.toml").write_text(f'examples_dir = "{examples}"\n')
    try:
        # OpenACC, data clauses, but no reduction: the summarised check fails without its regex.
        cell = (examples / "C" / "loops_dot_solution.c").read_text().replace(" reduction(+:dot)", "")
        r = kernel.run("%%idrrun -a --check loops_dot\n" + cell)
    finally:
        (kernel.cwd / "idrrun.toml").unlink()
    html = "".join(d.get("text/html", "") for d in r.displays)
    assert r.status == "error" and "FAIL, " in html, r.stdout + r.error_text
    assert SUMMARY_ONLY in html and MORE_AT_GRADING in html
    assert "reduction\\s" not in html + r.error_text and "reduction(+:dot)" not in html + r.error_text
    assert "hidden run" not in html  # a notebook runs no hidden case


PI_ROSTER = """submission,id,email,first_name,last_name
ann,1,ann@uni.example,Ann,Martin
bob,2,bob@uni.example,Bob,Durand
carl,3,carl@uni.example,Carl,Petit
dee,4,dee@uni.example,Dee,Moreau
eve,5,eve@uni.example,Eve,Leroy
fay,6,fay@uni.example,Fay,Roux
gus,7,gus@uni.example,Gus,Blanc
caf\\xe9,8,cafe@uni.example,Zoé,Café
hal,9,hal@uni.example,Hal,Noir
"""


def _pi_class(folder: Path) -> None:
    """Eight submissions of intro_pi, one under a Latin-1 file name (not UTF-8)."""
    solution = (ROOT / "examples" / "C" / "intro_pi_solution.c").read_text()
    main = "int main(int argc, char **argv)\n{\n"
    subs = {"ann.c": solution,
            "bob.c": (ROOT / "examples" / "C" / "intro_pi_exercise.c").read_text(),
            "carl.c": solution.replace("double pi = sum * h;", "double pi = sum * h"),  # no build
            "dee.c": solution.replace("sum += 4.0 /", "sum += 3.0 /"),  # a wrong constant
            "eve.c": solution.replace(" reduction(+:sum)", ""),
            "fay.c": solution.replace(main, main + "    volatile int *p = NULL; *p = 1;\n"),
            "gus.f90": (ROOT / "examples" / "Fortran" / "intro_pi_solution.f90").read_text()}
    assert len({*subs.values()}) == len(subs)
    folder.mkdir()
    for name, text in subs.items():
        (folder / name).write_text(text)
    with open(os.fsencode(folder) + b"/caf\xe9.c", "w") as fh:
        fh.write(solution)


@pytest.mark.slow
def test_a_class_graded_on_a_host_has_a_number_for_everyone_statistics_and_adjustments(tmp_path: Path) -> None:
    """The done-when of issue 32's parts 4, 5 and 7: a class of 8 graded with gcc on this
    machine, a roster, the LMS files; a regrading keeps the teacher's adjustment."""
    _pi_class(tmp_path / "class")
    (tmp_path / "roster.csv").write_text(PI_ROSTER)
    subs = sorted(os.fsdecode(p) for p in os.listdir(os.fsencode(tmp_path / "class")))
    report = tmp_path / "grades" / "intro_pi.csv"

    def grade(*extra: str) -> subprocess.CompletedProcess[str]:
        r = idrrun("grade", "intro_pi", *subs, "-j", "2", "--report", str(report),
                   "--feedback", "feedback", *extra, cwd=tmp_path / "class")
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    r = grade()
    out = r.stdout
    spec = specs.load(ROOT / "examples" / "intro_pi.toml")
    gpu_points = sum(c.points for c in spec.checks if c.kind in grades.GPU_KINDS)
    if not has_gpu() and gpu_points:
        assert "this machine has no GPU: " in out and "cannot be evaluated here; grades are out of" in out
    # The class's statistics, on the terminal and beside the report.
    assert "class: 8 students graded, grades out of " in out, out
    assert re.search(r"grades: min [\d.]+, median [\d.]+, max [\d.]+, mean [\d.]+", out), out
    assert "┃ check " in out and "│ reduction " in out
    with (tmp_path / "grades" / "intro_pi.stats.csv").open(newline="") as fh:
        table = list(csv.reader(fh))
    assert table[0][:5] == ["row", "points", "passed", "failed", "not evaluated"]
    assert table[1][0] == "grade" and float(table[1][7]) == float(table[1][1])  # max: out of
    assert [row[0] for row in table[2:]] == [c.label for c in spec.checks]
    assert all(sum(map(int, row[2:5])) == 8 for row in table[2:])
    reduction = next(row for row in table if row[0] == "reduction")
    assert int(reduction[3]) >= 2  # bob's start file, eve's loop without it
    rows = {row["student"]: row for row in csv.DictReader(report.open(encoding="utf-8"))}
    assert set(rows) == {"ann", "bob", "carl", "dee", "eve", "fay", "gus", "caf\\xe9"}
    # A build that failed earns no run point, and its feedback says it once, with the message.
    run_labels = [c.label for c in spec.checks if c.kind in specs.OUTPUT_KINDS]
    assert all(float(rows["carl"][report_mod.CHECK_COLUMN + label]) == 0 for label in run_labels)
    assert "compile failed: exit code 1 (carl.c:" in rows["carl"]["reasons"]  # the compiler's message
    carl = (tmp_path / "class" / "feedback" / "carl.md").read_text()
    assert "The program did not build: exit code 1." in carl and "error: expected" in carl

    # The teacher adjusts dee's mark; the same command again (resumed, nothing run) writes it
    # into the report and the feedback.
    (tmp_path / "grades" / "intro_pi.adjustments.csv").write_text(
        "student,points,reason\ndee,+1,found the wrong constant at the oral\n")
    r = grade()
    assert "resuming: 8 rows kept" in r.stdout and "adjustments: 1 student adjusted" in r.stdout
    dee = (tmp_path / "class" / "feedback" / "dee.md").read_text()
    assert "Adjustment: **+1**: found the wrong constant at the oral" in dee and "Grade: **" in dee
    # A regrading from scratch keeps it: idrrun never writes the adjustments file.
    r = grade("--fresh")
    rows = {row["student"]: row for row in csv.DictReader(report.open(encoding="utf-8"))}
    assert rows["dee"]["adjustment"] == "1.0" and "1 adjustment included" in r.stdout

    # As a shell's grades/* names them: the report, its statistics, its adjustments.
    beside = sorted(str(p) for p in (tmp_path / "grades").iterdir() if not p.name.startswith("."))
    assert len(beside) == 3
    r = idrrun("gradebook", *beside, "--roster", "roster.csv", "--moodle", "book/moodle.csv",
               "--canvas", "book/canvas.csv", "--csv", "book/plain.csv", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "intro_pi.stats.csv: the class statistics beside a report, not a report: left out" in r.stdout
    assert "dee, intro_pi: adjusted +1: found the wrong constant at the oral" in r.stdout

    def read(name: str) -> list[list[str]]:
        with (tmp_path / "book" / name).open(newline="", encoding="utf-8") as fh:
            return list(csv.reader(fh))

    moodle, canvas = read("moodle.csv"), read("canvas.csv")
    grade_of = {row[3].split("@")[0]: row[4] for row in moodle[1:]}
    out_of = float(canvas[1][5])
    # A number for every graded student (hal handed nothing in), the solutions at full marks
    # of what this machine evaluates, the column saying what that is.
    assert all(grade_of[s] != "" for s in ("ann", "bob", "carl", "dee", "eve", "fay", "gus", "cafe"))
    assert grade_of["hal"] == "" and "hal, intro_pi: no submission" in r.stdout
    assert all(row[5] != "" for row in canvas[2:-1]) and canvas[-1][:1] == ["Noir, Hal"] and canvas[-1][5] == ""
    assert float(grade_of["ann"]) == float(grade_of["gus"]) == float(grade_of["cafe"]) == out_of
    # The build failure and the untouched start file earn nothing; a wrong constant, part.
    assert float(grade_of["carl"]) == float(grade_of["bob"]) == 0.0
    assert 0.0 < float(grade_of["dee"]) < out_of
    assert float(grade_of["dee"]) == float(rows["dee"]["score"]) + 1  # the adjustment
    if not has_gpu() and gpu_points:
        assert moodle[0][4] == canvas[0][5] == \
            f"intro_pi ({out_of:g} of {float(rows['ann']['points']):g} points evaluated)"
    plain = read("plain.csv")
    dee_row = dict(zip(plain[0], plain[4]))
    assert dee_row["intro_pi adjustment"] == "+1" and dee_row["intro_pi: pi"] == "0"
