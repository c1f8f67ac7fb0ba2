"""The student's source as the diagnosis reads it (diagnose.py): its OpenACC directives and their
clauses, its loops, the compute and data constructs with the lines they hold, its functions,
and the array accesses with their subscripts. C and C++ (row-major), Fortran (column-major).

    reader.read(text, language, first_line) -> Program   (program_c.py, program_fortran.py)

This module holds the values and what both readers share (a directive's words, its loops).

Lines are the student's (a cell's first code line is 2). Comments and the text of strings are
blanked first, lines kept. Pure, and it never raises: what cannot be read (a loop whose end is
not found, a directive with odd parentheses) is left out, so that the diagnosis says less,
never something false.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

# What a directive is called: its first words (the rest are clauses). Longest first.
_NAMES = ("enter data", "exit data", "parallel loop", "kernels loop", "serial loop", "host_data",
          "parallel", "kernels", "serial", "data", "loop", "update", "atomic", "wait", "routine",
          "declare", "cache", "init", "shutdown", "set")
COMPUTE = ("parallel", "kernels", "serial")
STRUCTURED = (*COMPUTE, "data", "host_data")
# Clauses that move data between host and device when their construct starts or ends.
MOVING = frozenset({"copy", "copyin", "copyout", "pcopy", "pcopyin", "pcopyout", "present_or_copy",
                    "present_or_copyin", "present_or_copyout"})
# Clauses that put data on the device (an allocation when it is not there yet).
ALLOCATING = MOVING | {"create", "pcreate", "present_or_create"}
_CLAUSE = re.compile(r"\s*,?\s*([A-Za-z_]\w*)\s*")
IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Clause:
    name: str  # lower case: copy, num_gangs, collapse, ...
    args: str = ""  # what the parentheses hold, as written ("" without)

    @property
    def items(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in split_top(self.args) if p.strip())

    @property
    def names(self) -> tuple[str, ...]:
        """The variables the clause names: `a[0:n], b(1:n)` -> a, b; a reduction's after `:`."""
        items = self.items
        if self.name == "reduction" and self.args.count(":") >= 1:
            items = tuple(p.strip() for p in split_top(self.args.split(":", 1)[1]) if p.strip())
        return tuple(re.split(r"\s*[\[(]", item, maxsplit=1)[0].strip() for item in items)


@dataclass(frozen=True)
class Directive:
    line: int  # its first line
    last: int  # its last line (continued directives)
    name: str  # "parallel loop", "data", "update", "end parallel", ... (lower case)
    clauses: tuple[Clause, ...] = ()

    def clause(self, name: str) -> Clause | None:
        return next((c for c in self.clauses if c.name == name), None)

    def has(self, *names: str) -> bool:
        return any(c.name in names for c in self.clauses)

    @property
    def construct(self) -> str:
        """parallel, kernels, serial, data, ... ("" for an end directive)."""
        return "" if self.name.startswith("end") else self.name.split()[0]

    @property
    def compute(self) -> bool:
        return self.construct in COMPUTE

    @property
    def loops(self) -> bool:
        """It applies to the loop that follows: `loop`, `parallel loop`, ..."""
        return self.name.endswith("loop") and not self.name.startswith("end")

    def named(self, clauses: frozenset[str] | tuple[str, ...]) -> tuple[str, ...]:
        """The variables named by the clauses of these names."""
        return tuple(n for c in self.clauses if c.name in clauses for n in c.names)

    def number(self, name: str) -> int | None:
        """A clause's argument when it is a plain number: num_gangs(8) -> 8."""
        c = self.clause(name)
        return int(c.args) if c is not None and c.args.strip().isdigit() else None


@dataclass(frozen=True)
class Loop:
    line: int  # its header
    end: int  # the last line of its body
    var: str  # its variable ("" for a while loop)
    directive: Directive | None = None  # the loop (or combined) directive just before it
    perfect_parent: bool = False  # the loop around it holds nothing but this loop

    def holds(self, line: int) -> bool:
        return self.line < line <= self.end or line == self.line


@dataclass(frozen=True)
class Construct:
    """A compute or data construct and the lines it holds (its directive's line first)."""

    directive: Directive
    end: int

    @property
    def line(self) -> int:
        return self.directive.line

    @property
    def kind(self) -> str:
        return self.directive.construct

    def holds(self, line: int) -> bool:
        return self.directive.line <= line <= self.end


@dataclass(frozen=True)
class Access:
    """An array named in the code: indexed (`a[i*n+j]`, `a(i,j)`) or bare (`f(a)`, `a = 0`)."""

    array: str  # as written (Fortran: lower case); `p->val` for a member
    subscripts: tuple[str, ...]  # () for a bare name
    line: int
    column: int
    write: bool = False  # assigned (the left of `=`, `+=`, `++`)
    update: bool = False  # read and written at once (`+=`, `++`, `a(i) = a(i) + ...`)

    @property
    def at(self) -> tuple[int, int]:
        return self.line, self.column


@dataclass(frozen=True)
class Function:
    name: str  # as written (Fortran: lower case)
    line: int
    end: int
    kind: str = "function"  # Fortran: program, subroutine, function


@dataclass(frozen=True)
class Program:
    language: str  # "c", "c++", "fortran"
    first_line: int
    code: tuple[str, ...]  # the lines, comments and strings blanked
    directives: tuple[Directive, ...] = ()
    loops: tuple[Loop, ...] = ()
    constructs: tuple[Construct, ...] = ()
    accesses: tuple[Access, ...] = ()
    functions: tuple[Function, ...] = ()
    conditionals: tuple[tuple[int, int], ...] = ()  # (first, last line) of each if statement

    @property
    def fortran(self) -> bool:
        return self.language == "fortran"

    def text(self, line: int) -> str:
        i = line - self.first_line
        return self.code[i] if 0 <= i < len(self.code) else ""

    def span(self, start: int, end: int) -> str:
        """The code of lines start..end, joined."""
        return "\n".join(self.text(n) for n in range(start, end + 1))

    def compute_at(self, line: int) -> Construct | None:
        """The innermost compute construct holding the line."""
        held = [c for c in self.constructs if c.directive.compute and c.holds(line)]
        return max(held, key=lambda c: c.line, default=None)

    def data_around(self, line: int) -> list[Construct]:
        return [c for c in self.constructs if c.kind == "data" and c.holds(line) and c.line != line]

    def loops_around(self, line: int) -> list[Loop]:
        """The loops whose body holds the line, outermost first (not a loop whose header it is)."""
        return sorted((lp for lp in self.loops if lp.line < line <= lp.end), key=lambda lp: lp.line)

    def host_loops_around(self, line: int) -> list[Loop]:
        """The loops around the line that the host runs (outside any compute construct)."""
        return [lp for lp in self.loops_around(line) if self.compute_at(lp.line) is None]

    def loop_at(self, line: int) -> Loop | None:
        return next((lp for lp in self.loops if lp.line == line), None)

    def loops_in(self, construct: Construct) -> list[Loop]:
        return [lp for lp in self.loops if construct.holds(lp.line)]

    def function_at(self, line: int) -> Function | None:
        held = [f for f in self.functions if f.line <= line <= f.end]
        return max(held, key=lambda f: f.line, default=None)

    def conditional(self, line: int, within: Loop | None = None) -> bool:
        """The line is in an if statement (one inside the loop, when given)."""
        return any(a < line <= b or a == line == b for a, b in self.conditionals
                   if within is None or within.line < a <= within.end)

    def accesses_in(self, start: int, end: int) -> list[Access]:
        return [a for a in self.accesses if start <= a.line <= end]

    def same(self, a: str, b: str) -> bool:
        return a.lower() == b.lower() if self.fortran else a == b

    @property
    def fast(self) -> int:
        """Which subscript varies fastest in memory: C's last, Fortran's first."""
        return 0 if self.fortran else -1


# ---------------------------------------------------------------------------------------------
# Text helpers


def split_top(text: str, sep: str = ",") -> list[str]:
    """`a, b[0:n], c(1:n, 2)` split at the separators outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def closing(text: str, at: int, pairs: str = "()") -> int:
    """The index of the bracket closing the one at `at` (len(text) when none does)."""
    opening, close = pairs[0], pairs[1]
    depth = 0
    for i in range(at, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def directive(line: int, last: int, text: str) -> Directive:
    """A directive's text after `acc`, read into its name and clauses."""
    words = " ".join(text.lower().split())
    end = words.startswith("end")
    if end:
        words = words[3:].strip()
        text = text.strip()[3:]
    name = next((n for n in _NAMES if words == n or words.startswith(n + " ")
                 or words.startswith(n + "(") or words.startswith(n + ",")), "")
    if not name:
        return Directive(line, last, ("end " if end else "") + (words.split(" ")[0] if words else ""))
    rest = text.strip()
    for _ in name.split():
        rest = re.sub(r"^\s*[A-Za-z_]+", "", rest, count=1)
    return Directive(line, last, ("end " if end else "") + name, tuple(_clauses(rest)))


def _clauses(text: str) -> Iterator[Clause]:
    pos = 0
    while pos < len(text):
        m = _CLAUSE.match(text, pos)
        if m is None:
            return
        pos = m.end()
        if pos < len(text) and text[pos] == "(":
            close = closing(text, pos)
            yield Clause(m.group(1).lower(), text[pos + 1:close].strip())
            pos = close + 1
        else:
            yield Clause(m.group(1).lower())


def blank(text: str) -> str:
    return "".join(ch if ch == "\n" else " " for ch in text)



def attach(directives: Sequence[Directive], raw: Sequence[tuple[int, int, str]]) -> list[Loop]:
    """Each loop with the loop directive that applies to it (the first loop after it), and
    whether the loop around it holds it alone."""
    ordered = sorted(raw)
    owner: dict[int, Directive] = {}
    for d in directives:
        if d.loops:
            following = next((r for r in ordered if r[0] > d.last), None)
            if following is not None and following[0] not in owner:
                owner[following[0]] = d
    loops = [Loop(line, end, var, owner.get(line)) for line, end, var in ordered]
    return [perfect(lp, loops) for lp in loops]


def perfect(loop: Loop, loops: Sequence[Loop]) -> Loop:
    """The loop with `perfect_parent` set when the loop around it ends where it ends and
    starts just before it (its header's line, or the line before, a brace or a directive
    between): `for (j) for (i) body`."""
    parents = [p for p in loops if p.line < loop.line and p.end >= loop.end and p is not loop]
    if not parents:
        return loop
    parent = max(parents, key=lambda p: p.line)
    tight = parent.end - loop.end <= 1 and loop.line - parent.line <= 2
    return Loop(loop.line, loop.end, loop.var, loop.directive, tight)
