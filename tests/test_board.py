"""The class's times board (`idrrun grade --board`, grading/board.py): a small class graded on
the host with a timed check (real gcc, real runs in the sandbox; the timed check itself is
incomplete here, no GPU), its board beside the report: the runs' times as graded, fastest first,
beside the solution's; a failing run unranked, a build failure left off; pseudonyms from the
grader's key, the same on every board, names only when asked, a hostile name escaped."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH
from idrrun.checks import specs
from idrrun.errors import UsageError
from idrrun.grading import board, state
from idrrun.grading import rows as rows_mod
from idrrun.model import CheckResult
from idrrun.request import config, policy

SPEC = """\
name = "timed"
timeout = 20
[sources.c]
exercise = "timed_exercise.c"
solution = "timed_solution.c"
[args]
host = []
[[check]]
kind = "exit_ok"
[[check]]
kind = "value"
label = "result"
pattern = 'result = (\\S+)'
expected = 1
"""
BUSY = """\
[[check]]
kind = "gpu_busy"
label = "GPU busy"
min = 0.5
"""
# A program that sleeps (its time does not depend on the machine's load) and prints a result.
PROGRAM = ('#include <stdio.h>\n#include <time.h>\nint main(void) {{ struct timespec t = {{0, '
           '{ms}000000L}}; nanosleep(&t, 0); printf("result = {result}\\n"); return 0; }}\n')
HOSTILE = "<img src=x onerror=alert(1)>|"
# Each student: (milliseconds slept, result): bob slowest, carl fastest but wrong.
CLASS = {"ann": (50, 1), "bob": (500, 1), "carl": (10, 2), HOSTILE: (250, 1)}


def idrrun(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(folder / "ex"),
               IDRRUN_CACHE_DIR=str(folder / "cache"))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def table(markdown: str) -> list[list[str]]:
    """The board's rows (rank, student, language, time, ratio, verdict, ...)."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")][2:]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("board")
    (folder / "ex").mkdir()
    (folder / "ex" / "timed.toml").write_text(SPEC + BUSY)
    (folder / "ex" / "timed_solution.c").write_text(PROGRAM.format(ms=100, result=1))
    (folder / "ex" / "timed_exercise.c").write_text(PROGRAM.format(ms=0, result=0))
    (folder / "subs").mkdir()
    for name, (ms, result) in CLASS.items():
        (folder / "subs" / f"{name}.c").write_text(PROGRAM.format(ms=ms, result=result))
    (folder / "subs" / "dora.c").write_text("int main(void) { return }\n")  # no run: not on it
    r = idrrun(folder, "grade", "timed", *sorted(str(p) for p in (folder / "subs").iterdir()),
               "--report", "r.csv", "--board", "-j", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    return folder


def test_the_board_ranks_the_runs_beside_the_solution_under_pseudonyms(graded: Path) -> None:
    text = (graded / "r.board.md").read_text()
    rows = table(text)
    # Fastest first among the runs that passed what the host evaluates; carl's wrong result
    # shown after them, unranked; dora's build failed: no run, not on the board.
    assert [r[0] for r in rows] == ["1", "2", "3", "—"], text
    assert [r[5] for r in rows] == ["incomplete"] * 3 + ["fail"], text
    seconds = [float(r[3].removesuffix(" s")) for r in rows]
    assert seconds[0] < seconds[1] < seconds[2], text
    assert 0.5 <= seconds[2] < 5, text  # bob's 500 ms
    solution = float(re.search(r"the solution: c (\S+) s", text).group(1))  # type: ignore[union-attr]
    assert 0.1 <= solution < 5, text
    # (the ratio of the unrounded times: within the rounding of the two shown)
    ratio = seconds[2] / solution
    assert abs(float(rows[2][4].removesuffix("x")) - ratio) < 0.02 * ratio, text
    assert "Not on the board: 1 submission(s) with no finished run." in text
    # Pseudonyms: the grader's keyed ones, no name of the class anywhere.
    key = state.grading_key(policy.grading_settings(config.load(
        graded, environ={"IDRRUN_CACHE_DIR": str(graded / "cache")}, project=False), None, 1))
    named = board.pseudonyms(["ann", HOSTILE, "bob", "carl"], "timed", key)
    assert [r[1] for r in rows] == [named["ann"], named[HOSTILE], named["bob"], named["carl"]]
    page = (graded / "r.board.html").read_text()
    for name in ("ann", "bob", "carl", "dora", "img"):
        assert name not in text and name not in page, name
    # The same on the next board of the exercise (the rows resumed: nothing is run again).
    r = idrrun(graded, "grade", "timed", *sorted(str(p) for p in (graded / "subs").iterdir()),
               "--report", "r.csv", "--board", "--board-page", "boards")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [row[1] for row in table((graded / "r.board.md").read_text())] == [r[1] for r in rows]
    published = graded / "boards" / "timed.html"
    assert published.read_text() == (graded / "r.board.html").read_text()
    assert stat.S_IMODE(published.stat().st_mode) == 0o644
    # The solution's time is the median of its runs, made until they settle (3 to 7).
    assert re.search(r"the solution: c \S+ s \(median of [3-7] runs: \S+–\S+ s\)", text), text


def test_the_published_boards_have_an_index_that_lists_only_their_pages(tmp_path: Path) -> None:
    (tmp_path / "timed.toml").write_text(SPEC + BUSY)
    (tmp_path / "timed_solution.c").write_text("")
    (tmp_path / "timed_exercise.c").write_text("")
    made = board.board([], specs.load(tmp_path / "timed.toml"), b"k" * 32, {})
    published = tmp_path / "boards"
    published.mkdir()
    (published / "older.html").write_text("an earlier exercise's board")
    (published / "shadow.html").symlink_to("/etc/shadow")
    (published / "notes.txt").write_text("")
    written = board.write(made, tmp_path / "r.csv", published)
    assert published / "index.html" in written
    index = (published / "index.html").read_text()
    # The way back to the hub's home and to this index, then the boards.
    assert re.findall(r'href="([^"]+)"', index) == ["../home", "./", "older.html", "timed.html"], index
    assert stat.S_IMODE((published / "index.html").stat().st_mode) == 0o644
    # An exercise named "index" would be its page: refused, nothing overwritten.
    named_index = dataclasses.replace(made, exercise="index")
    with pytest.raises(UsageError, match="would overwrite"):
        board.write(named_index, tmp_path / "r.csv", published)
    assert (published / "index.html").read_text() == index
    # A folder others may write: its names are not the teacher's, nothing is written there.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UsageError, match="writable by others"):
        board.write(made, tmp_path / "s.csv", shared)
    assert not any(shared.iterdir()) and not (tmp_path / "s.board.md").exists()
    linked = tmp_path / "linked"
    linked.symlink_to(published)
    with pytest.raises(UsageError, match="is a link"):
        board.write(made, tmp_path / "s.csv", linked)
    # In a folder others may write (they could rename it, or put a link in its place, between
    # the check and the write): refused, nothing made or written.
    inside = shared / "boards"
    with pytest.raises(UsageError, match="the way to it is not safe"):
        board.write(made, tmp_path / "s.csv", inside)
    assert not inside.exists() and not (tmp_path / "s.board.md").exists()


def test_real_names_only_when_asked_and_escaped(graded: Path) -> None:
    r = idrrun(graded, "grade", "timed", *sorted(str(p) for p in (graded / "subs").iterdir()),
               "--report", "r.csv", "--board", "names")
    assert r.returncode == 0, r.stdout + r.stderr
    text = (graded / "r.board.md").read_text()
    assert [row[1] for row in table(text)] == ["ann", "&lt;img src=x onerror=alert(1)&gt;\\|",
                                               "bob", "carl"], text
    page = (graded / "r.board.html").read_text()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;|" in page, page
    assert "Names: the students&#x27; names." in page


def test_pseudonyms_are_keyed_stable_and_distinct() -> None:
    class_ = [f"student{i}" for i in range(300)]
    one = board.pseudonyms(class_, "timed", b"k" * 32)
    assert one == board.pseudonyms(list(reversed(class_)), "timed", b"k" * 32)
    assert len(set(one.values())) == len(class_)
    other = board.pseudonyms(class_, "timed", b"j" * 32)
    assert sum(one[s] == other[s] for s in class_) < 3  # another key: other names
    # Two words alone (256 pairs) must collide in 300: those that do get more digits.
    short = board.pseudonyms(class_, "timed", b"k" * 32, digits=0)
    assert len(set(short.values())) == len(class_)
    assert any(len(n.split()) == 2 for n in short.values())


def test_timed_figures_and_lanes_are_shown_as_the_grading_measured_them(tmp_path: Path) -> None:
    """On a GPU machine the rows carry their lane and their timed checks' measured figures."""
    (tmp_path / "timed.toml").write_text(SPEC + BUSY)
    (tmp_path / "timed_solution.c").write_text("")
    (tmp_path / "timed_exercise.c").write_text("")
    exercise = specs.load(tmp_path / "timed.toml")

    def row(student: str, seconds: float, busy: str, status: str = "pass",
            times: tuple[float, ...] = ()) -> rows_mod.GradeRow:
        # As grading writes a public check's result: its [[check]]'s index, no kind.
        [spec] = [s for s in exercise.checks if s.kind == "gpu_busy"]
        return rows_mod.GradeRow(student, "timed", "c", "pass" if status == "pass" else "fail",
                               0.1, seconds, student, lane="GPU 0 alone, CPUs 2-3",
                               checks=(CheckResult("GPU busy", status, got=busy, check=spec.index),),
                               run_times=times)

    # z's GPU is not busy enough: a fail of the timed check, a correct program, ranked. x's
    # graded run was its slowest: the median of its runs ranks it; y was run once.
    made = board.board([row("x", 3.5, "61 % (median of 3 runs: 49–63 %)", times=(3.5, 2.0, 1.9)),
                        row("y", 1.0, "80 % (median of 3 runs: 78–81 %)"),
                        row("z", 3.0, "20 % (median of 3 runs: 19–22 %)", "fail", (3.0, 3.1, 2.9))],
                       exercise, b"k" * 32, {"c": (1.4, 1.5, 1.7)}, "names")
    text = board.markdown(made)
    assert made.alone and "each run alone on its GPU" in text
    assert "the solution: c 1.500 s (median of 3 runs: 1.400–1.700 s)" in text, text
    assert table(text) == [
        ["1", "y", "c", "1.000 s", "0.67x", "pass", "GPU 0 alone, CPUs 2-3", "80 % (median of 3 runs: 78–81 %)"],
        ["2", "x", "c", "2.000 s (median of 3 runs: 1.900–3.500 s)", "1.33x", "pass", "GPU 0 alone, CPUs 2-3",
         "61 % (median of 3 runs: 49–63 %)"],
        ["3", "z", "c", "3.000 s (median of 3 runs: 2.900–3.100 s)", "2.00x", "fail", "GPU 0 alone, CPUs 2-3",
         "20 % (median of 3 runs: 19–22 %)"]]


def test_a_boards_folder_others_may_write_is_refused_before_grading(graded: Path) -> None:
    shared = graded / "shared-boards"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    r = idrrun(graded, "grade", "timed", str(graded / "subs" / "dora.c"), "--report", "d.csv",
               "--board", "--board-page", str(shared))
    assert r.returncode == 2 and "writable by others" in r.stderr, r.stdout + r.stderr
    assert not (graded / "d.csv").exists() and not any(shared.iterdir())


def test_an_exercise_without_a_timed_check_has_no_board(tmp_path: Path) -> None:
    (tmp_path / "ex").mkdir()
    (tmp_path / "ex" / "timed.toml").write_text(SPEC)
    (tmp_path / "ex" / "timed_solution.c").write_text(PROGRAM.format(ms=0, result=1))
    (tmp_path / "ex" / "timed_exercise.c").write_text(PROGRAM.format(ms=0, result=0))
    (tmp_path / "a.c").write_text(PROGRAM.format(ms=0, result=1))
    r = idrrun(tmp_path, "grade", "timed", "a.c", "--report", "r.csv", "--board")
    assert r.returncode == 2 and "has no timed check" in r.stderr, r.stdout + r.stderr
    r = idrrun(tmp_path, "grade", "timed", "a.c", "--board")
    assert r.returncode == 2 and "give --report FILE" in r.stderr, r.stdout + r.stderr


def test_the_solution_runs_until_its_times_settle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """checking.solution_times: the kept run first (its first on the machine: slow), then more
    of the same build until the last 3 settle within 10 % (measure.REPEAT), 7 at most."""
    from types import SimpleNamespace

    from idrrun import checking, pipeline, toolchains
    from idrrun.request import resolve
    from idrrun.request import source as source_mod
    from idrrun.request.options import Options

    (tmp_path / "timed.toml").write_text(SPEC + BUSY)
    (tmp_path / "timed_solution.c").write_text(PROGRAM.format(ms=0, result=1))
    (tmp_path / "timed_exercise.c").write_text(PROGRAM.format(ms=0, result=0))
    exercise = specs.load(tmp_path / "timed.toml")
    settings = config.load(tmp_path, environ={"IDRRUN_CACHE_DIR": str(tmp_path / "cache")})
    probe = toolchains.probe(settings, "gcc")
    src = source_mod.from_file(tmp_path / "timed_solution.c", "c", "timed_solution.c")
    request, toolchain = resolve.resolve(Options(), src, tmp_path, settings, probe, exercise)

    def measured(first: float, then: list[float]) -> tuple[float, ...]:
        monkeypatch.setattr(checking, "solution_output",
                            lambda *a, **k: checking.SolutionRun("result = 1\n", seconds=first))
        runs = iter(then)
        monkeypatch.setattr(checking.pipeline, "execute", lambda *a, **k: SimpleNamespace(
            failure=None, run=SimpleNamespace(proc=SimpleNamespace(seconds=next(runs)))))
        return checking.solution_times(pipeline.prepare(request, toolchain, probe, settings),
                                       exercise)

    assert measured(5.7, [2.3, 2.4, 2.35, 9.0]) == (5.7, 2.3, 2.4, 2.35)  # the slow first one stays
    assert measured(1.0, [1.02, 0.99, 5.0]) == (1.0, 1.02, 0.99)
    assert measured(1.0, [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]) == (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)
