"""Timed checks relative to the solution, without processes: a bound written as a ratio to the
solution's figure decided on the range both sides' runs allow, a straddling figure measured
again until decided (or not judged, its range said), a speed check's points on its scale. The
runs a GPU would make are faked here, and the tests that fake them say so in their names; the
GPU's own runs are benchmarks/ladder_gpu.py's."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

from idrrun.checks import ratio, relative, score, specs
from idrrun.checks.measure import Repeat
from idrrun.checks.verdict import evaluate_one
from idrrun.model import CheckResult
from test_checks import ev

AT_LEAST = ratio.Bound(0.7, "at_least")
# profile_cg's GPU busy on an H200 (issue 47): the C solution 51–63 % over 7 runs, a port that
# spins the host for ~0.4 ms at every iteration 27–32 %.
SOLUTION = (0.54, 0.51, 0.63)
SPINNER = (0.29, 0.27, 0.32)


def test_a_bound_as_a_ratio_is_decided_on_the_range_of_both_sides() -> None:
    # The solution against itself: 0.81–1.24, clear of 0.7; the spinner 0.43–0.63: clear below.
    same = ratio.decide((0.52, 0.55, 0.60), SOLUTION, AT_LEAST)
    assert same.status == "pass" and same.range is not None and same.range.low > 0.7
    spin = ratio.decide(SPINNER, SOLUTION, AT_LEAST)
    assert spin.status == "fail" and spin.range is not None and spin.range.high < 0.7
    assert spin.range.shown() == "0.54× (0.43–0.63× over 3 runs and 3 of the solution's)"
    # Fewer runs than a measure takes: run again, the side that has fewer.
    assert ratio.decide((0.29,), SOLUTION, AT_LEAST) == ratio.Decision(
        "again", ratio.ratio_range((0.29,), SOLUTION), "yours")
    # A range across the bound: run again, the side whose runs spread more...
    straddle = ratio.decide((0.35, 0.42, 0.40), (0.54, 0.55, 0.56), AT_LEAST)
    assert straddle.status == "again" and straddle.more == "yours"
    # ...until each side made its most: then not judged, never a coin flip.
    most = Repeat(least=3, most=3)
    assert ratio.decide((0.35, 0.42, 0.40), (0.54, 0.55, 0.56), AT_LEAST, most).status == "not_judged"
    # A run that put nothing on the GPU: a share of 0 by definition, one run says it.
    assert ratio.decide((0.0,), SOLUTION, AT_LEAST, exact=True).status == "fail"
    # At most (a time): 1.2x against 1.5x.
    assert ratio.decide((1.2, 1.25, 1.21), (1.0, 1.02, 0.99), ratio.Bound(1.5, "at_most")).status == "pass"


def judged(exercise: specs.Exercise, checks: Sequence[CheckResult], yours: Sequence[relative.Run],
           again_yours: relative.Again, solution: Sequence[relative.Run],
           again_solution: relative.Again) -> tuple[CheckResult, ...]:
    """The checks with the relative ones measured, as checking's _relative applies them."""
    return relative.applied(checks, relative.measured(exercise, checks, yours, again_yours,
                                                      solution, again_solution))


def _exercise(tmp_path: Path, check: str) -> specs.Exercise:
    (tmp_path / "ex.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "sol.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "demo_busy.toml").write_text(
        'name = "demo_busy"\n[sources.c]\nexercise = "ex.c"\nsolution = "sol.c"\n'
        '[args]\nhost = ["10"]\n' + check)
    return specs.load(tmp_path / "demo_busy.toml")


BUSY = '[[check]]\nkind = "gpu_busy"\nmin_ratio = 0.7\npoints = 2\n'


def _runs(values: Sequence[float]) -> Iterator[relative.Run]:
    for value in values:
        yield relative.Run(1.0, "", {"kernels": 4.0, "bytes_moved": 8.0, "gpu_busy": value})


def _graded(exercise: specs.Exercise, mine: Sequence[float], theirs: Sequence[float]) -> tuple[CheckResult, int, int]:
    """The gpu_busy check judged over faked runs of hers and of the solution's (as a GPU would
    give them, one after the other), and how many of each were made."""
    yours, solution = _runs(mine), _runs(theirs)
    made = {"yours": 1, "solution": 0}

    def again(side: str, runs: Iterator[relative.Run]) -> relative.Run | str:
        made[side] += 1
        return next(runs, "no more runs")

    first = next(yours)
    [check] = judged(exercise, (CheckResult("GPU busy", "pass", check=0),), [first],
                              lambda: again("yours", yours), [],
                              lambda: again("solution", solution))
    return check, made["yours"], made["solution"]


def test_a_straddling_figure_is_measured_again_until_decided_with_faked_gpu_runs(tmp_path: Path) -> None:
    ex = _exercise(tmp_path, BUSY)
    # Her first runs straddle 0.7 of the solution's (a busy machine), then settle clear above.
    check, mine, theirs = _graded(ex, (0.30, 0.45, 0.36, 0.52, 0.53, 0.52), (0.55, 0.54, 0.56, 0.55))
    assert check.status == "pass" and mine == 6 and theirs == 3, (check, mine, theirs)
    assert check.check == 0 and check.name == "GPU busy"
    assert check.got == "52 % (0.95× (0.93–0.98× over 6 runs and 3 of the solution's), the " \
        "solution's 55 %)", check.got
    # The spinner fails on its first three runs: clear below whatever the solution did.
    check, mine, theirs = _graded(ex, SPINNER, SOLUTION)
    assert check.status == "fail" and (mine, theirs) == (3, 3), check
    # A figure at the bound itself stays across it: 7 runs of each, then not judged, its range
    # said, never a pass or a fail drawn from noise.
    at_bound = itertools.cycle((0.36, 0.42))
    check, mine, theirs = _graded(ex, [next(at_bound) for _ in range(9)], [0.55] * 9)
    assert check.status == "incomplete" and (mine, theirs) == (7, 3), (check, mine, theirs)
    assert "the runs do not decide on which side of ≥ 0.7× the solution's share" in check.reason
    assert "over 7 runs and 3 of the solution's" in check.got


def test_identical_copies_get_one_mark_with_faked_gpu_runs(tmp_path: Path) -> None:
    """Five copies of one program, each measured on its own runs (a GPU's noise, faked): clear
    of the bound, every copy gets the same mark, as does every copy at the bound (not judged)."""
    ex = _exercise(tmp_path, BUSY)
    noise = ((0.30, 0.31, 0.29), (0.28, 0.33, 0.30), (0.31, 0.27, 0.29), (0.29, 0.30, 0.32),
             (0.33, 0.28, 0.30))
    marks = {_graded(ex, runs, SOLUTION)[0].status for runs in noise}
    assert marks == {"fail"}
    solutions = ((0.52, 0.55, 0.61), (0.56, 0.53, 0.58), (0.60, 0.51, 0.54), (0.55, 0.55, 0.57),
                 (0.53, 0.62, 0.55))
    assert {_graded(ex, runs, SOLUTION)[0].status for runs in solutions} == {"pass"}


def test_a_speed_check_is_scored_on_its_scale(tmp_path: Path) -> None:
    scale = ratio.Scale(1.5, 10.0)
    # All the points up to 1.5x, none from 10x, quarters between (log-linear, rounded down).
    assert [scale.credit(r) for r in (1.0, 1.5, 1.9, 2.3, 3.0, 5.0, 9.9, 10.0, 40.0)] == \
        [1.0, 1.0, 0.75, 0.75, 0.5, 0.25, 0.0, 0.0, 0.0]
    ex = _exercise(tmp_path, '[[check]]\nkind = "speed"\nfull = 1.5\nnone = 10\npoints = 2\n'
                             "per_iteration = 'iterations\\s*=\\s*(\\d+)'\n")
    [speed] = ex.checks
    # Per iteration: 2.3 s for 10 iterations against the solution's 1 s for 10.
    yours = [relative.Run(t, "iterations = 10\n", {"kernels": 1.0}) for t in (2.3, 2.31, 2.29)]
    theirs = [relative.Run(t, "iterations = 10\n", {"kernels": 1.0}) for t in (1.0, 1.01, 0.99)]
    more = iter(yours[1:])
    [check] = judged(ex, (CheckResult("run time", "pass", check=0),), yours[:1],
                              lambda: next(more, "no more"), theirs, lambda: "no more")
    assert check.status == "pass" and check.credit == 0.75, check
    assert check.reason.startswith("your run 2.30× the solution's: three quarters of the points "
                                   "(all at ≤ 1.5×, none at ≥ 10× the solution's)"), check.reason
    assert check.expected == "≤ 1.5× the solution's time per iteration (no points at ≥ 10×)"
    # Its points in part: 1.5 of 2 earned, the rest lost saying why.
    scored = score.score(ex, (check,), 0)
    assert (scored.earned, scored.possible) == (1.5, 2.0)
    [lost] = [i for i in scored.items if i.outcome == "lost"]
    assert lost.worth == 0.5 and lost.why.startswith("0.5 of the 2 points for run time lost: "
                                                     "your run 2.30× the solution's")
    # Nine times slower: no points, a fail.
    slow = [relative.Run(9 * t, "iterations = 10\n", {"kernels": 1.0}) for t in (1.3, 1.31, 1.29)]
    rest = iter(slow[1:])
    [check] = judged(ex, (CheckResult("run time", "pass", check=0),), slow[:1],
                              lambda: next(rest, "no more"), theirs, lambda: "no more")
    assert check.status == "fail" and check.credit == 0.0 and "11.7×" in check.got, check


def test_a_figure_far_from_its_bound_is_decided_on_one_run_with_faked_gpu_runs(tmp_path: Path) -> None:
    """A factor 3 beyond its bound is no noise (measure.Repeat.far): one run of hers and one
    of the solution's decide it, where a figure nearer the bound takes the least count."""
    # The spinner as the H200 measured it (issue 47): 7 % against the solution's 54 %.
    ex = _exercise(tmp_path, BUSY)
    check, mine, theirs = _graded(ex, (0.07, 0.08, 0.07), (0.54, 0.55, 0.56))
    assert check.status == "fail" and (mine, theirs) == (1, 1), (check, mine, theirs)
    assert check.got == "7 % (0.13×, the solution's 54 %)", check.got
    # 0.5x is not that far from 0.7x: three runs of each.
    check, mine, theirs = _graded(ex, (0.27, 0.29, 0.28), (0.54, 0.55, 0.56))
    assert check.status == "fail" and (mine, theirs) == (3, 3), (check, mine, theirs)
    assert ratio.decide((0.5,), (0.2,), AT_LEAST).status == "pass"  # 2.5x: 3.6x beyond 0.7x
    assert ratio.decide((0.4,), (0.2,), AT_LEAST).status == "again"  # 2x: under 3 x 0.7x
    # A start file on the scale: 66x the solution's time, none of the points at one run each;
    # 1.0x (all the points, but 2x would not be) takes three.
    scale = ratio.Scale(1.5, 10.0)
    far = ratio.scale_decide((6.6,), (0.1,), scale)
    assert (far.status, far.credit) == ("pass", 0.0) and far.range is not None
    assert far.range.shown() == "66.0×"
    near = ratio.scale_decide((0.1,), (0.1,), scale)
    assert near.status == "again" and near.more == "both"
    assert ratio.scale_decide((0.04,), (0.1,), scale).credit == 1.0  # 0.4x: 3x under 1.5x


def test_a_speed_range_across_one_step_of_the_scale_earns_the_better_step() -> None:
    """The H200's atomic_histogram serial port (C): 5.71–7.65× over 3 runs of each, no more
    runs to make (the runs spread more than the tolerance), across the step at 6.2× of the
    scale 1.5–10×: the better step's quarter, said so. Across two steps: not judged."""
    scale = ratio.Scale(1.5, 10.0)
    how = ratio.REPEAT
    solution = (0.010, 0.0105, 0.011)
    found = ratio.scale_decide(tuple(r * 0.0105 for r in (5.71, 7.26, 7.65)), solution, scale)
    assert (found.status, found.credit, found.across) == ("pass", 0.25, True), found
    wide = ratio.scale_decide(tuple(r * 0.0105 for r in (3.0, 5.0, 8.0, 3.0, 5.0, 8.0, 3.0)),
                              solution, scale)  # as many runs as a figure gets
    assert wide.status == "not_judged", wide
    assert how.least == 3


def test_a_speed_check_on_the_gpu_work_times_the_span_of_its_gpu_operations(tmp_path: Path) -> None:
    """`measure = "gpu"`: where the CUDA start and the host's set-up are most of the run (an
    H200: the histogram loop left to one device thread, its run as long as the solution's), the
    figure is the time from the run's first GPU operation to its last; a run that put nothing
    on the GPU has no such time, and fails."""
    ex = _exercise(tmp_path, '[[check]]\nkind = "speed"\nfull = 1.5\nnone = 10\npoints = 2\n'
                             'measure = "gpu"\n')
    [speed] = ex.checks
    assert speed.measure == "gpu"

    def run(span: float) -> relative.Run:
        return relative.Run(0.5, "", {"kernels": 1.0, "gpu_span_s": span})

    theirs = [run(s) for s in (0.010, 0.011, 0.0105)]
    slow = [run(s) for s in (0.200, 0.205, 0.198)]  # the same 0.5 s runs, 20x the GPU work
    rest = iter(slow[1:])
    [check] = judged(ex, (CheckResult("run time", "pass", check=0),), slow[:1],
                              lambda: next(rest, "no more"), theirs, lambda: "no more")
    assert check.status == "fail" and check.credit == 0.0, check
    assert check.reason.startswith("your GPU time 19.0× the solution's: none of the points"), check
    assert check.expected == "≤ 1.5× the solution's GPU time (no points at ≥ 10×)"
    # Nothing on the GPU: no figure, so the check stays as one run judged it: failed.
    host = evaluate_one(speed, dataclasses.replace(
        ev(), trace_values={"kernels": 0.0, "gpu_span_s": 0.0}))
    assert (host.status, host.got) == ("fail", "no GPU work"), host
    # One run of each (a notebook's --check): the solution's GPU time from its figures.
    one = evaluate_one(speed, dataclasses.replace(
        ev(), trace_values={"kernels": 4.0, "gpu_span_s": 0.05},
        solution_timed={"seconds": (0.5,), "gpu_span_s": (0.01,)}))
    assert (one.status, one.credit) == ("pass", 0.25), one
    assert one.reason.startswith("your GPU time 5.00× the solution's: a quarter of the points"), one
    bad = tmp_path / "bad"
    bad.mkdir()
    try:
        _exercise(bad, '[[check]]\nkind = "speed"\nfull = 1.5\nnone = 10\nmeasure = "wall"\n')
    except specs.SpecError as e:
        assert "expected \"run\" (the run's time) or \"gpu\"" in str(e), e
    else:
        raise AssertionError("measure = 'wall' was accepted")


def test_the_solutions_gpu_time_reaches_a_one_run_speed_check() -> None:
    """A notebook's --check compares one run of each: the solution's GPU time comes from its
    figures (its trace's span, kept with its cached output), as its run's time does."""
    from idrrun.checking import SolutionRun, _timed_figures
    from idrrun.checks.compare import RunFigures
    from idrrun.profile.model import RunShape

    run = SolutionRun("ok\n", seconds=0.5,
                      figures=RunFigures(traced=True, gpu_busy=0.4, shape=RunShape(span_ns=10_000_000)))
    assert _timed_figures(run) == {"seconds": (0.5,), "gpu_busy": (0.4,), "gpu_span_s": (0.01,)}
    idle = SolutionRun("ok\n", seconds=0.5, figures=RunFigures(traced=True, shape=None))
    assert "gpu_span_s" not in _timed_figures(idle)
