"""What the diagnosis's rules read off the student's loops (program.py's Program): how the
compiler spread each loop (gang, vector), which variable the vector lanes step along, how an
array's subscript moves with it against the layout (C row-major: the last subscript is
contiguous; Fortran column-major: the first), whether a loop's iterations are independent as
far as its text shows, the loop the host runs around a line; and the few words the rules name
things with. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .program import Construct, Directive, Loop, Program, closing
from .seen import Seen

# A name as a whole word, not a member (p->n, a%n, s.n); and a C declaration of one.
WORD = r"(?<![\w.>%]){}(?![\w])"
C_DECL = r"\b(?:double|float|int|long|short|char|unsigned|size_t|bool|const|auto)\b[^;=]*\b{}\b"


def mentions(text: str, var: str) -> bool:
    return bool(var) and re.search(WORD.format(re.escape(var)), text) is not None


def listed(names: Iterable[str]) -> str:
    """`a, b`, each once, in order."""
    shown = list(dict.fromkeys(names))
    return ", ".join(shown) if shown else "the arrays"


def at_line(line: int) -> str:
    return f"line {line}"


def inner_loop(p: Program, loop: Loop) -> Loop | None:
    """The first loop directly in the loop's body (no loop between them)."""
    inside = [lp for lp in p.loops if loop.line < lp.line <= loop.end]
    direct = [lp for lp in inside
              if not any(o.line < lp.line <= o.end and o.line > loop.line for o in inside)]
    return min(direct, key=lambda lp: lp.line, default=None)


def levels(seen: Seen, loop: Loop, construct: Construct) -> frozenset[str]:
    """How the loop is spread: the compiler's words, else its directive's clauses, else what
    gcc does with a `parallel loop` alone (gang and vector)."""
    d = loop.directive
    if d is None:
        return frozenset()
    said = seen.levels(d.line, d.last) if d.clause("tile") is None else None
    if said is not None:
        return said
    if d.clause("tile") is not None:
        return frozenset({"gang", "vector"})  # the tiles to gangs, their elements to lanes
    explicit = frozenset(c.name for c in d.clauses) & {"gang", "worker", "vector", "seq"}
    if explicit or not d.compute:
        return explicit
    inner_vector = any(lp.directive is not None and lp.directive.has("vector")
                       for lp in seen.program.loops_in(construct) if lp is not loop)
    return frozenset({"gang"} if inner_vector else {"gang", "vector"})


def collapsed(p: Program, loop: Loop) -> list[Loop]:
    """The loops a collapse(n) or tile(a, b) of the loop's directive takes together."""
    d = loop.directive
    tile = d.clause("tile") if d is not None else None
    depth = (d.number("collapse") if d is not None else None) or (len(tile.items) if tile else 1)
    chain = [loop]
    while len(chain) < depth and (inner := inner_loop(p, chain[-1])) is not None:
        chain.append(inner)
    return chain


def vector_loop(seen: Seen, construct: Construct) -> tuple[Loop, Loop] | None:
    """(the loop of the directive that gives vector lanes, the loop whose variable they run
    along: the innermost it collapses)."""
    for lp in sorted(seen.program.loops_in(construct), key=lambda lp: lp.line):
        if "vector" in levels(seen, lp, construct):
            return lp, collapsed(seen.program, lp)[-1]
    return None


def terms(expr: str) -> list[str]:
    """The additive terms of an expression, at the top level."""
    found, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch in "+-" and depth == 0 and i > start and expr[i - 1] not in "eE*/(":
            found.append(expr[start:i])
            start = i + 1
    found.append(expr[start:])
    return [t.strip() for t in found if t.strip()]


_CAST = re.compile(r"\(\s*(?:size_t|long|long long|int|unsigned|ptrdiff_t|int64_t|uint64_t)\s*\)")


def unit_step(expr: str, var: str) -> str:
    """"unit" when the variable adds 1 to the subscript, "strided" when it is multiplied,
    "" when it does not occur or cannot be told (an index of an index)."""
    with_var = [t for t in terms(expr) if mentions(t, var)]
    if len(with_var) != 1:
        return "strided" if with_var else ""
    term = _CAST.sub("", with_var[0]).strip()
    if re.search(r"[\[]", term):
        return ""
    if term.startswith("(") and term.endswith(")") and term.count("(") == 1:
        return unit_step(term[1:-1], var)
    if term == var:
        return "unit"
    # Multiplied: a stride. Divided (i / BLOCK), or taken modulo: many lanes on one element, or
    # a pattern this reading does not follow.
    return "strided" if "*" in term and not re.search(r"[/%]", term) else ""


def definitions(p: Program, loop: Loop) -> dict[str, str]:
    """Scalars the loop's body defines from an expression (`size_t c = i * w + j;`), which its
    subscripts may use in place of the loop's variables."""
    pattern = r"(?im)^\s*([A-Za-z_]\w*)\s*=\s*([^!\n]+)$" if p.fortran else (
        r"(?:^|[;{}])\s*(?:(?:const|size_t|int|long|unsigned|ptrdiff_t)\s+)*([A-Za-z_]\w*)\s*"
        r"=(?!=)\s*([^;]+);")
    found: dict[str, str] = {}
    for m in re.finditer(pattern, body_of(p, loop)):
        found.setdefault(m.group(1), m.group(2).strip())
    return found


def expanded(subscripts: Sequence[str], defined: dict[str, str]) -> tuple[str, ...]:
    """The subscripts with the body's scalars replaced by what defines them (one level)."""
    out = []
    for s in subscripts:
        for name, expr in defined.items():
            s = re.sub(WORD.format(re.escape(name)), f"({expr})".replace("\\", r"\\"), s)
        out.append(s)
    return tuple(out)


def stride(p: Program, subscripts: Sequence[str], var: str) -> str:
    """How an access moves as the variable steps: "unit", "strided", "" (not at all, or not
    told). C's last subscript and Fortran's first are contiguous in memory."""
    if not subscripts or not any(mentions(s, var) for s in subscripts):
        return ""
    fast = len(subscripts) - 1 if not p.fortran else 0
    if any(mentions(s, var) for i, s in enumerate(subscripts) if i != fast):
        return "strided"
    return unit_step(subscripts[fast], var)


def private_names(directives: Iterable[Directive | None]) -> set[str]:
    return {n.lower() for d in directives if d is not None
            for n in d.named(("private", "firstprivate", "reduction"))}


def body_of(p: Program, loop: Loop) -> str:
    """The loop's body: Fortran's lines between `do` and `end do`, C's text after its header."""
    if p.fortran:
        return p.span(loop.line + 1, loop.end - 1)
    text = p.span(loop.line, loop.end)
    opened = text.find("(")
    return text[closing(text, opened) + 1:] if opened >= 0 else text


def carried_scalar(p: Program, loop: Loop, private: set[str]) -> str:
    """A scalar that an iteration updates from the one before (`s += x`, `s = s + x`,
    `s = fmax(s, x)`), not declared in the loop nor private: "" when there is none."""
    text = body_of(p, loop)
    pattern = (r"(?im)^\s*([A-Za-z_]\w*)\s*=\s*(?:.*[-+*]\s*\1\b|\1\s*[-+*]|(?:max|min)\s*\(\s*\1\b)"
               if p.fortran else
               r"(?<![\w\]\).>])([A-Za-z_]\w*)\s*"
               r"(?:\+\+|--|[-+*/|&^]=|=(?!=)[^;]*?(?<![\w.>])\1(?![\w\[]))")
    for m in re.finditer(pattern, text):
        name = m.group(1)
        if name.lower() in private or name == loop.var:
            continue
        if not p.fortran and re.search(C_DECL.format(re.escape(name)), text):
            continue
        return name
    return ""


def independent(p: Program, loop: Loop, directives: Iterable[Directive | None]) -> bool:
    """No iteration reads what another writes, as far as the text shows: no scalar carried
    from one to the next, no array written at one place for all, no element read of an array
    the loop writes elsewhere than where it writes it."""
    if not loop.var or carried_scalar(p, loop, private_names(directives)):
        return False
    inside = p.accesses_in(loop.line, loop.end)
    writes = {(a.array, a.subscripts) for a in inside if a.write and a.subscripts}
    for a in inside:
        if a.write and a.subscripts and not any(mentions(s, loop.var) for s in a.subscripts):
            return False
        if not a.write and a.subscripts and any(w[0] == a.array for w in writes) and \
                (a.array, a.subscripts) not in writes:
            return False
    return True


def time_loop(p: Program, line: int) -> Loop | None:
    """The innermost loop the host runs around a line."""
    around = p.host_loops_around(line)
    return around[-1] if around else None

