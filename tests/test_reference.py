"""Complete work required and regrading that sees changes: `loop_on_device` names the hot loop a
half-ported program leaves on the host (real gcc and gfortran builds, the regions the run
executed); a resumed grading keeps a row only for the same submission, exercise and idrrun.
The reference values a students' course carries are tested from the wheel in test_packaging."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT
from idrrun.checks import loops

EXAMPLES = ROOT / "examples"
SAXPY = {"c": (EXAMPLES / "C" / "intro_saxpy_solution.c",
               "    #pragma acc parallel loop copyin(x[0:n]) copy(y[0:n])\n", "c"),
         "fortran": (EXAMPLES / "Fortran" / "intro_saxpy_solution.f90",
                     "    !$acc parallel loop copyin(x(1:n)) copy(y(1:n))\n", "f90")}


def run_cli(*args: str, cwd: Path, examples: Path = EXAMPLES) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def half_ported(language: str) -> tuple[str, int]:
    """intro_saxpy with the init loop in a compute region and the saxpy loop serial, and the
    line of that loop."""
    path, directive, _ = SAXPY[language]
    text = path.read_text()
    assert directive in text, "the solution changed: update the test"
    text = text.replace(directive, "")
    line = next(i for i, row in enumerate(text.splitlines(), 1)
                if row.strip().startswith(("for (int i = 0; i < n; i++)", "do i = 1, n"))
                and "a * x" in text.splitlines()[i])
    return text, line


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("gfortran") is None,
                    reason="gcc and gfortran are needed")
@pytest.mark.parametrize("language", ["c", "fortran"])
def test_half_ported_saxpy_fails_naming_the_loop_left_on_the_host(language: str,
                                                                  tmp_path: Path) -> None:
    text, line = half_ported(language)
    (tmp_path / f"half.{SAXPY[language][2]}").write_text(text)
    r = run_cli("run", "-a", "--check", "intro_saxpy", f"half.{SAXPY[language][2]}", cwd=tmp_path)
    assert r.returncode != 0, r.stdout
    assert "intro_saxpy: FAIL, 2 of" in r.stdout, r.stdout
    assert (f"the saxpy loop (line {line}) runs on the host: put it in a compute region"
            in r.stdout), r.stdout
    assert "1 of 2 compute regions ran" in r.stdout
    # The solution: both loops in compute regions that ran, each named with its region.
    path = SAXPY[language][0]
    r = run_cli("run", "-a", "--check", "intro_saxpy", str(path), cwd=tmp_path)
    assert r.returncode == 0 and "intro_saxpy: PASS" in r.stdout, r.stdout + r.stderr
    solution = path.read_text().splitlines()
    saxpy_loop = next(i for i, row in enumerate(solution, 1) if "a * x" in solution[i]
                      and row.strip().startswith(("for", "do")))
    assert (f"the saxpy loop (line {saxpy_loop}) ran in the compute region at line "
            f"{saxpy_loop - 1}") in r.stdout


C_LOOPS = """\
void f(int n, double *a, double *b)
{
#pragma acc kernels
    {
        for (int i = 0; i < n; i++)
            a[i] = 1.0;
    }
    for (int j = 0; j < n; j++) {
        b[j] = 2.0 * a[j];
    }
#pragma acc parallel loop collapse(2)
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            b[k] += a[i];
    do { n--; } while (n > 0);
}
"""
F_LOOPS = """\
subroutine f(n, a, b)
  !$acc kernels
  do i = 1, n
    a(i) = 1
  end do
  !$acc end kernels
  do j = 1, n
    b(j) = 2 * a(j)
  end do
  !$ACC Parallel Loop collapse(2)
  do i = 1, n
    do k = 1, n
      b(k) = b(k) + a(i)
    end do
  enddo
end subroutine
"""


def test_loops_and_constructs_as_the_source_holds_them() -> None:
    assert loops.statement_line(C_LOOPS, r"b\[j\]\s*=") == 9
    assert loops.enclosing_loop(C_LOOPS, 9, "c") == 8
    assert loops.enclosing_loop(C_LOOPS, 14, "c") == 13
    assert loops.compute_constructs(C_LOOPS, "c") == [3, 11]
    assert loops.construct_extent(C_LOOPS, 3, "c") == (3, 7)
    assert loops.construct_extent(C_LOOPS, 11, "c") == (11, 14)
    assert loops.construct_extent(C_LOOPS, 12, "c") == (12, 14)  # a runtime giving the loop's line
    assert loops.enclosing_loop(C_LOOPS, 1, "c") is None
    assert loops.statement_line(F_LOOPS, r"b\(j\)\s*=") == 8
    assert loops.enclosing_loop(F_LOOPS, 8, "fortran") == 7
    assert loops.compute_constructs(F_LOOPS, "fortran") == [2, 10]
    assert loops.construct_extent(F_LOOPS, 2, "fortran") == (2, 6)
    assert loops.construct_extent(F_LOOPS, 10, "fortran") == (10, 15)
    assert loops.construct_extent("#pragma acc parallel loop\nfor (;;", 1, "c") is None
    # gfortran gives a directive continued over lines (&) the line of its last one (md_forces)
    continued = ("x = 0\n!$acc parallel loop reduction(+:e) &\n!$acc   copyin(x) copyout(f)\n"
                 "do i = 1, n\n  f(i) = x(i)\nend do\n")
    assert loops.construct_extent(continued, 3, "fortran") == (2, 6)
    assert loops.construct_extent(continued, 2, "fortran") == (2, 6)


@pytest.mark.slow
def test_resubmitted_file_is_graded_again_while_an_unchanged_one_is_kept(tmp_path: Path) -> None:
    """Resume keys rows on content: alice's corrected file is graded again, bob's unchanged
    one is kept (renamed, too: not by name nor path); the report says how many and why."""
    klass = tmp_path / "class"
    klass.mkdir()
    wrong, _ = half_ported("c")
    (klass / "alice.c").write_text(wrong)
    (klass / "bob.c").write_text(SAXPY["c"][0].read_text())
    report = tmp_path / "report.json"

    def grade(*subs: str) -> tuple[dict[str, dict[str, object]], str]:
        r = run_cli("grade", "intro_saxpy", *subs, "--report", str(report), cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        return {d["student"]: d for d in json.loads(report.read_text())}, r.stdout

    rows, _ = grade(str(klass / "alice.c"), str(klass / "bob.c"))
    assert rows["alice"]["verdict"] == "fail" and "the saxpy loop" in str(rows["alice"]["reasons"])
    assert rows["bob"]["verdict"] == "pass"
    # Corrected, in her own words (a file like bob's would be kept by its content: his row)
    (klass / "alice.c").write_text("/* alice, corrected */\n" + SAXPY["c"][0].read_text())
    (klass / "bob.c").rename(klass / "robert.c")  # the same content under another name
    rows, said = grade(str(klass / "alice.c"), str(klass / "robert.c"))
    assert rows["alice"]["verdict"] == "pass", rows["alice"]
    assert rows["robert"]["verdict"] == "pass" and rows["robert"]["submission"] == str(klass / "robert.c")
    assert f"resuming: 1 row kept from {report}" in said, said
    assert f"1 row of {report} graded again: 1 changed" in said, said
    # A run with nothing changed keeps both; a changed spec grades both again.
    rows, said = grade(str(klass / "alice.c"), str(klass / "robert.c"))
    assert f"resuming: 2 rows kept from {report}" in said and "graded again" not in said, said
    course = tmp_path / "course"
    shutil.copytree(EXAMPLES, course, ignore=shutil.ignore_patterns("reference"))
    spec = course / "intro_saxpy.toml"
    spec.write_text(spec.read_text().replace("timeout = 60", "timeout = 61"))
    r = run_cli("grade", "intro_saxpy", str(klass / "alice.c"), str(klass / "robert.c"),
                "--report", str(report), cwd=tmp_path, examples=course)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resuming" not in r.stdout
    assert (f"2 rows of {report} graded again: 2 graded with another exercise spec, solution or "
            "data") in r.stdout, r.stdout


def test_other_arguments_say_whose_numbers_are_whose() -> None:
    """A student's own arguments (5000) are named as theirs, the exercise's as the exercise's:
    no number reads as the other's."""
    from idrrun.checks import reference as ref
    from idrrun.checks.specs import load

    exercise = load(Path(__file__).resolve().parent.parent / "examples" / "intro_saxpy.toml")
    found = ref.lookup(exercise, "c", ("5000",))
    assert found is not None and found.output is None
    own = "; ".join(f"{ref.describe(t)}: {' '.join(a)}" for t, a in ref.target_args(exercise).items())
    assert found.problem == (f"no reference for your arguments (5000): the course carries the "
                             f"solution's output for the exercise's own arguments only ({own})")
