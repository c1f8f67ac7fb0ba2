"""A limit relative to the solution's time (`timeout = "20x solution, at least 1 s"`): grading
runs the solution first and stops a program already far slower than it, saying so; so does a
notebook's --check where the course has the solution, unless its line gives --timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from idrrun import checking, pipeline, toolchains
from idrrun.checks import specs
from idrrun.grading import grader
from idrrun.grading.discover import Submission
from idrrun.grading.session import Session
from idrrun.model import Failure, FailureKind
from idrrun.profile.model import Hint
from idrrun.request import config, resolve
from idrrun.request import source as source_mod
from idrrun.request.options import Options

SPEC = """
name = "quick"
timeout = {timeout}
[sources.c]
exercise = "quick.c"
solution = "quick.c"
[args]
host = ["3"]
[[check]]
kind = "exit_ok"
"""
RELATIVE = '"20x solution, at least 1 s, at most 6 s"'


def _course(tmp_path: Path, timeout: str = RELATIVE) -> Path:
    examples = tmp_path / "examples"
    examples.mkdir(exist_ok=True)
    (examples / "quick.c").write_text('#include <stdio.h>\nint main(void){puts("3");return 0;}\n')
    (examples / "quick.toml").write_text(SPEC.format(timeout=timeout))
    return examples / "quick.toml"


def _slow(tmp_path: Path) -> Path:
    slow = tmp_path / "slow.c"
    slow.write_text("int main(void){for(;;){}}\n")
    return slow


def test_the_phrase_reads_into_a_factor_a_floor_and_a_cap(tmp_path: Path) -> None:
    ex = specs.load(_course(tmp_path))
    assert ex.relative_timeout == specs.RelativeTimeout(20.0, 1.0) and ex.timeout == 6.0
    assert ex.relative_timeout.limit(0.01, ex.timeout) == 1.0  # the floor
    assert ex.relative_timeout.limit(0.1, ex.timeout) == 2.0
    assert ex.relative_timeout.limit(1.0, ex.timeout) == 6.0  # never above the cap
    plain = specs.load(_course(tmp_path, '"5x solution"'))
    assert plain.relative_timeout == specs.RelativeTimeout(5.0, 0.0)
    assert plain.timeout == specs.DEFAULT_TIMEOUT  # no "at most": the default
    assert specs.load(_course(tmp_path, "120")).relative_timeout is None


@pytest.mark.parametrize("timeout", ['"20 solution"', '"20x solution, at least 5"',
                                     '"20x solution, at least 9 s, at most 5 s"',
                                     '"0x solution"', '"20x solution, at most 5 s, at most 9 s"',
                                     '"fast"', "0", "true"])
def test_a_wrong_timeout_names_the_field(tmp_path: Path, timeout: str) -> None:
    with pytest.raises(Exception) as err:
        specs.load(_course(tmp_path, timeout))
    assert "timeout" in str(err.value) and "quick.toml" in str(err.value), str(err.value)


def test_a_graded_run_far_slower_than_the_solution_is_stopped_at_the_relative_limit(
        tmp_path: Path) -> None:
    settings = config.load(tmp_path, environ={})
    probe = toolchains.probe(settings, "gcc")
    slow = _slow(tmp_path)
    started = time.monotonic()
    row = grader.grade_one(Session(settings, probe, sandbox="none (test)"),
                              Submission("slow", slow, source_mod.from_file(slow, "c", "slow.c")),
                              specs.load(_course(tmp_path)))
    took = time.monotonic() - started
    assert row.status == "fail" and row.failure is FailureKind.TIMEOUT
    assert row.failure_what.startswith("stopped at 1 s: the solution takes 0."), row.failure_what
    assert row.failure_what.endswith(" s (20x the solution's time, at least 1 s)"), row.failure_what
    assert "stopped at 1 s: the solution takes" in row.reasons, row.reasons
    # Why it is slow, never to raise --timeout: a graded run's limit is the grader's.
    assert row.failure_hint == checking.SLOW_UNKNOWN and "--timeout" not in row.failure_hint
    assert took < 5.5, took  # not the absolute 6 s


def _notebook_check(tmp_path: Path, line: Options) -> Failure | None:
    settings = config.load(tmp_path, environ={})
    probe = toolchains.probe(settings, "gcc")
    exercise = specs.load(_course(tmp_path, '"20x solution, at least 1 s, at most 3 s"'))
    src = source_mod.from_file(_slow(tmp_path), "c", "slow.c")
    request, toolchain = resolve.resolve(line, src, tmp_path, settings, probe, exercise)
    return checking.execute_checked(pipeline.prepare(request, toolchain, probe, settings),
                                    exercise).failure


def test_a_notebook_check_is_bounded_by_the_solution_here_unless_its_line_sets_a_limit(
        tmp_path: Path) -> None:
    """A --check where the course has the solution runs it first (once, cached) and bounds the
    run by its time here, saying why it may be slow and how to let it run; the line's
    --timeout is the student's own limit, in place of both."""
    stopped = _notebook_check(tmp_path, Options())
    assert stopped is not None and stopped.kind is FailureKind.TIMEOUT
    assert stopped.what.startswith("stopped at 1 s: the solution takes 0."), stopped.what
    assert stopped.limit == checking.SOLUTION_LIMIT
    assert stopped.hint == (checking.SLOW_UNKNOWN + " " + checking.LET_IT_RUN.format(seconds=3)), \
        stopped.hint
    own = _notebook_check(tmp_path, Options(timeout=2.0))
    assert own is not None and own.kind is FailureKind.TIMEOUT
    assert own.what.startswith("timed out after 2 s"), own.what
    assert own.limit is None


def test_data_laplace_bounds_a_graded_run_by_its_solution() -> None:
    """Its start file takes ~117 s on a GPU against ~1 s for the solution: graded, ~14 s."""
    from conftest import ROOT

    ex = specs.load(ROOT / "examples" / "data_laplace.toml")
    assert ex.relative_timeout == specs.RelativeTimeout(10.0, 10.0) and ex.timeout == 180.0
    assert ex.relative_timeout.limit(1.4, ex.timeout) == 14.0
    assert ex.relative_timeout.limit(0.5, ex.timeout) == 10.0


def test_a_stopped_run_is_told_why_in_the_lessons_words_with_what_its_trace_measured() -> None:
    """On a GPU the stopped run's trace still holds the copies it made (the built-in tracer
    writes as it goes): the hint's figure joins the lesson's words, or says why alone."""
    copies = Hint("data_region", "warning", "the arrays cross between host and GPU again and "
                  "again: open a data region", "a block of 128 MiB went host→device 840 times")
    idle = Hint("gpu_idle", "info", "the GPU waits for the host", "idle 40 %")
    lesson = "the start file moves both arrays at every construct"
    assert checking.why_slow(lesson, (idle, copies)) == (
        "the start file moves both arrays at every construct (measured in this run: a block of "
        "128 MiB went host→device 840 times).")
    assert checking.why_slow("", (copies,)).startswith("the arrays cross between host and GPU")
    assert checking.why_slow(lesson + ".", ()) == lesson + "."
    assert checking.why_slow("", ()) == checking.SLOW_UNKNOWN
