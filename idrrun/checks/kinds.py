"""The verdict: an exercise's checks evaluated on what a run produced. Pure: no processes.

Every check yields pass, fail or incomplete (it could not be evaluated: no GPU trace, no
compiler report, the solution did not run...), with expected vs got and a one-line reason. An
incomplete check is never a pass: the verdict is then incomplete, shown and counted apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..model import (AccReport, BuildResult, CheckResult, CheckStatus, ConstructRan, ProcResult,
                     RegionsRan, RunResult, Verdict)
from ..toolchains.diagnostics import rename_temporary, student_symbol
from . import loops, regex, registry
from .directives import code_text, has_directives
from .measure import Figure, Measured
from .reference import kept_file
from .registry import Kind, TimedFigure
from .specs import BUILD_ROW, CheckSpec, Exercise, Table
from .words import listed, output_line, plural, printed_name


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
    trace_problem: str = ""  # why there is no trace, when the run's profiler says
    # The source as the compiler read it (build.PREPROCESSED), when the family can say.
    compiled_text: str | None = None
    acc_requested: bool = True  # built with -a: the OpenACC checks mean something
    run_dir: Path | None = None  # where the program ran (its files, for image checks)
    solution_dir: Path | None = None  # the solution's files for the same arguments
    # Files of the solution's that the course's reference does not keep, with why.
    solution_left_out: tuple[str, ...] = ()
    # The compute constructs the run executed (OpenACC profiling, profile/regions.py); None:
    # not counted (no run, not an OpenACC build).
    regions: RegionsRan | None = None
    # solution_output came from the course's references (a students' copy): solution_problem
    # is then why there is none for these arguments.
    from_reference: bool = False
    target: str | None = None  # where the build runs its regions (Toolchain.target), when known
    # The source as the student knows it: its name, the line its text starts on (a cell's
    # second), and the name the build gave its file (renamed in what the checks show).
    source_name: str = ""
    first_line: int = 1
    temporary: str = ""
    host: HostComparison | None = None  # agrees_with_host: None when not compared

    @property
    def code(self) -> str:
        """What the compiler read: comments and disabled blocks removed."""
        if self.compiled_text is not None:
            return self.compiled_text
        return code_text(self.source_text, self.language)


def parse_number(text: str) -> float | None:
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


# An excerpt of the output: the lines around what a check read, or the last ones.
EXCERPT_CONTEXT = 2
EXCERPT_TAIL = 6
_EXCERPT_WIDTH = 160


def _excerpt(ev: Evidence, output: str, at: int | None) -> str:
    """The output's lines around line `at` (0-based; marked with >), or its last lines when at
    is None; numbered as the output's lines, the build's temporary names renamed."""
    lines = output.splitlines()
    if not lines:
        return ""
    if at is None or at >= len(lines):
        first, last, at = max(0, len(lines) - EXCERPT_TAIL), len(lines), None
    else:
        first, last = max(0, at - EXCERPT_CONTEXT), min(len(lines), at + EXCERPT_CONTEXT + 1)
    width = len(str(last))
    shown = []
    for i in range(first, last):
        text = lines[i] if len(lines[i]) <= _EXCERPT_WIDTH else lines[i][:_EXCERPT_WIDTH] + "…"
        shown.append(f"{'>' if i == at else ' '} {i + 1:>{width}} | {text}")
    excerpt = "\n".join(shown)
    if ev.temporary and ev.source_name:
        excerpt = rename_temporary(excerpt, ev.temporary, ev.source_name)
    return excerpt


def _ended(p: ProcResult) -> str:
    """How the program ended, as a sentence around ProcResult.describe's words: 'the program
    was killed by SIGSEGV', 'the program ended with exit code 3'."""
    if p.start_error is not None:
        return f"the program could not be started ({p.start_error})"
    if p.timed_out and not p.interrupted:
        return "the program did not end in time (it timed out)"
    if p.interrupted or p.limit is not None or p.signal_name is not None:
        return f"the program was {p.describe()}"
    return f"the program ended with {p.describe()}"


def _exit_ok(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None
    p = ev.run.proc
    if p.ok:
        return CheckResult(spec.label, "pass", "exit 0", "exit 0", "the program ended normally")
    return CheckResult(spec.label, "fail", "exit 0", p.describe(), _ended(p),
                       excerpt=_excerpt(ev, p.output, None))


def _value(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None and spec.pattern is not None and spec.expected is not None
    expected = _fmt(spec.expected) + _tolerance(spec)
    output = ev.run.proc.output
    found = regex.matches(spec.pattern, output)
    what = output_line(spec.expect, spec.pattern, spec.label)
    if not found:
        return CheckResult(spec.label, "fail", expected, "not printed",
                           f"the program did not print {what}", excerpt=_excerpt(ev, output, None),
                           pattern=spec.pattern)
    at, raw = found[-1]
    got = parse_number(raw)
    shown = _excerpt(ev, output, at)
    if got is None:
        return CheckResult(spec.label, "fail", expected, raw,
                           f"{spec.label} is printed as '{raw}', which is not a number",
                           excerpt=shown, pattern=spec.pattern)
    if _close(got, spec.expected, spec.abs_tol, spec.rel_tol):
        return CheckResult(spec.label, "pass", expected, _fmt(got), f"{spec.label} = {_fmt(got)}",
                           pattern=spec.pattern)
    return CheckResult(spec.label, "fail", expected, _fmt(got),
                       f"{spec.label} is {_fmt(got)}, expected {_fmt(spec.expected)}",
                       excerpt=shown, pattern=spec.pattern)


def _quoted(line: str, width: int = 60) -> str:
    text = line.strip()
    return f"'{text if len(text) <= width else text[:width] + '…'}'"


def _line(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None
    output = ev.run.proc.output
    if spec.exact is not None:
        lines = output.splitlines()
        at = next((i for i, line in enumerate(lines) if line.strip() == spec.exact.strip()), None)
        expected = spec.expect or f"a line '{spec.exact.strip()}'"
        printed = lines[at] if at is not None else ""
    else:
        assert spec.regex is not None
        found = regex.matches(spec.regex, output)
        expected = output_line(spec.expect, spec.regex, "", group_is_number=False)
        at = found[0][0] if found else None
        printed = output.splitlines()[at] if at is not None else ""
    pattern = spec.regex or ""
    if at is not None:
        return CheckResult(spec.label, "pass", expected, "printed", f"printed {_quoted(printed)}",
                           pattern=pattern)
    return CheckResult(spec.label, "fail", expected, "not printed",
                       f"the program did not print {expected}", excerpt=_excerpt(ev, output, None),
                       pattern=pattern)


def _numbers(pattern: str, text: str) -> list[str]:
    return regex.findall(pattern, text)


def _times(n: int) -> str:
    return {0: "not at all", 1: "once", 2: "twice"}.get(n, f"{n} times")


@dataclass(frozen=True)
class _Side:
    """What printed values are compared with, in words ({what}: the line, {want}/{got}: how
    often, then the values; {which}: the value; {same}: "the same value")."""

    count: str
    value: str
    agrees: str


_SOLUTION = _Side("the solution prints {what} {want}, this program {got}",
                  "{which} is {got} where the solution prints {want}",
                  "prints {same} as the solution")
_HOST = _Side("on the host it prints {what} {want}, on the GPU {got}",
              "{which} is {got} on the GPU, {want} on the host: a race? (threads that write "
              "one place without atomic or reduction)",
              "prints {same} on the GPU as on the host")


def _matches_solution(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None and spec.pattern is not None
    pattern = spec.pattern
    what = output_line(spec.expect, pattern, spec.label)
    if ev.solution_output is None:
        return CheckResult(spec.label, "incomplete", "", "", ev.solution_problem if ev.from_reference
                           else f"the solution could not be run: {ev.solution_problem or 'unknown reason'}",
                           pattern=pattern)
    want = _numbers(pattern, ev.solution_output)
    if not want:
        return CheckResult(spec.label, "incomplete", "", "",
                           f"the solution does not print {what} for these arguments",
                           pattern=pattern)
    return _compare(spec, ev, want, ev.run.proc.output, _SOLUTION)


def _compare(spec: CheckSpec, ev: Evidence, want: list[str], output: str,
             side: _Side) -> CheckResult:
    """The values the program printed in `output` against those it should have (`want`)."""
    assert spec.pattern is not None
    pattern = spec.pattern
    what = output_line(spec.expect, pattern, spec.label)
    found = regex.matches(pattern, output)
    got = [g for _, g in found]
    shown_want, shown_got = listed(want), listed(got) or "not printed"
    if len(got) != len(want):
        at = found[len(want)][0] if len(got) > len(want) else (found[-1][0] if found else None)
        return CheckResult(spec.label, "fail", shown_want, shown_got,
                           side.count.format(what=what, want=_times(len(want)), got=_times(len(got))),
                           excerpt=_excerpt(ev, output, at), pattern=pattern)
    for i, (w, g) in enumerate(zip(want, got)):
        which = (printed_name(pattern) or "the value") if len(want) == 1 else f"value {i + 1} of {len(want)}"
        wv, gv = parse_number(w), parse_number(g)
        differs = w != g if wv is None or gv is None else \
            not _close(gv, wv, spec.abs_tol, spec.rel_tol)
        if differs:
            expected = w if wv is None or gv is None else w + _tolerance(spec)
            return CheckResult(spec.label, "fail", expected, g,
                               side.value.format(which=which, got=g, want=w),
                               excerpt=_excerpt(ev, output, found[i][0]), pattern=pattern)
    same = "the same value" if len(got) == 1 else f"the same {len(got)} values"
    return CheckResult(spec.label, "pass", shown_want, shown_got, side.agrees.format(same=same),
                       pattern=pattern)


def _agrees_with_host(spec: CheckSpec, ev: Evidence) -> CheckResult:
    """The GPU's values against the same build's on the host, as NVIDIA's PCAST compares them
    inside nvc: a race or a missing reduction that still prints plausible numbers shows."""
    assert spec.pattern is not None
    compared = ev.host
    if compared is None or compared.device_output is None or compared.host_output is None:
        why = compared.problem if compared is not None and compared.problem else \
            "the program did not run to its end: nothing to compare"
        # A build for the host has no GPU run to compare: only a GPU can say (PASSED_HERE).
        return CheckResult(spec.label, "incomplete", "", "", why, pattern=spec.pattern,
                           gpu_only=ev.target not in (None, "gpu"))
    want = _numbers(spec.pattern, compared.host_output)
    if not want:
        what = output_line(spec.expect, spec.pattern, spec.label)
        return CheckResult(spec.label, "incomplete", "", "",
                           f"on the host the program does not print {what}", pattern=spec.pattern)
    return _compare(spec, ev, want, compared.device_output, _HOST)


def _never_called(acc: AccReport | None) -> str:
    """The compiler's count of regions in functions nothing calls, as a parenthesis."""
    if acc is None or acc.unreachable < 1:
        return ""
    regions = plural(acc.unreachable, "compute region")
    where = "is in a function" if acc.unreachable == 1 else "are in functions"
    return f" ({regions} {where} the program never calls, says the compiler)"


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
                               f"{plural(ran.distinct, 'compute region')} ran ({RAN_METHOD})")
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
                       f"{plural(ev.acc.regions, 'compute region')} in code the program reaches "
                       f"({fallback})")


# A program without a directive runs no compute region: the OpenACC runtime, which counts them,
# is not even started (it loads the counting library only then).
NO_DIRECTIVE = ("the source has no OpenACC directive: no compute region ran (comments and "
                "disabled #if blocks do not count)")


def _regions_ran(spec: CheckSpec, ev: Evidence) -> CheckResult:
    """Distinct compute constructs the run executed (each counted once, however often it ran)."""
    want = spec.minimum or 1
    expected = f"≥ {plural(want, 'compute region')} run"
    ran = _ran(ev)
    if (ran is None or not ran.counted) and not has_directives(ev.code, ev.language):
        return CheckResult(spec.label, "fail", expected, "0", NO_DIRECTIVE)
    if ran is None:
        return CheckResult(spec.label, "incomplete", expected, "",
                           "the regions that ran were not counted (only a checked OpenACC run "
                           "counts them)")
    if not ran.counted:
        return CheckResult(spec.label, "incomplete", expected, "", ran.why)
    code = _student_code(ev)
    which = listed([_construct(c, code, ev.language) for c in ran.constructs], 6) or "none"
    if ran.distinct >= want:
        return CheckResult(spec.label, "pass", expected, str(ran.distinct),
                           f"{plural(ran.distinct, 'compute region')} ran: {which}")
    return CheckResult(spec.label, "fail", expected, str(ran.distinct),
                       f"{ran.distinct} of {want} compute regions ran (ran: {which})"
                       + _never_called(ev.acc))


def _ran(ev: Evidence) -> RegionsRan | None:
    """The compute constructs the run executed. A program with no OpenACC code to run (no
    directive, or none the compiler made a compute region of) never starts the OpenACC runtime,
    which then loads no counting library: none ran, which is a count, not a question."""
    ran = ev.regions
    if ran is not None and ran.state == "not_loaded" and \
            (not has_directives(ev.code, ev.language) or ev.acc is not None and ev.acc.regions == 0):
        return RegionsRan("counted")
    return ran


def _loop_on_device(spec: CheckSpec, ev: Evidence) -> CheckResult:
    """The loop around the statement spec.pattern names, in a compute construct that ran: the
    constructs' lines come from the regions the run executed, their extents from the source."""
    assert spec.pattern is not None
    code = _student_code(ev)
    expected = "in a compute region that ran"
    statement = loops.statement_line(code, spec.pattern)
    if statement is None:
        return CheckResult(spec.label, "incomplete", expected, "not found",
                           f"{spec.label} was not found in the source: is it still written as "
                           "in the start file?", pattern=spec.pattern)
    line = loops.enclosing_loop(code, statement, ev.language) or statement
    where = f"{spec.label} (line {line})"
    ran = _ran(ev)
    if ran is None or not ran.counted:
        return _loop_uncounted(spec, ev, where, line)
    for construct in ran.constructs:
        extent = loops.construct_extent(code, construct.line, ev.language) \
            if construct.line is not None else None
        if extent is not None and extent[0] <= statement <= extent[1]:
            return CheckResult(spec.label, "pass", expected, f"region at line {extent[0]}",
                               f"{where} ran in the compute region at line {extent[0]}",
                               line=line, pattern=spec.pattern)
    unplaced = sum(1 for c in ran.constructs if c.line is None)
    for directive in loops.compute_constructs(code, ev.language):
        extent = loops.construct_extent(code, directive, ev.language)
        if extent is not None and extent[0] <= statement <= extent[1] and unplaced:
            return CheckResult(spec.label, "incomplete", expected, "",
                               f"{plural(unplaced, 'compute region')} ran whose source lines are "
                               f"unknown (the build has no line tables): whether {where} ran in "
                               "one of them cannot be told", line=line, pattern=spec.pattern)
        if extent is not None and extent[0] <= statement <= extent[1]:
            return CheckResult(spec.label, "fail", expected, "region never ran",
                               f"{where} is in a compute region (line {directive}) that never "
                               "ran: is the code that holds it called?", line=line,
                               pattern=spec.pattern)
    return CheckResult(spec.label, "fail", expected, "host",
                       f"{where} runs on the host: put it in a compute region", line=line,
                       pattern=spec.pattern)


def _loop_uncounted(spec: CheckSpec, ev: Evidence, where: str, line: int) -> CheckResult:
    """loop_on_device where the regions that ran were not counted: a source without a directive
    ran none (the loop runs on the host); otherwise it cannot be told."""
    expected, pattern = "in a compute region that ran", spec.pattern or ""
    if not has_directives(ev.code, ev.language):
        return CheckResult(spec.label, "fail", expected, "host",
                           f"{where} runs on the host: {NO_DIRECTIVE}", line=line, pattern=pattern)
    return CheckResult(spec.label, "incomplete", expected, "",
                       ev.regions.why if ev.regions is not None else "the regions that ran were "
                       "not counted (only a checked OpenACC run counts them)",
                       line=line, pattern=pattern)


def _student_code(ev: Evidence) -> str:
    """The code numbered as the student reads it (a cell's code starts on its line 2), as the
    regions' lines are: the build numbers them so."""
    return "\n" * (ev.first_line - 1) + code_text(ev.source_text, ev.language)


def _construct(c: ConstructRan, code: str = "", language: str = "c") -> str:
    where = f"line {c.line}" if c.line is not None else "a region"
    # Named by the function it is written in (not the one the compiler inlined it into).
    written = loops.enclosing_function(code, c.line, language) if c.line is not None else None
    function = written or student_symbol(c.function)
    if function:
        where += f" ({function})"
    return f"{where} {'once' if c.count == 1 else f'{c.count} times'}"


def _uses_openmp(spec: CheckSpec, ev: Evidence) -> CheckResult:
    if ev.acc is None:
        return CheckResult(spec.label, "incomplete", "", "", "no compiler report to read")
    want, made = spec.minimum or 1, ev.acc.omp_targets
    expected = f"≥ {plural(want, 'target region')}"
    if made < 1:
        return CheckResult(spec.label, "fail", expected, "0",
                           "the compiler made no OpenMP target region")
    if made < want:
        return CheckResult(spec.label, "fail", expected, str(made),
                           f"{plural(made, 'target region')}, says the compiler, of the {want} "
                           "the exercise asks for: is a loop left on the host?")
    return CheckResult(spec.label, "pass", expected, str(made),
                       f"{plural(made, 'target region')}, says the compiler")


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
        return CheckResult(spec.label, "pass", NO_IMPLICIT, "none", "every array has a data clause")
    names = sorted({i.variable for i in ev.acc.implicit})
    first = ev.acc.implicit[0]
    return CheckResult(spec.label, "fail", NO_IMPLICIT, ", ".join(names), first.detail,
                       line=first.line)


NO_IMPLICIT = "no implicit copy"
SOURCE_EXPECTED = "what the exercise asks for"


def _source(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert spec.regex is not None
    expected = spec.expect or SOURCE_EXPECTED
    if not regex.search(spec.regex, ev.code):
        return CheckResult(spec.label, "fail", expected, "not found",
                           spec.reason or "the source does not have what the exercise asks for",
                           pattern=spec.regex)
    # The line, found in the source as written (comments removed, lines kept).
    written = regex.matches(spec.regex, code_text(ev.source_text, ev.language))
    if not written:
        return CheckResult(spec.label, "pass", expected, "found",
                           "found in the source as the compiler reads it", pattern=spec.regex)
    index = written[0][0]
    line = ev.first_line + index
    text = ev.source_text.splitlines()[index] if index < len(ev.source_text.splitlines()) else ""
    return CheckResult(spec.label, "pass", expected, f"line {line}",
                       f"found at line {line}: {_quoted(text, 70)}", line=line, pattern=spec.regex)


def _trace(spec: CheckSpec, values: Mapping[str, float], ev: Evidence | None) -> CheckResult:
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
        counts = _numbers(spec.per_iteration, output)
        iterations = parse_number(counts[-1]) if counts else None
        if not iterations:
            what = output_line("", spec.per_iteration, "the iteration count")
            return CheckResult(spec.label, "fail", f"≤ {human_bytes(spec.max_bytes)} per iteration",
                               "no iteration count",
                               f"the program did not print {what}: the number of iterations",
                               excerpt=_excerpt(ev, output, None) if ev is not None else "",
                               pattern=spec.per_iteration)
        moved, unit = moved / iterations, " per iteration"
    status: CheckStatus = "pass" if moved <= spec.max_bytes else "fail"
    # Too much moved: placed on the directive inside a loop that moves data, where one does.
    line = loops.transfer_in_loop(_student_code(ev), ev.language) \
        if status == "fail" and ev is not None else None
    return CheckResult(spec.label, status, f"≤ {human_bytes(spec.max_bytes)}{unit}", human_bytes(moved),
                       f"{human_bytes(moved)} moved between host and device{unit}" +
                       ("" if status == "pass" else ": keep the data on the device") +
                       (f" (line {line} moves data at each iteration of its loop)"
                        if line is not None else ""), line=line)


def _busy_subject(values: Mapping[str, float]) -> str:
    """Whose figure a gpu_busy check read: the GPU's, or on several the least busy one's
    (summary.trace_values: each GPU must meet the bound)."""
    gpus = int(values.get("gpus", 1))
    if gpus < 2:
        return "the GPU"
    return f"the least busy of the {gpus} GPUs (GPU {int(values.get('least_busy_gpu', 0))})"


def _gpu_busy(spec: CheckSpec, values: Mapping[str, float], ev: Evidence | None = None) -> CheckResult:
    assert spec.min_share is not None
    busy = values.get("gpu_busy", 0.0)
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
    once = _trace(spec, {timed.key: figure.value}, None)
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
    at_median = _trace(spec, {timed.key: measured.median}, None)
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
    sides = {_trace(spec, {timed.key: v}, None).status for v in measured.samples}
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
    left_out = next((f for f in ev.solution_left_out
                     if f == spec.file or f.startswith(f"{spec.file} (")), None)
    expected = kept_file(ev.solution_dir, spec.file)
    if left_out is not None and not expected.is_file():
        return CheckResult(spec.label, "incomplete", spec.file, "",
                           f"the course's reference does not keep the solution's {left_out}: "
                           "the check needs the solution itself")
    return image_check(ev.run_dir / spec.file, expected, spec.label,
                       min_psnr=spec.min_psnr, max_diff=spec.max_diff, raw=spec.raw)


def human_bytes(n: float) -> str:
    """1073741904 -> '1.07 GB': short enough for the verdict table."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


OPENACC_BUILD = "OpenACC build"
# What INCOMPLETE says where the run was built for the host and every other check passed
# (Verdict.passed_here): the verdict, the course check and the grade report say it alike.
PASSED_HERE = "every check this machine can evaluate passed; a GPU also evaluates: {checks}"
GPU_ONLY = "needs a GPU: this run was built for the host"
RAN_METHOD = "counted as they ran, OpenACC profiling interface"


def passed_here(gpu_checks: Sequence[CheckResult]) -> str:
    return PASSED_HERE.format(checks=", ".join(dict.fromkeys(c.name for c in gpu_checks)))


# Why a GPU-trace check on a GPU build has no trace: the checks collect theirs on a GPU
# (request/resolve.py's checks_trace), so either no GPU was found or the tracer says why.
NO_TRACE = "needs a GPU trace: {why}"
NO_GPU_HERE = "no GPU was found on this machine (nvidia-smi lists none)"


# Why a GPU-trace check does not judge a run that did not end normally.
CUT_SHORT = ("not judged: the run did not end normally ({how}), and the GPU trace of a run that "
             "stops early can miss work still in flight on the GPU; judged once it ends normally")


def evaluate_one(spec: CheckSpec, ev: Evidence) -> CheckResult:
    kind = registry.get(spec.kind)
    assert kind is not None, spec.kind  # specs accept registered kinds only
    if ev.run is not None and ev.run.proc.start_error is not None and \
            (kind.needs_run or kind.needs_trace):
        # The program never ran (its launcher, a profiler or the box failed): nothing of the
        # student's to judge in what a run shows.
        return CheckResult(spec.label, "incomplete", "", "not run",
                           f"not judged: {_ended(ev.run.proc)}, so it did not run")
    if kind.needs_trace:
        if ev.trace_values is None and ev.target not in (None, "gpu"):
            # Built for the host: only a GPU can say; the verdict names it (PASSED_HERE).
            return CheckResult(spec.label, "incomplete", "", "", GPU_ONLY, gpu_only=True)
        if ev.trace_values is None:
            return CheckResult(spec.label, "incomplete", "", "",
                               NO_TRACE.format(why=ev.trace_problem or NO_GPU_HERE))
        if ev.run is not None and not ev.run.proc.ok:
            # A program that dies with kernels queued (libgomp's fatal errors exit at once)
            # leaves a trace with or without them, as the GPU's timing has it: the same program
            # gave 0 kernels graded at -j 1 and 3 at -j 8 (an H100). Its verdict already fails
            # on how it ended; these checks wait for a run that ends.
            return CheckResult(spec.label, "incomplete", "", "",
                               CUT_SHORT.format(how=ev.run.proc.describe()))
        return _trace(spec, ev.trace_values, ev)
    if ev.build is None or not ev.build.ok:
        if spec.kind == "source":
            return _source(spec, ev)
        return CheckResult(spec.label, "fail", "", "not built",
                           "the program did not build (see the compiler's messages)")
    if kind.needs_run and ev.run is None:
        return CheckResult(spec.label, "incomplete", "", "", "the program was not run (-n)")
    assert kind.evaluate is not None
    return kind.evaluate(spec, ev)


# The verdict of a program that did not build: one row, the compiler's first error and the end
# of what it said; no check judges it (a source check would still match the text: a program
# that does not build earns nothing).
NOT_BUILT = "builds"
NOT_BUILT_LINES = 12


def _not_built(ev: Evidence) -> CheckResult:
    assert ev.build is not None
    said = [line for line in ev.build.output.splitlines() if line.strip()]
    first = next((line.strip() for line in said if "error" in line.lower()),
                 said[0].strip() if said else "")
    reason = "the program did not build" + (f": {first}" if first else
                                            " (the compiler said nothing)")
    if ev.build.refused:
        reason = f"the program did not build: {ev.build.refused}"
    return CheckResult(NOT_BUILT, "fail", "the program builds", "not built", reason,
                       kind=BUILD_ROW, excerpt="\n".join(said[:NOT_BUILT_LINES]))


def evaluate(exercise: Exercise, ev: Evidence) -> Verdict:
    if ev.build is not None and not ev.build.ok:
        return Verdict(exercise=exercise.name, checks=(_not_built(ev),))
    checks = [replace(evaluate_one(spec, ev), check=spec.index) for spec in exercise.checks]
    if not ev.acc_requested and exercise.model == "openacc":
        # Without -a the directives are comments: what the checks say is not about OpenACC.
        checks.insert(0, CheckResult(OPENACC_BUILD, "incomplete", "built with -a", "built without -a",
                                     "add -a to the line: the exercise checks the OpenACC version"))
    return Verdict(exercise=exercise.name, checks=tuple(checks))


def evaluate_hidden(exercise: Exercise, ev: Evidence, index: int) -> tuple[CheckResult, ...]:
    """The output checks again, on a run with the index-th hidden argument set (grading)."""
    return tuple(replace(evaluate_one(spec, ev), name=f"{spec.label} (hidden run {index + 1})",
                         hidden=index + 1, kind=spec.kind, check=spec.index)
                 for spec in exercise.checks if _hidden_runs(spec))


def _hidden_runs(spec: CheckSpec) -> bool:
    kind = registry.get(spec.kind)
    return kind is not None and kind.hidden_runs


# What each kind reads of its [[check]] table besides the fields every check has: one reader
# per kind, each returning CheckSpec's fields by name.
def _value_fields(t: Table) -> dict[str, Any]:
    pattern = t.pattern("pattern", "number")
    expected = t.number("expected")
    if expected is None:
        raise t.err("expected", "a value check needs the expected number")
    return {"pattern": pattern, "expected": expected}


def _line_fields(t: Table) -> dict[str, Any]:
    if ("regex" in t.raw) == ("exact" in t.raw):
        raise t.err("", "a line check needs exactly one of 'regex' or 'exact'")
    return {"regex": t.pattern("regex")} if "regex" in t.raw else {"exact": t.string("exact")}


def _regions_fields(t: Table) -> dict[str, Any]:
    minimum = t.number("min", 1)
    if minimum is None or minimum < 1 or minimum != int(minimum):
        raise t.err("min", f"a {t.raw.get('kind')} check needs min, a whole number ≥ 1")
    return {"minimum": int(minimum)}


def _data_moved_fields(t: Table) -> dict[str, Any]:
    max_bytes = t.number("max_bytes")
    if max_bytes is None:
        raise t.err("max_bytes", "a data_moved check needs max_bytes")
    fields: dict[str, Any] = {"max_bytes": max_bytes}
    if "per_iteration" in t.raw:
        fields["per_iteration"] = t.pattern("per_iteration", "count")
    return fields


def _gpu_busy_fields(t: Table) -> dict[str, Any]:
    share = t.number("min")
    if share is None or not 0 < share <= 1:
        raise t.err("min", "a gpu_busy check needs min, a fraction in (0, 1]")
    return {"min_share": share}


def _image_fields(t: Table) -> dict[str, Any]:
    name = t.string("file")
    if "/" in name or name.startswith("."):
        raise t.err("file", "a file name in the program's folder, e.g. blur.pgm")
    fields: dict[str, Any] = {"file": name, "min_psnr": t.number("min_psnr"),
                              "max_diff": t.number("max_diff")}
    if "width" in t.raw or "height" in t.raw or "dtype" in t.raw:
        width, height, dtype = t.number("width"), t.number("height"), t.string("dtype")
        if not width or not height:
            raise t.err("", "a raw image needs width, height and dtype")
        fields["raw"] = (int(width), int(height), dtype)
    return fields


def _pattern(group: str = "") -> Callable[[Table], dict[str, Any]]:
    return lambda t: {"pattern": t.pattern("pattern", group)}


# idrrun's kinds, one record each, grouped by what they read (checks/registry.py).
OUTPUT = (
    Kind("exit_ok", "output", "ends normally", "the program ends normally", _exit_ok,
         needs_run=True, hidden_runs=True),
    Kind("value", "output", "value", "{label} is right", _value, fields=_value_fields,
         keys=frozenset({"pattern", "expected"}), needs_run=True, hidden_runs=True),
    Kind("line", "output", "prints the line", "the program prints {label}", _line,
         fields=_line_fields, keys=frozenset({"regex", "exact"}), needs_run=True, hidden_runs=True),
    Kind("matches_solution", "output", "same as the solution", "{label} is the solution's",
         _matches_solution, fields=_pattern("number"), keys=frozenset({"pattern"}),
         needs_run=True, needs_solution=True, hidden_runs=True),
    Kind("image", "output", "picture", "{label} is the solution's", _image, fields=_image_fields,
         keys=frozenset({"file", "min_psnr", "max_diff", "width", "height", "dtype"}),
         needs_run=True, needs_solution=True, hidden_runs=True),
    # The GPU's output against the same build's on the host, at the host arguments: a run of
    # its own, public only.
    Kind("agrees_with_host", "output", "GPU as host",
         "{label} is the same on the GPU as on the host", _agrees_with_host,
         fields=_pattern("number"), keys=frozenset({"pattern"}), needs_run=True),
)
PROGRAM = (
    Kind("uses_openacc", "program", "uses OpenACC", "OpenACC compute regions run", _uses_openacc,
         model="openacc"),
    Kind("no_implicit_data", "program", "data clauses",
         "every array in a compute region has a data clause", _no_implicit_data),
    Kind("source", "program", "in the source", "the source has {label}", _source,
         fields=lambda t: {"regex": t.pattern("regex")}, keys=frozenset({"regex"})),
    Kind("uses_openmp", "program", "uses OpenMP offload",
         "the compiler makes {min} OpenMP target regions", _uses_openmp, fields=_regions_fields,
         keys=frozenset({"min"}), model="openmp"),
    Kind("regions_ran", "program", "compute regions run", "{min} compute regions run",
         _regions_ran, fields=_regions_fields, keys=frozenset({"min"}), needs_run=True,
         model="openacc"),
    Kind("loop_on_device", "program", "loop on the device", "{label} runs in a compute region",
         _loop_on_device, fields=_pattern(), keys=frozenset({"pattern"}), needs_run=True,
         model="openacc"),
)
TRACE = (
    Kind("ran_on_gpu", "trace", "runs on the GPU", "kernels run on the GPU", trace=_ran_on_gpu),
    Kind("queues", "trace", "async queues", "{min} async queues run kernels", trace=_queues,
         fields=lambda t: {"minimum": int(t.number("min", 1) or 1)}, keys=frozenset({"min"})),
    Kind("data_moved", "trace", "data moved", "the data stays on the device ({label})",
         trace=_data_moved, fields=_data_moved_fields, keys=frozenset({"max_bytes", "per_iteration"})),
    # A share of time: it depends on what else runs beside the program, so a run checked by one
    # waits for a GPU of its own and its figure is measured over several runs (checks/measure.py).
    Kind("gpu_busy", "trace", "GPU busy", "the GPU is busy enough ({label})", trace=_gpu_busy,
         fields=_gpu_busy_fields, keys=frozenset({"min"}),
         timed=TimedFigure("gpu_busy", lambda spec: spec.min_share, 100.0, " %")),
)
for _declared in (*OUTPUT, *PROGRAM, *TRACE):
    registry.register(_declared)
