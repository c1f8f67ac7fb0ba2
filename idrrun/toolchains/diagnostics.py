"""What compilers print about a source, read into model.Diagnostic; the build's temporary names
replaced by the ones the student knows.

The compiler sees `source.c` in a folder of the build's own; a student wrote `cell[3]` or
`saxpy.c`. Every form in which gcc, gfortran, ld, the programs' runtimes and nvhpc name that
file is renamed (`rename_temporary`), checked against their real output (tests/test_build.py):

    source.c:8:3: error: ...                 gcc, g++, gfortran (and its `source.f90:10:31:` line)
    source.c: In function 'main':            gcc's context, and `In file included from source.c:2:`
    /…/.KEY.tmp-x/source.c:2: undefined ...  ld with line tables (a checked build has -g1)
    /usr/bin/ld: /tmp/ccw1Wp8C.o: in func…   ld: the object the compiler made of the source
    At line 7 of file source.f90             gfortran's runtime errors (the program's output)
    at /…/source.f90:7                       gfortran's backtrace
    prog: source.c:3: main: Assertion …      assert()
    "source.c", line 5: error: ...           nvc (EDG)
    NVFORTRAN-S-0034-... (source.f90: 5)     nvfortran

Reading (`parse`): gcc's one-line form `FILE:LINE[:COL]: SEVERITY: MESSAGE` (with -fopt-info
its `optimized:` remarks too), gfortran's location line followed, after the quoted source, by
`Error: ...` or `Warning: ...`, ld's `FILE:LINE: MESSAGE`, nvc's `"FILE", line N: SEVERITY: ...`
and nvfortran's `NVFORTRAN-S-NNNN-MESSAGE (FILE: LINE)`. Context lines (`In function`,
`included from`, the quoted source and its caret) are left out. Pure; nothing raises.
"""

from __future__ import annotations

import re

from ..model import Diagnostic

# Characters that end a path in a message: blanks, quotes (ASCII and gcc's typographic ones),
# brackets, and the separators that follow a file name.
_PATH_END = frozenset(" \t\n\r\"'`‘’“”()<>[]=,;:|")
_MAX_PATH = 4096
# The object gcc compiles a source into before linking it, in its temporary folder.
_COMPILER_OBJECT = re.compile(r"/cc[A-Za-z0-9]{6}\.o(?=:)")


def _path_start(text: str, at: int) -> int:
    """Where the path whose last part starts at `at` begins (`at` when no folder precedes it)."""
    if at == 0 or text[at - 1] != "/":
        return at
    start = at - 1
    while start > 0 and at - start < _MAX_PATH and text[start - 1] not in _PATH_END:
        start -= 1
    return start


def rename_temporary(text: str, temporary: str, name: str) -> str:
    """`text` with the file `temporary` (a bare name, or any path ending in it) and the object
    gcc made of it shown as `name`. A longer name that ends in it (`mysource.c`) is left alone.
    Linear in the text: each occurrence is found by search, its folder walked back once."""
    if not text or not temporary or temporary not in text and "/cc" not in text:
        return text
    out: list[str] = []
    kept = 0
    for m in re.finditer(re.escape(temporary) + r"(?![\w.\-])", text):
        start = _path_start(text, m.start())
        before = text[start - 1] if start > 0 else " "
        if start < kept or before.isalnum() or before in "_.-":
            continue
        out += [text[kept:start], name]
        kept = m.end()
    out.append(text[kept:])
    renamed = "".join(out)
    if "/cc" not in renamed:
        return renamed
    pieces: list[str] = []
    kept = 0
    for m in _COMPILER_OBJECT.finditer(renamed):
        start = _path_start(renamed, m.start() + 1)
        if start < kept:
            continue
        pieces += [renamed[kept:start], name]
        kept = m.end()
    pieces.append(renamed[kept:])
    return "".join(pieces)


# gcc: `FILE:LINE:COL: SEVERITY: MESSAGE` (COL may be a range in some versions: `3:5-9`).
# The compilers' own names for a student's functions: gfortran's main program, a module's
# procedure (__mod_MOD_name), the outlined bodies of OpenMP/OpenACC regions (main._omp_fn.0,
# main$_omp_fn$0) and the clones of an optimised function (.constprop.0, .isra.0, .part.0).
_CLONE = re.compile(r"(?:[.$]_omp_fn[.$]\d+|\.(?:constprop|isra|part|cold|lto_priv)\.\d+)+$")
_MODULE_PROC = re.compile(r"^__\w+?_MOD_(\w+)$")
MAIN_PROGRAM = "the main program"


def student_symbol(symbol: str) -> str:
    """A function's symbol as the student wrote it: `saxpy._omp_fn.0` -> `saxpy`,
    `__heat_MOD_step` -> `step`, `MAIN__` -> "the main program"; a temporary of the
    compiler's own (`D.1234`, `parm.5`) -> "" (nothing of the student's to name)."""
    name = _CLONE.sub("", symbol)
    if name == "MAIN__":
        return MAIN_PROGRAM
    module = _MODULE_PROC.match(name)
    if module is not None:
        return module.group(1)
    if re.fullmatch(r"(?:D|parm|atmp|_gfortran\w*)\.\d+|\.?_\w*", name):
        return ""
    return name


_GCC = re.compile(r"^(?P<file>[^\s:][^:\n]*?):(?P<line>\d+):(?:(?P<col>\d+)(?:-\d+)?:)?[ \t]+"
                  r"(?:(?P<sev>fatal error|error|warning|note|optimized|missed|remark):[ \t]*)?"
                  r"(?P<msg>\S.*)$")
# gfortran: the location alone, then the quoted source, then the message.
_GFORTRAN_AT = re.compile(r"^(?P<file>[^\s:][^:\n]*?):(?P<line>\d+):(?P<col>\d+)(?:-\d+)?:\s*$")
_GFORTRAN_SAYS = re.compile(r"^(?P<sev>Fatal Error|Error|Warning|Note):\s*(?P<msg>.*)$")
# ld, prefixed by the linker's own name, or on the line after it (`FILE:LINE: undefined ...`).
_LD = re.compile(r"^(?:\S*/)?(?:ld|ld\.\w+|collect2)(?:\.exe)?:\s+")
_LD_SAYS = re.compile(r"undefined reference|multiple definition|relocation ")
# nvc (EDG front end).
_EDG = re.compile(r'^"(?P<file>[^"\n]+)", line (?P<line>\d+): (?P<sev>catastrophic error|error|'
                  r'warning|remark)(?: #\w+-?\w*)?: (?P<msg>.*)$')
# nvfortran, nvc's back end: NVFORTRAN-S-0034-Syntax error ... (FILE: LINE)
_NV = re.compile(r"^NV(?:FORTRAN|C\+\+|C|CPP)-(?P<sev>[IWSF])-\d+-(?P<msg>.*?)"
                 r"\s*\((?P<file>[^()\n:]+): (?P<line>\d+)\)\s*$")
_NV_SEVERITY = {"I": "info", "W": "warning", "S": "error", "F": "error"}
# Lines of gcc's that quote the source and point at it: `   10 |   x = 1`, `      |   ^~~`.
_QUOTE = re.compile(r"^\s*\d*\s*\|")


def _severity(text: str | None) -> str:
    word = (text or "error").lower()
    return "error" if word in ("fatal error", "catastrophic error") else word


def parse(output: str) -> list[Diagnostic]:
    """The messages of a build's output that name a file and a line, in order."""
    found: list[Diagnostic] = []
    waiting: tuple[str, int, int] | None = None  # gfortran's location, until its message
    for raw in output.splitlines():
        line = raw.rstrip()
        if not line or _QUOTE.match(line):
            continue
        at = _GFORTRAN_AT.match(line)
        if at is not None:
            if waiting is None:
                waiting = (at.group("file"), int(at.group("line")), int(at.group("col")))
            continue
        says = _GFORTRAN_SAYS.match(line)
        if says is not None and waiting is not None:
            found.append(Diagnostic(waiting[0], waiting[1], waiting[2], _severity(says.group("sev")),
                                    says.group("msg").strip()))
            waiting = None
            continue
        found += _one_line(_LD.sub("", line), linked=_LD.match(line) is not None)
    return found


def _one_line(line: str, linked: bool) -> list[Diagnostic]:
    for pattern in (_EDG, _NV):
        m = pattern.match(line)
        if m is not None:
            sev = m.group("sev")
            return [Diagnostic(m.group("file"), int(m.group("line")), None,
                               _NV_SEVERITY.get(sev) or _severity(sev), m.group("msg").strip())]
    m = _GCC.match(line)
    if m is None or (m.group("sev") is None and not (linked or _LD_SAYS.match(m.group("msg")))):
        return []
    col = m.group("col")
    return [Diagnostic(m.group("file"), int(m.group("line")), int(col) if col else None,
                       _severity(m.group("sev")), m.group("msg").strip())]
