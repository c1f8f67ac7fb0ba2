"""What a student reads of every check kind, for pass, fail and incomplete, from hand-made
evidence (no processes): words, never a regular expression; no temporary file name; plurals
and grammar right; a label for every kind that is not its spec name."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from idrrun.checks.evidence import Evidence, HostComparison
from idrrun.checks.verdict import evaluate, evaluate_one
from idrrun.checks.specs import CHECK_KINDS, CheckSpec, Exercise, SourcePair, _check
from idrrun.display import VerdictView
from idrrun.model import (AccReport, BuildResult, CheckResult, ConstructRan, ImplicitData,
                          ProcResult, RegionsRan, RunResult, Verdict)

BUILT = BuildResult(ok=True, command=("gcc",), proc=None, output="", cached=False, key="k",
                    build_dir=Path("/nonexistent"))
FAILED = BuildResult(ok=False, command=("gcc",), proc=None, output="e", cached=False, key="k",
                     build_dir=None)
SPEC = Path("/course/examples/demo.toml")


def spec(**table: object) -> CheckSpec:
    """A check as a course's spec declares it (the defaults the spec reader gives)."""
    return _check(dict(table), 0, SPEC)


def ev(output: str = "", rc: int | None = 0, *, timed_out: bool = False, limit: str | None = None,
       acc: AccReport | None = None, solution: str | None = None, ran: bool = True,
       source: str = "#pragma acc parallel loop\nfor (;;) {}\n", built: bool = True,
       regions: RegionsRan | None = None, trace: dict[str, float] | None = None,
       run_dir: Path | None = None, solution_dir: Path | None = None,
       language: str = "c", seconds: float = 0.0) -> Evidence:
    proc = ProcResult(("prog",), rc, timed_out=timed_out, output=output, limit=limit, seconds=seconds)
    run = RunResult(("prog",), proc, regions=regions)
    return Evidence(source_text=source, language=language, build=BUILT if built else FAILED,
                    run=run if built and ran else None, acc=acc, solution_output=solution,
                    solution_problem="" if solution is not None else "it crashed",
                    trace_values=trace, regions=regions, run_dir=run_dir,
                    solution_dir=solution_dir)


def timed(evidence: Evidence, solution: str | None = None, **figures: tuple[float, ...]) -> Evidence:
    """The evidence with the solution's timed figures (its output too, where given)."""
    return dataclasses.replace(evidence, solution_timed=figures, solution_output=solution
                               if solution is not None else evidence.solution_output)


def pgm(path: Path, values: bytes) -> None:
    path.write_bytes(b"P5\n2 2\n255\n" + values)


GPU = {"kernels": 200.0, "queues": 3.0, "bytes_moved": 5600.0, "gpu_busy": 0.9}
HOST = {"kernels": 0.0, "queues": 1.0, "bytes_moved": 134e6, "gpu_busy": 0.1}
IMPLICIT = ImplicitData("A", 12, "parallel", "A is used in the parallel region at line 12 "
                                             "without a data clause, so the runtime moves it")
ONE_RAN = RegionsRan("counted", (ConstructRan(1, 47, "main"),))
TWO_RAN = RegionsRan("counted", (ConstructRan(1000, 47, "main"), ConstructRan(3, 55, "main")))


def results(tmp: Path) -> Iterator[tuple[str, str, CheckResult]]:
    """(kind, the status it should have, the result) for every kind and every status it has."""
    y_last = spec(kind="value", pattern=r"y_last\s*=\s*(\S+)", expected=2.0)
    yield "value", "pass", evaluate_one(y_last, ev("y_last = 2\n"))
    yield "value", "fail", evaluate_one(y_last, ev("y_last = 3\n"))
    yield "value", "fail", evaluate_one(y_last, ev("nothing\n"))
    yield "value", "fail", evaluate_one(y_last, ev("y_last = abc\n"))
    yield "value", "incomplete", evaluate_one(y_last, ev(ran=False))
    exit_ok = spec(kind="exit_ok")
    yield "exit_ok", "pass", evaluate_one(exit_ok, ev())
    for end in (dict(rc=-11), dict(rc=3), dict(rc=None, timed_out=True), dict(rc=-9, limit="memory")):
        yield "exit_ok", "fail", evaluate_one(exit_ok, ev(**end))  # type: ignore[arg-type]
    yield "exit_ok", "fail", evaluate_one(exit_ok, ev(built=False))
    yield "exit_ok", "incomplete", evaluate_one(exit_ok, ev(ran=False))
    converged = spec(kind="line", exact="converged")
    yield "line", "pass", evaluate_one(converged, ev("converged\n"))
    yield "line", "fail", evaluate_one(converged, ev("diverged\n"))
    iterations = spec(kind="line", regex=r"^iter\w*\s*=\s*\d+")
    yield "line", "pass", evaluate_one(iterations, ev("iterations = 5\n"))
    yield "line", "fail", evaluate_one(iterations, ev("nothing\n"))
    yield "line", "incomplete", evaluate_one(iterations, ev(ran=False))
    same = spec(kind="matches_solution", pattern=r"error\s*=\s*(\S+)", rel_tol=1e-6)
    two = "error = 1.0e-3\nerror = 2.0e-4\n"
    yield "matches_solution", "pass", evaluate_one(same, ev(two, solution=two))
    yield "matches_solution", "fail", evaluate_one(same, ev("error = 1.0e-3\n", solution=two))
    yield "matches_solution", "fail", evaluate_one(same, ev("x\n", solution="error = 1\n"))
    yield "matches_solution", "fail", evaluate_one(same, ev("error = 1\nerror = 3\n", solution=two))
    yield "matches_solution", "incomplete", evaluate_one(same, ev(two, solution=None))
    yield "matches_solution", "incomplete", evaluate_one(same, ev(two, solution="nothing\n"))
    acc = spec(kind="uses_openacc")
    yield "uses_openacc", "pass", evaluate_one(acc, ev(acc=AccReport(1, (), "gcc"), regions=ONE_RAN))
    yield "uses_openacc", "pass", evaluate_one(acc, ev(acc=AccReport(1, (), "gcc"), ran=False))
    yield "uses_openacc", "fail", evaluate_one(acc, ev(source="int x;\n", acc=AccReport(0, (), "gcc")))
    yield "uses_openacc", "fail", evaluate_one(
        acc, ev(acc=AccReport(0, (), "gcc", unreachable=1), regions=RegionsRan("counted")))
    yield "uses_openacc", "incomplete", evaluate_one(acc, ev(acc=None, ran=False))
    data = spec(kind="no_implicit_data")
    yield "no_implicit_data", "pass", evaluate_one(data, ev(acc=AccReport(1, (), "gcc")))
    yield "no_implicit_data", "fail", evaluate_one(data, ev(acc=AccReport(1, (IMPLICIT,), "gcc")))
    yield "no_implicit_data", "fail", evaluate_one(data, ev(acc=AccReport(0, (), "gcc", unreachable=1)))
    yield "no_implicit_data", "incomplete", evaluate_one(data, ev(acc=None))
    tile = spec(kind="source", regex=r"(?im)^\s*(#pragma\s+acc|!\$acc)\b.*\btile\s*\(",
                reason="the exercise asks for loops tiled with the tile clause, e.g. tile(32,32)")
    yield "source", "pass", evaluate_one(tile, ev(source="int a;\n#pragma acc loop tile(32,32)\n"))
    yield "source", "fail", evaluate_one(tile, ev(source="#pragma acc loop\n"))
    yield "source", "fail", evaluate_one(spec(kind="source", regex=r"\bgang\b"), ev(source="x\n"))
    for kind, extra in (("ran_on_gpu", {}), ("queues", {"min": 2}), ("gpu_busy", {"min": 0.5}),
                        ("data_moved", {"max_bytes": 64e3, "per_iteration": r"iterations\s*=\s*(\d+)"})):
        check = spec(kind=kind, **extra)
        yield kind, "pass", evaluate_one(check, ev("iterations = 1\n", trace=GPU))
        yield kind, "fail", evaluate_one(check, ev("iterations = 1\n", trace=HOST))
        yield kind, "incomplete", evaluate_one(check, ev())
    yield "data_moved", "fail", evaluate_one(
        spec(kind="data_moved", max_bytes=64e3, per_iteration=r"iterations\s*=\s*(\d+)"),
        ev("no count\n", trace=GPU))
    # Relative to the solution's figure measured the same way (one run of each here).
    busy = spec(kind="gpu_busy", min_ratio=0.7)
    yield "gpu_busy", "pass", evaluate_one(busy, timed(ev(trace=GPU), gpu_busy=(1.0,)))
    yield "gpu_busy", "fail", evaluate_one(busy, timed(ev(trace=dict(GPU, gpu_busy=0.29)), gpu_busy=(0.54,)))
    yield "gpu_busy", "incomplete", evaluate_one(busy, ev(trace=GPU))  # no solution's share
    speed = spec(kind="speed", full=1.5, none=10, per_iteration=r"iterations\s*=\s*(\d+)")
    yield "speed", "pass", evaluate_one(speed, timed(ev("iterations = 10\n", trace=GPU, seconds=1.2),
                                                     seconds=(1.0,), solution="iterations = 10\n"))
    yield "speed", "pass", evaluate_one(speed, timed(ev("iterations = 10\n", trace=GPU, seconds=3.0),
                                                     seconds=(1.0,), solution="iterations = 10\n"))
    yield "speed", "fail", evaluate_one(speed, timed(ev("iterations = 10\n", trace=GPU, seconds=12.0),
                                                     seconds=(1.0,), solution="iterations = 10\n"))
    yield "speed", "fail", evaluate_one(speed, timed(ev("no count\n", trace=GPU, seconds=1.0),
                                                     seconds=(1.0,), solution="iterations = 10\n"))
    yield "speed", "incomplete", evaluate_one(speed, ev("iterations = 10\n", trace=GPU))
    yield "speed", "incomplete", evaluate_one(speed, ev())
    yield "queues", "fail", evaluate_one(spec(kind="queues", min=2),
                                         ev(trace=dict(GPU, queues=1.0)))
    mine, theirs = tmp / "mine", tmp / "theirs"
    mine.mkdir(exist_ok=True)
    theirs.mkdir(exist_ok=True)
    pgm(theirs / "blur.pgm", bytes([0, 10, 20, 30]))
    pgm(mine / "blur.pgm", bytes([0, 10, 20, 30]))
    picture = spec(kind="image", file="blur.pgm")
    yield "image", "pass", evaluate_one(picture, ev(run_dir=mine, solution_dir=theirs))
    pgm(mine / "blur.pgm", bytes([0, 10, 20, 99]))
    yield "image", "fail", evaluate_one(picture, ev(run_dir=mine, solution_dir=theirs))
    yield "image", "incomplete", evaluate_one(picture, ev(run_dir=mine))
    omp = spec(kind="uses_openmp")
    yield "uses_openmp", "pass", evaluate_one(omp, ev(acc=AccReport(0, (), "gcc", omp_targets=1)))
    yield "uses_openmp", "fail", evaluate_one(omp, ev(acc=AccReport(0, (), "gcc")))
    yield "uses_openmp", "incomplete", evaluate_one(omp, ev(acc=None))
    ran = spec(kind="regions_ran", min=2)
    yield "regions_ran", "pass", evaluate_one(ran, ev(regions=TWO_RAN))
    yield "regions_ran", "fail", evaluate_one(ran, ev(regions=ONE_RAN, acc=AccReport(1, (), "gcc", unreachable=1)))
    yield "regions_ran", "incomplete", evaluate_one(ran, ev(regions=None))
    saxpy = spec(kind="loop_on_device", label="the saxpy loop", pattern=r"y\[i\]\s*=")
    ported = "int main(void) {\n#pragma acc parallel loop\nfor (int i = 0; i < n; i++)\n  y[i] = 2;\n}\n"
    at_2 = RegionsRan("counted", (ConstructRan(1, 2, "main"),))
    yield "loop_on_device", "pass", evaluate_one(saxpy, ev(source=ported, regions=at_2))
    yield "loop_on_device", "fail", evaluate_one(saxpy, ev(source=ported, regions=RegionsRan("counted")))
    yield "loop_on_device", "fail", evaluate_one(
        saxpy, ev(source=ported.replace("#pragma acc parallel loop", "// on the host"),
                  regions=RegionsRan("counted")))
    yield "loop_on_device", "incomplete", evaluate_one(saxpy, ev(source=ported, regions=None))
    yield "loop_on_device", "incomplete", evaluate_one(saxpy, ev(source="int x;\n", regions=at_2))
    unplaced = RegionsRan("counted", (ConstructRan(1, None, ""),))
    yield "loop_on_device", "incomplete", evaluate_one(saxpy, ev(source=ported, regions=unplaced))
    host = spec(kind="agrees_with_host", pattern=r"total\s*=\s*(\S+)")
    same = HostComparison("total = 1000\n", "total = 1000\n")
    yield "agrees_with_host", "pass", evaluate_one(host, dataclasses.replace(ev(), host=same))
    racy = HostComparison("total = 858\n", "total = 1000\n")
    yield "agrees_with_host", "fail", evaluate_one(host, dataclasses.replace(ev(), host=racy))
    twice = HostComparison("total = 1000\ntotal = 2\n", "total = 1000\n")
    yield "agrees_with_host", "fail", evaluate_one(host, dataclasses.replace(ev(), host=twice))
    yield "agrees_with_host", "incomplete", evaluate_one(
        host, dataclasses.replace(ev(), host=HostComparison(problem="needs a GPU")))
    yield "agrees_with_host", "incomplete", evaluate_one(host, ev())
    yield "agrees_with_host", "incomplete", evaluate_one(
        host, dataclasses.replace(ev(), host=HostComparison("x\n", "nothing\n")))
    exercise = Exercise("demo", "demo", "demo", SPEC, 10.0, (), {"c": SourcePair(SPEC, SPEC)},
                        (), (), checks=(exit_ok,))
    without_acc = evaluate(exercise, dataclasses.replace(ev(), acc_requested=False))
    yield "exit_ok", "incomplete", without_acc.checks[0]
    yield "value", "fail", evaluate_one(y_last, ev(built=False))


# Pieces of regular expressions, and spellings of the build's temporary files.
REGEX = re.compile(r"\\[sSdDbwW]|\(\?|\[\^|\\[()\[\]]|\(\\|/\^|\$/")
TEMPORARY = re.compile(r"\bsource\.(?:c|cpp|f90|cu)\b|\.tmp-|\bprog-source\b")
# "1 values", "1 errors", "region(s)", "the program killed by".
WRONG = re.compile(r"(?<![\d.])1 (?!time)[a-z]+s\b|\(s\)|the program (?:killed|exit code|could not "
                   r"start:|stopped at)")


def texts(result: CheckResult) -> list[str]:
    return [result.name, result.expected, result.got, result.reason]


def test_every_kind_has_pass_fail_and_incomplete_here(tmp_path: Path) -> None:
    seen = {(kind, status) for kind, status, _ in results(tmp_path)}
    for kind in CHECK_KINDS:
        statuses = {"pass", "fail"} if kind == "source" else {"pass", "fail", "incomplete"}
        assert {(kind, s) for s in statuses} <= seen, kind


def test_what_a_student_reads_of_every_check(tmp_path: Path) -> None:
    for kind, status, result in results(tmp_path):
        assert result.status == status, (kind, result)
        for text in texts(result):
            assert not REGEX.search(text), (kind, status, text)
            assert not TEMPORARY.search(text), (kind, status, text)
            assert not WRONG.search(text), (kind, status, text)
        assert result.reason, (kind, status, result)
        assert "_" not in result.name or result.name == "y_last", (kind, result.name)


def test_a_passing_check_says_what_is_there(tmp_path: Path) -> None:
    for kind, status, result in results(tmp_path):
        if status == "pass":
            words = result.reason.lower()
            assert not re.search(r"\b(asks for|needs|missing|should)\b", words), (kind, result)
            assert not words.startswith(("no ", "not ", "the exercise")), (kind, result)


def test_two_checks_of_one_kind_are_told_apart() -> None:
    error = spec(kind="matches_solution", pattern=r"error\s*=\s*(\S+)")
    count = spec(kind="matches_solution", pattern=r"iterations\s*=\s*(\S+)")
    assert error.label != count.label
    assert "error" in error.label and "iterations" in count.label


def test_a_spec_may_say_what_it_expects_in_words() -> None:
    rank = spec(kind="line", regex=r"^rank 0 -> (device 0 of [1-9]\d*|host),",
                expect="a line 'rank 0 -> device 0 of N,' (or '-> host,')")
    r = evaluate_one(rank, ev("nothing\n"))
    assert r.expected == "a line 'rank 0 -> device 0 of N,' (or '-> host,')"
    assert not REGEX.search(r.reason) and "rank 0 -> device 0 of N" in r.reason
    # The teacher's report keeps the pattern.
    assert r.pattern == r"^rank 0 -> (device 0 of [1-9]\d*|host),"


@pytest.mark.parametrize("checks, headline", [
    ((CheckResult("a", "pass"),), "demo: PASS, 1 check"),
    ((CheckResult("a", "pass"), CheckResult("b", "pass")), "demo: PASS, 2 checks"),
    ((CheckResult("a", "pass"), CheckResult("b", "incomplete", reason="needs a GPU trace")),
     "demo: INCOMPLETE, 1 check passed, 1 could not be evaluated here (b: needs a GPU trace)"),
    ((CheckResult("a", "fail"),), "demo: FAIL, 1 of 1 check failed"),
])
def test_the_headline_counts_right(checks: tuple[CheckResult, ...], headline: str) -> None:
    assert VerdictView(Verdict("demo", checks)).headline() == headline


def test_the_expected_column_is_never_cut_mid_word() -> None:
    long = CheckResult("y_last", "fail", "a line 'the largest relative error = <number>'", "not printed",
                       "the output has no such line")
    text = str(VerdictView(Verdict("demo", (long,))))
    # Wrapped inside its column (the columns after it stay in place), at spaces only.
    assert all(word in text.split() for word in long.expected.split()), text



def test_the_course_s_checks_have_words_and_names_of_their_own() -> None:
    from idrrun.checks import specs, words

    examples = Path(__file__).resolve().parent.parent / "examples"
    for exercise in specs.all_exercises(examples):
        labels = [c.label for c in exercise.checks]
        assert len(set(labels)) == len(labels), (exercise.name, labels)
        for c in exercise.checks:
            assert c.label != c.kind, (exercise.name, c)
            if c.kind in ("value", "matches_solution", "line"):
                said = words.output_line(c.expect, c.pattern or c.regex, "",
                                         group_is_number=c.kind != "line")
                assert said != "the line the exercise asks for", (exercise.name, c.label)
                assert not REGEX.search(said), (exercise.name, said)
            if c.kind == "source":
                assert c.expect, (exercise.name, c.label)
