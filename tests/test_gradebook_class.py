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

from conftest import Kernel, PYTHONPATH
from idrrun.checks import draw, specs
from idrrun.checks.visibility import MORE_AT_GRADING, SUMMARY_ONLY
from idrrun.grading import gradebook

SEED = "spring-term"


def idrrun(*args: str, cwd: Path, examples: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
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
    subs = {"ann": (own, 14), "bob": (near_miss, 12), "carol": (wrong, 9), "dave": (renamed, 14),
            "erin": (solution, 14), "frank": (start, 8)}
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
        r = idrrun("grade", "loops_dot", *subs, "-j", "2", "--seed", SEED, "--report", str(report),
                   "--feedback", str(feedback), *extra, cwd=tmp_path, examples=examples)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    r = grade()
    rows = {row["student"]: row for row in json.loads(report.read_text())}
    assert {s: (r["score"], r["points"], r["not_evaluated"]) for s, r in rows.items()} == \
        {s: (p, 14, 0) for s, p in expected.items()}, {s: r["reasons"] for s, r in rows.items()}
    assert "data clauses" in rows["bob"]["reasons"] and "dot (hidden run 1)" in rows["carol"]["reasons"]
    assert "│ 12/14 " in r.stdout and "│ 8/14 " in r.stdout

    # Feedback: the score, the summarised check without its regex, no hidden value anywhere.
    drawn = draw.drawn(specs.load(examples / "loops_dot.toml"), SEED).hidden_args
    assert rows["ann"]["hidden_args"] == [list(a) for a in drawn]
    for path in feedback.iterdir():
        text = path.read_text()
        assert not any(a in text for (a,) in drawn) and "reduction\\s" not in text, text
    bob = (feedback / "bob.md").read_text()
    assert "Score: **12/14**" in bob and f"| reduction | pass |  |  | {SUMMARY_ONLY} |" in bob
    assert "| data clauses | fail |" in bob

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
