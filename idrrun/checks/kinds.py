"""The verdict: an exercise's checks evaluated on what a run produced. Pure: no processes.

Every check yields pass, fail or incomplete (it could not be evaluated: no GPU trace, no
compiler report, the solution did not run...), with expected vs got and a one-line reason. An
incomplete check is never a pass: the verdict is then incomplete, shown and counted apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..model import (AccReport, BuildResult, CheckResult, CheckStatus, ConstructRan, RegionsRan,
                     RunResult, Verdict)
from . import regex
from .directives import code_text, has_directives
from .measure import Figure, Measured
from .specs import OUTPUT_KINDS, TRACE_KINDS, CheckSpec, Exercise


@dataclass(frozen=True)
class HostComparison:
    """What the agrees_with_host check compares: the program's output at the exercise's host
    arguments on the GPU, and the same build's with its regions on the host; or why not."""

    device_output: str | None = None
    host_output: str | None = None
    problem: str = ""  # why an output is None


@dataclass(frozen=True)
class Evidence:
    """What the checks look at; each part is None when that step did not happen."""

    source_text: str
    language: str
    build: BuildResult | None
    run: RunResult | None
    acc: AccReport | None
    solution_output: str | None  # the solution's output, same arguments
    solution_problem: str = ""  # why solution_output is None, when it is
    # From the GPU trace of a profiled GPU run (profile.trace_values); None: no trace.
    trace_values: Mapping[str, float] | None = None
    # The source as the compiler read it (build.PREPROCESSED), when the family can say.
    compiled_text: str | None = None
    acc_requested: bool = True  # built with -a: the OpenACC checks mean something
    run_dir: Path | None = None  # where the program ran (its files, for image checks)
    solution_dir: Path | None = None  # the solution's files for the same arguments
    # The compute constructs the run executed (OpenACC profiling, profile/regions.py); None:
    # not counted (no run, not an OpenACC build).
    regions: RegionsRan | None = None
    host: HostComparison | None = None  # agrees_with_host: None when not compared

    @property
    def code(self) -> str:
        """What the compiler read: comments and disabled blocks removed."""
        if self.compiled_text is not None:
            return self.compiled_text
        return code_text(self.source_text, self.language)


def _number(text: str) -> float | None:
    try:
        return float(text.replace("D", "E").replace("d", "e"))
    except ValueError:
        return None


def _close(got: float, expected: float, abs_tol: float, rel_tol: float) -> bool:
    return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)


def _fmt(x: float) -> str:
    return f"{x:.10g}"


def _tolerance(spec: CheckSpec) -> str:
    parts = []
    if spec.abs_tol:
        parts.append(f"±{_fmt(spec.abs_tol)}")
    if spec.rel_tol:
        parts.append(f"rel {_fmt(spec.rel_tol)}")
    return f" ({', '.join(parts)})" if parts else ""


def _exit_ok(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None
    p = ev.run.proc
    if p.ok:
        return CheckResult(spec.label, "pass", "exit 0", "exit 0", "the program ended normally")
    return CheckResult(spec.label, "fail", "exit 0", p.describe(), f"the program {p.describe()}")


def _value(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None and spec.pattern is not None and spec.expected is not None
    expected = _fmt(spec.expected) + _tolerance(spec)
    matches = regex.findall(spec.pattern, ev.run.proc.output)
    if not matches:
        return CheckResult(spec.label, "fail", expected, "not printed",
                           f"no line of the output matches {spec.pattern!r}")
    raw = matches[-1]
    got = _number(raw)
    if got is None:
        return CheckResult(spec.label, "fail", expected, raw, f"{raw!r} is not a number")
    if _close(got, spec.expected, spec.abs_tol, spec.rel_tol):
        return CheckResult(spec.label, "pass", expected, _fmt(got), f"{spec.label} = {_fmt(got)}")
    return CheckResult(spec.label, "fail", expected, _fmt(got),
                       f"{spec.label} is {_fmt(got)}, expected {_fmt(spec.expected)}")


def _line(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None
    output = ev.run.proc.output
    if spec.exact is not None:
        found = any(line.strip() == spec.exact.strip() for line in output.splitlines())
        expected = repr(spec.exact)
    else:
        assert spec.regex is not None
        found = regex.search(spec.regex, output)
        expected = f"/{spec.regex}/"
    if found:
        return CheckResult(spec.label, "pass", expected, "found", "the line was printed")
    return CheckResult(spec.label, "fail", expected, "not found", f"no output line matches {expected}")


def _numbers(pattern: str, text: str) -> list[str]:
    return regex.findall(pattern, text)


def _matches_solution(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None and spec.pattern is not None
    if ev.solution_output is None:
        return CheckResult(spec.label, "incomplete", "", "",
                           f"the solution could not be run: {ev.solution_problem or 'unknown reason'}")
    want = _numbers(spec.pattern, ev.solution_output)
    if not want:
        return CheckResult(spec.label, "incomplete", "", "",
                           f"the solution prints no line matching {spec.pattern!r}")
    return _compare(spec, want, _numbers(spec.pattern, ev.run.proc.output), _SOLUTION)


@dataclass(frozen=True)
class _Wording:
    """How a comparison of printed values names its two sides."""

    count: str  # {want} {got}: counts of values
    value: str  # {i} {got} {want}: one value that differs
    agrees: str


_SOLUTION = _Wording("the solution prints {want} such values, this program {got}",
                     "value {i}: {got} where the solution gives {want}", "agrees with the solution")
_HOST = _Wording("the same program prints {want} such values on the host, {got} on the GPU",
                 "value {i}: {got} on the GPU, {want} on the host (the same build, the same "
                 "arguments): a race? (an update without atomic, a sum without reduction)",
                 "the GPU and the host print the same values")


def _compare(spec: CheckSpec, want: list[str], got: list[str], words: _Wording) -> CheckResult:
    """The values a program printed (`got`) against those it should have (`want`)."""
    shown_want, shown_got = ", ".join(want[:4]), ", ".join(got[:4]) or "not printed"
    if len(got) != len(want):
        return CheckResult(spec.label, "fail", shown_want, shown_got,
                           words.count.format(want=len(want), got=len(got)))
    for i, (w, g) in enumerate(zip(want, got)):
        wv, gv = _number(w), _number(g)
        if wv is None or gv is None:
            if w != g:
                return CheckResult(spec.label, "fail", w, g, f"value {i + 1} differs")
        elif not _close(gv, wv, spec.abs_tol, spec.rel_tol):
            return CheckResult(spec.label, "fail", w + _tolerance(spec), g,
                               words.value.format(i=i + 1, got=g, want=w))
    return CheckResult(spec.label, "pass", shown_want, shown_got, words.agrees)


def _agrees_with_host(spec: CheckSpec, ev: Evidence) -> CheckResult:
    """The GPU's values against the same build's on the host, as NVIDIA's PCAST compares them
    inside nvc: a race or a missing reduction that still prints plausible numbers shows."""
    assert spec.pattern is not None
    compared = ev.host
    if compared is None or compared.device_output is None or compared.host_output is None:
        why = compared.problem if compared is not None and compared.problem else \
            "the program did not run to its end: nothing to compare"
        return CheckResult(spec.label, "incomplete", "", "", why)
    want = _numbers(spec.pattern, compared.host_output)
    if not want:
        return CheckResult(spec.label, "incomplete", "", "",
                           f"on the host the program prints no line matching {spec.pattern!r}")
    return _compare(spec, want, _numbers(spec.pattern, compared.device_output), _HOST)


def _never_called(acc: AccReport | None) -> str:
    """The compiler's count of regions in functions nothing calls, as a parenthesis."""
    if acc is None or acc.unreachable < 1:
        return ""
    return (f" ({acc.unreachable} compute region(s) are in functions the program never calls, "
            "says the compiler)")


def _uses_openacc(spec: CheckSpec, ev: Evidence) -> CheckResult:
    """Compute regions that ran, when the run counted them; else (no run, or the runtime did
    not load the counting library) those the compiler made in code the program reaches."""
    if not has_directives(ev.code, ev.language):
        return CheckResult(spec.label, "fail", "OpenACC directives", "none",
                           "the source has no OpenACC directive (comments and disabled #if "
                           "blocks do not count)")
    ran = ev.regions
    if ran is not None and ran.counted:
        if ran.distinct >= 1:
            return CheckResult(spec.label, "pass", "≥ 1 compute region run", str(ran.distinct),
                               f"{ran.distinct} compute region(s) ran ({RAN_METHOD})")
        return CheckResult(spec.label, "fail", "≥ 1 compute region run", "0",
                           "the compute regions never ran: the program executed none of them"
                           + (_never_called(ev.acc) or " (is the code that holds them called?)"))
    if ran is not None and ran.state != "not_loaded":
        return CheckResult(spec.label, "incomplete", "≥ 1 compute region run", "", ran.why)
    if ev.acc is None:
        return CheckResult(spec.label, "incomplete", "", "", "no compiler report to read")
    fallback = "from the compiler's report: " + (ran.why if ran is not None else
                                                 "the program was not run")
    if ev.acc.regions < 1 and ev.acc.unreachable:
        return CheckResult(spec.label, "fail", "≥ 1 compute region", "0",
                           "the compute regions never run: the compiler made them only in "
                           f"functions the program never calls ({fallback})")
    if ev.acc.regions < 1:
        return CheckResult(spec.label, "fail", "≥ 1 compute region", "0",
                           "the compiler made no parallel/kernels/serial region of the "
                           f"directives ({fallback})")
    return CheckResult(spec.label, "pass", "≥ 1 compute region", str(ev.acc.regions),
                       f"{ev.acc.regions} compute region(s) in code the program reaches "
                       f"({ev.acc.method}; {fallback})")


def _regions_ran(spec: CheckSpec, ev: Evidence) -> CheckResult:
    """Distinct compute constructs the run executed (each counted once, however often it ran)."""
    want = spec.minimum or 1
    expected = f"≥ {want} compute region(s) run"
    ran = ev.regions
    if ran is None:
        return CheckResult(spec.label, "incomplete", expected, "",
                           "the regions that ran were not counted (only a checked OpenACC run "
                           "counts them)")
    if not ran.counted:
        return CheckResult(spec.label, "incomplete", expected, "", ran.why)
    which = ", ".join(_construct(c) for c in ran.constructs[:6]) or "none"
    if ran.distinct >= want:
        return CheckResult(spec.label, "pass", expected, str(ran.distinct),
                           f"{ran.distinct} compute region(s) ran: {which}")
    return CheckResult(spec.label, "fail", expected, str(ran.distinct),
                       f"{ran.distinct} of {want} compute regions ran (ran: {which})"
                       + _never_called(ev.acc))


def _construct(c: ConstructRan) -> str:
    where = f"line {c.line}" if c.line is not None else "a region"
    if c.function:
        where += f" ({c.function})"
    return f"{where} {'once' if c.count == 1 else f'{c.count} times'}"


def _uses_openmp(spec: CheckSpec, ev: Evidence) -> CheckResult:
    if ev.acc is None:
        return CheckResult(spec.label, "incomplete", "", "", "no compiler report to read")
    if ev.acc.omp_targets < 1:
        return CheckResult(spec.label, "fail", "≥ 1 target region", "0",
                           "the compiler made no OpenMP target region")
    return CheckResult(spec.label, "pass", "≥ 1 target region", str(ev.acc.omp_targets),
                       f"{ev.acc.omp_targets} target region(s) ({ev.acc.method})")


def _no_implicit_data(spec: CheckSpec, ev: Evidence) -> CheckResult:
    if ev.acc is None:
        return CheckResult(spec.label, "incomplete", "", "", "no compiler report to read")
    if ev.acc.regions == 0:
        return CheckResult(spec.label, "fail", "explicit data clauses", "no compute region",
                           "no compute region: nothing runs on the device" + _never_called(ev.acc))
    if ev.regions is not None and ev.regions.counted and ev.regions.distinct == 0:
        return CheckResult(spec.label, "fail", "explicit data clauses", "no compute region ran",
                           "no compute region ran: nothing runs on the device")
    if not ev.acc.implicit:
        return CheckResult(spec.label, "pass", "none", "none", "every array has a data clause")
    names = sorted({i.variable for i in ev.acc.implicit})
    first = ev.acc.implicit[0]
    return CheckResult(spec.label, "fail", "none", ", ".join(names), first.detail)


def _source(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert spec.regex is not None
    if regex.search(spec.regex, ev.code):
        return CheckResult(spec.label, "pass", f"/{spec.regex}/", "found", spec.reason or "found")
    return CheckResult(spec.label, "fail", f"/{spec.regex}/", "not found",
                       spec.reason or "the source does not contain what the exercise asks for")


def _trace(spec: CheckSpec, values: Mapping[str, float], output: str) -> CheckResult:
    if spec.kind == "ran_on_gpu":
        kernels = int(values.get("kernels", 0))
        if kernels >= 1:
            return CheckResult(spec.label, "pass", "≥ 1 GPU kernel", str(kernels), "the regions ran on the GPU")
        return CheckResult(spec.label, "fail", "≥ 1 GPU kernel", "0",
                           "no kernel ran on the GPU: the OpenACC regions ran on the host")
    if spec.kind == "gpu_busy":
        return _gpu_busy(spec, values)
    if spec.kind == "queues":
        queues, want = int(values.get("queues", 0)), spec.minimum or 1
        status: CheckStatus = "pass" if queues >= want else "fail"
        return CheckResult(spec.label, status, f"≥ {want} queues", str(queues),
                           f"{queues} streams had work" + ("" if status == "pass" else
                                                           ": use async(n) on distinct queues"))
    assert spec.max_bytes is not None
    moved = values.get("bytes_moved", 0.0)
    unit = ""
    if spec.per_iteration is not None:
        counts = _numbers(spec.per_iteration, output)
        iterations = _number(counts[-1]) if counts else None
        if not iterations:
            return CheckResult(spec.label, "fail", f"≤ {_bytes(spec.max_bytes)} per iteration",
                               "no iteration count",
                               f"no output line matches {spec.per_iteration!r}")
        moved, unit = moved / iterations, " per iteration"
    status = "pass" if moved <= spec.max_bytes else "fail"
    return CheckResult(spec.label, status, f"≤ {_bytes(spec.max_bytes)}{unit}", _bytes(moved),
                       f"data moved between host and device{unit}" +
                       ("" if status == "pass" else ": keep the data on the device"))


def _gpu_busy(spec: CheckSpec, values: Mapping[str, float]) -> CheckResult:
    assert spec.min_share is not None
    busy = values.get("gpu_busy", 0.0)
    status: CheckStatus = "pass" if busy >= spec.min_share else "fail"
    return CheckResult(spec.label, status, f"≥ {100 * spec.min_share:.0f} %", f"{100 * busy:.0f} %",
                       "share of the run the GPU is busy" + (
                           "" if status == "pass" else ": the GPU waits (launches, transfers, "
                           "host waits): see the profile's hints"))


@dataclass(frozen=True)
class _TimedFigure:
    """Where a timed kind's figure is among a trace's values, and how it is shown."""

    key: str  # in profile.summary.trace_values
    scale: float = 1.0
    unit: str = ""

    def show(self, value: float) -> str:
        return f"{self.scale * value:.0f}{self.unit}"

    def spread(self, low: float, high: float) -> str:
        return f"{self.scale * low:.0f}–{self.scale * high:.0f}{self.unit}"


# Every kind of specs.TIMED_KINDS has its figure here.
_TIMED = {"gpu_busy": _TimedFigure("gpu_busy", 100.0, " %")}
UNSTABLE = ("not stable over {runs} runs ({spread}: more than {tolerance}), and the runs disagree "
            "on the verdict: the machine was too busy to time it; grade it again with fewer jobs")
TOO_FEW = "measured {runs} time(s) only, too few to tell: {stopped}"


def figure(spec: CheckSpec, values: Mapping[str, float] | None) -> Figure | None:
    """A timed check's figure in one run's trace values; None without a trace. A run that put
    nothing at all on the GPU has an exact figure (no GPU time to share out)."""
    timed = _TIMED.get(spec.kind)
    if values is None or timed is None:
        return None
    idle = not values.get("kernels") and not values.get("bytes_moved")
    return Figure(values.get(timed.key, 0.0), exact=idle)


NOT_MEASURED = ("one run only: the program fails other checks whatever its figure, so it was "
                "not measured further; one run cannot fail it")


def unmeasured_result(spec: CheckSpec, figure: Figure) -> CheckResult:
    """A timed check on one run's figure, where measuring it could not change the verdict (the
    program fails other checks): a pass or an exact figure stands; a fail from one sample is
    never given (it could be noise)."""
    timed = _TIMED[spec.kind]
    once = _trace(spec, {timed.key: figure.value}, "")
    if figure.exact or once.status == "pass":
        return once
    return CheckResult(spec.label, "incomplete", once.expected, once.got + " (one run)",
                       NOT_MEASURED)


def measured_result(spec: CheckSpec, measured: Measured) -> CheckResult:
    """A timed check judged on its figure measured over several runs (checks/measure.py): the
    median decides once the figure is stable; when it is not, only runs that all agree do, and
    otherwise the check is incomplete: noise never fails (nor passes) a program."""
    timed = _TIMED[spec.kind]
    at_median = _trace(spec, {timed.key: measured.median}, "")
    runs = len(measured.samples)
    if measured.exact or runs == 1 and not measured.stopped:
        return at_median
    spread = timed.spread(measured.low, measured.high)
    got = f"{timed.show(measured.median)} (median of {runs} runs: {spread})"
    if measured.stable:
        return replace(at_median, got=got)
    if runs < measured.how.least:
        return CheckResult(spec.label, "incomplete", at_median.expected, got,
                           TOO_FEW.format(runs=runs, stopped=measured.stopped))
    sides = {_trace(spec, {timed.key: v}, "").status for v in measured.samples}
    if len(sides) == 1:
        return replace(at_median, got=got + ", not stable",
                       reason=at_median.reason + f" (every one of the {runs} runs says so)")
    return CheckResult(spec.label, "incomplete", at_median.expected, got,
                       UNSTABLE.format(runs=runs, spread=spread,
                                       tolerance=measured.how.describe()))


def _image(spec: CheckSpec, ev: Evidence) -> CheckResult:
    # Pillow is loaded only for exercises that compare pictures.
    from ..images import image_check

    assert spec.file is not None
    if ev.run_dir is None or ev.solution_dir is None:
        return CheckResult(spec.label, "incomplete", spec.file, "",
                           "the solution's picture is not available: " +
                           (ev.solution_problem or "the solution was not run"))
    return image_check(ev.run_dir / spec.file, ev.solution_dir / spec.file, spec.label,
                       min_psnr=spec.min_psnr, max_diff=spec.max_diff, raw=spec.raw)


def _bytes(n: float) -> str:
    """1073741904 -> '1.07 GB': short enough for the verdict table."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


_NEEDS_RUN = ("exit_ok", "value", "line", "matches_solution", "image", "regions_ran",
              "agrees_with_host")
_EVALUATORS = {
    "exit_ok": _exit_ok, "value": _value, "line": _line, "matches_solution": _matches_solution,
    "uses_openacc": _uses_openacc, "no_implicit_data": _no_implicit_data, "source": _source,
    "image": _image, "uses_openmp": _uses_openmp, "regions_ran": _regions_ran,
    "agrees_with_host": _agrees_with_host,
}
OPENACC_BUILD = "OpenACC build"
RAN_METHOD = "counted as they ran, OpenACC profiling interface"


def evaluate_one(spec: CheckSpec, ev: Evidence) -> CheckResult:
    if spec.kind in TRACE_KINDS:
        if ev.trace_values is None:
            return CheckResult(spec.label, "incomplete", "", "",
                               "needs a GPU trace: --profile, on a GPU")
        return _trace(spec, ev.trace_values, ev.run.proc.output if ev.run is not None else "")
    if ev.build is None or not ev.build.ok:
        if spec.kind == "source":
            return _source(spec, ev)
        return CheckResult(spec.label, "fail", "", "not built", "the program did not build")
    if spec.kind in _NEEDS_RUN and ev.run is None:
        return CheckResult(spec.label, "incomplete", "", "", "the program was not run (-n)")
    return _EVALUATORS[spec.kind](spec, ev)


def evaluate(exercise: Exercise, ev: Evidence) -> Verdict:
    checks = [evaluate_one(spec, ev) for spec in exercise.checks]
    if not ev.acc_requested and exercise.model == "openacc":
        # Without -a the directives are comments: what the checks say is not about OpenACC.
        checks.insert(0, CheckResult(OPENACC_BUILD, "incomplete", "built with -a", "built without -a",
                                     "add -a to the line: the exercise checks the OpenACC version"))
    return Verdict(exercise=exercise.name, checks=tuple(checks))


def evaluate_hidden(exercise: Exercise, ev: Evidence, index: int) -> tuple[CheckResult, ...]:
    """The output checks again, on a run with the index-th hidden argument set (grading)."""
    return tuple(replace(evaluate_one(spec, ev), name=f"{spec.label} (hidden run {index + 1})",
                         hidden=index + 1, kind=spec.kind)
                 for spec in exercise.checks if spec.kind in OUTPUT_KINDS)
