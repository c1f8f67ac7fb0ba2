"""Points that mean the port: near-misses of intro_saxpy, graded for real (gcc, `idrrun grade`),
score between the untouched start file and the published solution, in proportion to what they
got right; a program that does not build earns nothing and is one row."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import ROOT
from idrrun import cli

C = ROOT / "examples" / "C"
FORTRAN = ROOT / "examples" / "Fortran"
SOLUTION = (C / "intro_saxpy_solution.c").read_text()
F_SOLUTION = (FORTRAN / "intro_saxpy_solution.f90").read_text()
SAXPY_PRAGMA = "    #pragma acc parallel loop copyin(x[0:n]) copy(y[0:n])\n"
INIT_PRAGMA = "    #pragma acc parallel loop copyout(x[0:n], y[0:n])\n"
# A compute region that does no real work: one element, the loops left on the host.
IDLE = "    #pragma acc parallel loop copy(x[0:1])\n    for (int i = 0; i < 1; i++)\n        x[0] = 0.0;\n"


def _variants() -> dict[str, tuple[str, str]]:
    assert SAXPY_PRAGMA in SOLUTION and INIT_PRAGMA in SOLUTION and "saxpy(n, 2.0" in SOLUTION
    serial = SOLUTION.replace(SAXPY_PRAGMA, "").replace(INIT_PRAGMA, "")
    return {
        "solution": ("c", SOLUTION),
        "start": ("c", (C / "intro_saxpy_exercise.c").read_text()),
        # the easy loop ported, the hot one left serial
        "half": ("c", SOLUTION.replace(SAXPY_PRAGMA, "")),
        "idle": ("c", serial.replace("    init(n, x, y);\n", IDLE + "    init(n, x, y);\n")),
        # the whole port, with a wrong coefficient
        "wrong": ("c", SOLUTION.replace("saxpy(n, 2.0", "saxpy(n, 3.0")),
        "broken": ("c", SOLUTION.replace("int main(int argc", "int main(int argc,,")),
        "f_half": ("fortran", F_SOLUTION.replace("    !$acc parallel loop copyin(x(1:n)) copy(y(1:n))\n", "")),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    folder = tmp_path_factory.mktemp("near")
    files = []
    for name, (language, text) in _variants().items():
        path = folder / f"{name}.{'c' if language == 'c' else 'f90'}"
        path.write_text(text)
        files.append(str(path))
    report = folder / "report.json"
    # The seed from the grader's environment: never on a command line (issue 33).
    os.environ["IDRRUN_GRADING_SEED"] = "near-misses"
    try:
        code = cli.main(["grade", "intro_saxpy", *files, "-j", "2", "--report", str(report)])
    finally:
        del os.environ["IDRRUN_GRADING_SEED"]
    assert code in (0, 1), code
    return {r["student"]: r for r in json.loads(report.read_text())}


def _share(row: dict[str, object]) -> float:
    """What it earns of the points evaluated here (a host does not time its run: speed)."""
    earned, evaluated = row["score"], row["evaluated"]
    assert isinstance(earned, (int, float)) and isinstance(evaluated, (int, float)) and evaluated
    return earned / evaluated


def test_near_misses_score_between_the_start_file_and_the_solution(
        graded: dict[str, dict[str, object]]) -> None:
    scores = {name: _share(row) for name, row in graded.items()}
    print(json.dumps({n: f"{graded[n]['score']}/{graded[n]['points']}" for n in graded}))
    assert scores["solution"] == 1.0 and scores["start"] <= 0.1, scores
    # A teacher's order (examples/README.md, "The ladder"): a region with no work < a whole port
    # with one wrong constant < half a port with the right result < the solution: correct
    # results matter more than speed.
    assert scores["start"] < scores["idle"] < scores["wrong"] < scores["half"] < 1.0, scores
    assert scores["idle"] <= 0.25 and 0.4 < scores["half"] <= 0.7 and 0.4 < scores["f_half"] <= 0.7
    assert scores["wrong"] <= 0.4, scores  # wrong_result


def test_points_that_wait_for_the_port_say_so(graded: dict[str, dict[str, object]]) -> None:
    """The half port's values are right, and count in part: half of them once the saxpy loop
    runs in a compute region (the JSON report's rows keep the checks; the score is recomputed
    from them)."""
    from idrrun.checks import score, specs
    from idrrun.grading import state as state_mod

    exercise = specs.load(ROOT / "examples" / "intro_saxpy.toml")
    half = graded["half"]
    assert isinstance(half["checks"], list)
    checks = [state_mod._check_from(c) for c in half["checks"]]
    assert next(c for c in checks if c.name == "y_last").status == "pass"
    items = score.score(exercise, checks, 2).items
    y_last = [i for i in items if i.label == "y_last"]
    assert [(i.outcome, i.worth) for i in y_last] == [("earned", 1.5), ("lost", 1.5)], y_last
    assert y_last[1].why == "1.5 of the 3 points for y_last count once the saxpy loop runs in a " \
        "compute region", y_last
    assert sum(i.worth for i in items if i.outcome == "earned") == half["score"]


def test_a_build_failure_earns_nothing_and_is_one_row(graded: dict[str, dict[str, object]]) -> None:
    broken = graded["broken"]
    assert broken["score"] == 0 and broken["verdict"] == "fail", broken
    checks = broken["checks"]
    assert isinstance(checks, list) and len(checks) == 1, checks
    [row] = checks
    assert row["name"] == "builds" and row["status"] == "fail", row
    assert "error" in row["reason"] and row["excerpt"], row


def test_course_check_fails_a_spec_whose_start_file_earns_too_much(tmp_path: Path) -> None:
    """intro_pi with its points no longer waiting for the port: the serial start file earns
    them, and `course check` says so, with the points it earned, and fails."""
    import shutil
    import subprocess
    import sys

    from conftest import PYTHONPATH

    examples = tmp_path / "examples"
    (examples / "C").mkdir(parents=True)
    for source in C.glob("intro_pi_*"):
        shutil.copy(source, examples / "C" / source.name)
    shutil.copytree(ROOT / "examples" / "reference" / "intro_pi", examples / "reference" / "intro_pi")
    spec = (ROOT / "examples" / "intro_pi.toml").read_text()
    assert 'counts_in_part = ["the pi loop"]' in spec
    spec = spec.replace('counts_in_part = ["the pi loop"]\n', "")
    spec = spec[:spec.index("[sources.fortran]")] + spec[spec.index("[args]"):]
    (examples / "intro_pi.toml").write_text(spec)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples),
               IDRRUN_GRADING_SEED="x")
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "course", "check"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 1, out
    assert "the start file earns 13 of the 19 points evaluated here (68 %, more than 10 %)" in out, out
    assert "solution 19/22, 3 points not evaluated here, start 13/22" in out, out
