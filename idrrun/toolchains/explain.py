"""What a compiler or an OpenACC runtime said, explained in the student's terms: which array,
which directive, what to change.

A failed build or run already carries its typed kind (model.FailureKind) and a generic hint;
these readers look at the messages the tools printed (the only place where nvcc, gfortran and
libgomp or the NVIDIA runtime say what went wrong) and give the hint that fits them, with the
student's own names and line numbers from the source. Each reader knows one message:

    nvcc fatal   : Unsupported gpu architecture 'compute_70'        a target this CUDA dropped
    Error: Invalid character in name at (1)    on a `#ifdef` line    gfortran's preprocessor
    libgomp: present clause: !acc_is_present (0x…, 40000 (0x9c40))  present, never put there
      (GCC 14's: present clause: not present on the device (addr: 0x…, size: 40000 (0x9c40), dev: 0))
    FATAL ERROR: data in PRESENT clause was not found on device 1: name=a  (the NVIDIA runtime)
    … an illegal memory access was encountered / Illegal address      a section too small
    libgomp: Trying to map into device [0x…) object when [0x…) is already mapped
    error: ‘readonly’ undeclared   on an OpenACC line   OpenACC 2.7, which GCC 12 and 13 do not read
    mkoffload: fatal error: either '-fopenacc' or '-fopenmp' must be set   both models offloaded

Pure: text in, words out; None when no reader knows the message (the generic hint stays).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..model import Source
from .diagnostics import parse

# ---------------------------------------------------------------------------------------------
# The student's directives: their clauses, with the arrays they name


@dataclass(frozen=True)
class Clause:
    """One clause of an OpenACC directive in the source: `present(a, b[0:n])` at a line."""

    line: int  # in the cell or file, as the student counts (the magic line is line 1)
    name: str  # present, copyin, copy, ...
    items: tuple[str, ...]  # as written: "a", "b[0:n]", "c(1:n)"

    @property
    def arrays(self) -> tuple[str, ...]:
        return tuple(re.split(r"[\[(\s]", item, maxsplit=1)[0] for item in self.items)


_C_DIRECTIVE = re.compile(r"^\s*#\s*pragma\s+acc\b(.*)$")
_F_DIRECTIVE = re.compile(r"^\s*!\$acc\b(.*)$", re.IGNORECASE)
_CLAUSE = re.compile(r"\b([a-z_]+)\s*\(", re.IGNORECASE)


def _top_level(text: str, start: int) -> tuple[str, int]:
    """The text inside the parenthesis that opens before `start`, and where it closes."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] in "([":
            depth += 1
        elif text[i] in ")]":
            depth -= 1
            if depth == 0:
                return text[start:i], i + 1
    return text[start:], len(text)


def _split(items: str) -> tuple[str, ...]:
    """`a, b[0:n], c(1:n, 2)` -> ("a", "b[0:n]", "c(1:n, 2)"): commas at the top level only."""
    out, depth, word = [], 0, ""
    for ch in items:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(word.strip())
            word = ""
        else:
            word += ch
    out.append(word.strip())
    return tuple(w for w in out if w)


def clauses(source: Source) -> Iterator[Clause]:
    """Every clause with a list of the source's OpenACC directives, in order (a C directive
    continued with `\\` and a Fortran one with `&` are read as one, at their first line)."""
    directive = _F_DIRECTIVE if source.language == "fortran" else _C_DIRECTIVE
    lines = source.text.splitlines()
    i = 0
    while i < len(lines):
        found = directive.match(lines[i])
        at = i
        i += 1
        if found is None:
            continue
        text = found.group(1)
        while text.rstrip().endswith(("\\", "&")) and i < len(lines):
            text = text.rstrip()[:-1] + " " + re.sub(r"^\s*(!\$acc&?)?", "", lines[i], flags=re.I)
            i += 1
        pos = 0
        while (m := _CLAUSE.search(text, pos)) is not None:
            inside, pos = _top_level(text, m.end())
            yield Clause(source.first_line + at, m.group(1).lower(), _split(inside))


def _said(found: Sequence[Clause]) -> str:
    """`present(a) at line 12, present(b) at line 20`."""
    return ", ".join(f"{c.name}({', '.join(c.items)}) at line {c.line}" for c in found)


# ---------------------------------------------------------------------------------------------
# The OpenACC runtime's messages

# libgomp's format: "present clause: !acc_is_present (%p, %lu (0x%lx))" (GCC 12 and 13), "present
# clause: not present on the device (addr: %p, size: %lu (0x%lx), dev: %d)" (GCC 14, which shares
# the message with OpenMP's present modifier). The address, then the size.
_PRESENT_GCC = re.compile(r"present clause: (?:!acc_is_present \(|not present on the device "
                          r"\(addr: )(0x[0-9a-f]+|\(nil\)), (?:size: )?(\d+)")
_PRESENT_NV = re.compile(r"data in PRESENT clause was not found on device \d+: name=([^\s]+)")
_ILLEGAL = re.compile(r"an illegal memory access was encountered|Illegal address during kernel "
                      r"execution", re.IGNORECASE)
_MAPPED = re.compile(r"Trying to map into device \[(0x[0-9a-f]+)\.\.(0x[0-9a-f]+)\) object when "
                     r"\[(0x[0-9a-f]+)\.\.(0x[0-9a-f]+)\) is already mapped")

DATA_CLAUSES = ("copy", "copyin", "copyout", "create", "present", "no_create", "deviceptr",
                "attach", "pcopy", "pcopyin", "pcopyout", "pcreate", "present_or_copy",
                "present_or_copyin", "present_or_copyout", "present_or_create")


def _put_there(fortran: bool, array: str) -> str:
    """How an array is put on the device before a construct, in the source's language."""
    if fortran:
        return (f"a data region around the construct (`!$acc data copyin({array})` … "
                f"`!$acc end data`), or `!$acc enter data copyin({array})` before it")
    return (f"a data region around the construct (`#pragma acc data copyin({array}[0:n])` and a "
            f"block), or `#pragma acc enter data copyin({array}[0:n])` before it")


def _present(output: str, source: Source) -> str | None:
    gcc = _PRESENT_GCC.search(output)
    nv = _PRESENT_NV.search(output)
    if gcc is None and nv is None:
        return None
    present = [c for c in clauses(source) if c.name in ("present", "default") and
               (c.name == "present" or "present" in c.items)]
    named = [nv.group(1)] if nv else sorted({a for c in present for a in c.arrays if c.name == "present"})
    which = (f"{' or '.join(named)}" if named else "an array")
    size = f" ({gcc.group(2)} bytes at {gcc.group(1)})" if gcc else ""
    where = f": {_said(present)}" if present else ""
    return (f"the runtime found no device copy of {which}{size}, which a `present` clause says is "
            f"on the device{where}. `present` moves nothing: it only checks. Put the array there "
            f"first, with {_put_there(source.language == 'fortran', named[0] if named else 'array')}; "
            "or name it in copyin/copy instead of present")


def _illegal(output: str, source: Source) -> str | None:
    if _ILLEGAL.search(output) is None:
        return None
    sections = [c for c in clauses(source) if c.name in DATA_CLAUSES and
                any(("[" in item or ":" in item) for item in c.items)]
    where = (f" Compare each section with the loops that use it: {_said(sections)}"
             if sections else "")
    shape = "a(1:n)" if source.language == "fortran" else "a[0:n]"
    return ("a compute region read or wrote device memory it was not given: most often an array "
            f"section smaller than what the loop touches (a data clause with {shape} for a loop "
            "that goes further), or a host pointer used on the device without a data clause."
            + where)


def _mapped(output: str, source: Source) -> str | None:
    found = _MAPPED.search(output)
    if found is None:
        return None
    asked = int(found.group(2), 16) - int(found.group(1), 16)
    there = int(found.group(4), 16) - int(found.group(3), 16)
    mapped = [c for c in clauses(source) if c.name in DATA_CLAUSES]
    by_array: dict[str, list[Clause]] = {}
    for c in mapped:
        for array in c.arrays:
            by_array.setdefault(array, []).append(c)
    # The arrays given to data clauses more than once with different sections: the suspects.
    twice = {a: cs for a, cs in by_array.items()
             if len({item for c in cs for item in c.items if re.split(r"[\[(\s]", item)[0] == a}) > 1}
    where = "".join(f" {a}: {_said(cs)}." for a, cs in sorted(twice.items()))
    ending = "!$acc exit data / !$acc end data" if source.language == "fortran" else \
        "#pragma acc exit data / the end of the data region"
    return (f"an array already on the device ({there} bytes) was given again, in another data "
            f"clause, with a section that overlaps it but does not fit inside it ({asked} bytes). "
            "While an array is on the device, a clause may only name it whole as it is there or "
            "a part of that; give every clause of the array the same section, or end the first "
            f"mapping ({ending}) before the second.{where}")


# GCC's libgomp (12 to 14) stops at a `declare` on a function's local variable whose mapping
# its GOACC_declare has no case for (device_resident, link): "GOACC_declare: Assertion `0'
# failed", an abort that names no line. nvc accepts the same directive.
_GOACC_DECLARE = re.compile(r"GOACC_declare: Assertion")
_DECLARE = re.compile(r"^\s*(?:#\s*pragma\s+acc|!\$acc)\s+declare\b", re.IGNORECASE)


def _declare(output: str, source: Source) -> str | None:
    if _GOACC_DECLARE.search(output) is None:
        return None
    lines = source.text.splitlines()
    declared = [c for c in clauses(source)
                if _DECLARE.match(lines[c.line - source.first_line]) is not None]
    unusual = [c for c in declared if c.name in ("device_resident", "link")] or declared
    where = f" ({_said(unusual)})" if unusual else ""
    return ("the OpenACC runtime of gcc (libgomp) stopped at a `declare` directive" + where
            + ": its GOACC_declare has no case for this clause on a function's local variable "
            "(an assertion of gcc's runtime, not an error of your program; nvc accepts it). With "
            "gcc, put the variable on the device with a data region instead: `create` in a "
            "`data` construct around the loops that use it, or `declare create(...)`")


_RUN_READERS: tuple[Callable[[str, Source], str | None], ...] = (_present, _illegal, _mapped,
                                                                 _declare)


def run_hint(output: str, source: Source) -> str | None:
    """The hint for a run whose output holds an OpenACC runtime's message; None for others."""
    for reader in _RUN_READERS:
        said = reader(output, source)
        if said is not None:
            return said
    return None


# ---------------------------------------------------------------------------------------------
# Compilers' messages

_NVCC_ARCH = re.compile(r"nvcc fatal\s*:\s*Unsupported gpu architecture '(?:compute|sm)_(\d+)'")


def _nvcc_arch(output: str, source: Source) -> str | None:
    found = _NVCC_ARCH.search(output)
    if found is None:
        return None
    cc = int(found.group(1))
    if cc >= 75:
        return (f"this nvcc does not know sm_{cc} (a GPU newer than this CUDA?): `nvcc "
                "--list-gpu-arch` lists the targets it builds; -arch=native builds for the GPU here")
    return (f"this nvcc no longer builds for sm_{cc} (CUDA 13 dropped the GPUs before Turing: "
            "sm_50 to sm_72): ask for a target it knows, the nearest being -arch=sm_75 (`nvcc "
            "--list-gpu-arch` lists them), or -arch=native for the GPU here. gcc's offloading "
            f"does the same on its own: -gpu=cc{cc} there builds the nearest target ptxas accepts")


# OpenACC 2.7's clauses that GCC 14 reads and GCC 12 and 13 stop at (each gives its own error:
# "'readonly' undeclared", "'default' is not valid for '#pragma acc data'", "'host' is not valid
# for '#pragma acc parallel'", gfortran's "Failed to match clause"), and what those read instead.
_ACC_LINE = r"^\s*(?:#\s*pragma\s+acc|!\$acc)\s+"
_OPENACC27 = (
    (re.compile(r"\b(?:copyin|cache)\s*\(\s*readonly\s*:", re.IGNORECASE),
     "the readonly modifier (copyin(readonly: ...))",
     "leave it out: copyin(a) copies the same, readonly only promises that the region does not "
     "write it"),
    (re.compile(_ACC_LINE + r"(?:parallel|kernels|serial)\b.*\bself\s*\(", re.IGNORECASE),
     "the self clause of a compute construct",
     "write if(!(condition)) (Fortran: if(.not. (condition))) in its place: the construct runs "
     "on the host when the condition holds, as with self(condition)"),
    (re.compile(_ACC_LINE + r"data\b.*\bdefault\s*\(", re.IGNORECASE),
     "the default clause of a data construct",
     "put default(present) or default(none) on each compute construct inside the data region "
     "instead, which GCC 12 and 13 read"),
)


def _openacc27(output: str, source: Source) -> str | None:
    """A compile that stopped at an OpenACC 2.7 clause: which one, at which line, what instead."""
    lines = source.text.splitlines()
    found: dict[int, list[tuple[str, str]]] = {}
    for d in parse(output):
        index = d.line - source.first_line
        if d.severity != "error" or not 0 <= index < len(lines) or d.line in found:
            continue
        clauses = [(what, instead) for pattern, what, instead in _OPENACC27
                   if pattern.search(lines[index])]
        if clauses:
            found[d.line] = clauses
    if not found:
        return None
    said = "; ".join(f"line {line}: {what}, {instead}" for line, clauses in sorted(found.items())
                     for what, instead in clauses)
    return ("OpenACC 2.7, which GCC 14 reads and this gcc does not (GCC 12 and 13 implement "
            f"OpenACC 2.6): {said}")


# The nvptx mkoffload of GCC 12 to 14, given both -fopenacc and -fopenmp ("nvptx mkoffload:" from
# GCC 13 on, the quotes typographic where the locale allows).
_MODELS_TOGETHER = re.compile(r"mkoffload: fatal error: either .-fopenacc. or .-fopenmp. must be set")


def _models_together(output: str, source: Source) -> str | None:
    if _MODELS_TOGETHER.search(output) is None:
        return None
    return ("gcc's nvptx offload compiler builds OpenACC or OpenMP offloading, never both in one "
            "program (GCC 12 to 14): leave -fopenmp out of the options for an OpenACC program "
            "(-a), or -fopenacc for OpenMP target regions (-t); or build for the host "
            "(-foffload=disable), where both run")


_COMPILE_READERS: tuple[Callable[[str, Source], str | None], ...] = (_nvcc_arch,
                                                                     _openacc27, _models_together)


def compile_hint(output: str, source: Source) -> str | None:
    """The hint for a failed build whose messages a reader knows; None for others."""
    for reader in _COMPILE_READERS:
        said = reader(output, source)
        if said is not None:
            return said
    return None
