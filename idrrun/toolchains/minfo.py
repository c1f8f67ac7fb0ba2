"""nvhpc and pgi feedback: what nvc/nvfortran (pgcc/pgf90) said of a program's OpenACC directives.

Exercise checks ask two questions of a build: did the compiler create at least one OpenACC
compute region (parallel, kernels, serial), and which arrays reach a compute region without a
data clause naming them, so that the runtime moves them (or, for a C pointer under gcc, fails to
move them) implicitly. The answers come from what the compiler wrote, never from the source:
a directive the compiler ignored (no -fopenacc, a typo) creates no region.

nvhpc (nvc / nvfortran). The text of -Minfo=accel: a compute region is a line group that says
"Generating NVIDIA GPU code" (older: "Generating Tesla code", "Accelerator kernel generated";
"Generating Multicore code" for the host target) and is not an `acc routine`. Implicit data is
"Generating implicit copy|copyin|copyout|create(...)" on a name with an array section, `x[...]`
in C or `x(...)` in Fortran: nvhpc prints whole arrays with a section (`a[:]`, `a(:)`), so a
bare name is a scalar (a reduction variable, a counter) or a struct, and is left out.

Everything here is pure: the texts come in, frozen values go out, nothing raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import AccReport, DataMove, ImplicitData, Remark
from .feedback import MSG_NVHPC, MSG_NVHPC_UNKNOWN, at as _at, balanced as _balanced, split_top as _split_top
from .remarks import explain

NVHPC_METHOD = "nvhpc -Minfo=accel"


@dataclass(frozen=True)
class _Message:
    function: str
    line: int
    text: str


_NV_NUMBERED = re.compile(r"^\s+(?P<line>\d+),\s*(?P<text>.*)$")
_NV_FUNCTION = re.compile(r"^(?P<name>\S.*):\s*$")
_NV_CODEGEN = re.compile(r"Generating (?:NVIDIA GPU|Tesla|Multicore|Radeon|AMD GPU) code"
                         r"|Accelerator (?:serial )?kernel generated")
_NV_IMPLICIT = re.compile(r"Generating implicit (?P<clause>copy|copyin|copyout|create)\(")
# Every data clause -Minfo reports, explicit or not, for the arrays each construct moves.
_NV_DATA = re.compile(r"Generating (?P<implicit>implicit )?(?P<clause>copyin|copyout|copy|create|"
                      r"present|no_create|delete|attach|detach|update (?:device|self|host))\(")
_NV_UNKNOWN_SIZE = re.compile(r"size of the GPU copy of (?P<var>[\w.%>-]+) is unknown")
_NV_KERNELS = re.compile(r"Loop is parallelizable|loop carried dependence|Parallelization would",
                         re.IGNORECASE)


def _minfo_messages(minfo: str) -> list[_Message]:
    """Each message with its function and the line number of the group it belongs to."""
    messages: list[_Message] = []
    function = ""
    line: int | None = None
    for raw in minfo.splitlines():
        text = raw.rstrip()
        if not text:
            continue
        numbered = _NV_NUMBERED.match(text)
        if numbered:
            line = int(numbered.group("line"))
            messages.append(_Message(function, line, numbered.group("text").strip()))
        elif text[0] in " \t":
            if line is not None:
                messages.append(_Message(function, line, text.strip()))
        else:
            header = _NV_FUNCTION.match(text)
            if header:
                function, line = header.group("name"), None
    return messages


_NV_INCLUDE = re.compile(r'^include "')
_NV_CONTEXT = re.compile(r"^Remark: individual warnings|^\d+ errors? detected")


def _remarks(minfo: str) -> tuple[Remark, ...]:
    """Each message of the source's own lines, with its meaning. Messages under an `include
    "x.h"` line (indented deeper) are about the header's lines, and left out."""
    out: list[Remark] = []
    in_header: int | None = None  # the indent of the include line being skipped
    line: int | None = None
    for raw in minfo.splitlines():
        text = raw.rstrip()
        if not text.strip() or not text[0].isspace():
            in_header, line = None, None
            continue
        indent = len(text) - len(text.lstrip())
        numbered = _NV_NUMBERED.match(text)
        if in_header is not None and indent > in_header:
            continue
        in_header = None
        if numbered:
            line, said = int(numbered.group("line")), numbered.group("text").strip()
            if _NV_INCLUDE.match(said):
                in_header, line = indent, None
                continue
        else:
            said = text.strip()
        if line is None or _NV_CONTEXT.match(said):
            continue
        meaning, kind = explain(said)
        out.append(Remark(line, said, meaning, kind))
    return tuple(out)


def _nvhpc_construct(messages: list[_Message], function: str, line: int,
                     codegen: set[tuple[str, int]]) -> str:
    """A best guess, as -Minfo never names the construct.

    parallel and serial report their data and their code at the directive's line; kernels
    reports data at its directive and code at each loop, with the loop analysis that only
    kernels needs ("Loop is parallelizable", dependences).
    """
    if (function, line) not in codegen:
        return "kernels"
    here = [m.text for m in messages if m.function == function and m.line == line]
    if any(_NV_KERNELS.search(t) for t in here):
        return "kernels"
    if any("Accelerator serial kernel generated" in t for t in here):
        return "serial"
    return "parallel"


def _arrays(clause_args: str) -> list[tuple[str, str]]:
    """The arrays of a clause's list, `a[:n]` or `a(:)`, as (name, section): a bare name is a
    scalar or a struct (see the module's docstring)."""
    arrays = []
    for section in _split_top(clause_args):
        cut = min((i for i in (section.find("["), section.find("(")) if i > 0), default=-1)
        if cut > 0:
            arrays.append((section[:cut].strip(), section))
    return arrays


def _data_moves(messages: list[_Message]) -> tuple[DataMove, ...]:
    """Each array each construct moves or expects present, as -Minfo says it."""
    moves: list[DataMove] = []
    for m in messages:
        for found in _NV_DATA.finditer(m.text):
            args = m.text[found.end() - 1:_balanced(m.text, found.end() - 1)][1:-1]
            moves += [DataMove(name, found.group("clause"), m.line, bool(found.group("implicit")))
                      for name, _ in _arrays(args)]
    return tuple(dict.fromkeys(moves))


def from_nvhpc_minfo(minfo: str) -> AccReport:
    """Compute regions and implicit data from the text of nvc/nvfortran -Minfo=accel."""
    try:
        messages = _minfo_messages(minfo)
        routines = {(m.function, m.line) for m in messages if "acc routine" in m.text}
        codegen = {(m.function, m.line) for m in messages
                   if _NV_CODEGEN.search(m.text) and (m.function, m.line) not in routines}
        implicit: list[ImplicitData] = []
        seen: set[tuple[str, int, str]] = set()
        for m in messages:
            found: list[tuple[str, str]] = []  # (variable, detail template argument)
            imp = _NV_IMPLICIT.search(m.text)
            if imp:
                args = m.text[imp.end() - 1:_balanced(m.text, imp.end() - 1)][1:-1]
                found += [(name, f"{imp.group('clause')}({section})") for name, section in _arrays(args)]
            unknown = _NV_UNKNOWN_SIZE.search(m.text)
            if unknown:
                found.append((unknown.group("var").rstrip("->").rstrip("-"), ""))
            for variable, clause in found:
                if (m.function, m.line, variable) in seen:
                    continue
                seen.add((m.function, m.line, variable))
                construct = _nvhpc_construct(messages, m.function, m.line, codegen)
                template = MSG_NVHPC if clause else MSG_NVHPC_UNKNOWN
                implicit.append(ImplicitData(variable, m.line, construct, template.format(
                    var=variable, construct=construct, at=_at(m.line), clause=clause)))
        try:
            said = _remarks(minfo)
        except Exception:  # noqa: BLE001 - what the annotated source shows never costs a check
            said = ()
        return AccReport(len(codegen), tuple(implicit), NVHPC_METHOD, remarks=said,
                         moves=_data_moves(messages))
    except Exception:  # noqa: BLE001 - odd input gives an empty answer (see module doc)
        return AccReport(0, (), NVHPC_METHOD)
