"""A long run is visible and bounded in a cell (issue 45.6): while the program runs the cell
shows how long it has been running, one display updated in place (not a stream of outputs, in
the kernel's messages nor in what nbclient stores), emptied when the run ends; a --check cell
whose program runs far beyond the solution's time here is stopped at the exercise's limit
relative to that time, told why it is slow in the lesson's words and how to let it run
(--timeout on the line), and, let run, finishes."""

from __future__ import annotations

import io
import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pexpect
import pytest
from nbclient import NotebookClient

from conftest import ROOT, Kernel
from idrrun.run import proc

SLEEPER = """%%idrrun
#include <stdio.h>
#include <unistd.h>
int main(void) {
    printf("before the wait\\n");
    fflush(stdout);
    sleep(3);
    printf("after the wait\\n");
    return 0;
}
"""
ELAPSED = re.compile(r"^running… (\d+) s\b")

SPEC = """\
name = "slowpoke"
timeout = "5x solution, at least 1 s, at most 30 s"
slow = "the start file waits 3 s at every step where the solution waits for nothing"
[sources.c]
exercise = "C/slowpoke_exercise.c"
solution = "C/slowpoke_solution.c"
[args]
host = []
[[check]]
kind = "exit_ok"
"""
PROGRAM = ('#include <stdio.h>\n#include <unistd.h>\n'
           'int main(void) {{ {wait}puts("done"); return 0; }}\n')


def _course(root: Path) -> None:
    """ROOT/examples: "slowpoke", whose solution returns at once and whose start file sleeps."""
    examples = root / "examples"
    (examples / "C").mkdir(parents=True, exist_ok=True)
    (examples / "slowpoke.toml").write_text(SPEC)
    (examples / "C" / "slowpoke_exercise.c").write_text(PROGRAM.format(wait="sleep(3); "))
    (examples / "C" / "slowpoke_solution.c").write_text(PROGRAM.format(wait=""))


def _elapsed(data: dict[str, object]) -> str:
    return str(data.get("text/plain", ""))


def test_a_run_is_told_its_time_every_second_from_its_start() -> None:
    ticks: list[float] = []
    p = proc.run(["sleep", "2.5"], what="run", timeout=10, spec=proc.ProcSpec(on_tick=ticks.append))
    assert p.ok
    assert [round(t) for t in ticks] == [1, 2], ticks
    quick: list[float] = []
    assert proc.run(["true"], what="run", timeout=10, spec=proc.ProcSpec(on_tick=quick.append)).ok
    assert quick == []  # a run shorter than a second says nothing


def test_a_running_program_shows_its_time_in_one_display_updated_in_place(kernel: Kernel) -> None:
    r = kernel.run(SLEEPER)
    assert r.status == "ok", r.error_text
    assert "before the wait" in r.stdout and "after the wait" in r.stdout
    # The output still streams as it comes: the first line long before the second.
    before = next(c.at for c in r.chunks if "before the wait" in c.text)
    after = next(c.at for c in r.chunks if "after the wait" in c.text)
    assert after - before > 2.0, (before, after)
    assert "running…" not in r.stdout  # the display is not part of the text
    ids = [i for i in r.display_ids if i is not None]
    assert len(ids) == 1, r.display_ids  # one display...
    assert ELAPSED.match(_elapsed(r.displays[r.display_ids.index(ids[0])])), r.displays
    assert {i for i, _ in r.updates} == set(ids), r.updates  # ...updated in place
    shown = [_elapsed(data) for _, data in r.updates]
    seconds = [int(m[1]) for text in shown if (m := ELAPSED.match(text))]
    assert len(seconds) >= 1 and seconds == sorted(seconds) and seconds[-1] >= 2, shown
    assert shown[-1] == "", shown  # replaced by the normal output at the end


def test_nbclient_stores_one_output_for_the_elapsed_time(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%load_ext idrrun"),
                                         nbformat.v4.new_code_cell(SLEEPER)])
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[1].outputs
    displays = [o for o in outputs if o.output_type == "display_data"]
    assert len(displays) == 1, outputs
    assert displays[0].data.get("text/plain", "") == "", displays  # emptied at the end
    text = "".join(o.text for o in outputs if o.output_type == "stream")
    assert "before the wait" in text and "after the wait" in text and "exit 0" in text


def test_a_terminal_run_shows_its_time_on_one_line(tmp_path: Path) -> None:
    program = tmp_path / "sleeper.c"
    program.write_text(SLEEPER.split("\n", 1)[1])
    child = pexpect.spawn(sys.executable, ["-m", "idrrun", "run", str(program)], cwd=tmp_path,
                          env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
                               "NO_COLOR": "1", "TERM": "xterm"},
                          encoding="utf-8", timeout=60)
    child.logfile_read = seen = io.StringIO()
    child.expect("before the wait")
    child.expect(r"running… 2 s")
    child.expect("after the wait")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    said = seen.getvalue()
    assert "exit 0" in said
    # The status line, after the program's line, is erased before its next one.
    assert re.search("before the wait\r\n\r\x1b\\[Krunning… 1 s.*\r\x1b\\[Kafter the wait", said,
                     re.DOTALL), said


def test_a_check_far_slower_than_the_solution_is_stopped_and_told_how_to_let_it_run(
        kernel: Kernel) -> None:
    _course(kernel.cwd)
    cell = "%%idrrun --check slowpoke\n" + PROGRAM.format(wait="sleep(3); ")
    started = time.monotonic()
    r = kernel.run(cell)
    took = time.monotonic() - started
    assert r.status == "error", r.stdout
    said = r.error_text
    assert "stopped at 1 s: the solution takes " in said, said
    assert "5x the solution's time, at least 1 s" in said, said
    assert "the start file waits 3 s at every step" in said, said  # the lesson's why
    assert "--timeout 30" in said, said  # how to let it run
    assert took < 3.0 + 2.0, took  # stopped, not run to its end (the build counted in)
    let_run = kernel.run(cell.replace("--check slowpoke", "--check slowpoke --timeout 30"))
    assert let_run.status == "ok", let_run.error_text
    assert "done" in let_run.stdout and "exit 0" in let_run.stdout
    assert let_run.seconds > 3.0
