"""The directives of a source and the compute constructs they open, read from its text (the
ladder's rungs are made from them: ladder.py). Pure: text in, lines and words out.

    directives(text, language, model) -> [Directive]: every directive, continuations joined
    constructs(text, language, model) -> [Construct]: each compute construct and its last line
    clause_items(words, clause)       -> the items of a clause, split at top-level commas
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..checks import loops
from ..checks.directives import code_text


def sentinel(model: str) -> str:
    """The directives' sentinel word of a model: acc (OpenACC) or omp (OpenMP)."""
    return "acc" if model == "openacc" else "omp"


# ---------------------------------------------------------------------------------------------
# Directives: their lines (with continuations), their words, their clauses


@dataclass(frozen=True)
class Directive:
    first: int  # its first line, from 1
    last: int  # its last line (continued directives span several)
    words: str  # its text after the sentinel, continuations joined

    def says(self, pattern: str) -> bool:
        """Whether its words match `pattern` (a keyword's case does not matter)."""
        return re.search(pattern, self.words, re.IGNORECASE) is not None


_C_SENTINEL = {"acc": re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+acc\b(.*)$"),
               "omp": re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+omp\b(.*)$")}
_F_SENTINEL = {"acc": re.compile(r"^[ \t]*!\$acc&?(.*)$", re.IGNORECASE),
               "omp": re.compile(r"^[ \t]*!\$omp&?(.*)$", re.IGNORECASE)}


def _continued(line: str, fortran: bool) -> bool:
    code = line.split("!")[0] if fortran and line.count("!") > 1 else line
    return code.rstrip().endswith("&" if fortran else "\\")


def directives(text: str, language: str, model: str) -> list[Directive]:
    """Every directive of the model (OpenACC or OpenMP) in the text, continuations joined."""
    fortran = language == "fortran"
    pattern = (_F_SENTINEL if fortran else _C_SENTINEL)[sentinel(model)]
    lines = text.split("\n")
    found: list[Directive] = []
    number = 0
    while number < len(lines):
        m = pattern.match(lines[number])
        if m is None:
            number += 1
            continue
        first, words = number, [m.group(1)]
        while _continued(lines[number], fortran) and number + 1 < len(lines):
            number += 1
            more = pattern.match(lines[number])
            words.append(more.group(1) if more is not None else lines[number])
        joined = " ".join(w.rstrip().rstrip("\\&").strip() for w in words)
        found.append(Directive(first + 1, number + 1, joined))
        number += 1
    return found


_COMPUTE = {"openacc": r"^\s*(parallel|kernels|serial)\b",
            "openmp": r"^\s*target\b(?!\s+(data|enter|exit|update)\b)"}
_DATA = {"openacc": r"^\s*(data|enter\s+data)\b", "openmp": r"^\s*target\s+(data|enter\s+data)\b"}


def is_compute(d: Directive, model: str) -> bool:
    return d.says(_COMPUTE[model])


def is_data(d: Directive, model: str) -> bool:
    """A data region or an enter data: what puts arrays on the device by itself."""
    return d.says(_DATA[model])


def clause_items(words: str, clause: str) -> list[str]:
    """The items of every `clause(...)` of a directive's words, split at the commas outside
    brackets; an OpenMP map's type (`to:`) left out."""
    items: list[str] = []
    for m in re.finditer(rf"\b{clause}\s*\(", words, re.IGNORECASE):
        inside = _balanced(words, m.end() - 1)
        if inside is None:
            continue
        if ":" in inside and clause == "map":
            inside = inside.split(":", 1)[1]
        items += [i.strip() for i in _split_top(inside) if i.strip()]
    return items


def _balanced(text: str, at: int) -> str | None:
    """What the bracket at `at` holds, up to its closing one; None when it is not closed."""
    depth = 0
    for i in range(at, len(text)):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(text[i], 0)
        if depth == 0:
            return text[at + 1:i]
    return None


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


# ---------------------------------------------------------------------------------------------
# Compute constructs: the lines they hold


@dataclass(frozen=True)
class Construct:
    directive: Directive
    end: int  # the last line it holds (a Fortran `end` directive included)


_F_DO = re.compile(r"^[ \t]*(?:\d+[ \t]+)?(?:[A-Za-z_]\w*[ \t]*:[ \t]*)?do\b(?![ \t]*=)", re.IGNORECASE)
_F_END_DO = re.compile(r"^[ \t]*(?:\d+[ \t]+)?end[ \t]*do\b", re.IGNORECASE)


def _fortran_end_do(lines: Sequence[str], start: int) -> int | None:
    """The `end do` (line from 1) closing the first loop at or after line `start`."""
    depth = 0
    for number in range(start, len(lines) + 1):
        if _F_DO.match(lines[number - 1]):
            depth += 1
        elif _F_END_DO.match(lines[number - 1]):
            depth -= 1
            if depth == 0:
                return number
    return None


def _fortran_end(lines: Sequence[str], d: Directive, model: str, found: Sequence[Directive]) -> int | None:
    """The last line of a Fortran construct: its loop's `end do` (with the optional `end`
    directive right after), or its own `end` directive."""
    name = d.words.split()[0].lower()
    looped = d.says(r"\bloop\b" if model == "openacc" else r"\bdo\b")
    ends = [e for e in found if e.first > d.last and e.says(r"^\s*end\b") and
            e.words.lower().split()[1:2] == [name]]
    if looped:
        end = _fortran_end_do(lines, d.last + 1)
        if end is None:
            return None
        after = [e for e in ends if e.first == end + 1]
        return after[0].last if after else end
    return ends[0].last if ends else None


def constructs(text: str, language: str, model: str) -> list[Construct]:
    """The compute constructs of the text and the lines each holds; one that cannot be read
    as a construct is left out."""
    found = directives(text, language, model)
    code = code_text(text, language)
    lines = code.split("\n")
    out: list[Construct] = []
    for d in found:
        if not is_compute(d, model):
            continue
        if language == "fortran":
            end = _fortran_end(lines, d, model, found)
        else:
            extent = loops.construct_extent(code, d.last + 1, language) if d.last < len(lines) else None
            end = extent[1] if extent is not None else None
        if end is not None:
            out.append(Construct(d, end))
    return out
