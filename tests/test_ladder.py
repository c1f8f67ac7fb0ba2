"""The ladder of near-misses (idrrun/grading/ladder.py): made from every exercise's own
solution, judged against a teacher's order and bounds, and `idrrun course check --ladder`
failing a spec whose marks break the order (gcc, graded for real)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT
from idrrun.checks import loops, specs
from idrrun.checks.directives import code_text, has_directives
from idrrun.checks.score import CheckPoints, Score
from idrrun.grading import ladder
from idrrun.grading.rows import GradeRow
from idrrun.model import CheckResult

COURSE = specs.all_exercises(ROOT / "examples")


@pytest.mark.parametrize("exercise", COURSE, ids=[e.name for e in COURSE])
def test_every_exercise_has_a_ladder_made_from_its_own_solution(exercise: specs.Exercise) -> None:
    """Each rung is made or says why not; what it changed is what it claims."""
    for language, pair in exercise.sources.items():
        assert pair.solution is not None
        solution = pair.solution.read_text()
        rungs = {r.name: r for r in ladder.rungs(exercise, language)}
        assert tuple(rungs) == ladder.RUNGS
        assert rungs["solution"].text == solution and rungs["start"].text == pair.exercise.read_text()
        for name in ("slow", "wrong", "trivial", "comment"):
            assert rungs[name].made, (exercise.name, language, name, rungs[name].how)
        model = exercise.model
        count = len(ladder.constructs(solution, language, model))
        # directives in comments: the compiler sees none
        comment = rungs["comment"].text
        assert comment is not None and not ladder.directives(comment, language, model)
        if model == "openacc":
            assert not has_directives(code_text(comment, language), language)
        # a region with no work: one compute construct, every other directive gone
        trivial = rungs["trivial"].text
        assert trivial is not None and len(ladder.constructs(trivial, language, model)) == 1
        # a wrong result: one line changed, the spec's loop statements found where they were
        wrong = rungs["wrong"].text
        assert wrong is not None
        changed = [a for a, b in zip(solution.split("\n"), wrong.split("\n")) if a != b]
        assert len(changed) == 1 and len(wrong.split("\n")) == len(solution.split("\n")), changed
        for check in exercise.checks:
            if check.kind == "loop_on_device" and check.pattern is not None:
                assert loops.statement_line(code_text(wrong, language), check.pattern) == \
                    loops.statement_line(code_text(solution, language), check.pattern)
        half = rungs["half"]
        if half.made:
            assert half.text is not None
            assert len(ladder.constructs(half.text, language, model)) == count - 1, half.how
        else:
            assert half.how, exercise.name


def test_the_slow_rung_copies_where_it_costs_or_makes_the_hot_construct_serial() -> None:
    """On the H200 the copy before the first construct in a loop earned every point twice:
    life_swap's population construct runs at its pictures only (the copy was there already),
    async_matmul's product runs once (one copy of A: 1.0x). The copy goes before a hot construct
    in a loop or in a function called in one; without one, the hot construct is made serial."""
    by_name = {e.name: e for e in COURSE}
    life = {r.name: r for r in ladder.rungs(by_name["life_swap"], "c")}["slow"]
    assert life.text is not None
    solution = by_name["life_swap"].sources["c"].solution
    assert solution is not None
    before, after = solution.read_text().split("\n"), life.text.split("\n")
    at = next(i for i, (a, b) in enumerate(zip(before, after)) if a != b)
    assert after[at].strip() == "#pragma acc update self(cur[0:cells])" and after[at + 1:] == before[at:]
    hot = after[at + 1]
    assert "parallel loop" in hot and "reduction" not in hot, hot  # the generation's stencil
    matmul = {r.name: r for r in ladder.rungs(by_name["async_matmul"], "c")}["slow"]
    assert matmul.how == "the construct at line 53 made serial (one device thread)", matmul.how
    assert matmul.text is not None and "#pragma acc serial loop collapse(2) present(A[0:n]" in matmul.text
    # profile_cg's construct is in a function its iteration loop calls: the copy at each call.
    cg = {r.name: r for r in ladder.rungs(by_name["profile_cg"], "c")}["slow"]
    assert cg.how == "#pragma acc update self(p[0:w*w]) before the construct at line 31, at each call"
    # compute_scan's hot construct (the block sums) runs once, after the time loop: made serial
    # it earned every speed point on the H200; the copy goes before a construct the loop runs
    # (the smoothing).
    for language, how in (("c", "#pragma acc update self(in[0:n]) before the construct at line 41"),
                          ("fortran", "!$acc update self(in) before the construct at line 85")):
        scan = {r.name: r for r in ladder.rungs(by_name["compute_scan"], language)}["slow"]
        assert scan.how == f"{how}, at each call", scan.how


def test_the_half_port_brings_its_arrays_to_the_host_and_back() -> None:
    """data_laplace: the copy loop left on the host, the arrays it reads updated around it (its
    stencil, a loop_on_device of the spec, stays on the device); intro_saxpy: of its two hot
    loops, the last one's (the saxpy loop) on the host."""
    laplace = next(e for e in COURSE if e.name == "data_laplace")
    half = next(r for r in ladder.rungs(laplace, "c") if r.name == "half")
    assert half.text is not None and "#pragma acc update self(A[0:n], Anew[0:n])" in half.text
    assert "#pragma acc update device(A[0:n], Anew[0:n])" in half.text
    assert "(lines 64-67 on the host)" in half.how, half.how
    saxpy = next(e for e in COURSE if e.name == "intro_saxpy")
    half = next(r for r in ladder.rungs(saxpy, "fortran") if r.name == "half")
    assert half.text is not None and "copyin(x(1:n)) copy(y(1:n))" not in half.text
    assert "copyout(x(1:n), y(1:n))" in half.text


def _graded(name: str, share: float | None, how: str = "") -> ladder.Graded:
    """A rung scored by hand: its share of 10 points (None: not made)."""
    rung = ladder.Rung(name, "" if share is not None else None, how or f"the {name} rung")
    if share is None:
        return ladder.Graded(rung, None)
    earned = 10 * share
    items = (CheckPoints(1, 0, "y_last", earned, "earned"), CheckPoints(0, 0, "ends normally", 10 - earned, "lost"))
    # Its checks: it ends normally, its y_last is right but where the rung is a wrong result.
    checks = (CheckResult("ends normally", "pass", check=0),
              CheckResult("y_last", "fail" if name == "wrong" else "pass", check=1))
    row = GradeRow(name, "demo", "c", "fail", 0.1, 0.1, name, checks=checks,
                   score=Score(earned, 10.0, 0.0, items))
    return ladder.Graded(rung, row)


def test_the_judge_holds_marks_to_the_order_and_the_bounds(tmp_path: Path) -> None:
    (tmp_path / "ex.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "demo.toml").write_text(
        'name = "demo"\n[sources.c]\nexercise = "ex.c"\nsolution = "ex.c"\n[[check]]\nkind = "exit_ok"\n'
        "[[check]]\nkind = \"value\"\npattern = 'y_last\\s*=\\s*(\\S+)'\nexpected = 2.0\n")
    exercise = specs.load(tmp_path / "demo.toml")
    shares = {"solution": 1.0, "slow": 1.0, "half": 0.6, "wrong": 0.4, "trivial": 0.1, "start": 0.0,
              "comment": 0.0}
    held = ladder.judge(exercise, [_graded(n, s) for n, s in shares.items()], on_gpu=False)
    assert held.findings == () and held.notes == ()
    # On a GPU the slow rung must earn less than the solution where a speed check sees it...
    timed = dataclasses.replace(exercise, checks=(*exercise.checks, dataclasses.replace(
        exercise.checks[0], kind="speed", label="run time", index=2)))
    on_gpu = ladder.judge(timed, [_graded(n, s) for n, s in shares.items()], on_gpu=True)
    assert on_gpu.findings == ("the order breaks: the solution made slow (correct) earns 100 %, "
                               "the solution 100 % (the slow rung; it earns 10 of 10: y_last 10)",)
    # ...unless that check earned all its points: the rung is not slow here (its marks are
    # right), not judged, with the figure; a part of the points only judges it.
    def timed_slow(credit: float | None) -> ladder.Graded:
        g = _graded("slow", 1.0)
        assert g.row is not None
        speed = CheckResult("run time", "pass", got="1.02× (0.98–1.05× over 3 runs)", check=2,
                            kind="speed", credit=credit)
        return dataclasses.replace(g, row=dataclasses.replace(g.row, checks=(*g.row.checks, speed)))
    fast = ladder.judge(timed, [timed_slow(None) if n == "slow" else _graded(n, s)
                                for n, s in shares.items()], on_gpu=True)
    assert fast.findings == () and fast.notes == (
        "the solution made slow (correct): not judged: it is not slow here (run time 1.02× "
        "(0.98–1.05× over 3 runs): every point of its speed): the slow rung",), fast
    part = ladder.judge(timed, [timed_slow(0.75) if n == "slow" else _graded(n, s)
                                for n, s in shares.items()], on_gpu=True)
    assert part.findings == on_gpu.findings and part.notes == ()
    on_host = ladder.judge(timed, [timed_slow(None) if n == "slow" else _graded(n, s)
                                   for n, s in shares.items()], on_gpu=False)
    assert on_host.findings == () and not any("not slow" in n for n in on_host.notes)
    # ...and where none does, the ladder says so.
    unseen = ladder.judge(exercise, [_graded(n, s) for n, s in shares.items()], on_gpu=True)
    assert unseen.findings == () and unseen.notes == (ladder.UNSEEN_SPEED,)
    # A wrong result above a half port, and above its bound.
    broken = dict(shares, wrong=0.8)
    found = ladder.judge(exercise, [_graded(n, s) for n, s in broken.items()], on_gpu=False).findings
    assert found == (
        "the order breaks: the whole port with a wrong result earns 80 %, a half port (one hot "
        "loop on the host, the result right) 60 % (the wrong rung; it earns 8 of 10: y_last 8)",
        "the whole port with a wrong result earns 80 %, more than 70 % (the wrong rung; it earns "
        "8 of 10: y_last 8)"), found
    # A rung not made is left out of the order, and said.
    missing = ladder.judge(exercise, [_graded(n, s) for n, s in dict(shares, half=None).items()], False)
    assert missing.findings == () and missing.notes == (
        "a half port (one hot loop on the host, the result right): not judged: the half rung",)


def _course_check(examples: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples),
               IDRRUN_GRADING_SEED="ladder")
    return subprocess.run([sys.executable, "-m", "idrrun.cli", "course", "check", "--ladder", *args],
                          cwd=examples.parent, env=env, capture_output=True, text=True, timeout=600)


def _copy_exercise(name: str, folder: Path) -> Path:
    examples = folder / "examples"
    for language in ("C", "Fortran"):
        (examples / language).mkdir(parents=True)
        for source in (ROOT / "examples" / language).glob(f"{name}_*"):
            shutil.copy(source, examples / language / source.name)
    if (ROOT / "examples" / "reference" / name).is_dir():
        shutil.copytree(ROOT / "examples" / "reference" / name, examples / "reference" / name)
    return examples


def test_course_check_ladder_fails_a_spec_whose_marks_break_the_order(tmp_path: Path) -> None:
    """intro_saxpy as it was before issue 47 (its values all or nothing on the saxpy loop, a
    wrong result unbounded): its half port earns 16 %, its whole port with a wrong constant 60 %,
    and `course check --ladder` says so and fails; as it is, the order holds."""
    examples = _copy_exercise("intro_saxpy", tmp_path)
    spec = (ROOT / "examples" / "intro_saxpy.toml").read_text()
    (examples / "intro_saxpy.toml").write_text(spec)
    held = _course_check(examples, "-l", "c", "--json")
    assert held.returncode == 0, held.stdout[-3000:] + held.stderr
    [row] = json.loads(held.stdout)["rows"]
    shares = {r["rung"]: r["share"] for r in row["ladder"] if "rung" in r}
    assert shares["solution"] == 1.0 and shares["start"] == 0.0
    assert shares["solution"] >= shares["slow"] > shares["half"] > shares["wrong"] > \
        shares["trivial"] > shares["start"], shares
    # Each rung's checks that did not pass, with why: what a figure not judged is told by.
    unpassed = {r["rung"]: r["unpassed"] for r in row["ladder"] if "rung" in r}
    assert unpassed["solution"] == [] or all(c["status"] == "incomplete" for c in unpassed["solution"])
    assert any(c["status"] == "fail" and c["reason"] for c in unpassed["wrong"]), unpassed["wrong"]
    old = spec.replace('counts_in_part = ["the init loop", "the saxpy loop"]',
                       'counts_when = ["the saxpy loop", "compute regions run"]')
    (examples / "intro_saxpy.toml").write_text("wrong_result = 1.0\n" + old)
    broken = _course_check(examples, "-l", "c")
    out = " ".join((broken.stdout + broken.stderr).split())
    assert broken.returncode == 1, out
    assert "the ladder (c): the order breaks: the whole port with a wrong result earns 60 %, a half " \
           "port (one hot loop on the host, the result right) 16 %" in out, out
    assert "BROKEN" in out
