"""The report of a followed trace made before the program's end (stages.Ahead): once the trace
file says it is whole (the tracer's context_end marks, or its end record), the follower's thread
draws the timeline, writes trace.json and makes the report while CUDA tears the program down;
after the run collect() takes it only when it was made of the very trace read.

The traces are recorded ones (an H200's) written as the tracer writes them: no GPU here."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from idrrun.profile import perfetto, summary, tracefile
from idrrun.profile.model import ProfilePlan
from idrrun.profile.render import ProfileView
from idrrun.profile.stages import TIMELINE_FILE, TRACE_JSON_FILE, Ahead, Work, collect
from idrrun.profile.tracefile import Follower, read_trace

from test_profile import needs_cupti, run_writer

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
RECORDED = DATA / "async_trace_h200.jsonl"  # one process, one context (1), its end record last


def _operations(path: Path = RECORDED) -> list[str]:
    """The recorded trace's lines but its end record."""
    return [line for line in path.read_text().splitlines(keepends=True)
            if '"type":"end"' not in line]


def _mark(context: int) -> str:
    return json.dumps({"type": "context_end", "context": context}, separators=(",", ":")) + "\n"


def _until(done: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _followed(run: Path) -> tuple[ProfilePlan, Follower]:
    """A shown profile's plan in `run` and its follower with its Ahead, as the pipeline makes
    them (running.Tracer)."""
    plan = ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=run,
                       output=run / "trace.jsonl")
    assert plan.output is not None
    prepared = perfetto.Prepared()
    return plan, Follower(plan.output, prepared, ahead=Ahead(plan, Work(), prepared))


def _as_read_afresh(plan: ProfilePlan, tmp_path: Path) -> tuple[str, bytes, str]:
    """The report's text, picture and trace.json of the same file read after the run alone, in
    a folder of its own (nothing made during the run)."""
    assert plan.output is not None
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "trace.jsonl").write_bytes(plan.output.read_bytes())
    report = collect(ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=alone,
                                 output=alone / "trace.jsonl"))
    assert report.timeline_png is not None and report.trace_json is not None
    return (str(ProfileView(report)).replace(str(alone), str(plan.run_dir)),
            report.timeline_png.read_bytes(), report.trace_json.read_text())


def test_the_picture_is_made_once_every_context_with_operations_is_marked_ended(
        tmp_path: Path) -> None:
    """Two contexts: the mark of the first leaves the second's records to come, and nothing is
    drawn; the second's mark makes the picture and trace.json at once, before the end record,
    and collect() gives what the same file read afresh gives."""
    run = tmp_path / "run"
    run.mkdir()
    plan, follower = _followed(run)
    assert plan.output is not None
    lines = _operations()
    other = [line.replace('"context":1', '"context":2') for line in lines[1:4]]
    with follower, open(plan.output, "w") as out:
        out.write("".join(lines) + "".join(other) + _mark(1))
        out.flush()
        _until(lambda: follower.read_bytes == plan.output.stat().st_size, "not read")  # type: ignore[union-attr]
        time.sleep(0.3)
        assert not (run / TIMELINE_FILE).exists(), "drawn while a context had records to come"
        out.write(_mark(2))
        out.flush()
        _until(lambda: (run / TIMELINE_FILE).exists() and (run / TRACE_JSON_FILE).exists(),
               "not drawn once every context was marked ended")
        out.write('{"type":"end","records":26,"dropped":0}\n')
    report = collect(plan, follower=follower)
    text, png, exported = _as_read_afresh(plan, tmp_path)
    assert report.trace is not None and report.trace.complete
    assert str(ProfileView(report)) == text
    assert report.timeline_png is not None and report.timeline_png.read_bytes() == png
    assert report.trace_json is not None and report.trace_json.read_text() == exported


def test_records_after_the_mark_are_drawn_again(tmp_path: Path) -> None:
    """A context marked ended, then more work (a program that made a context again): what was
    made at the mark is not what is shown; the report, its picture and trace.json are those of
    the whole file."""
    run = tmp_path / "run"
    run.mkdir()
    plan, follower = _followed(run)
    assert plan.output is not None
    lines = _operations()
    half = len(lines) // 2
    with follower, open(plan.output, "w") as out:
        out.write("".join(lines[:half]) + _mark(1))
        out.flush()
        _until(lambda: (run / TIMELINE_FILE).exists(), "not drawn at the mark")
        early = (run / TIMELINE_FILE).read_bytes()
        out.write("".join(lines[half:]) + '{"type":"end","records":23,"dropped":0}\n')
    report = collect(plan, follower=follower)
    text, png, exported = _as_read_afresh(plan, tmp_path)
    assert str(ProfileView(report)) == text
    assert report.timeline_png is not None and report.timeline_png.read_bytes() == png != early
    assert report.trace_json is not None and report.trace_json.read_text() == exported


def test_a_followed_trace_without_a_mark_is_reported_after_the_run(tmp_path: Path) -> None:
    """A program killed before its end (no mark, no end record): nothing is made during the
    run, and the report after it says the trace stops early, as the file read afresh does."""
    run = tmp_path / "run"
    run.mkdir()
    plan, follower = _followed(run)
    assert plan.output is not None
    with follower, open(plan.output, "w") as out:
        out.write("".join(_operations()))
        out.flush()
        _until(lambda: follower.read_bytes == plan.output.stat().st_size, "not read")  # type: ignore[union-attr]
        time.sleep(0.2)
        assert not (run / TIMELINE_FILE).exists()
    report = collect(plan, follower=follower)
    assert any("stops early" in note for note in report.notes)
    assert str(ProfileView(report)) == _as_read_afresh(plan, tmp_path)[0]


def test_the_follower_wakes_on_the_trace_writes_and_at_the_run_end_not_on_a_timer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With its timer at a minute, the follower still reads each write at once (the folder's
    inotify watch) and stops at once when the run ends (its wake pipe)."""
    monkeypatch.setattr(Follower, "POLL_SECONDS", 60.0)
    path = tmp_path / "trace.jsonl"
    lines = _operations()
    follower = Follower(path)
    with follower, open(path, "w") as out:
        for part in (lines[:5], lines[5:]):
            out.write("".join(part))
            out.flush()
            size = path.stat().st_size
            _until(lambda: follower.read_bytes == size, "a write not read within 20 s", 20.0)
        start = time.monotonic()
    assert time.monotonic() - start < 5.0, "the follower did not stop at the run's end"
    assert read_trace(path, follower) == read_trace(path)


def test_a_mark_named_by_an_older_reader_is_passed_over() -> None:
    """Version 3 readers ignore unknown records: a context_end line changes nothing of what the
    trace says (the tracer's format stays readable both ways)."""
    lines = _operations() + ['{"type":"end","records":23,"dropped":0}\n']
    with_mark, _ = tracefile.parse_lines([*lines[:-1], _mark(1), lines[-1]])
    without, _ = tracefile.parse_lines(lines)
    assert with_mark == without and with_mark.skipped == 0


WRITES_ITS_OWN_TRACE = r"""
/* Stands in for a GPU program under the built-in tracer (no GPU here): writes a recorded trace
   (argv[1], its end record left out) to IDRRUN_TRACE_FILE and the mark of its context's end, as
   the tracer does when CUDA is about to destroy the context; then, as CUDA's teardown would,
   waits, looking whether idrrun drew the timeline meanwhile; then the end record. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *path = getenv("IDRRUN_TRACE_FILE");
    FILE *in = argc > 1 ? fopen(argv[1], "rb") : NULL;
    if (path == NULL || in == NULL) return 2;
    char folder[4096], picture[4200], exported[4200];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash != NULL) *slash = 0;
    snprintf(picture, sizeof picture, "%s/timeline.png", folder);
    snprintf(exported, sizeof exported, "%s/trace.json", folder);
    FILE *out = fopen(path, "wb");
    static char line[1 << 16];
    while (fgets(line, sizeof line, in) != NULL)
        if (strstr(line, "\"type\":\"end\"") == NULL) fputs(line, out);
    fputs("{\"type\":\"context_end\",\"context\":1}\n", out);
    fflush(out);
    int drawn = 0;
    for (int i = 0; i < 400 && !drawn; i++) {
        usleep(50000);
        drawn = access(picture, F_OK) == 0 && access(exported, F_OK) == 0;
    }
    fputs("{\"type\":\"end\",\"records\":23,\"dropped\":0}\n", out);
    fclose(out);
    puts(drawn ? "drawn before the end" : "not drawn before the end");
    return 0;
}
"""


@needs_cupti
def test_idrrun_run_profile_draws_the_timeline_before_the_program_ends(tmp_path: Path) -> None:
    """`idrrun run --profiler builtin` end to end: the picture and trace.json are in the run's
    folder before the program's end (the program itself sees them), and the report shown is
    the trace's."""
    work = tmp_path / "work"
    done = run_writer(tmp_path, work, WRITES_ITS_OWN_TRACE, RECORDED)
    assert "drawn before the end" in done.stdout and "not drawn" not in done.stdout, done.stdout
    [trace_file] = list((work / "idrrun-profile").glob("*/trace.jsonl"))
    written = read_trace(trace_file)
    assert written is not None and written.complete
    assert "GPU profile (built-in CUPTI tracer): 4 queues" in done.stdout, done.stdout
    assert f"timeline: {trace_file.parent / TIMELINE_FILE}" in done.stdout
    assert (trace_file.parent / TRACE_JSON_FILE).read_text() == perfetto.text(written)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # (its fault)
def test_a_follower_whose_thread_ended_writes_to_no_reused_descriptor(tmp_path: Path) -> None:
    """A follower thread that ends early (a fault of ours while reading) has closed what is
    its own; the run's end then wakes nobody and writes into no file that took a freed
    descriptor's number."""
    from idrrun.profile.tracefile import Follower

    class Failing(Follower):
        def poll(self) -> None:
            raise RuntimeError("a fault of ours")

    trace = tmp_path / "trace.jsonl"
    trace.write_text("")
    follower = Failing(trace)
    follower.__enter__()
    follower._done.wait(5)
    time.sleep(0.05)  # (its descriptors closed after done)
    victims = [open(tmp_path / f"victim{i}", "wb") for i in range(4)]  # noqa: SIM115
    try:
        follower.__exit__(None, None, None)
    finally:
        for f in victims:
            f.close()
    assert all((tmp_path / f"victim{i}").read_bytes() == b"" for i in range(4))


def test_a_tick_after_the_last_kernel_record_says_the_gpu_was_still_at_work() -> None:
    """Format 5: the tracer's helper thread writes a tick (CUPTI's clock, the launches until
    then) while launches are ahead of the kernel records. A run stopped in a long kernel: fewer
    kernel records than launches before the last tick, so the GPU was at work then (its GPU
    time at least until the tick); every launch recorded, the tick says nothing more."""
    copy = ('{"type":"memcpy","start":1000,"end":3000,"device":0,"context":1,"stream":7,'
            '"correlation":1,"bytes":64,"copy":"HtoD","src":"pageable","dst":"device","async":0}\n')
    kernel = ('{"type":"kernel","start":4000,"end":5000,"device":0,"context":1,"stream":7,'
              '"correlation":2,"grid":[1,1,1],"block":[1,1,1],"name":"main$_omp_fn$0"}\n')
    tick = '{"type":"tick","at":9001000,"launched":%d}\n'
    stopped, _ = tracefile.parse_lines([copy, kernel, tick % 2])
    assert stopped.busy_after == 9_001_000 and not stopped.complete
    values = summary.trace_values(stopped)
    assert values["gpu_span_s"] == pytest.approx(4e-6)
    assert values["gpu_span_at_least_s"] == pytest.approx(9e-3)
    ended, _ = tracefile.parse_lines([copy, kernel, tick % 1])
    assert ended.busy_after == 0
    assert summary.trace_values(ended)["gpu_span_at_least_s"] == pytest.approx(4e-6)
    merged = tracefile.merge([ended, stopped])
    assert merged.busy_after == 9_001_000
    # Records lost for another reason (CUPTI dropped some) say nothing of a kernel still running.
    dropped, _ = tracefile.parse_lines([copy, kernel, '{"type":"dropped","count":3}\n', tick % 2])
    assert dropped.busy_after == 0
