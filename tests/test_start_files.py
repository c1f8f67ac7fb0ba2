"""Start files are cheap to check, and a run far beyond the solution's time says so: `course
check` runs a start file with the host arguments (unless its spec says it needs the GPU's), and
a graded run that times out is told how long the solution takes with the same arguments."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conftest import ROOT
from idrrun import checking, toolchains
from idrrun.checks import specs
from idrrun.grading import course, grader
from idrrun.grading.discover import Submission
from idrrun.grading.rows import GradeRow
from idrrun.grading.session import Session
from idrrun.model import FailureKind
from idrrun.request import config
from idrrun.request import source as source_mod


def test_a_start_file_is_checked_at_the_host_arguments_or_its_own() -> None:
    ex = specs.load(ROOT / "examples" / "tiling_laplace.toml")
    assert ex.gpu_args != ex.host_args and ex.start_args == "host"
    start = ex.as_start_file()
    assert start.gpu_args == ex.host_args and start.host_args == ex.host_args
    needs_gpu = dataclasses.replace(ex, start_args="gpu")
    assert needs_gpu.as_start_file() is needs_gpu
    # data_laplace's C start file moves fixed-size arrays on a GPU whatever n: fewer iterations.
    laplace = specs.load(ROOT / "examples" / "data_laplace.toml")
    assert laplace.start_args == ("256", "20")
    own = laplace.as_start_file()
    assert own.host_args == own.gpu_args == ("256", "20")


@pytest.mark.parametrize("start, message", [("'both'", "got 'both'"), ("[['1']]", "a list of arguments"),
                                            ("3", "got 3")])
def test_a_wrong_start_is_named_with_what_it_may_be(tmp_path: Path, start: str, message: str) -> None:
    text = (ROOT / "examples" / "intro_pi.toml").read_text().replace(
        "[args]\n", f"[args]\nstart = {start}\n", 1)
    (tmp_path / "intro_pi.toml").write_text(text)
    for folder in ("C", "Fortran"):
        (tmp_path / folder).mkdir()
        for source in (ROOT / "examples" / folder).glob("intro_pi_*"):
            (tmp_path / folder / source.name).write_text(source.read_text())
    with pytest.raises(Exception) as err:
        specs.load(tmp_path / "intro_pi.toml")
    assert "args.start" in str(err.value) and message in str(err.value), str(err.value)


def test_course_check_gives_start_files_their_host_arguments(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """What each row of `course check` is graded with: the solutions with the exercise as it is,
    the start files with the GPU arguments replaced by the host's, unless [args] start says
    "gpu" or gives its own."""
    seen: dict[str, tuple[str, ...]] = {}

    def record(session: Session, sub: Submission, exercise: specs.Exercise) -> object:
        seen[sub.student] = exercise.gpu_args
        return GradeRow(sub.student, exercise.name, "c", "fail", 0.0, 0.0, str(sub.path))

    monkeypatch.setattr(course, "grade_one", record)
    ex = specs.load(ROOT / "examples" / "tiling_laplace.toml")
    settings = config.load(tmp_path, environ={})
    probe = toolchains.probe(settings, "gcc")
    course.course_check(Session(settings, probe, exercises=(
        ex, dataclasses.replace(ex, name="laplace_gpu_start", start_args="gpu"),
        dataclasses.replace(ex, name="laplace_own_start", start_args=("9", "3")))), ["c"])
    assert seen == {"tiling_laplace/c/solution": ex.gpu_args, "tiling_laplace/c/start": ex.host_args,
                    "laplace_gpu_start/c/solution": ex.gpu_args,
                    "laplace_gpu_start/c/start": ex.gpu_args,
                    "laplace_own_start/c/solution": ex.gpu_args,
                    "laplace_own_start/c/start": ("9", "3")}


def test_the_timeout_reason_against_the_solution_s_time() -> None:
    assert checking.timed_out_against("timed out after 60 s", 60, 2.1) == (
        "timed out after 60 s; the solution runs in 2.1 s with these arguments: a loop left on "
        "the host?")
    assert checking.timed_out_against("timed out after 60 s", 60, 20.0) == (
        "timed out after 60 s; the solution runs in 20.0 s with these arguments")
    assert "runs in 0.004 s" in checking.timed_out_against("timed out after 2 s", 2, 0.004)


SPEC = """
name = "quick"
timeout = 2
[sources.c]
exercise = "quick.c"
solution = "quick.c"
[args]
host = ["3"]
[[check]]
kind = "exit_ok"
"""


def test_a_graded_run_that_times_out_is_told_the_solution_s_time(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "quick.c").write_text('#include <stdio.h>\nint main(void){puts("3");return 0;}\n')
    (examples / "quick.toml").write_text(SPEC)
    slow = tmp_path / "slow.c"
    slow.write_text("int main(void){for(;;){}}\n")
    settings = config.load(tmp_path, environ={})
    probe = toolchains.probe(settings, "gcc")
    row = grader.grade_one(Session(settings, probe, sandbox="none (test)"),
                              Submission("slow", slow, source_mod.from_file(slow, "c", "slow.c")),
                              specs.load(examples / "quick.toml"))
    assert row.status == "fail" and row.failure is FailureKind.TIMEOUT
    assert row.failure_what.startswith("timed out after 2 s; the solution runs in 0.")
    assert row.failure_what.endswith(" s with these arguments: a loop left on the host?")
    assert "a loop left on the host?" in row.reasons
