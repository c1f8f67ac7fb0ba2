"""Where a loop of a source lies, and which compute constructs hold it: what `loop_on_device`
asks of the constructs a run executed (profile/regions.py gives their lines).

    statement_line(code, pattern)              the first line a statement's regex matches
    enclosing_loop(code, line, language)       the header line of the loop around that line
    construct_extent(code, line, language)     the lines a compute construct starting there holds
    compute_constructs(code, language)         the lines of every compute directive
    enclosing_function(code, line, language)   the name of the function written around a line
    transfer_in_loop(code, language)           the directive inside a loop that moves data

`code` is the source as code_text leaves it (comments blanked, lines kept), so that line numbers
are the student's. Pure, linear in the text, and it never raises: a submission may be anything;
what cannot be read as a loop or a construct is None.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from . import regex

# A compute construct's directive, and whether a loop directive is combined with it.
_C_COMPUTE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+acc[ \t]+(parallel|kernels|serial)\b(.*)$")
_F_COMPUTE = re.compile(r"^[ \t]*!\$acc[ \t]+(parallel|kernels|serial)\b(.*)$", re.IGNORECASE)
_F_END = re.compile(r"^[ \t]*!\$acc[ \t]+end[ \t]*(parallel|kernels|serial)\b", re.IGNORECASE)
_C_LOOP = re.compile(r"^[ \t]*(?:\}[ \t]*)?(for|while|do)\b")
_F_DO = re.compile(r"^[ \t]*(?:\d+[ \t]+)?(?:[A-Za-z_]\w*[ \t]*:[ \t]*)?do\b(?![ \t]*=)",
                   re.IGNORECASE)
_F_END_DO = re.compile(r"^[ \t]*(?:\d+[ \t]+)?end[ \t]*do\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z_]\w*")
# The statements C code nests (their header, then a statement of their own).
_C_HEADED = ("for", "while", "if", "switch")


def statement_line(code: str, pattern: str) -> int | None:
    """The first line (from 1) that the spec's regex matches, line by line."""
    for number, line in enumerate(code.split("\n"), 1):
        if regex.search(pattern, line):
            return number
    return None


def _fortran(language: str) -> bool:
    return language.strip().lower() == "fortran"


def compute_constructs(code: str, language: str) -> list[int]:
    """The lines of the compute directives (parallel, kernels, serial) of the source."""
    pattern = _F_COMPUTE if _fortran(language) else _C_COMPUTE
    return [n for n, line in enumerate(code.split("\n"), 1) if pattern.match(line)]


def enclosing_loop(code: str, line: int, language: str) -> int | None:
    """The header line of the innermost loop whose body holds `line`; None when none does."""
    lines = code.split("\n")
    header = _F_DO if _fortran(language) else _C_LOOP
    for start in range(min(line, len(lines)), 0, -1):
        if not header.match(lines[start - 1]):
            continue
        extent = _loop_extent(code, start, language)
        if extent is not None and extent[0] <= line <= extent[1]:
            return start
    return None


# A C function's header just before its body's brace: `name(...)` and perhaps qualifiers.
_C_HEADER = re.compile(r"([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*"
                       r"(?:const\s*)?$")
_C_NOT_FUNCTIONS = frozenset({"if", "for", "while", "switch", "do", "return", "sizeof"})
# A Fortran unit's first line: `subroutine NAME`, `recursive subroutine NAME`, `real(dp) function
# NAME(...)`, `program NAME`; what precedes the keyword is prefixes and a type (one character
# class: linear, whatever the line).
_F_UNIT = re.compile(r"\b(subroutine|function|program)[ \t]+([A-Za-z_]\w*)", re.IGNORECASE)
_F_PREFIX = re.compile(r"[\w(),=* \t]*")
_F_UNIT_END = re.compile(r"^[ \t]*end[ \t]*(?:(subroutine|function|program)\b.*)?$",
                         re.IGNORECASE)


def enclosing_function(code: str, line: int, language: str) -> str | None:
    """The function (C) or subroutine, function or program (Fortran) whose text holds `line`,
    by its name in the source: where the student wrote it, whatever the compiler inlined it
    into. None outside any (or what cannot be read as one)."""
    lines = code.split("\n")
    if not 1 <= line <= len(lines):
        return None
    if language == "fortran":
        return _fortran_unit(lines, line)
    start = _offset(lines, line)
    return _c_function(code, start, start + len(lines[line - 1]))


def called_in_loop(code: str, line: int, language: str) -> bool:
    """The function holding `line` is called (by its name, as written) inside a loop of
    another function: what it runs, it runs at every iteration of that loop."""
    name = enclosing_function(code, line, language)
    if name is None or name.lower() == "main":
        return False
    call = re.compile(rf"\b{re.escape(name)}\s*\(", re.IGNORECASE if _fortran(language) else 0)
    return any(call.search(written) and enclosing_function(code, n, language) != name and
               enclosing_loop(code, n, language) is not None
               for n, written in enumerate(code.split("\n"), 1))


def _c_marks(code: str) -> Iterator[tuple[int, str]]:
    """(offset, character) of each brace and semicolon of C code, strings, characters and
    preprocessor lines left out."""
    pos = 0
    while pos < len(code):
        char = code[pos]
        if char in "\"'":
            pos = _skip_quoted(code, pos)
            continue
        if char == "#" and (pos == 0 or code[pos - 1] == "\n"):
            newline = code.find("\n", pos)
            pos = len(code) if newline < 0 else newline + 1
            continue
        if char in "{};":
            yield pos, char
        pos += 1


def _c_function(code: str, offset: int, line_end: int) -> str | None:
    """The name of the function whose body holds the line from `offset` to `line_end` (or
    opens on it): a body is a brace at file level after a header `name(...)`."""
    depth, start, name = 0, 0, None
    for pos, char in _c_marks(code):
        if char == "{" and depth == 0:
            if pos > line_end:
                return None
            header = _C_HEADER.search(code, start, pos)
            name = header.group(1) if header is not None and \
                header.group(1) not in _C_NOT_FUNCTIONS else None
        if char == "{":
            depth += 1
            continue
        if char == "}":
            depth = max(depth - 1, 0)
            if depth == 0 and pos >= offset:
                return name
        if depth == 0:
            start = pos + 1
    return None


def _fortran_unit(lines: list[str], line: int) -> str | None:
    units: list[str] = []
    for number, text in enumerate(lines[:line], 1):
        unit = _F_UNIT.search(text)
        before = text[:unit.start()] if unit is not None else ""
        first = before.split(None, 1)[0].lower() if before.strip() else ""
        if unit is not None and _F_PREFIX.fullmatch(before) and first not in ("end", "call"):
            units.append(unit.group(2))
        elif _F_UNIT_END.match(text) and units and number < line:
            units.pop()
    return units[-1] if units else None


# Directives that move data between host and device each time they run: an update, and a
# construct (compute or data) with a clause that copies.
_UPDATE = re.compile(r"^[ \t]*(?:#[ \t]*pragma[ \t]+acc|!\$acc)[ \t]+update\b", re.IGNORECASE)
_COPIES = re.compile(r"^[ \t]*(?:#[ \t]*pragma[ \t]+acc|!\$acc)[ \t]+(?:parallel|kernels|serial|data)"
                     r"\b.*\b(?:copy|copyin|copyout|pcopy\w*)[ \t]*\(", re.IGNORECASE)


def transfer_in_loop(code: str, language: str) -> int | None:
    """The line of the first directive inside a loop that moves data each iteration: an
    `update`, else a construct whose clauses copy; None when no such directive is in a loop.
    Where data moved per iteration is too much, that is the line that moves it."""
    lines = code.split("\n")
    for pattern in (_UPDATE, _COPIES):
        for number, text in enumerate(lines, 1):
            if pattern.match(text) and enclosing_loop(code, number, language) is not None:
                return number
    return None


def construct_extent(code: str, line: int, language: str) -> tuple[int, int] | None:
    """The lines a compute construct holds: from its directive at `line` to the end of the
    statement (C) or loop or `end` directive (Fortran) it applies to. A `line` that is not a
    directive (a runtime that gives the loop's line) holds the statement that starts there."""
    lines = code.split("\n")
    if not 1 <= line <= len(lines):
        return None
    if _fortran(language):
        return _fortran_construct(lines, line)
    if _C_COMPUTE.match(lines[line - 1]):
        end = _c_statement_end(code, _offset(lines, line + 1))
    else:
        end = _c_statement_end(code, _offset(lines, line))
    return (line, code.count("\n", 0, end) + 1) if end is not None else None


def _loop_extent(code: str, line: int, language: str) -> tuple[int, int] | None:
    lines = code.split("\n")
    if _fortran(language):
        end = _fortran_end_do(lines, line)
        return (line, end) if end is not None else None
    start = _offset(lines, line)
    first = lines[line - 1]
    closing = first.lstrip()
    if closing.startswith("}"):  # `} while (...)` ends a do loop; it starts no body
        return None
    end = _c_statement_end(code, start + len(first) - len(closing))
    return (line, code.count("\n", 0, end) + 1) if end is not None else None


def _offset(lines: list[str], line: int) -> int:
    """The offset of the start of `line` (from 1) in the text the lines were split from."""
    return sum(len(text) + 1 for text in lines[:line - 1])


# ---------------------------------------------------------------------------------------------
# C: the end of one statement

def _skip_blank(code: str, pos: int) -> int:
    """Past blanks and preprocessor lines (a `#pragma acc loop` between a construct and its loop)."""
    while pos < len(code):
        if code[pos].isspace():
            pos += 1
        elif code[pos] == "#":
            newline = code.find("\n", pos)
            pos = len(code) if newline < 0 else newline + 1
        else:
            break
    return pos


def _skip_quoted(code: str, pos: int) -> int:
    quote = code[pos]
    pos += 1
    while pos < len(code) and code[pos] != quote and code[pos] != "\n":
        pos += 2 if code[pos] == "\\" else 1
    return pos + 1


def _balanced_end(code: str, pos: int, opening: str, closing: str) -> int | None:
    """Past the bracket that closes the one at pos."""
    depth = 0
    while pos < len(code):
        char = code[pos]
        if char in "\"'":
            pos = _skip_quoted(code, pos)
            continue
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1
    return None


def _c_statement_end(code: str, pos: int, depth: int = 0) -> int | None:
    """The offset just past the C statement that starts at pos (after blanks): a block, a
    headed statement (for, while, if, switch, do) with its body, or an expression up to its
    semicolon. None when the text ends first (or nests beyond reason)."""
    pos = _skip_blank(code, pos)
    if pos >= len(code) or depth > 64:
        return None
    if code[pos] == "{":
        return _balanced_end(code, pos, "{", "}")
    word = _WORD.match(code, pos)
    keyword = word.group(0) if word is not None else ""
    if keyword in _C_HEADED:
        paren = _skip_blank(code, word.end()) if word is not None else pos
        if paren >= len(code) or code[paren] != "(":
            return None
        after = _balanced_end(code, paren, "(", ")")
        end = _c_statement_end(code, after, depth + 1) if after is not None else None
        if keyword == "if" and end is not None:
            following = _skip_blank(code, end)
            other = _WORD.match(code, following)
            if other is not None and other.group(0) == "else":
                return _c_statement_end(code, other.end(), depth + 1)
        return end
    if keyword == "do" and word is not None:
        body = _c_statement_end(code, word.end(), depth + 1)
        if body is None:
            return None
        semicolon = code.find(";", body)
        return semicolon + 1 if semicolon >= 0 else None
    return _expression_end(code, pos)


def _expression_end(code: str, pos: int) -> int | None:
    depth = 0
    while pos < len(code):
        char = code[pos]
        if char in "\"'":
            pos = _skip_quoted(code, pos)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif char == ";" and depth == 0:
            return pos + 1
        pos += 1
    return None


# ---------------------------------------------------------------------------------------------
# Fortran: loops to their `end do`, constructs to their `end` directive

def _fortran_end_do(lines: list[str], line: int) -> int | None:
    depth = 0
    for number in range(line, len(lines) + 1):
        text = lines[number - 1]
        if _F_DO.match(text):
            depth += 1
        elif _F_END_DO.match(text):
            depth -= 1
            if depth == 0:
                return number
    return None


_F_ACC_LINE = re.compile(r"^\s*!\$acc\b", re.IGNORECASE)


def _directive_start(lines: list[str], line: int) -> int:
    """The first line of a directive continued over several lines (`&`): gfortran gives the
    line of its last one as the construct's line (md_forces: `!$acc parallel loop ... &` then
    `!$acc copyin(...)`)."""
    while line > 1 and _F_ACC_LINE.match(lines[line - 1]) and not _F_COMPUTE.match(lines[line - 1]) \
            and _F_ACC_LINE.match(lines[line - 2]) and lines[line - 2].rstrip().endswith("&"):
        line -= 1
    return line


def _fortran_construct(lines: list[str], line: int) -> tuple[int, int] | None:
    line = _directive_start(lines, line)
    directive = _F_COMPUTE.match(lines[line - 1])
    if directive is None:  # a loop's own line
        end = _fortran_end_do(lines, line) if _F_DO.match(lines[line - 1]) else None
        return (line, end) if end is not None else None
    if re.match(r"[ \t]+loop\b", directive.group(2), re.IGNORECASE):
        for number in range(line + 1, len(lines) + 1):
            if _F_DO.match(lines[number - 1]):
                end = _fortran_end_do(lines, number)
                return (line, end) if end is not None else None
        return None
    for number in range(line + 1, len(lines) + 1):
        closing = _F_END.match(lines[number - 1])
        if closing is not None and closing.group(1).lower() == directive.group(1).lower():
            return (line, number)
    return None
