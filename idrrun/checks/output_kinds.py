"""The check kinds that read what the program printed or wrote: its exit, a value, a line, its
values beside the solution's or beside the same build's on the host, a picture beside the
solution's. Each is evaluated again on every hidden run. Pure: no processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import CheckResult
from . import regex, registry
from .evidence import (Evidence, close_enough, how_it_ended, number_text, numbers_printed,
                       output_excerpt, parse_number, quoted, tolerance_text)
from .reference import kept_file
from .registry import Kind
from .spec_fields import Table
from .spec_values import CheckSpec
from .words import listed, output_line, printed_name


def _exit_ok(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None
    p = ev.run.proc
    if p.ok:
        return CheckResult(spec.label, "pass", "exit 0", "exit 0", "the program ended normally")
    return CheckResult(spec.label, "fail", "exit 0", p.describe(), how_it_ended(p),
                       excerpt=output_excerpt(ev, p.output, None))


def _value(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None and spec.pattern is not None and spec.expected is not None
    expected = number_text(spec.expected) + tolerance_text(spec)
    output = ev.run.proc.output
    found = regex.matches(spec.pattern, output)
    what = output_line(spec.expect, spec.pattern, spec.label)
    if not found:
        return CheckResult(spec.label, "fail", expected, "not printed",
                           f"the program did not print {what}", excerpt=output_excerpt(ev, output, None),
                           pattern=spec.pattern)
    at, raw = found[-1]
    got = parse_number(raw)
    shown = output_excerpt(ev, output, at)
    if got is None:
        return CheckResult(spec.label, "fail", expected, raw,
                           f"{spec.label} is printed as '{raw}', which is not a number",
                           excerpt=shown, pattern=spec.pattern)
    if close_enough(got, spec.expected, spec.abs_tol, spec.rel_tol):
        return CheckResult(spec.label, "pass", expected, number_text(got),
                           f"{spec.label} = {number_text(got)}", pattern=spec.pattern)
    return CheckResult(spec.label, "fail", expected, number_text(got),
                       f"{spec.label} is {number_text(got)}, expected {number_text(spec.expected)}",
                       excerpt=shown, pattern=spec.pattern)



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
        return CheckResult(spec.label, "pass", expected, "printed", f"printed {quoted(printed)}",
                           pattern=pattern)
    return CheckResult(spec.label, "fail", expected, "not printed",
                       f"the program did not print {expected}", excerpt=output_excerpt(ev, output, None),
                       pattern=pattern)



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
    want = numbers_printed(pattern, ev.solution_output)
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
                           excerpt=output_excerpt(ev, output, at), pattern=pattern)
    for i, (w, g) in enumerate(zip(want, got)):
        which = (printed_name(pattern) or "the value") if len(want) == 1 else f"value {i + 1} of {len(want)}"
        wv, gv = parse_number(w), parse_number(g)
        differs = w != g if wv is None or gv is None else \
            not close_enough(gv, wv, spec.abs_tol, spec.rel_tol)
        if differs:
            expected = w if wv is None or gv is None else w + tolerance_text(spec)
            return CheckResult(spec.label, "fail", expected, g,
                               side.value.format(which=which, got=g, want=w),
                               excerpt=output_excerpt(ev, output, found[i][0]), pattern=pattern)
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
    want = numbers_printed(spec.pattern, compared.host_output)
    if not want:
        what = output_line(spec.expect, spec.pattern, spec.label)
        return CheckResult(spec.label, "incomplete", "", "",
                           f"on the host the program does not print {what}", pattern=spec.pattern)
    return _compare(spec, ev, want, compared.device_output, _HOST)



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


# The output kinds, one record each (checks/registry.py); registered in this order.
OUTPUT = (
    Kind("exit_ok", "output", "ends normally", "the program ends normally", _exit_ok,
         needs_run=True, hidden_runs=True, judges_the_end=True),
    Kind("value", "output", "value", "{label} is right", _value, fields=_value_fields,
         keys=frozenset({"pattern", "expected"}), needs_run=True, hidden_runs=True,
         label_from=lambda name, exact, file: name),
    Kind("line", "output", "prints the line", "the program prints {label}", _line,
         fields=_line_fields, keys=frozenset({"regex", "exact"}), needs_run=True, hidden_runs=True,
         label_from=lambda name, exact, file: f"prints '{exact.strip()[:30]}'" if exact else None),
    Kind("matches_solution", "output", "same as the solution", "{label} is the solution's",
         _matches_solution, fields=_pattern("number"), keys=frozenset({"pattern"}),
         needs_run=True, needs_solution=True, hidden_runs=True,
         label_from=lambda name, exact, file: f"{name} as the solution's" if name else None),
    Kind("image", "output", "picture", "{label} is the solution's", _image, fields=_image_fields,
         keys=frozenset({"file", "min_psnr", "max_diff", "width", "height", "dtype"}),
         needs_run=True, needs_solution=True, hidden_runs=True,
         label_from=lambda name, exact, file: f"picture {file}" if file else None),
    # The GPU's output against the same build's on the host, at the host arguments: a run of
    # its own, public only.
    Kind("agrees_with_host", "output", "GPU as host",
         "{label} is the same on the GPU as on the host", _agrees_with_host,
         fields=_pattern("number"), keys=frozenset({"pattern"}), needs_run=True, needs_host=True,
         label_from=lambda name, exact, file: f"{name} (GPU as host)" if name else None),
)
for _declared in OUTPUT:
    registry.register(_declared)
