"""gcc's feedback: what gcc made of a program's OpenACC directives: compute regions and implicit data.

Exercise checks ask two questions of a build: did the compiler create at least one OpenACC
compute region (parallel, kernels, serial), and which arrays reach a compute region without a
data clause naming them, so that the runtime moves them (or, for a C pointer under gcc, fails to
move them) implicitly. The answers come from what the compiler wrote, never from the source:
a directive the compiler ignored (no -fopenacc, a typo) creates no region.

gcc / gfortran (12). The build adds GCC_DUMP_FLAGS. The `original` dump prints each construct
with the clauses the student wrote; the `gimple` dump prints the same construct after
gimplification has ADDED a clause for every variable the region uses without one. A name in a
gimple clause that the original construct does not name is therefore implicit.

Pairing. A function is named in the dumps by a header: `;; Function NAME (...)` in C's original
dump, else its declaration on one line, `RETURN-TYPE NAME (PARAMETERS)`, whatever the source's
declarator was (attributes on lines of their own, K&R parameters printed as a prototype, a
multi-line declarator on one line). The return type may hold parentheses of its own (a function
returning a function pointer prints `void (*<T350>) (float *, int) getfp (float * a, int n)`),
so the name is what precedes the LAST parenthesised group, the parameter list. Functions pair by
name; two of one name (Fortran: module procedures of two modules, internal procedures of two
hosts, all printed by their own name) pair by the source lines of their constructs, which both
dumps give for Fortran (original-lineno); C has one function per name. Constructs pair by order
inside a function. A function whose counts or lines disagree is left out rather than risk a
false finding.

Reachable code. Only regions in functions the program can reach count, in `regions` as in the
implicit data (and OpenMP target regions likewise): a region in a function never called never
runs, and directives there must not pass for a port. gcc's call graph (-fdump-ipa-cgraph, its "Initial Symbol table", after the
front end and before any optimisation) lists for every function the functions it calls and the
symbols whose address it takes; a function is reachable when a path of calls and references
leads to it from `main` (or a constructor or destructor). Taking a function's address counts as
a call (a function pointer, a table of them), so the answer is conservative: code that can run
counts. Without `main` (an object file) every function counts. The regions that did run are
counted at run time instead (profile/regions.py); this is what the compiler's report alone can
say, without a run or when the run could not be counted. gcc gimplifies no function it dropped
(an unused static one), so regions are counted in the gimple dump, never in the original one,
unless there is no gimple dump at all.

Of the implicit names, only data counts:

- a map of a dereference (`*a`, `MEM[...]`, a Fortran descriptor's `a.data`) or of a name that
  is an array (declared with `[...]` in the function, or indexed in the region's body);
- a map or `firstprivate` of a name declared as a pointer: under gcc only the pointer value, a
  host address, reaches the device;
- never a scalar (plain scalars become firstprivate, kernels scalars force_tofrom, also a
  Fortran scalar passed by reference, mapped as `force_tofrom:*n`), never a
  variable of a reduction clause, never a struct or a global scalar whose type the dumps do not
  show (a global array is recognised by its indexing in the region).

Everything here is pure: the texts come in, frozen values go out, nothing raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..model import AccReport, ImplicitData, Remark
from .feedback import (COMPUTE_CONSTRUCTS, MSG_ARRAY, MSG_ENTERED, MSG_IN_DATA, MSG_POINTER, at as _at,
                       balanced as _balanced, split_top as _split_top)
from .remarks import REGION_MADE, clause_meaning

# -fdump-tree-original-lineno: the clauses as written (gfortran prints `[file:line:col]` before
# each construct; gcc prints no line in C, lineno or not).
# -fdump-tree-gimple-lineno: the clauses after gimplification, and `[file:line:col]` before each
# construct, which names the source line of a finding.
# -fdump-ipa-cgraph: the call graph, for the reachable functions.
# The dumps land next to the output file, named like `prog-source.c.005t.original`,
# `prog-source.c.006t.gimple` and `prog-source.c.000i.cgraph` (numbers vary with versions); the
# plain -fdump-tree-gimple and -fdump-tree-original variants parse too.
GCC_DUMP_FLAGS: tuple[str, ...] = ("-fdump-tree-original-lineno", "-fdump-tree-gimple-lineno",
                                   "-fdump-ipa-cgraph")

# Their names, as a pattern (fnmatch): what a graded build takes out of its folder for them.
DUMP_FILES = "*.[0-9][0-9][0-9][a-z].*"
GCC_METHOD = "gcc tree dumps (original vs gimple)"
# An OpenMP target region in the gimple dump (not OpenACC's `omp target oacc_...`, not a data
# or update construct), one line each: counted line by line, in linear time.
_OMP_TARGET = re.compile(r"^[ \t]*(?:\[[^\]\n]*\][ \t]*)*#pragma omp target"
                         r"(?![ \t]+(?:oacc_|data\b|enter\b|exit\b|update\b))", re.MULTILINE)


# ---------------------------------------------------------------------------------------------
# gcc tree dumps: reading


@dataclass(frozen=True)
class _Item:
    """One variable or expression named by a clause."""

    clause: str  # "map", "firstprivate", "reduction", "private", ...
    expr: str  # "*a", "x", "MEM[(char *)a]", "(real(kind=8)[0:] *) b.data"
    attrs: str  # what gcc appends in brackets: "len: 800", "pointer assign, bias: 0", ""
    map_kind: str = ""  # a map's kind: "tofrom", "force_tofrom", "alloc", ...


@dataclass(frozen=True)
class _Directive:
    kind: str  # "parallel", "kernels", "serial", "data", "enter data", "declare", "loop", ...
    line: int | None
    items: tuple[_Item, ...]
    start: int  # index of the pragma line in the function's lines
    end: int  # index one past the last line of its body (== start + 1 for standalone ones)


@dataclass(frozen=True)
class _Function:
    name: str
    lines: tuple[str, ...]
    directives: tuple[_Directive, ...]
    pointers: frozenset[str]  # base names declared as pointers (parameters, locals, copies)
    arrays: frozenset[str]  # names declared as arrays, as the dump spells them

    def lines_of_computes(self) -> tuple[int | None, ...]:
        return tuple(d.line for d in self.computes())

    def computes(self) -> tuple[_Directive, ...]:
        return tuple(d for d in self.directives if d.kind in COMPUTE_CONSTRUCTS)


# `[file:line:col]` (gimple-lineno, and gfortran's original-lineno), possibly `discrim N`. The
# `:\d+:\d+` tail keeps `[len: 800]` and `[0:99]` out.
_LOC = re.compile(r"\[[^\[\]]*?:(\d+):\d+(?: discrim \d+)?\]\s*")
_PRAGMA = re.compile(r"^(?P<indent>[ \t]*)(?P<locs>(?:\[[^\[\]]*?:\d+:\d+(?: discrim \d+)?\]\s*)*)"
                     r"#pragma\s+(?P<rest>.*)$")
_ORIGINAL_KIND = re.compile(r"acc\s+(?P<kind>enter\s+data|exit\s+data|host_data|parallel|kernels"
                            r"|serial|data|update|declare|wait|cache|loop|atomic|routine)\b")
_GIMPLE_KIND = re.compile(r"omp\s+target\s+oacc_(?P<kind>\w+)")
_FN_DUMP_HEADER = re.compile(r"^;; Function (?P<sig>.*?)(?:\s+\([^()]*\))?\s*$")
_BLOCK_OPEN = re.compile(r"^(?:\[[^\[\]]*\]\s*)?\{\s*$")
# gcc's own temporaries: `D.4238`, `_39`.
_TEMP = re.compile(r"D\.\d+|_\d+")
_CLAUSE_NAME = re.compile(r"\s*([A-Za-z_]\w*)")
_IDENT = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")
_CAST = re.compile(r"\((?:[^()]|\([^()]*\))*?\*\s*(?:restrict\s*|const\s*|volatile\s*)*\)")
_ATTRS = re.compile(r"\s*\[(?P<attrs>(?:len:|pointer |bias:|value-expr:)[^\[\]]*)\]\s*$")
_MEM_INNER = re.compile(r"\[(?P<inner>[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]\s*$")
_NOT_NAMES = frozenset({"MEM", "restrict", "const", "volatile", "char", "void", "sizetype"})
# Tree codes g++ prints around a name: `*NON_LVALUE_EXPR <a>`.
_TREE_CODE = re.compile(r"[A-Z][A-Z_]*_EXPR")
# A declaration line in a gimple function: `double * restrict A;`, `double * gp.29;`,
# `real(kind=8)[0:D.4292] * restrict a.0;`. Statements always print ` = `, declarations never.
_PTR_DECL = re.compile(r"^\s*(?!return\b|goto\b)[A-Za-z_][\w()=:\[\]., <>]*?\*\s*"
                       r"(?:(?:restrict|__restrict|const|volatile)\s+|\*\s*)*"
                       r"(?P<name>[A-Za-z_]\w*(?:\.\d+)?)\s*;\s*$")
_ARRAY_DECL = re.compile(r"^\s*(?:static\s+)?[A-Za-z_][\w()=:.,<>]*(?:\s+[A-Za-z_][\w()=:.,<>]*)*"
                         r"\s+(?P<name>[A-Za-z_]\w*(?:\.\d+)?)\s*(?:\[[^\[\]]*\])+\s*(?:=.*)?;\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _clauses(text: str) -> Iterator[tuple[str, str]]:
    """(name, argument text) of each clause: `map(tofrom:x) async(q) independent`."""
    i = 0
    while i < len(text):
        m = _CLAUSE_NAME.match(text, i)
        if m is None:
            i += 1
            continue
        name = m.group(1)
        i = m.end()
        if i < len(text) and text[i] == "(":
            end = _balanced(text, i)
            yield name, text[i + 1:end - 1]
            i = end
        else:
            yield name, ""


def _items(text: str) -> tuple[_Item, ...]:
    items: list[_Item] = []
    for clause, args in _clauses(_LOC.sub("", text)):
        if clause == "map":
            kind, _, rest = args.partition(":")  # the map kind (tofrom, force_present, ...)
            m = _ATTRS.search(rest)
            expr, attrs = (rest[:m.start()], m.group("attrs")) if m else (rest, "")
            items.append(_Item("map", expr.strip(), attrs.strip(), kind.strip()))
        elif clause == "reduction":
            _, _, names = args.partition(":")
            items.extend(_Item("reduction", n, "") for n in _split_top(names))
        else:
            items.extend(_Item(clause, a, "") for a in _split_top(args))
    return tuple(items)


def _base_name(expr: str) -> str | None:
    """The user variable an expression of a clause is about, or None for compiler temporaries.

    `*a` -> a, `MEM[(char *)a]` -> a, `(real(kind=8)[0:] * restrict) b.11_14->data` -> b,
    `a.0` -> a (gfortran's copy of a dummy array), `gp.28_13` -> gp, `*NON_LVALUE_EXPR <a>` -> a,
    `D.4238` -> None.
    """
    text = expr.strip()
    if text.lstrip("*( ").startswith("MEM"):
        m = _MEM_INNER.search(text)
        if m is None:
            return None
        text = m.group("inner")
    text = _CAST.sub(" ", text)
    for m in _IDENT.finditer(text):
        token = m.group(0)
        if token in _NOT_NAMES or _TREE_CODE.fullmatch(token):
            continue
        return None if _TEMP.fullmatch(token) else token.split(".")[0]
    return None


def _is_dereference(item: _Item) -> bool:
    """Whether a clause expression is about pointed-to data rather than a variable's own bytes."""
    expr = _CAST.sub(" ", item.expr)
    return ("*" in expr or "->" in expr or "MEM" in expr or ".data" in expr
            or "pointer" in item.attrs)


def _last_group(text: str) -> int | None:
    """Index of the `(` opening the parenthesised group that ends `text`; None if none does."""
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return None


# g++'s `;; Function void scale(T*, int) [with T = double] (...)`: the template's arguments.
_TEMPLATE_ARGS = re.compile(r"\s*\[with [^\[\]]*\]$")


def _function_name(signature: str) -> str:
    """The name in a header: `void f (double * a, int n)`, `void (*<T350>) (float *, int) f
    (float * a, int n)`, `void ns::f(double*, int)` and `f` all give the name before the last
    parenthesised group (the parameters), or the last word when there is none."""
    sig = _TEMPLATE_ARGS.sub("", signature.strip())
    cut = _last_group(sig)
    head = sig[:cut].rstrip() if cut is not None else sig
    while re.search(r"<[^<>]*>", head):
        head = re.sub(r"<[^<>]*>", "", head)
    words = head.split()
    return words[-1].lstrip("*&") if words else ""


def _split_functions(text: str) -> list[tuple[str, list[str]]]:
    """The dump cut into (function name, lines); one nameless piece when no header is found.

    C's original dump heads each function with `;; Function f (null)`; gimple dumps and gfortran's
    original dump print the signature at column 0, then `{` (maybe after a `[file:line:col]`).
    """
    lines = text.splitlines()
    dump_headers = any(_FN_DUMP_HEADER.match(line) for line in lines)
    functions: list[tuple[str, list[str]]] = []
    current: tuple[str, list[str]] | None = None
    for i, line in enumerate(lines):
        name: str | None = None
        if dump_headers:
            m = _FN_DUMP_HEADER.match(line)
            if m:
                name = _function_name(m.group("sig"))
        elif (line[:1] not in ("", " ", "\t", "{", "}", "[", "#", ";", "<")
              and not line.startswith("__attribute__")
              and i + 1 < len(lines) and _BLOCK_OPEN.match(lines[i + 1])):
            name = _function_name(line)
        if name is not None:
            current = (name, [line])
            functions.append(current)
        elif current is not None:
            current[1].append(line)
        elif line.strip():
            current = ("", [line])
            functions.append(current)
    return functions


def _directives(lines: list[str]) -> tuple[_Directive, ...]:
    found: list[_Directive] = []
    for i, line in enumerate(lines):
        m = _PRAGMA.match(line)
        if m is None:
            continue
        rest = m.group("rest")
        g = _GIMPLE_KIND.match(rest)
        o = _ORIGINAL_KIND.match(rest) if g is None else None
        if g is not None:
            kind = g.group("kind")
            clauses = rest[g.end():]
            # Later passes split kernels into oacc_parallel_kernels_*; gcc 12's gimple does not.
            kind = "kernels" if kind.startswith("parallel_kernels") else kind.replace("_", " ")
            kind = "host_data" if kind == "host data" else kind
        elif o is not None:
            kind = " ".join(o.group("kind").split())
            clauses = rest[o.end():]
        else:
            continue
        locs = _LOC.findall(m.group("locs"))
        line_no = int(locs[0]) if locs else None
        indent = _indent(line)
        end = i + 1
        # The body is what follows at a deeper indent: dumps indent every block they print.
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
            end += 1
        found.append(_Directive(kind, line_no, _items(clauses.rstrip().rstrip(";")), i, end))
    return tuple(found)


def _declarations(lines: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(pointer base names, array names) declared in a function, signature included."""
    pointers: set[str] = set()
    arrays: set[str] = set()
    if lines:
        head = lines[0].rstrip()
        open_at = _last_group(head)  # the parameters: the return type may have parentheses
        if open_at is not None and not head.startswith(";;"):
            for param in _split_top(head[open_at + 1:-1]):
                m = re.search(r"\*\s*(?:(?:restrict|__restrict|const|volatile)\s+)*"
                              r"([A-Za-z_]\w*)\s*$", param)
                if m:
                    pointers.add(m.group(1))
    for line in lines[1:]:
        # Declarations are short and never hold ` = ` outside an initialiser; skipping the rest
        # keeps the regular expressions away from long clause lines.
        if len(line) > 240 or not line.rstrip().endswith(";") or line.lstrip().startswith("["):
            continue
        if " = " not in line:
            p = _PTR_DECL.match(line)
            if p and not re.fullmatch(r"D\.\d+", p.group("name")):
                pointers.add(p.group("name").split(".")[0])
        a = _ARRAY_DECL.match(line)
        if a and " = " not in line[:a.start("name")]:
            arrays.add(a.group("name"))
    return frozenset(pointers), frozenset(arrays)


# gfortran's descriptor of an array section (`copyout(x(1:n))`): a temporary `parm.N` whose
# data is set to the array's, `parm.8.data = (void *) &(*x)[0];`, then named by the clause.
_DESCRIPTOR = re.compile(r"^\s*(?:\[[^\[\]]*\]\s*)*(?P<temp>parm\.\d+)\.data\s*=\s*(?P<value>.*);\s*$")


def _descriptors(lines: list[str]) -> list[str]:
    """The lines with gfortran's section descriptors (`parm.8`) in the directives renamed to
    the arrays they describe (`x`): the student named the array, never the temporary."""
    aliases: dict[str, str] = {}
    for line in lines:
        m = _DESCRIPTOR.match(line)
        if m is not None:
            name = _base_name(_LOC.sub("", m.group("value")))
            if name is not None and name != "parm":
                aliases[m.group("temp")] = name
    if not aliases:
        return lines
    temps = re.compile(r"\b(" + "|".join(re.escape(t) for t in aliases) + r")\b(?!\.\d)")
    return [temps.sub(lambda m: aliases[m.group(1)], line) if "#pragma" in line else line
            for line in lines]


def _parse_dump(text: str) -> list[_Function]:
    functions: list[_Function] = []
    for name, lines in _split_functions(text):
        lines = _descriptors(lines)
        pointers, arrays = _declarations(lines)
        functions.append(_Function(name, tuple(lines), _directives(lines), pointers, arrays))
    return functions


# ---------------------------------------------------------------------------------------------
# gcc's call graph: which functions the program can reach


# `main/13 (main) @0x7f68df3ce110`, `__m_MOD_msub/1 (msub) @0x...`: node id, then the name the
# tree dumps print (in the initial table; later tables print the assembler name there).
_CG_NODE = re.compile(r"^(?P<id>\S+/\d+) \((?P<name>.*)\) @0x[0-9a-f]+\s*$")
_CG_ID = re.compile(r"\S+/\d+")
_ROOT_FLAGS = frozenset({"static_constructor", "static_destructor"})


@dataclass(frozen=True)
class _CallGraph:
    functions: frozenset[str]  # every function the graph names (as the tree dumps name it)
    reachable: frozenset[str]  # those a path of calls and references from main leads to

    def reaches(self, name: str) -> bool:
        """Unknown names count as reachable: leave nothing out that the graph cannot place."""
        return name not in self.functions or name in self.reachable


# Complexity: a reader of gcc's symbol table dump: one branch per line form.
def _call_graph(text: str) -> _CallGraph | None:
    """The initial symbol table of -fdump-ipa-cgraph; None when there is none or no `main`."""
    start = text.find("Initial Symbol table:")
    if start < 0:
        return None
    names: dict[str, str] = {}
    edges: dict[str, list[str]] = {}
    functions: set[str] = set()
    roots: list[str] = []
    current: str | None = None
    for line in text[start:].splitlines()[1:]:
        if not line.strip():
            continue
        node = _CG_NODE.match(line)
        if node is not None:
            current = node.group("id")
            names[current] = node.group("name")
            edges[current] = []
            if node.group("name") == "main":
                roots.append(current)
            continue
        if not line[:1].isspace():
            break  # the next section
        if current is None:
            continue
        key, _, rest = line.strip().partition(":")
        if key in ("Calls", "References"):
            edges[current].extend(_CG_ID.findall(rest))
        elif key == "Function flags":
            functions.add(current)
            if _ROOT_FLAGS & set(rest.split()):
                roots.append(current)
    if not any(names.get(r) == "main" for r in roots):
        return None
    seen = set(roots)
    todo = list(roots)
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return _CallGraph(frozenset(names[f] for f in functions),
                      frozenset(names[f] for f in functions if f in seen))


# ---------------------------------------------------------------------------------------------
# gcc tree dumps: deciding


def _counterpart(fn: _Function, candidates: list[_Function]) -> _Function | None:
    """Of the original dump's functions of fn's name, the one that is fn: the one whose
    constructs are on the same lines, else (no lines: C) the first with as many constructs."""
    lines = fn.lines_of_computes()
    if None not in lines:
        for candidate in candidates:
            if candidate.lines_of_computes() == lines:
                return candidate
    for candidate in candidates:
        theirs = candidate.lines_of_computes()
        if len(theirs) == len(lines) and all(line is None for line in theirs):
            return candidate
    return None


def _pairs(original: list[_Function], gimple: list[_Function]
           ) -> Iterator[tuple[_Function, _Directive, _Directive]]:
    """(gimple function, original construct, gimple construct) for every construct paired.

    The two dumps do not list functions in the same order (gimplification follows the call
    graph): each gimple function finds its counterpart by name, then by the lines of its
    constructs (see the module's docstring). Only functions with constructs take part.
    """
    by_name: dict[str, list[_Function]] = {}
    for fn in original:
        if fn.computes():
            by_name.setdefault(fn.name, []).append(fn)
    for fn in gimple:
        candidates = by_name.get(fn.name)
        if not candidates or not fn.computes():
            continue
        orig = _counterpart(fn, candidates)
        if orig is None:
            continue
        candidates.remove(orig)
        for o, g in zip(orig.computes(), fn.computes(), strict=True):
            yield fn, o, g


def _names(items: Iterable[_Item]) -> set[str]:
    return {n for n in (_base_name(i.expr) for i in items) if n}


def _reductions(fn: _Function, construct: _Directive) -> set[str]:
    """Names in a reduction clause of the construct or of a loop inside it."""
    inner = [d for d in fn.directives if construct.start <= d.start < construct.end]
    return _names(i for d in inner for i in d.items if i.clause == "reduction")


def _is_data(item: _Item, name: str, fn: _Function, body: str) -> bool:
    raw = _IDENT.search(_CAST.sub(" ", item.expr))
    spelled = raw.group(0) if raw else name
    if _is_dereference(item) or name in fn.pointers:
        return True
    if spelled in fn.arrays or name in fn.arrays:
        return True
    # A global array is declared outside every function; its indexing in the region shows it.
    return re.search(r"(?<![\w.])" + re.escape(spelled) + r"\s*\[", body) is not None


def _hint(fn: _Function, construct: _Directive, name: str) -> tuple[str, int | None] | None:
    """Where the variable is already on the device: an enclosing data region, else an earlier
    enter data or declare of the same function. (directive, line) of the closest one."""
    enclosing = [d for d in fn.directives
                 if d.kind == "data" and d.start < construct.start < d.end
                 and name in _names(d.items)]
    if enclosing:
        return "data", enclosing[-1].line
    earlier = [d for d in fn.directives
               if d.kind in ("enter data", "declare") and d.start < construct.start
               and name in _names(d.items)]
    if earlier:
        return earlier[-1].kind, earlier[-1].line
    return None


def _moves_data(item: _Item, name: str, fn: _Function) -> bool:
    """Whether a clause copies the variable's data, not just a pointer to it.

    gfortran maps a dummy array's data (`*a`), and so does gcc for a C array; a C pointer gets
    `firstprivate(a)` or a map of the pointer itself, which leave the data on the host. The
    zero-length `MEM[(char *)a] [len: 0]` and the `[pointer ...]` companions only attach a pointer
    to data that must already be present.
    """
    if item.clause != "map" or "pointer" in item.attrs or re.fullmatch(r"len:\s*0", item.attrs):
        return False
    return _is_dereference(item) or name not in fn.pointers


def _finding(fn: _Function, construct: _Directive, name: str, data_moved: bool) -> ImplicitData:
    at = _at(construct.line)
    hint = _hint(fn, construct, name)
    if hint is not None and hint[0] == "data":
        detail = MSG_IN_DATA.format(var=name, construct=construct.kind, at=at,
                                    data_at=_at(hint[1]))
    elif hint is not None:
        detail = MSG_ENTERED.format(var=name, construct=construct.kind, at=at,
                                    directive=hint[0], data_at=_at(hint[1]))
    elif name in fn.pointers and not data_moved:
        detail = MSG_POINTER.format(var=name, construct=construct.kind, at=at)
    else:
        detail = MSG_ARRAY.format(var=name, construct=construct.kind, at=at)
    return ImplicitData(name, construct.line, construct.kind, detail)


def _implicit(fn: _Function, original: _Directive, gimple: _Directive) -> list[ImplicitData]:
    explicit = _names(original.items)
    reductions = _reductions(fn, gimple) | _names(i for i in original.items
                                                  if i.clause == "reduction")
    body = "\n".join(fn.lines[gimple.start + 1:gimple.end])
    # kernels copies a scalar with force_tofrom (an aggregate gets tofrom); a force_tofrom of a
    # dereference is a scalar passed by reference (a Fortran dummy `n`, or its host's).
    scalars = _names(i for i in gimple.items
                     if i.map_kind == "force_tofrom" and "*" in _CAST.sub(" ", i.expr))
    found: dict[str, bool] = {}  # name -> whether some implicit clause moves its data
    for item in gimple.items:
        if item.clause not in ("map", "firstprivate"):
            continue
        name = _base_name(item.expr)
        if not name or name in explicit or name in reductions or name in scalars:
            continue
        if item.clause == "firstprivate" and name not in fn.pointers:
            continue  # a scalar copied to the device: what the course teaches, not a problem
        if _is_data(item, name, fn, body):
            found[name] = found.get(name, False) or _moves_data(item, name, fn)
    return [_finding(fn, gimple, name, found[name]) for name in sorted(found)]


# ---------------------------------------------------------------------------------------------
# gcc tree dumps: what they say line by line, for the annotated source

# gimple's map kinds, as the OpenACC clauses that make them.
_CLAUSE_OF_MAP = {"to": "copyin", "from": "copyout", "tofrom": "copy", "alloc": "create",
                  "force_to": "copyin", "force_from": "copyout", "force_tofrom": "copy",
                  "force_alloc": "create", "force_present": "present", "present": "present",
                  "release": "delete", "delete": "delete", "attach": "attach",
                  "force_attach": "attach", "detach": "detach", "force_detach": "detach",
                  "force_deviceptr": "deviceptr", "no_alloc": "no_create"}
_DATA_DIRECTIVES = ("data", "enter data", "exit data", "update")


def _moved(items: Iterable[_Item], directive: str = "") -> dict[str, list[str]]:
    """clause -> names of the variables a construct's map clauses move (pointer companions,
    which only attach a pointer to data already there, left out)."""
    out: dict[str, list[str]] = {}
    for item in items:
        name = _base_name(item.expr) if item.clause == "map" else None
        if name is None or "pointer" in item.attrs or re.fullmatch(r"len:\s*0", item.attrs):
            continue
        clause = _CLAUSE_OF_MAP.get(item.map_kind.strip(), item.map_kind.strip())
        if directive == "update":
            clause = "update self" if clause == "copyout" else "update device"
        names = out.setdefault(clause, [])
        if name not in names:
            names.append(name)
    return out


def _data_remark(line: int, moved: dict[str, list[str]], directive: str = "") -> Remark | None:
    if not moved:
        return None
    text = " · ".join(f"{clause} {', '.join(names)}" for clause, names in moved.items())
    meaning = "; ".join(clause_meaning(c, ", ".join(n), directive=directive) for c, n in moved.items())
    return Remark(line, text, meaning, "data")


def _construct_remarks(fn: _Function, original: _Directive, gimple: _Directive,
                       implicit: list[ImplicitData]) -> list[Remark]:
    """A compute construct: the region, the data its clauses move, the data gcc moves for it."""
    line = gimple.line
    if line is None:
        return []
    out = [Remark(line, f"OpenACC {gimple.kind} region", REGION_MADE, "region")]
    explicit = _data_remark(line, _moved(original.items))
    if explicit is not None:
        out.append(explicit)
    for found in implicit:
        out.append(_implicit_remark(fn, gimple, found.variable))
    return out


def _implicit_remark(fn: _Function, gimple: _Directive, name: str) -> Remark:
    """What gcc does with a variable the construct uses without a clause naming it."""
    line = gimple.line or 0
    hint = _hint(fn, gimple, name)
    if hint is not None:
        where = f"the {hint[0]} directive{_at(hint[1])}" if hint[0] != "data" else \
            f"the data region{_at(hint[1])}"
        return Remark(line, f"{name}: no clause, found on the device",
                      f"{name} is already on the device ({where}) and used there; "
                      f"present({name}) would say so", "implicit")
    added = _moved(i for i in gimple.items if _base_name(i.expr) == name)
    for clause in added:
        return Remark(line, f"{clause}({name}) added by the compiler",
                      clause_meaning(clause, name, implicit=True), "implicit")
    return Remark(line, f"firstprivate({name}) added by the compiler",
                  f"{name}: only the pointer's value, a host address, reaches the device, not the "
                  "data it points to", "implicit")


def _data_directives(fn: _Function, orig_fns: list[_Function]) -> dict[int, _Directive]:
    """The original dump's data directives of a gimple function, by the gimple ones' start:
    gimple names a Fortran array's data by a temporary, the original by the array. Paired by
    order, when the function's counterpart (by name) has the same ones."""
    mine = [d for d in fn.directives if d.kind in _DATA_DIRECTIVES]
    for candidate in (f for f in orig_fns if f.name == fn.name):
        theirs = [d for d in candidate.directives if d.kind in _DATA_DIRECTIVES]
        if [d.kind for d in theirs] == [d.kind for d in mine]:
            return {g.start: o for g, o in zip(mine, theirs)}
    return {}


# A construct paired in both dumps, and what it uses without a clause (from_gcc_dumps).
_Paired = tuple[_Function, _Directive, _Directive, list[ImplicitData]]


def _remarks(paired: list[_Paired], orig_fns: list[_Function], gimple_fns: list[_Function],
             graph: _CallGraph | None) -> tuple[Remark, ...]:
    """The regions gcc made, the data their clauses and data directives move, the data it moves
    for them, and the regions in functions never called, by source line."""
    out: list[Remark] = []
    seen: set[tuple[str, int]] = set()
    for fn, o, g, implicit in paired:
        seen.add((fn.name, g.start))
        if graph is None or graph.reaches(fn.name):
            out += _construct_remarks(fn, o, g, implicit)
    for fn in gimple_fns:
        live = graph is None or graph.reaches(fn.name)
        written = _data_directives(fn, orig_fns)
        for d in fn.directives:
            if d.line is None:
                continue
            if d.kind in COMPUTE_CONSTRUCTS and not live:
                out.append(Remark(d.line, f"OpenACC {d.kind} region in {fn.name}, a function the "
                                  "program never calls", "this region never runs: nothing calls "
                                  "the function that holds it", "region"))
            elif d.kind in COMPUTE_CONSTRUCTS and (fn.name, d.start) not in seen:
                out.append(Remark(d.line, f"OpenACC {d.kind} region", REGION_MADE, "region"))
            elif d.kind in _DATA_DIRECTIVES and live:
                said = _data_remark(d.line, _moved(written.get(d.start, d).items, d.kind), d.kind)
                if said is not None:
                    out.append(said)
    return tuple(sorted(out, key=lambda r: r.line))


def _safe_remarks(paired: list[_Paired], orig_fns: list[_Function], gimple_fns: list[_Function],
                  graph: _CallGraph | None) -> tuple[Remark, ...]:
    """The remarks, or none: what the annotated source shows must never cost the checks."""
    try:
        return _remarks(paired, orig_fns, gimple_fns, graph)
    except Exception:  # noqa: BLE001 - odd input gives no remark (see module doc)
        return ()


def from_gcc_dumps(original: str, gimple: str, cgraph: str = "") -> AccReport:
    """Compute regions and implicit data from the texts of gcc's `original` and `gimple` dumps,
    in the functions that gcc's call graph (-fdump-ipa-cgraph's text) says the program reaches."""
    try:
        orig_fns = _parse_dump(original)
        gimple_fns = _parse_dump(gimple)
        graph = _call_graph(cgraph)
        # The gimple dump says what was compiled; without one, the original dump still counts.
        counted = gimple_fns if gimple.strip() else orig_fns
        live = [f for f in counted if graph is None or graph.reaches(f.name)]
        regions = sum(len(f.computes()) for f in live)
        written = max(sum(len(f.computes()) for f in orig_fns), sum(len(f.computes()) for f in counted))
        # Each construct paired, with what it uses without a clause (in reachable functions).
        paired = [(fn, o, g, _implicit(fn, o, g) if graph is None or graph.reaches(fn.name) else [])
                  for fn, o, g in _pairs(orig_fns, gimple_fns)]
        implicit = [found for *_, said in paired for found in said]
        targets = sum(len(_OMP_TARGET.findall("\n".join(f.lines))) for f in gimple_fns
                      if graph is None or graph.reaches(f.name))
        return AccReport(regions, tuple(implicit), GCC_METHOD, targets,
                         unreachable=written - regions,
                         remarks=_safe_remarks(paired, orig_fns, gimple_fns, graph))
    except Exception:  # noqa: BLE001 - odd input gives an empty answer (see module doc)
        return AccReport(0, (), GCC_METHOD)
