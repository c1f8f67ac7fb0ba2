"""Resume keys (issue 44.5): a resumed grading keeps a row only for what decided it: the bytes,
the language they were graded as, the flags (the submission's line and the grader's policy), the
spec and the grader's code. Real gcc and gfortran, through `idrrun grade` as a teacher runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("gfortran") is None,
                                reason="gcc and gfortran are needed")

SPEC = """\
name = "twin"
timeout = 30
[sources.c]
exercise = "C/twin_exercise.c"
solution = "C/twin_solution.c"
[sources.fortran]
exercise = "Fortran/twin_exercise.f90"
solution = "Fortran/twin_solution.f90"
[args]
host = []
[[check]]
kind = "exit_ok"
[[check]]
kind = "value"
label = "answer"
pattern = 'answer\\s*=\\s*(\\S+)'
expected = 42
"""
C_PROGRAM = '#include <stdio.h>\nint main(void) {{ printf("answer = {value}\\n"); return 0; }}\n'
F_PROGRAM = "program twin\n  print '(a,i0)', 'answer = ', {value}\nend program twin\n"


def _course(tmp_path: Path) -> Path:
    examples = tmp_path / "examples"
    for folder, program, suffix in (("C", C_PROGRAM, "c"), ("Fortran", F_PROGRAM, "f90")):
        (examples / folder).mkdir(parents=True)
        (examples / folder / f"twin_exercise.{suffix}").write_text(program.format(value=0))
        (examples / folder / f"twin_solution.{suffix}").write_text(program.format(value=42))
    (examples / "twin.toml").write_text(SPEC)
    return examples


def _grade(tmp_path: Path, *args: str) -> tuple[dict[str, dict[str, object]], str]:
    """`idrrun grade twin ARGS --report r.json`: the rows by student, and what it said."""
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(tmp_path / "examples"),
               IDRRUN_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "twin", "--report",
                        str(tmp_path / "r.json"), *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    rows = json.loads((tmp_path / "r.json").read_text())
    return {str(row["student"]): row for row in rows}, r.stdout + r.stderr


def test_the_same_bytes_in_another_language_are_graded_again(tmp_path: Path) -> None:
    _course(tmp_path)
    klass = tmp_path / "class"
    klass.mkdir()
    ann, bob = klass / "ann.c", klass / "bob.f90"
    ann.write_text(C_PROGRAM.format(value=42))
    bob.write_bytes(ann.read_bytes())  # a classmate's C bytes, handed in as Fortran
    rows, said = _grade(tmp_path, str(ann))
    assert rows["ann"]["verdict"] == "pass", said
    # Resumed: ann's row is kept; bob's bytes are ann's, but built as Fortran they fail.
    rows, said = _grade(tmp_path, str(ann), str(bob))
    assert rows["bob"]["verdict"] == "fail" and rows["bob"]["language"] == "fortran", rows["bob"]
    assert "compile failed" in str(rows["bob"]["reasons"]), rows["bob"]
    assert rows["ann"]["verdict"] == "pass" and "1 row kept" in said, said
    # And the other way: a C file of a Fortran file's failing bytes does not inherit its fail.
    carl = klass / "carl.c"
    carl.write_bytes(bob.read_bytes())
    bob.write_text(F_PROGRAM.format(value=42))
    (klass / "dee.f90").write_bytes(carl.read_bytes())
    rows, said = _grade(tmp_path, str(klass / "dee.f90"))
    assert rows["dee"]["verdict"] == "fail", said
    rows, said = _grade(tmp_path, str(klass / "dee.f90"), str(carl))
    assert rows["carl"]["verdict"] == "pass" and rows["carl"]["language"] == "c", rows["carl"]


def test_a_row_is_graded_again_under_another_grader_policy(tmp_path: Path) -> None:
    _course(tmp_path)
    ann = tmp_path / "ann.c"
    ann.write_text(C_PROGRAM.format(value=42))
    _grade(tmp_path, str(ann))
    rows, said = _grade(tmp_path, str(ann))
    assert "1 row kept" in said, said
    # The grader's time limit decides a row (a program may end in 20 s, not in 5): another
    # limit grades it again, and says why.
    rows, said = _grade(tmp_path, "--timeout", "7", str(ann))
    assert "row kept" not in said and "1 row of" in said and "with other grader settings" in said, said
    assert rows["ann"]["verdict"] == "pass"
    rows, said = _grade(tmp_path, "--timeout", "7", str(ann))
    assert "1 row kept" in said, said
