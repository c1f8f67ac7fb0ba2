"""Timed checks are measured, not sampled once (checks/measure.py, trace_kinds.measured_result, and
checking's repetition of a timed run): a stable figure's median decides, with its spread; one
that does not settle is incomplete, never a fail from noise. No GPU here: the figures are fakes,
the runs real."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from idrrun import checking, pipeline, toolchains
from idrrun.checks import measure, specs, trace_kinds, verdict
from idrrun.checks.measure import Figure, Measured, Repeat
from idrrun.pipeline import Outcome
from idrrun.request import config, resolve
from idrrun.request import source as source_mod
from idrrun.request.options import Options

BUSY = specs.CheckSpec(kind="gpu_busy", label="GPU busy", min_share=0.5)


def run_of(values: list[float]) -> tuple[list[int], measure.Again]:
    """A fake `again`: each call one more run, its figure the next value."""
    calls = [0]
    feed = iter(values)

    def again() -> dict[str, Figure]:
        calls[0] += 1
        return {"GPU busy": Figure(next(feed))}

    return calls, again


def test_a_stable_figure_takes_the_least_runs() -> None:
    calls, again = run_of([0.61, 0.58])
    got = measure.repeat({"GPU busy": Figure(0.59)}, again)["GPU busy"]
    assert calls == [2] and got.samples == (0.59, 0.61, 0.58) and got.stable
    result = trace_kinds.measured_result(BUSY, got)
    assert result.status == "pass" and result.got == "59 % (median of 3 runs: 58–61 %)"


def test_a_figure_that_settles_late_and_one_that_never_does() -> None:
    # An outlier first (a cold start), then stable: the last three decide.
    calls, again = run_of([0.58, 0.60, 0.59])
    got = measure.repeat({"GPU busy": Figure(0.20)}, again)["GPU busy"]
    assert calls == [3] and got.stable and got.median == pytest.approx(0.585)
    # Never stable, the runs on both sides of the bound: incomplete after `most` runs.
    calls, again = run_of([0.7, 0.45, 0.6, 0.35, 0.65, 0.4, 0.9])
    got = measure.repeat({"GPU busy": Figure(0.3)}, again)["GPU busy"]
    assert calls == [6] and len(got.samples) == Repeat().most and not got.stable
    result = trace_kinds.measured_result(BUSY, got)
    assert result.status == "incomplete", result
    assert result.got.startswith("45 % (median of 7 runs: 30–70 %)")
    assert "not stable over 7 runs" in result.reason and "the runs disagree" in result.reason
    # Never stable, but every run below the bound: that is no noise, it fails.
    calls, again = run_of([0.3, 0.1, 0.25, 0.05, 0.2, 0.12])
    result = trace_kinds.measured_result(BUSY, measure.repeat({"GPU busy": Figure(0.15)}, again)["GPU busy"])
    assert result.status == "fail" and result.got.endswith(", not stable")
    assert "every one of the 7 runs says so" in result.reason


def test_an_exact_figure_is_one_run_and_a_failed_run_stops_the_measure() -> None:
    calls, again = run_of([])
    got = measure.repeat({"GPU busy": Figure(0.0, exact=True)}, again)["GPU busy"]
    assert calls == [0] and got.stable
    result = trace_kinds.measured_result(BUSY, got)
    assert result.status == "fail" and result.got == "0 %"  # the GPU never worked

    def broken() -> str:
        return "a run run failed: killed by SIGKILL"

    got = measure.repeat({"GPU busy": Figure(0.7)}, broken)["GPU busy"]
    assert got.samples == (0.7,) and got.stopped
    result = trace_kinds.measured_result(BUSY, got)
    assert result.status == "incomplete" and "measured 1 time(s) only" in result.reason


def test_runs_clear_of_the_bound_stop_at_the_least_count() -> None:
    """Far from the bound, a spread wider than the tolerance cannot change the verdict: the
    least count of runs decides (the GPU machine's solution of profile_cg: 61 %, 49 %, 63 %
    against 25 % went on to 7 runs before)."""
    calls, again = run_of([0.49, 0.63, 0.5, 0.6])
    got = measure.repeat({"GPU busy": Figure(0.61)}, again, bounds={"GPU busy": 0.25})["GPU busy"]
    assert calls == [2] and got.samples == (0.61, 0.49, 0.63)
    assert not got.stable and got.clear
    result = trace_kinds.measured_result(dataclasses.replace(BUSY, min_share=0.25), got)
    assert result.status == "pass" and result.got == "61 % (median of 3 runs: 49–63 %)"
    assert "all 3 runs are clear of the bound by more than ±10 %" in result.reason
    # Clear below the bound fails the same way: 3 runs, not 7.
    calls, again = run_of([0.1, 0.25, 0.05, 0.2])
    got = measure.repeat({"GPU busy": Figure(0.25)}, again, bounds={"GPU busy": 0.5})["GPU busy"]
    assert calls == [2] and trace_kinds.measured_result(BUSY, got).status == "fail"
    # Far from the bound (a factor 3 beyond it), one run decides: 15 % against 50 %.
    calls, again = run_of([0.1, 0.25, 0.05, 0.2])
    got = measure.repeat({"GPU busy": Figure(0.15)}, again, bounds={"GPU busy": 0.5})["GPU busy"]
    assert calls == [0] and got.clear and got.samples == (0.15,)
    result = trace_kinds.measured_result(BUSY, got)
    assert result.status == "fail" and result.got == "15 %", result
    # Near the bound the runs go on until the figure settles: 0.52 is within ±10 % of 0.5.
    calls, again = run_of([0.70, 0.56, 0.57, 0.56, 0.9])
    got = measure.repeat({"GPU busy": Figure(0.52)}, again, bounds={"GPU busy": 0.5})["GPU busy"]
    assert calls == [4] and got.stable and got.samples[-3:] == (0.56, 0.57, 0.56)
    # Without a bound, as before: on to the most.
    calls, again = run_of([0.49, 0.63, 0.5, 0.6, 0.45, 0.66])
    got = measure.repeat({"GPU busy": Figure(0.61)}, again)["GPU busy"]
    assert calls == [6] and not got.clear


def test_far_from_is_a_factor_beyond_the_bound_on_one_side() -> None:
    how = Repeat()
    assert measure.far_from([0.08], 0.25, how) and measure.far_from([0.8, 0.9], 0.25, how)
    assert not measure.far_from([0.61], 0.25, how)  # 2.4x: within the factor 3
    assert not measure.far_from([0.08, 0.9], 0.25, how)  # both sides
    assert not measure.far_from([0.01], 0.02, how)  # near zero: within ±0.02 of it
    assert not measure.far_from([], 0.25, how) and not measure.far_from([0.5], 0.0, how)


def test_clear_of_needs_every_run_beyond_the_tolerance() -> None:
    how = Repeat()
    assert measure.clear_of([0.61, 0.49, 0.63], 0.25, how)
    assert measure.clear_of([0.1, 0.12, 0.08], 0.5, how)
    assert not measure.clear_of([0.61, 0.49], 0.25, how)  # fewer than `least`
    assert not measure.clear_of([0.27, 0.31, 0.45], 0.25, how)  # 0.27 is within ±0.031
    assert not measure.clear_of([0.1, 0.6, 0.7], 0.5, how)  # both sides
    assert measure.clear_of([0.0, 0.01, 0.0], 0.25, how)  # near zero: ±0.02


def test_settled_is_within_the_tolerance_of_the_median() -> None:
    how = Repeat()
    assert measure.settled([0.5, 0.54, 0.46], how)  # ±0.04 of 0.5: within ±10 %
    assert not measure.settled([0.5, 0.57, 0.46], how)
    assert measure.settled([0.0, 0.01, 0.02], how)  # near zero: ±0.02
    assert not measure.settled([0.5, 0.5], how)  # fewer than `least`
    assert Measured((0.5,), exact=True).stable


def test_figure_of_a_trace() -> None:
    assert trace_kinds.figure(BUSY, None) is None  # no trace: the check says why
    assert trace_kinds.figure(BUSY, {"gpu_busy": 0.4, "kernels": 3.0}) == Figure(0.4)
    assert trace_kinds.figure(BUSY, {"gpu_busy": 0.0, "kernels": 0.0, "bytes_moved": 0.0}) == \
        Figure(0.0, exact=True)
    other = specs.CheckSpec(kind="queues", label="queues", minimum=3)
    assert trace_kinds.figure(other, {"queues": 3.0}) is None  # not timed


# ---------------------------------------------------------------------------------------------
# The repetition of a timed run: real runs, a fake trace


SPEC = """
name = "busy"
[sources.c]
exercise = "busy.c"
solution = "busy.c"
[args]
host = ["1"]
[[check]]
kind = "exit_ok"
[[check]]
kind = "gpu_busy"
label = "GPU busy"
min = 0.5
"""


@pytest.fixture
def busy(tmp_path: Path) -> tuple[specs.Exercise, Path]:
    (tmp_path / "busy.c").write_text('#include <stdio.h>\nint main(void){puts("ran");return 0;}\n')
    (tmp_path / "busy.toml").write_text(SPEC)
    return specs.load(tmp_path / "busy.toml"), tmp_path


def checked(exercise: specs.Exercise, folder: Path, monkeypatch: pytest.MonkeyPatch,
            shares: list[float], timed: bool = True) -> tuple[Outcome, int]:
    """execute_checked on a real run whose trace says `shares`, one per run; returns its
    outcome and how many runs were made."""
    seen: dict[int, dict[str, float]] = {}
    feed: Iterator[float] = itertools.chain(shares, itertools.repeat(shares[-1]))

    alive: list[Outcome] = []  # kept, so that no id is reused by a later outcome

    def fake_trace(toolchain: object, outcome: Outcome) -> dict[str, float]:
        if id(outcome) not in seen:  # each run's outcome: the next share
            alive.append(outcome)
            seen[id(outcome)] = {"gpu_busy": next(feed), "kernels": 4.0, "bytes_moved": 1e3}
        return seen[id(outcome)]

    monkeypatch.setattr(checking, "gpu_trace_values", fake_trace)
    settings = config.load(folder, environ={})
    probe = toolchains.probe(settings, "gcc")
    src = source_mod.from_file(folder / "busy.c", "c", "busy.c")
    request, toolchain = resolve.resolve(Options(acc=True), src, folder, settings, probe, exercise)
    request = dataclasses.replace(request, timed=timed)
    outcome = checking.execute_checked(pipeline.prepare(request, toolchain, probe, settings), exercise)
    return outcome, len(seen)


def test_a_timed_run_is_repeated_until_its_figure_is_stable(
        busy: tuple[specs.Exercise, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    outcome, runs = checked(*busy, monkeypatch, [0.57, 0.61, 0.59])
    assert runs == 3
    assert outcome.verdict is not None and outcome.verdict.passed, outcome.verdict
    [busy_check] = [c for c in outcome.verdict.checks if c.name == "GPU busy"]
    assert busy_check.got == "59 % (median of 3 runs: 57–61 %)"
    # Each run's wall time, the checked run's first (the times board's median is of them).
    times = outcome.verdict.run_times
    assert len(times) == 3 and outcome.run is not None and times[0] == outcome.run.proc.seconds
    assert all(0 < t < 30 for t in times)


def test_a_timed_figure_clear_of_its_bound_takes_the_least_runs(
        busy: tuple[specs.Exercise, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec's bound (min 0.5) reaches measure.repeat: 0.9, 0.7, 0.8 pass at 3 runs."""
    outcome, runs = checked(*busy, monkeypatch, [0.9, 0.7, 0.8, 0.55, 0.95])
    assert runs == 3
    assert outcome.verdict is not None and outcome.verdict.passed, outcome.verdict
    [busy_check] = [c for c in outcome.verdict.checks if c.name == "GPU busy"]
    assert busy_check.got == "80 % (median of 3 runs: 70–90 %)"
    assert "more runs could not change the verdict" in busy_check.reason


def test_a_timed_figure_that_does_not_settle_is_incomplete(
        busy: tuple[specs.Exercise, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    outcome, runs = checked(*busy, monkeypatch, [0.3, 0.7, 0.45, 0.6, 0.35, 0.65, 0.4])
    assert runs == 7
    assert outcome.verdict is not None and outcome.verdict.incomplete and outcome.failure is None
    [busy_check] = [c for c in outcome.verdict.checks if c.name == "GPU busy"]
    assert busy_check.status == "incomplete" and "not stable over 7 runs" in busy_check.reason


def test_a_run_that_did_not_end_normally_is_not_measured(
        busy: tuple[specs.Exercise, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Its trace may stop short (verdict.CUT_SHORT): one run, the timed check incomplete."""
    exercise, folder = busy
    (folder / "busy.c").write_text('#include <stdio.h>\nint main(void){puts("ran");return 3;}\n')
    outcome, runs = checked(exercise, folder, monkeypatch, [0.9, 0.9, 0.9])
    assert runs == 1 and outcome.verdict is not None
    [busy_check] = [c for c in outcome.verdict.checks if c.name == "GPU busy"]
    assert busy_check.status == "incomplete"
    assert busy_check.reason == verdict.CUT_SHORT.format(how="exit code 3")


def test_an_untimed_request_takes_one_sample(busy: tuple[specs.Exercise, Path],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook's --check (not graded) samples once, as before."""
    outcome, runs = checked(*busy, monkeypatch, [0.3, 0.7], timed=False)
    assert runs == 1 and outcome.verdict is not None and outcome.verdict.failed_checks
    assert outcome.verdict.run_times == ()


def test_a_program_failing_another_check_is_not_measured_further(
        busy: tuple[specs.Exercise, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Its verdict is decided: one run; its timed check passes on that run, or is incomplete,
    never a fail from one sample."""
    exercise, folder = busy
    failing = specs.CheckSpec(kind="line", label="greeting", exact="hello")
    exercise = dataclasses.replace(exercise, checks=exercise.checks + (failing,))
    for share, status in ((0.3, "incomplete"), (0.8, "pass")):
        outcome, runs = checked(exercise, folder, monkeypatch, [share, 0.9, 0.9])
        assert runs == 1 and outcome.verdict is not None
        [busy_check] = [c for c in outcome.verdict.checks if c.name == "GPU busy"]
        assert busy_check.status == status, busy_check
        assert outcome.verdict.failed_checks[0].name == "greeting"
    assert busy_check.got == "80 %"
    outcome, _ = checked(exercise, folder, monkeypatch, [0.3])
    [busy_check] = [c for c in outcome.verdict.checks if c.name == "GPU busy"] if outcome.verdict else []
    assert busy_check.got == "30 % (one run)" and busy_check.reason == trace_kinds.NOT_MEASURED


def test_a_measured_timed_check_keeps_its_place_in_the_spec_and_earns_its_points() -> None:
    """A timed check's result made again from its measured figure names its [[check]] as every
    evaluated result does: the score finds its points (profile_cg's solution scored 18 of 20 on
    an H100 with its GPU busy check passing: the measured result had lost its index)."""
    from idrrun.checks import score
    from idrrun.model import CheckResult

    spec = dataclasses.replace(BUSY, index=1, points=2.0)
    exercise = specs.Exercise(name="t", title="t", topic="t", path=Path("t.toml"), timeout=10,
                              options=(), sources={}, host_args=(), gpu_args=(),
                              checks=(specs.CheckSpec(kind="exit_ok", label="ends", index=0), spec))
    again: Iterator[Figure] = iter([Figure(0.8), Figure(0.8)])
    measured = measure.repeat({"GPU busy": Figure(0.8)}, lambda: {"GPU busy": next(again)})
    result = trace_kinds.measured_result(spec, measured["GPU busy"])
    once = trace_kinds.unmeasured_result(spec, Figure(0.8))
    assert result.status == once.status == "pass" and result.check == once.check == 1
    ends = CheckResult("ends", "pass", check=0)
    assert score.score(exercise, (ends, result), 0).earned == 3.0
