"""Fortran (free form) read for the diagnosis (program.py's values): comments removed, continued
lines and `!$acc` directives joined to their first line, the do loops, the program units, the if
blocks, the arrays (declared with a shape, dimension, allocatable or pointer, or named by a data
clause) and their accesses. Pure; it never raises: what it cannot follow it leaves out.

    read_fortran(text, first_line) -> Program
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .program import (ALLOCATING, IDENT, STRUCTURED, Access, Construct, Directive, Function, Loop,
                      Program, attach, closing, directive, split_top)

_F_SENTINEL = re.compile(r"^[ \t]*!\$acc\b&?(.*)$", re.IGNORECASE)
_F_DO = re.compile(r"^(?:\d+\s+)?(?:[A-Za-z_]\w*\s*:\s*)?do\b(?:\s*while\b|\s+([A-Za-z_]\w*)\s*="
                   r"|\s*$)", re.IGNORECASE)
_F_END_DO = re.compile(r"^(?:\d+\s+)?end\s*do\b", re.IGNORECASE)
_F_UNIT = re.compile(r"\b(subroutine|function|program)\s+([A-Za-z_]\w*)", re.IGNORECASE)
_F_UNIT_END = re.compile(r"^end\s*(?:(subroutine|function|program)\b.*)?$", re.IGNORECASE)
_F_DECL = re.compile(r"^(?P<attrs>[^:]*)::(?P<names>.*)$")
_F_KEYWORDS = frozenset({"if", "then", "else", "do", "while", "end", "call", "print", "write",
                         "read", "allocate", "deallocate", "return", "select", "case", "max",
                         "min", "abs", "sqrt", "real", "int", "mod", "size", "sum", "exp", "sin",
                         "cos", "dble", "nint", "floor", "present", "open", "close", "stop"})


def _strip_fortran(line: str) -> str:
    """A line without its comment (after a `!` outside quotes), strings blanked."""
    out, quote = [], ""
    for ch in line:
        if quote:
            out.append(ch if ch == quote else " ")
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "!":
            break
        else:
            out.append(ch)
    return "".join(out)


def _fortran_statements(lines: Sequence[str]) -> tuple[list[str], list[tuple[int, str]],
                                                       list[tuple[int, int, str]]]:
    """(code lines, statements as (line index, text), directives as (first, last, text)):
    continued lines joined to their first, comments removed."""
    code: list[str] = []
    statements: list[tuple[int, str]] = []
    directives: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines):
        sentinel = _F_SENTINEL.match(lines[i])
        if sentinel is not None:
            text, at = _strip_fortran(sentinel.group(1)), i
            code.append(lines[i])
            while text.rstrip().endswith("&") and i + 1 < len(lines):
                i += 1
                code.append(lines[i])
                more = _F_SENTINEL.match(lines[i])
                text = text.rstrip()[:-1] + " " + _strip_fortran(more.group(1) if more else lines[i])
            directives.append((at, i, text))
            i += 1
            continue
        text, at = _strip_fortran(lines[i]), i
        code.append(text)
        while text.rstrip().endswith("&") and i + 1 < len(lines):
            i += 1
            rest = _strip_fortran(lines[i])
            code.append(rest)
            text = text.rstrip()[:-1] + " " + rest.lstrip().lstrip("&")
        if text.strip():
            statements.append((at, text.strip()))
        i += 1
    return code, statements, directives


def _fortran_loops(statements: Sequence[tuple[int, str]],
                   first_line: int) -> list[tuple[int, int, str]]:
    out, stack = [], []
    for at, text in statements:
        m = _F_DO.match(text)
        if m is not None:
            stack.append((at, (m.group(1) or "").lower()))
        elif _F_END_DO.match(text) and stack:
            start, var = stack.pop()
            out.append((first_line + start, first_line + at, var))
    return out


def _fortran_units(statements: Sequence[tuple[int, str]], first_line: int) -> list[Function]:
    out: list[Function] = []
    stack: list[tuple[str, str, int]] = []
    for at, text in statements:
        end = _F_UNIT_END.match(text)
        if end is not None:
            if stack:
                name, kind, start = stack.pop()
                out.append(Function(name, first_line + start, first_line + at, kind))
            continue
        unit = _F_UNIT.search(text)
        if unit is not None and not text.lower().startswith(("call", "end")):
            stack.append((unit.group(2).lower(), unit.group(1).lower(), at))
    return out


def _fortran_conditionals(statements: Sequence[tuple[int, str]],
                          first_line: int) -> list[tuple[int, int]]:
    out, stack = [], []
    for at, text in statements:
        lower = text.lower()
        if re.match(r"(?:[a-z_]\w*\s*:\s*)?if\s*\(", lower):
            if re.search(r"\)\s*then\s*$", lower):
                stack.append(at)
            else:
                out.append((first_line + at, first_line + at))
        elif re.match(r"end\s*if\b", lower) and stack:
            out.append((first_line + stack.pop(), first_line + at))
    return out


def _fortran_arrays(statements: Sequence[tuple[int, str]],
                    directives: Sequence[Directive]) -> set[str]:
    """The names declared as arrays (a shape, dimension, allocatable, pointer) or named in a
    data clause."""
    arrays: set[str] = set()
    for _, text in statements:
        m = _F_DECL.match(text)
        if m is None:
            continue
        whole = re.search(r"\b(dimension|allocatable|pointer)\b", m.group("attrs"), re.IGNORECASE)
        for item in split_top(m.group("names")):
            name = IDENT.match(item.strip())
            if name is not None and (whole or "(" in item.split("=")[0]):
                arrays.add(name.group(0).lower())
    for d in directives:
        for n in d.named(ALLOCATING | {"present", "delete", "self", "host", "device"}):
            arrays.add(n.lower().split("%")[-1])
    return arrays


def _fortran_accesses(statements: Sequence[tuple[int, str]], arrays: set[str],
                      first_line: int) -> list[Access]:
    out = []
    for at, text in statements:
        begin = _guarded(text)
        lhs_end = _assignment(text[begin:])
        for m in re.finditer(r"(?<![\w%])([A-Za-z_]\w*(?:\s*%\s*[A-Za-z_]\w*)*)\s*(\()?", text):
            name = re.sub(r"\s+", "", m.group(1)).lower()
            if name.split("%")[-1] not in arrays or name in _F_KEYWORDS:
                continue
            subscripts: tuple[str, ...] = ()
            if m.group(2):
                close = closing(text, m.end() - 1)
                subscripts = tuple(s.strip() for s in split_top(text[m.end():close]))
            write = lhs_end is not None and m.start() == begin
            update = write and lhs_end is not None and re.search(
                rf"(?<![\w%]){re.escape(m.group(1))}(?![\w%])", text[begin + lhs_end + 1:],
                re.IGNORECASE) is not None
            out.append(Access(name, subscripts, first_line + at, m.start(), write, update))
    return out


def _guarded(text: str) -> int:
    """Where the statement of a one-line `if (...) statement` starts (0 for another)."""
    m = re.match(r"(?:if|where)\s*\(", text, re.IGNORECASE)
    if m is None:
        return 0
    close = closing(text, m.end() - 1)
    rest = text[close + 1:]
    if rest.strip().lower().startswith("then") or not rest.strip():
        return 0
    return close + 1 + len(rest) - len(rest.lstrip())


def _assignment(text: str) -> int | None:
    """Where the `=` of an assignment statement is, None for another statement."""
    if re.match(r"(?:if|do|call|print|write|read|allocate|deallocate|where|forall|select)\b",
                text, re.IGNORECASE):
        return None
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "=" and depth == 0:
            pair = text[max(i - 1, 0):i + 2]
            if any(op in pair for op in ("==", "/=", "<=", ">=", "=>")):
                return None
            return i
    return None


def _fortran_constructs(directives: Sequence[Directive], loops: Sequence[Loop]) -> list[Construct]:
    """A combined construct (parallel loop) holds the loop after it; the others reach their
    end directive (the last one opened of the same kind)."""
    out: list[Construct] = []
    opened: list[Directive] = []
    ordered = sorted(loops, key=lambda lp: lp.line)
    for d in directives:
        if d.name.startswith("end"):
            base = d.name.split()[1] if len(d.name.split()) > 1 else ""
            if d.name.endswith("loop"):
                continue  # the optional end of a combined construct
            match = next((k for k in range(len(opened) - 1, -1, -1)
                          if opened[k].construct == base), None)
            if match is not None:
                out.append(Construct(opened[match], d.line))
                del opened[match:]
        elif d.construct in STRUCTURED and d.loops:
            following = next((lp for lp in ordered if lp.line > d.last), None)
            if following is not None:
                out.append(Construct(d, following.end))
        elif d.construct in STRUCTURED:
            opened.append(d)
    return sorted(out, key=lambda c: c.line)


def read_fortran(text: str, first_line: int) -> Program:
    code, statements, raw = _fortran_statements(text.split("\n"))
    directives = [directive(first_line + a, first_line + b, t) for a, b, t in raw]
    loops = attach(directives, _fortran_loops(statements, first_line))
    arrays = _fortran_arrays(statements, directives)
    return Program("fortran", first_line, tuple(code), tuple(directives), tuple(loops),
                   tuple(_fortran_constructs(directives, loops)),
                   tuple(_fortran_accesses(statements, arrays, first_line)),
                   tuple(_fortran_units(statements, first_line)),
                   tuple(_fortran_conditionals(statements, first_line)))
