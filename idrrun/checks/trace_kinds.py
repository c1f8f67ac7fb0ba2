"""The check kinds that read the GPU trace of a profiled run (kernels on the GPU, async queues,
data moved, the GPU busy), and how a timed one's figure is judged once measured over several runs
(checks/measure.py). Pure: no processes.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..model import CheckResult, CheckStatus
from . import loops, ratio, registry
from .evidence import (CodeFile, Evidence, human_bytes, numbers_printed, output_excerpt,
                       parse_number, student_files)
from .measure import REPEAT, Figure, Measured, Repeat
from .registry import Kind, TimedFigure
from .spec_fields import Table
from .spec_values import CheckSpec
from .words import output_line, plural


def judge_trace(spec: CheckSpec, values: Mapping[str, float], ev: Evidence | None) -> CheckResult:
    """A GPU-trace check on the trace's figures; ev: the run's evidence (its output), None for
    a timed figure judged alone (measured_result)."""
    judge = registry.get(spec.kind)
    assert judge is not None and judge.trace is not None
    return judge.trace(spec, values, ev)


def _ran_on_gpu(spec: CheckSpec, values: Mapping[str, float], ev: Evidence | None) -> CheckResult:
    kernels = int(values.get("kernels", 0))
    if kernels >= 1:
        return CheckResult(spec.label, "pass", "≥ 1 GPU kernel", str(kernels),
                           f"{plural(kernels, 'kernel')} ran on the GPU")
    return CheckResult(spec.label, "fail", "≥ 1 GPU kernel", "0",
                       "no kernel ran on the GPU: the OpenACC regions ran on the host")


def _queues(spec: CheckSpec, values: Mapping[str, float], ev: Evidence | None) -> CheckResult:
    queues, want = int(values.get("queues", 0)), spec.minimum or 1
    status: CheckStatus = "pass" if queues >= want else "fail"
    return CheckResult(spec.label, status, f"≥ {plural(want, 'queue')}", str(queues),
                       f"{plural(queues, 'queue')} of the GPU ran kernels" + (
                           "" if status == "pass" else ": use async(n) on distinct queues"))


def _data_moved(spec: CheckSpec, values: Mapping[str, float], ev: Evidence | None) -> CheckResult:
    assert spec.max_bytes is not None
    moved = values.get("bytes_moved", 0.0)
    unit = ""
    output = ev.run.proc.output if ev is not None and ev.run is not None else ""
    if spec.per_iteration is not None:
        counts = numbers_printed(spec.per_iteration, output)
        iterations = parse_number(counts[-1]) if counts else None
        if not iterations:
            what = output_line("", spec.per_iteration, "the iteration count")
            return CheckResult(spec.label, "fail", f"≤ {human_bytes(spec.max_bytes)} per iteration",
                               "no iteration count",
                               f"the program did not print {what}: the number of iterations",
                               excerpt=output_excerpt(ev, output, None) if ev is not None else "",
                               pattern=spec.per_iteration)
        moved, unit = moved / iterations, " per iteration"
    status: CheckStatus = "pass" if moved <= spec.max_bytes else "fail"
    # Too much moved: placed on the directive inside a loop that moves data, where one does (in
    # the source, or said in a header of hers).
    moving = _transfer_in_loop(ev) if status == "fail" and ev is not None else None
    return CheckResult(spec.label, status, f"≤ {human_bytes(spec.max_bytes)}{unit}", human_bytes(moved),
                       f"{human_bytes(moved)} moved between host and device{unit}" +
                       ("" if status == "pass" else ": keep the data on the device") +
                       (f" ({moving[0].at(moving[1])} moves data at each iteration of its loop)"
                        if moving is not None else ""),
                       line=moving[1] if moving is not None and moving[0].placed else None)


def _transfer_in_loop(ev: Evidence) -> tuple[CodeFile, int] | None:
    """The file of hers and the line of the first directive in a loop that moves data."""
    for file in student_files(ev):
        line = loops.transfer_in_loop(file.code, ev.language)
        if line is not None:
            return file, line
    return None


def _busy_subject(values: Mapping[str, float]) -> str:
    """Whose figure a gpu_busy check read: the GPU's, or on several the least busy one's
    (summary.trace_values: each GPU must meet the bound)."""
    gpus = int(values.get("gpus", 1))
    if gpus < 2:
        return "the GPU"
    return f"the least busy of the {gpus} GPUs (GPU {int(values.get('least_busy_gpu', 0))})"


def _gpu_busy(spec: CheckSpec, values: Mapping[str, float], ev: Evidence | None = None) -> CheckResult:
    busy = values.get("gpu_busy", 0.0)
    if spec.min_ratio is not None:
        solution = ev.solution_timed.get("gpu_busy", ()) if ev is not None else ()
        return relative_result(spec, (busy,), solution, ONE_RUN, exact=_idle(values),
                               subject=_busy_subject(values))
    assert spec.min_share is not None
    status: CheckStatus = "pass" if busy >= spec.min_share else "fail"
    return CheckResult(spec.label, status, f"≥ {100 * spec.min_share:.0f} %", f"{100 * busy:.0f} %",
                       _busy_subject(values) + f" is busy {100 * busy:.0f} % of the run" + (
                           "" if status == "pass" else ": it waits (launches, transfers, host "
                           "waits): see the profile's hints"))


UNSTABLE = ("not stable over {runs} runs ({spread}: more than {tolerance}), and the runs disagree "
            "on the verdict: the machine was too busy to time it; grade it again with fewer jobs")
TOO_FEW = "measured {runs} time(s) only, too few to tell: {stopped}"


def _timed(spec: CheckSpec) -> TimedFigure | None:
    kind = registry.get(spec.kind)
    return kind.timed if kind is not None else None


def is_timed(spec: CheckSpec) -> bool:
    """Its kind's figure is a time or a share of time (Kind.timed): measured over several runs."""
    return _timed(spec) is not None


def timed_bound(spec: CheckSpec) -> float | None:
    """A timed check's bound in its figure's terms (measure.repeat stops once runs clear it)."""
    timed = _timed(spec)
    return timed.bound(spec) if timed is not None else None


def figure(spec: CheckSpec, values: Mapping[str, float] | None) -> Figure | None:
    """A timed check's figure in one run's trace values; None without a trace. A run that put
    nothing at all on the GPU has an exact figure (no GPU time to share out)."""
    timed = _timed(spec)
    if values is None or timed is None:
        return None
    idle = not values.get("kernels") and not values.get("bytes_moved")
    return Figure(values.get(timed.key, 0.0), exact=idle)


NOT_MEASURED = ("one run only: the program fails other checks whatever its figure, so it was "
                "not measured further; one run cannot fail it")


def unmeasured_result(spec: CheckSpec, figure: Figure) -> CheckResult:
    """A timed check on one run's figure, where measuring it could not change the verdict (the
    program fails other checks): a pass or an exact figure stands; a fail from one sample is
    never given (it could be noise). It names its [[check]], as evaluate's results do: its
    points are the spec's."""
    return replace(_unmeasured(spec, figure), check=spec.index)


def _unmeasured(spec: CheckSpec, figure: Figure) -> CheckResult:
    timed = _timed(spec)
    assert timed is not None
    once = judge_trace(spec, {timed.key: figure.value}, None)
    if figure.exact or once.status == "pass":
        return once
    return CheckResult(spec.label, "incomplete", once.expected, once.got + " (one run)",
                       NOT_MEASURED)


def measured_result(spec: CheckSpec, measured: Measured) -> CheckResult:
    """A timed check judged on its figure measured over several runs (checks/measure.py): the
    median decides once the figure is stable; when it is not, only runs that all agree do, and
    otherwise the check is incomplete: noise never fails (nor passes) a program. It names its
    [[check]], as evaluate's results do: its points are the spec's (a timed check that lost its
    index scored nothing: profile_cg's solution at 18 of 20 on an H100)."""
    return replace(_measured(spec, measured), check=spec.index)


def _measured(spec: CheckSpec, measured: Measured) -> CheckResult:
    timed = _timed(spec)
    assert timed is not None
    at_median = judge_trace(spec, {timed.key: measured.median}, None)
    runs = len(measured.samples)
    if measured.exact or runs == 1 and not measured.stopped:
        return at_median
    spread = timed.spread(measured.low, measured.high)
    got = f"{timed.show(measured.median)} (median of {runs} runs: {spread})"
    if measured.stable:
        return replace(at_median, got=got)
    if measured.clear:
        return replace(at_median, got=got, reason=at_median.reason + (
            f" (all {runs} runs are clear of the bound by more than "
            f"±{100 * measured.how.rel_tol:.0f} %: more runs could not change the verdict)"))
    if runs < measured.how.least:
        return CheckResult(spec.label, "incomplete", at_median.expected, got,
                           TOO_FEW.format(runs=runs, stopped=measured.stopped))
    sides = {judge_trace(spec, {timed.key: v}, None).status for v in measured.samples}
    if len(sides) == 1:
        return replace(at_median, got=got + ", not stable",
                       reason=at_median.reason + f" (every one of the {runs} runs says so)")
    return CheckResult(spec.label, "incomplete", at_median.expected, got,
                       UNSTABLE.format(runs=runs, spread=spread,
                                       tolerance=measured.how.describe()))



# Where a figure's runs are not repeated (a notebook's --check): one run of each decides.
ONE_RUN = Repeat(least=1, most=1)
NO_SOLUTION_FIGURE = ("the solution's {what} with these arguments is not known here (a "
                      "students' course keeps its outputs, not its times): judged where it runs")
NOT_DECIDED = ("{got}: the runs do not decide on which side of {bound} it is (more than "
               "{tolerance}): the machine was too busy to time it; grade it again with fewer jobs")


def _idle(values: Mapping[str, float]) -> bool:
    """The run put nothing on the GPU: a share of 0 by definition, one run says it."""
    return not values.get("kernels") and not values.get("bytes_moved")


def relative_result(spec: CheckSpec, yours: Sequence[float], solution: Sequence[float],
                    how: Repeat = REPEAT, exact: bool = False, subject: str = "the GPU",
                    stopped: str = "") -> CheckResult:
    """gpu_busy with a bound relative to the solution's share (min_ratio), on the runs of
    both (checks/ratio.py): decided, or not judged with its range, never a coin flip."""
    assert spec.min_ratio is not None
    bound = ratio.Bound(spec.min_ratio, "at_least")
    expected = f"≥ {spec.min_ratio:g}× the solution's share"
    if not solution:
        return CheckResult(spec.label, "incomplete", expected, _percent_runs(yours),
                           NO_SOLUTION_FIGURE.format(what="share of GPU time"), check=spec.index)
    decision = ratio.decide(yours, solution, bound, how, exact)
    found = decision.range
    got = _percent_runs(yours, how) + (f" ({found.shown()}, the solution's "
                                       f"{_percent_runs(solution, how)})" if found is not None else "")
    if decision.status in ("pass", "fail"):
        status: CheckStatus = "pass" if decision.status == "pass" else "fail"
        return CheckResult(spec.label, status, expected, got,
                           f"{subject} is busy {got} of the run" + (
                               "" if status == "pass" else ": it waits (launches, transfers, "
                               "host waits) where the solution's does not: see the profile's hints"),
                           check=spec.index)
    why = NOT_DECIDED.format(got=got, bound=expected, tolerance=how.describe())
    return CheckResult(spec.label, "incomplete", expected, got, why + (f" ({stopped})" if stopped else ""),
                       check=spec.index)


def _percent_runs(samples: Sequence[float], how: Repeat = REPEAT) -> str:
    """The share the last runs measured (their median): those that decided."""
    return f"{100 * statistics.median(ratio.window(samples, how)):.0f} %" if samples else "?"


def iterations(spec: CheckSpec, output: str) -> float | None:
    """The iteration count the spec's per_iteration pattern reads in an output (the last)."""
    if spec.per_iteration is None:
        return None
    counts = numbers_printed(spec.per_iteration, output)
    found = parse_number(counts[-1]) if counts else None
    return found or None


def _speed(spec: CheckSpec, values: Mapping[str, float], ev: Evidence | None) -> CheckResult:
    """The run's time (per iteration, where the exercise prints its iterations) against the
    solution's with the same arguments, one run of each (a notebook's --check; grading
    measures both: idrrun/relative.py)."""
    assert ev is not None and ev.run is not None
    yours = per_run(spec, ev.run.proc.seconds, ev.run.proc.output, values)
    count = iterations(spec, ev.solution_output or "") if spec.per_iteration is not None else 1.0
    timed = ev.solution_timed.get(GPU_SPAN if spec.measure == "gpu" else "seconds", ())
    solution = tuple(s / count for s in timed) if count else ()
    if yours is None and spec.measure == "gpu":
        return CheckResult(spec.label, "fail", _speed_expected(spec), "no GPU work",
                           "nothing ran on the GPU: no GPU time to compare with the solution's",
                           check=spec.index)
    if yours is None:
        what = output_line("", spec.per_iteration or "", "the iteration count")
        return CheckResult(spec.label, "fail", _speed_expected(spec), "no iteration count",
                           f"the program did not print {what}: the number of iterations",
                           pattern=spec.per_iteration or "", check=spec.index)
    return speed_result(spec, (yours,), solution, ONE_RUN)


# The trace's figure a speed check with `measure = "gpu"` times (profile/summary.trace_values).
GPU_SPAN = "gpu_span_s"


def per_run(spec: CheckSpec, seconds: float, output: str,
            values: Mapping[str, float] | None = None) -> float | None:
    """A run's time as the speed check compares it: the run's, or its GPU work's (`measure =
    "gpu"`: None without GPU work), per iteration where the spec counts them (None: the
    output has no count)."""
    if spec.measure == "gpu":
        seconds = (values or {}).get(GPU_SPAN, 0.0)
        if seconds <= 0:
            return None
    if spec.per_iteration is None:
        return seconds
    count = iterations(spec, output)
    return seconds / count if count else None


def _speed_times(spec: CheckSpec) -> str:
    """What a speed check times, as "your ..." says it."""
    return "GPU time" if spec.measure == "gpu" else "run"


def _speed_expected(spec: CheckSpec) -> str:
    assert spec.scale is not None
    each = " per iteration" if spec.per_iteration is not None else ""
    time = "GPU time" if spec.measure == "gpu" else "time"
    return f"≤ {spec.scale[0]:g}× the solution's {time}{each} (no points at ≥ {spec.scale[1]:g}×)"


_SHARES = {1.0: "all the points", 0.75: "three quarters of the points", 0.5: "half the points",
           0.25: "a quarter of the points", 0.0: "none of the points"}


def speed_result(spec: CheckSpec, yours: Sequence[float], solution: Sequence[float],
                 how: Repeat = REPEAT, stopped: str = "") -> CheckResult:
    """"your run 2.3× the solution's": the share of the points its step of the spec's scale
    earns, decided over the runs of both (checks/ratio.py), or not judged with its range."""
    assert spec.scale is not None
    scale = ratio.Scale(*spec.scale)
    expected = _speed_expected(spec)
    if not solution:
        return CheckResult(spec.label, "incomplete", expected, "", NO_SOLUTION_FIGURE.format(
            what="time"), check=spec.index)
    decision = ratio.scale_decide(yours, solution, scale, how)
    found = decision.range
    if found is None:
        return CheckResult(spec.label, "incomplete", expected, "", "the solution's time is 0",
                           check=spec.index)
    got = found.shown() if max(found.runs) > 1 else ratio.times(found.ratio)
    said = f"your {_speed_times(spec)} {ratio.times(found.ratio)} the solution's"
    if decision.status != "pass":
        why = NOT_DECIDED.format(got=said + f" ({got})", bound="a step of the scale",
                                 tolerance=how.describe())
        return CheckResult(spec.label, "incomplete", expected, got,
                           why + (f" ({stopped})" if stopped else ""), check=spec.index)
    share = _SHARES.get(decision.credit, f"{100 * decision.credit:.0f} % of the points")
    if decision.across:
        said = (f"your {_speed_times(spec)} {ratio.times(found.low).rstrip('×')}–"
                f"{ratio.times(found.high)} the solution's, "
                f"across a step of the scale: the better step's points")
    status: CheckStatus = "pass" if decision.credit > 0 else "fail"
    hint = "" if decision.credit >= 1 else ": see the profile's hints for where the time goes"
    return CheckResult(spec.label, status, expected, got,
                       f"{said}: {share} ({scale.describe()}){hint}", check=spec.index,
                       credit=decision.credit)


def _speed_fields(t: Table) -> dict[str, Any]:
    full, none = t.number("full"), t.number("none")
    if full is None or none is None or not 0 < full < none:
        raise t.err("full", "a speed check needs full and none, ratios of the run's time to "
                            "the solution's with 0 < full < none (e.g. full = 1.5, none = 10)")
    fields: dict[str, Any] = {"scale": (full, none)}
    measure = t.raw.get("measure", "run")
    if measure not in ("run", "gpu"):
        raise t.err("measure", 'expected "run" (the run\'s time) or "gpu" (its GPU work, from '
                               f'its first GPU operation to its last), got {measure!r}')
    fields["measure"] = measure
    if "per_iteration" in t.raw:
        fields["per_iteration"] = t.pattern("per_iteration", "count")
    return fields


def _data_moved_fields(t: Table) -> dict[str, Any]:
    max_bytes = t.number("max_bytes")
    if max_bytes is None:
        raise t.err("max_bytes", "a data_moved check needs max_bytes")
    fields: dict[str, Any] = {"max_bytes": max_bytes}
    if "per_iteration" in t.raw:
        fields["per_iteration"] = t.pattern("per_iteration", "count")
    return fields


def _gpu_busy_fields(t: Table) -> dict[str, Any]:
    if "min_ratio" in t.raw:
        if "min" in t.raw:
            raise t.err("min", "a gpu_busy check has min (a share) or min_ratio (a ratio to the "
                               "solution's share), not both")
        ratio_ = t.number("min_ratio")
        if ratio_ is None or not 0 < ratio_ <= 1:
            raise t.err("min_ratio", "expected a ratio to the solution's share in (0, 1]")
        return {"min_ratio": ratio_}
    share = t.number("min")
    if share is None or not 0 < share <= 1:
        raise t.err("min", "a gpu_busy check needs min, a fraction in (0, 1], or min_ratio, a "
                           "ratio to the solution's share (it differs from GPU to GPU)")
    return {"min_share": share}



# What the trace of a run stopped at its time limit decides (Kind.so_far): a prefix of the run's
# records holds at least its kernels, queues and bytes so far, and its time is at least the limit.
def _ran_on_gpu_so_far(spec: CheckSpec, values: Mapping[str, float], ev: Evidence) -> CheckResult | None:
    return _ran_on_gpu(spec, values, ev) if values.get("kernels", 0) >= 1 else None


def _queues_so_far(spec: CheckSpec, values: Mapping[str, float], ev: Evidence) -> CheckResult | None:
    judged = _queues(spec, values, ev)
    return judged if judged.status == "pass" else None


def _data_moved_so_far(spec: CheckSpec, values: Mapping[str, float], ev: Evidence) -> CheckResult | None:
    """More than the whole run may move, already: per iteration, over the iterations the
    solution makes with the same arguments (a stopped run prints no count of its own)."""
    assert spec.max_bytes is not None
    moved = values.get("bytes_moved", 0.0)
    if spec.per_iteration is None:
        return _data_moved(spec, values, ev) if moved > spec.max_bytes else None
    count = iterations(spec, ev.solution_output or "")
    if count is None or moved / count <= spec.max_bytes:
        return None
    each = human_bytes(moved / count)
    return CheckResult(spec.label, "fail", f"≤ {human_bytes(spec.max_bytes)} per iteration",
                       f"≥ {each}",
                       f"{human_bytes(moved)} moved between host and device before the stop: at "
                       f"least {each} per iteration over the solution's {count:g} iterations: "
                       "keep the data on the device")


def _speed_so_far(spec: CheckSpec, values: Mapping[str, float], ev: Evidence) -> CheckResult | None:
    """Stopped at a time that is already past the scale's end, against the solution's longest
    run with the same arguments (the same iterations: per iteration, the same ratio). With
    `measure = "gpu"`, the GPU time so far: at least until the GPU was last seen at work (a run
    stopped in a kernel: the tracer's tick, profile/summary.trace_values)."""
    assert spec.scale is not None and ev.run is not None
    gpu = spec.measure == "gpu"
    solution = ev.solution_timed.get(GPU_SPAN if gpu else "seconds", ())
    if not solution or max(solution) <= 0:
        return None
    yours = values.get("gpu_span_at_least_s", 0.0) if gpu else ev.run.proc.seconds
    at_least = yours / max(solution)
    if at_least < spec.scale[1]:
        return None
    return CheckResult(spec.label, "fail", _speed_expected(spec), f"≥ {ratio.times(at_least)}",
                       f"your {_speed_times(spec)} at least {ratio.times(at_least)} the "
                       f"solution's: none of the points ({ratio.Scale(*spec.scale).describe()}): "
                       "see the profile's hints for where the time goes", check=spec.index,
                       credit=0.0)


# The trace kinds, one record each (checks/registry.py); registered in this order.
TRACE = (
    Kind("ran_on_gpu", "trace", "runs on the GPU", "kernels run on the GPU", trace=_ran_on_gpu,
         so_far=_ran_on_gpu_so_far),
    Kind("queues", "trace", "async queues", "{min} async queues run kernels", trace=_queues,
         fields=lambda t: {"minimum": int(t.number("min", 1) or 1)}, keys=frozenset({"min"}),
         so_far=_queues_so_far),
    Kind("data_moved", "trace", "data moved", "the data stays on the device ({label})",
         trace=_data_moved, fields=_data_moved_fields, keys=frozenset({"max_bytes", "per_iteration"}),
         so_far=_data_moved_so_far),
    # A share of time: it depends on what else runs beside the program, so a run checked by one
    # waits for a GPU of its own and its figure is measured over several runs (checks/measure.py).
    Kind("gpu_busy", "trace", "GPU busy", "the GPU is busy enough ({label})", trace=_gpu_busy,
         fields=_gpu_busy_fields, keys=frozenset({"min", "min_ratio"}),
         timed=TimedFigure("gpu_busy", lambda spec: spec.min_share, 100.0, " %")),
    # The run's time against the solution's on the same GPU, points on the spec's scale: timed
    # (alone on its GPU, both measured over runs: idrrun/relative.py), judged on a GPU build.
    Kind("speed", "trace", "run time", "the run is about as fast as the solution's",
         trace=_speed, fields=_speed_fields,
         keys=frozenset({"full", "none", "per_iteration", "measure"}),
         timed=TimedFigure("seconds", lambda spec: None, 1.0, " s"), scores_time=True,
         so_far=_speed_so_far),
)
for _declared in TRACE:
    registry.register(_declared)
