"""run/proc: spawn, pump with a deadline, finish — on real processes, without the jail."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from idrrun.model import Limits, ProcResult
from idrrun.run import proc


def test_run_captures_output_and_exit_code() -> None:
    r = proc.run(["sh", "-c", "echo out; echo err >&2; exit 3"], what="run", timeout=10)
    assert r.returncode == 3 and not r.ok and "out" in r.output and "err" in r.output
    assert r.describe() == "exit code 3"


def test_cannot_start_is_a_result() -> None:
    r = proc.run(["/no/such/program"], what="run", timeout=5)
    assert r.returncode is None and r.start_error and r.describe().startswith("could not start")


def test_deadline_kills_the_group() -> None:
    start = time.monotonic()
    r = proc.run(["sh", "-c", "sleep 30 & sleep 30; wait"], what="run", timeout=0.5)
    assert r.timed_out and time.monotonic() - start < 3


def test_output_streams_as_written_on_a_terminal() -> None:
    seen: list[tuple[float, str]] = []
    start = time.monotonic()
    spec = proc.ProcSpec(terminal=True,
                         on_output=lambda text: seen.append((time.monotonic() - start, text)))
    r = proc.run(["sh", "-c", "echo one; sleep 0.6; echo two"], what="run", timeout=10, spec=spec)
    assert r.ok and r.output == "one\ntwo\n"
    first = next(t for t, text in seen if "one" in text)
    assert first < 0.5  # the first line arrived before the program ended


def test_output_cap_truncates_and_says_so() -> None:
    r = proc.run(["sh", "-c", "yes | head -c 100000"], what="run", timeout=10,
                 spec=proc.ProcSpec(max_output=1000))
    assert r.truncated and "output truncated at 1000 bytes" in r.output


def test_stdin_file_and_closed_stdin(tmp_path: Path) -> None:
    data = tmp_path / "in.txt"
    data.write_text("42\n")
    limits = Limits(memory=None, tasks=None, file_size=None, stdin=data)
    assert proc.run(["cat"], what="run", timeout=5,
                    spec=proc.ProcSpec(limits=limits)).output == "42\n"
    assert proc.run(["cat"], what="run", timeout=5).output == ""  # /dev/null: EOF at once
    missing = Limits(memory=None, tasks=None, file_size=None, stdin=tmp_path / "nope")
    r = proc.run(["cat"], what="run", timeout=5, spec=proc.ProcSpec(limits=missing))
    assert r.start_error is not None and "standard input file" in r.start_error


def test_spawn_pump_finish_in_steps() -> None:
    running = proc.spawn(["sh", "-c", "echo hi; exit 7"], what="run")
    assert isinstance(running, proc.Running)
    ending = proc.pump(running, proc.Deadline.after(10))
    assert ending == proc.EXITED
    result = proc.finish(running, ending)
    assert isinstance(result, ProcResult) and result.returncode == 7 and result.output == "hi\n"


def test_deadline() -> None:
    d = proc.Deadline.after(0.05)
    assert 0 < d.remaining() <= 0.05
    time.sleep(0.06)
    assert d.remaining() <= 0


def test_signal_is_named() -> None:
    r = proc.run(["sh", "-c", "kill -SEGV $$"], what="run", timeout=5)
    assert r.signal_name == "SIGSEGV" and r.describe() == "killed by SIGSEGV"


def test_nothing_left_after_a_timeout() -> None:
    r = proc.run(["sh", "-c", "sleep 100.25 & sleep 100.25"], what="run", timeout=0.3)
    assert r.timed_out
    left = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry / "cmdline").read_bytes() == b"sleep\x00100.25\x00":
                left.append(entry.name)
        except OSError:
            continue
    assert left == []


def test_output_is_read_to_its_end_not_to_a_quiet_moment() -> None:
    """A writer that outlives the main child (in a session of its own, so the group kill does
    not reach it) and writes after a pause longer than any scheduling delay: its line is read,
    because the output is read until its end (EOF/EIO), not until 20 ms pass without data, as
    before. The same wait covers a pty that hands over the program's last lines late, under load."""
    for terminal in (True, False):
        start = time.monotonic()
        # (the main child waits until the writer has had time to leave its group)
        r = proc.run(["sh", "-c", "setsid sh -c 'sleep 0.5; echo late' & sleep 0.2; echo early"],
                     what="run", timeout=10, spec=proc.ProcSpec(terminal=terminal))
        assert r.ok and "early" in r.output and "late" in r.output, (terminal, r.output)
        assert time.monotonic() - start < 5


def test_stop_all_ends_runs_in_other_threads_and_starts_none_until_resumed() -> None:
    results: list[ProcResult] = []
    watcher = threading.Thread(target=lambda: results.append(
        proc.run(["sleep", "30"], what="run", timeout=60)))
    watcher.start()
    time.sleep(0.3)
    start = time.monotonic()
    proc.stop_all()
    try:
        watcher.join(timeout=10)
        took = time.monotonic() - start
        refused = proc.run(["true"], what="run", timeout=5)
    finally:
        proc.resume()
    assert not watcher.is_alive() and took < 2.0, took
    assert results[0].interrupted and not results[0].timed_out
    assert refused.interrupted and refused.returncode is None
    assert proc.run(["true"], what="run", timeout=5).ok


def test_a_runs_time_is_never_less_than_it_took(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parent kept off the CPU right after the process started (a loaded machine) must not
    shorten the run's time: a 200 ms sleep is at least 200 ms, however late the parent looks.
    (Its clock once started after Popen: a 500 ms sleep was measured 0.499 s.)"""
    watch = proc._watch

    def late(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.15)  # the child sleeps meanwhile
        return watch(*args, **kwargs)

    monkeypatch.setattr(proc, "_watch", late)
    r = proc.run(["sleep", "0.2"], what="run", timeout=10)
    assert r.ok and r.seconds >= 0.2, r.seconds
