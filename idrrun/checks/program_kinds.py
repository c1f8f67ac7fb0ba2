"""The check kinds that read the program itself: its source, the compiler's report, the compute
regions its run executed (OpenACC profiling) and where their loops are. Pure: no processes.
"""

from __future__ import annotations

from typing import Any

from ..model import AccReport, CheckResult, ConstructRan, RegionsRan
from ..toolchains.diagnostics import student_symbol
from . import loops, regex, registry
from .directives import code_text, has_directives
from .evidence import CodeFile, Evidence, file_of, quoted, student_files
from .registry import Kind
from .spec_fields import Table
from .spec_values import CheckSpec
from .words import listed, plural


# How uses_openacc knows the compute regions that ran, in its reason.
RAN_METHOD = "counted as they ran, OpenACC profiling interface"


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
    which = listed([_construct(c, ev) for c in ran.constructs], 6) or "none"
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


def _statement(ev: Evidence, pattern: str) -> tuple[CodeFile, int] | None:
    """The file of hers and the line where the spec's statement is: the first line it matches
    in the source, else in her headers, in the order included."""
    for file in student_files(ev):
        line = loops.statement_line(file.code, pattern)
        if line is not None:
            return file, line
    return None


# Complexity: the chain of facts the check needs (the statement, its loop, a construct around it,
# the construct ran), each said apart when missing.
def _loop_on_device(spec: CheckSpec, ev: Evidence) -> CheckResult:
    """The loop around the statement spec.pattern names, in a compute construct that ran: the
    constructs' lines come from the regions the run executed, their extents from the file of
    hers they are in (the source, or a header it includes)."""
    assert spec.pattern is not None
    expected = "in a compute region that ran"
    found = _statement(ev, spec.pattern)
    if found is None:
        return CheckResult(spec.label, "incomplete", expected, "not found",
                           f"{spec.label} was not found in the source: is it still written as "
                           "in the start file?", pattern=spec.pattern)
    file, statement = found
    code = file.code
    line = loops.enclosing_loop(code, statement, ev.language) or statement
    where = f"{spec.label} ({file.at(line)})"
    # The listing a feedback annotates is the source's: a line of a header is said, not placed.
    placed = line if file.placed else None
    ran = _ran(ev)
    if ran is None or not ran.counted:
        return _loop_uncounted(spec, ev, where, placed)
    for construct in ran.constructs:
        extent = loops.construct_extent(code, construct.line, ev.language) \
            if construct.line is not None and file_of(ev, construct.file) == file else None
        if extent is not None and extent[0] <= statement <= extent[1]:
            return CheckResult(spec.label, "pass", expected, f"region at {file.at(extent[0])}",
                               f"{where} ran in the compute region at {file.at(extent[0])}",
                               line=placed, pattern=spec.pattern)
    unplaced = sum(1 for c in ran.constructs if c.line is None)
    for directive in loops.compute_constructs(code, ev.language):
        extent = loops.construct_extent(code, directive, ev.language)
        if extent is not None and extent[0] <= statement <= extent[1] and unplaced:
            return CheckResult(spec.label, "incomplete", expected, "",
                               f"{plural(unplaced, 'compute region')} ran whose source lines are "
                               f"unknown (the build has no line tables): whether {where} ran in "
                               "one of them cannot be told", line=placed, pattern=spec.pattern)
        if extent is not None and extent[0] <= statement <= extent[1]:
            return CheckResult(spec.label, "fail", expected, "region never ran",
                               f"{where} is in a compute region ({file.at(directive)}) that never "
                               "ran: is the code that holds it called?", line=placed,
                               pattern=spec.pattern)
    return CheckResult(spec.label, "fail", expected, "host",
                       f"{where} runs on the host: put it in a compute region", line=placed,
                       pattern=spec.pattern)


def _loop_uncounted(spec: CheckSpec, ev: Evidence, where: str, line: int | None) -> CheckResult:
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


def _construct(c: ConstructRan, ev: Evidence) -> str:
    """A construct that ran, in words: where it is written (its file of hers, its line, the
    function around it), and how often it ran."""
    file = file_of(ev, c.file)
    where = file.at(c.line) if c.line is not None else "a region"
    # Named by the function it is written in (not the one the compiler inlined it into).
    written = loops.enclosing_function(file.code, c.line, ev.language) if c.line is not None else None
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
    # The line, found in the source as written (comments removed, lines kept), else in one of
    # her headers (said, not placed: the annotated listing is the source's).
    written = regex.matches(spec.regex, code_text(ev.source_text, ev.language))
    if not written:
        for name, header in ev.headers:
            inside = regex.matches(spec.regex, code_text(header, ev.language))
            if inside:
                index = inside[0][0]
                rows = header.splitlines()
                text = rows[index] if index < len(rows) else ""
                return CheckResult(spec.label, "pass", expected, f"{name}, line {index + 1}",
                                   f"found in {name} at line {index + 1}: {quoted(text, 70)}",
                                   pattern=spec.regex)
        return CheckResult(spec.label, "pass", expected, "found",
                           "found in the source as the compiler reads it", pattern=spec.regex)
    index = written[0][0]
    line = ev.first_line + index
    text = ev.source_text.splitlines()[index] if index < len(ev.source_text.splitlines()) else ""
    return CheckResult(spec.label, "pass", expected, f"line {line}",
                       f"found at line {line}: {quoted(text, 70)}", line=line, pattern=spec.regex)



def _regions_fields(t: Table) -> dict[str, Any]:
    minimum = t.number("min", 1)
    if minimum is None or minimum < 1 or minimum != int(minimum):
        raise t.err("min", f"a {t.raw.get('kind')} check needs min, a whole number ≥ 1")
    return {"minimum": int(minimum)}



# The program kinds, one record each (checks/registry.py); registered in this order.
PROGRAM = (
    Kind("uses_openacc", "program", "uses OpenACC", "OpenACC compute regions run", _uses_openacc,
         model="openacc", report_rows=frozenset({"regions"}), reads_regions=True),
    Kind("no_implicit_data", "program", "data clauses",
         "every array in a compute region has a data clause", _no_implicit_data,
         report_rows=frozenset({"regions", "implicit"})),
    # The source is there to read whether or not it built.
    Kind("source", "program", "in the source", "the source has {label}", _source,
         fields=lambda t: {"regex": t.pattern("regex")}, keys=frozenset({"regex"}),
         judged_unbuilt=True),
    Kind("uses_openmp", "program", "uses OpenMP offload",
         "the compiler makes {min} OpenMP target regions", _uses_openmp, fields=_regions_fields,
         keys=frozenset({"min"}), model="openmp", report_rows=frozenset({"omp_targets"})),
    Kind("regions_ran", "program", "compute regions run", "{min} compute regions run",
         _regions_ran, fields=_regions_fields, keys=frozenset({"min"}), needs_run=True,
         model="openacc", reads_regions=True),
    Kind("loop_on_device", "program", "loop on the device", "{label} runs in a compute region",
         _loop_on_device, fields=lambda t: {"pattern": t.pattern("pattern")},
         keys=frozenset({"pattern"}), needs_run=True, model="openacc", names_the_hot_loop=True,
         reads_regions=True),
)
for _declared in PROGRAM:
    registry.register(_declared)
