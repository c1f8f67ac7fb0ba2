"""C and C++ read for the diagnosis (program.py's values): comments and strings blanked, the
`#pragma acc` directives (continued with `\\`), each statement's extent by its braces and
semicolons, the for and while loops, the functions, the array accesses. Pure; it never raises:
what it cannot follow it leaves out.

    read_c(text, language, first_line) -> Program
"""

from __future__ import annotations

import bisect
import re

from .program import (ALLOCATING, IDENT, STRUCTURED, Access, Construct, Directive, Function, Program,
                      attach, blank, closing, directive, split_top)

_C_TYPES = frozenset({"int", "long", "short", "char", "float", "double", "unsigned", "signed",
                      "size_t", "const", "static", "bool", "void", "struct", "restrict",
                      "ptrdiff_t", "int64_t", "int32_t", "uint64_t", "uint32_t", "register"})
MAX_DEPTH = 200  # statements nested deeper than this are not followed (none is, in a course)

def _strip_c(text: str) -> str:
    """Comments and the inside of strings and characters made blanks; newlines kept."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        two = text[i:i + 2]
        if two == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif two == "/*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] not in (ch, "\n"):
                j += 2 if text[j] == "\\" else 1
            out.append(ch + blank(text[i + 1:j]) + (ch if j < n and text[j] == ch else ""))
            i = j + 1 if j < n and text[j] == ch else j
            continue
        else:
            out.append(ch)
            i += 1
            continue
        out.append(blank(text[i:j]))
        i = j
    return "".join(out)


_C_PRAGMA = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+acc\b(.*)$")
_C_HEADER = re.compile(r"([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:const\s*)?$")
_C_NOT_FUNCTIONS = frozenset({"if", "for", "while", "switch", "do", "return", "sizeof"})


class _CReader:
    """One pass over C code: its directives, statements' extents, loops, functions, accesses."""

    def __init__(self, text: str, first_line: int) -> None:
        self.first_line = first_line
        stripped = _strip_c(text)
        self.lines = stripped.split("\n")
        # The code of statements: preprocessor lines (directives included) blanked.
        flat_lines = []
        continued = False
        for line in self.lines:
            is_pre = continued or line.lstrip().startswith("#")
            continued = is_pre and line.rstrip().endswith("\\")
            flat_lines.append(blank(line) if is_pre else line)
        self.flat = "\n".join(flat_lines)
        self.starts = [0]
        for line in flat_lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def line_of(self, offset: int) -> int:
        return self.first_line + bisect.bisect_right(self.starts, offset) - 1

    def offset_of(self, line: int) -> int:
        i = line - self.first_line
        return self.starts[i] if 0 <= i < len(self.starts) else len(self.flat)

    def directives(self) -> list[Directive]:
        out, i = [], 0
        while i < len(self.lines):
            m = _C_PRAGMA.match(self.lines[i])
            at = i
            i += 1
            if m is None:
                continue
            text = m.group(1)
            while text.rstrip().endswith("\\") and i < len(self.lines):
                text = text.rstrip()[:-1] + " " + self.lines[i]
                i += 1
            out.append(directive(self.first_line + at, self.first_line + i - 1, text))
        return out

    def _skip(self, pos: int) -> int:
        flat = self.flat
        while pos < len(flat) and flat[pos].isspace():
            pos += 1
        return pos

    def _word(self, pos: int) -> str:
        m = IDENT.match(self.flat, pos)
        return m.group(0) if m else ""

    def _after_parens(self, pos: int) -> int:
        pos = self._skip(pos)
        if pos < len(self.flat) and self.flat[pos] == "(":
            return closing(self.flat, pos) + 1
        return pos

    def statement_end(self, pos: int, depth: int = 0) -> int:
        """The offset just past the statement starting at or after `pos`."""
        flat, pos = self.flat, self._skip(pos)
        if pos >= len(flat) or depth > MAX_DEPTH:
            return len(flat)
        if flat[pos] == "{":
            return closing(flat, pos, "{}") + 1
        word = self._word(pos)
        if word in ("for", "while", "switch"):
            return self.statement_end(self._after_parens(pos + len(word)), depth + 1)
        if word == "if":
            end = self.statement_end(self._after_parens(pos + 2), depth + 1)
            after = self._skip(end)
            if self._word(after) == "else":
                return self.statement_end(after + 4, depth + 1)
            return end
        if word == "do":
            end = self._skip(self.statement_end(pos + 2, depth + 1))
            if self._word(end) == "while":
                end = self._after_parens(end + 5)
            semicolon = flat.find(";", end)
            return len(flat) if semicolon < 0 else semicolon + 1
        return self._simple_end(pos)

    def _simple_end(self, pos: int) -> int:
        depth = 0
        for i in range(pos, len(self.flat)):
            ch = self.flat[i]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
                if depth < 0:
                    return i
            elif ch == ";" and depth == 0:
                return i + 1
        return len(self.flat)

    def loops(self) -> list[tuple[int, int, str, int]]:
        """(header line, last line, variable, body offset) of every for and while loop."""
        out = []
        for m in re.finditer(r"\b(for|while)\b", self.flat):
            start = m.start()
            before = self.flat[:start].rstrip()
            if m.group(1) == "while" and before.endswith("}") and self._is_do_while(start):
                continue
            body = self._after_parens(m.end())
            if body <= m.end():
                continue
            var = ""
            if m.group(1) == "for":
                header = self.flat[self._skip(m.end()) + 1:body - 1]
                init = split_top(header, ";")[0]
                found = re.findall(r"([A-Za-z_]\w*)\s*=(?!=)", init)
                var = found[-1] if found else ""
            end = self.statement_end(body)
            out.append((self.line_of(start), self.line_of(max(end - 1, start)), var, body))
        return out

    def _is_do_while(self, at: int) -> bool:
        """A `while` that closes a `do { } while (...);` (a `;` follows its condition)."""
        after = self._skip(self._after_parens(at + 5))
        return after < len(self.flat) and self.flat[after] == ";"

    def functions(self) -> list[Function]:
        out, depth, start = [], 0, 0
        flat = self.flat
        for i, ch in enumerate(flat):
            if ch == "{":
                if depth == 0:
                    header = _C_HEADER.search(flat[start:i].rstrip())
                    if header is not None and header.group(1) not in _C_NOT_FUNCTIONS:
                        end = closing(flat, i, "{}")
                        out.append(Function(header.group(1), self.line_of(start + header.start()),
                                            self.line_of(min(end, len(flat) - 1))))
                depth += 1
            elif ch == "}":
                depth = max(depth - 1, 0)
                if depth == 0:
                    start = i + 1
            elif ch == ";" and depth == 0:
                start = i + 1
        return out

    def accesses(self) -> list[Access]:
        out = []
        flat = self.flat
        for m in re.finditer(r"(?<![\w.>])([A-Za-z_]\w*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*)*)\s*(\[)?",
                             flat):
            name = re.sub(r"\s+", "", m.group(1))
            if name in _C_TYPES or name in _C_NOT_FUNCTIONS:
                continue
            subscripts: list[str] = []
            pos = m.end() - 1 if m.group(2) else m.end()
            while m.group(2) and pos < len(flat) and flat[pos] == "[":
                close = closing(flat, pos, "[]")
                subscripts.append(flat[pos + 1:close].strip())
                pos = self._skip(close + 1)
            if not subscripts and self._called(m.end()):
                continue  # a function's name, not an array's
            write, update = self._assigned(m.start(), pos)
            if write and not update:
                rhs = flat[self._skip(pos) + 1:self._simple_end(self._skip(pos) + 1)]
                update = re.search(rf"(?<![\w.>]){re.escape(m.group(1))}\s*\[", rhs) is not None
            out.append(Access(name, tuple(subscripts), self.line_of(m.start()),
                              m.start() - self.starts[self.line_of(m.start()) - self.first_line],
                              write, update))
        return out

    def conditionals(self) -> list[tuple[int, int]]:
        out = []
        for m in re.finditer(r"\bif\b", self.flat):
            body = self._after_parens(m.end())
            if body > m.end():
                end = self.statement_end(m.start())
                out.append((self.line_of(m.start()), self.line_of(max(end - 1, m.start()))))
        return out

    def _called(self, pos: int) -> bool:
        pos = self._skip(pos)
        return pos < len(self.flat) and self.flat[pos] == "("

    def _assigned(self, start: int, pos: int) -> tuple[bool, bool]:
        """(written, read and written) for the name from `start` whose subscripts end at `pos`."""
        after = self.flat[self._skip(pos):self._skip(pos) + 3]
        before = self.flat[max(0, start - 2):start]
        if after.startswith(("++", "--")) or before in ("++", "--"):
            return True, True
        if re.match(r"(?:[-+*/%&|^]|<<|>>)=", after):
            return True, True
        if after.startswith("=") and not after.startswith("=="):
            return True, False
        return False, False


def read_c(text: str, language: str, first_line: int) -> Program:
    r = _CReader(text, first_line)
    directives = r.directives()
    raw_loops = r.loops()
    constructs = []
    for d in directives:
        if d.construct in STRUCTURED and not d.name.startswith("end"):
            start = r.offset_of(d.last + 1)
            end = r.statement_end(start)
            constructs.append(Construct(d, r.line_of(max(end - 1, start))))
    loops = attach(directives, [(line, end, var) for line, end, var, _ in raw_loops])
    found = r.accesses()
    # A bare name is kept for the arrays only: those indexed somewhere or named by a clause.
    arrays = {a.array for a in found if a.subscripts} | {
        n for d in directives for n in d.named(ALLOCATING | {"present", "self", "host", "device",
                                                             "delete", "deviceptr"})}
    kept = [a for a in found if a.subscripts or a.array in arrays]
    return Program(language, first_line, tuple(r.lines), tuple(directives), tuple(loops),
                   tuple(constructs), tuple(kept), tuple(r.functions()), tuple(r.conditionals()))
