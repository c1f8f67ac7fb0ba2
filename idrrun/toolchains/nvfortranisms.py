"""Fortran written for nvfortran, read by gfortran: what nvfortran accepts and gfortran does not.

Pure functions over the source text; GccFamily.translate applies them and says what it did.
The IDRIS notebooks are written for nvfortran: preprocessor lines indented with the code
(`    #ifdef _OPENACC`), a preprocessor used on `.f90` cells without `-cpp`, free-form lines
longer than the standard's 132 columns. gfortran reads each as an error far from its cause
("Invalid character in name", "Unterminated character constant"), so a cell that runs under
nvfortran fails here for a reason that is not the student's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A preprocessor directive: what cpp in traditional mode (gfortran -cpp) acts on. `#` then a
# directive name; a Fortran line never starts so (a `#` is no Fortran character outside a
# string), so moving it to column 1 changes no Fortran.
_DIRECTIVE = re.compile(r"^([ \t]+)(#[ \t]*(?:if|ifdef|ifndef|elif|else|endif|define|undef|include|"
                        r"error|warning|pragma|line)\b.*)$")
_AT_COLUMN_1 = re.compile(r"^#[ \t]*(?:if|ifdef|ifndef|elif|else|endif|define|undef|include|"
                          r"error|warning|pragma|line)\b")
FREE_FORM_LIMIT = 132  # gfortran's default for free form (-ffree-line-length-132)
LONG_LINES_FLAG = "-ffree-line-length-none"
CPP_FLAG = "-cpp"
_NO_CPP = ("-nocpp",)
_FIXED_SUFFIXES = (".f", ".for", ".ftn", ".F", ".FOR", ".FTN")
_PREPROCESSED_SUFFIXES = (".F", ".F90", ".F95", ".F03", ".F08", ".FOR", ".FTN", ".fpp", ".FPP")


@dataclass(frozen=True)
class FortranFixes:
    """What gfortran needs to read a source as nvfortran does: the text (same lines, same
    numbers), flags to add, and a note per change for the student."""

    text: str
    flags: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _lines_said(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:8])
    return shown + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")


def fixes(text: str, suffix: str, options: tuple[str, ...], first_line: int = 1) -> FortranFixes:
    """The source with its indented preprocessor lines moved to column 1, `-cpp` where it has
    preprocessor lines and nothing turns the preprocessor on, `-ffree-line-length-none` where
    a free-form line is longer than 132 columns; `first_line`: the number, in the cell or file,
    of the text's first line (the notes name the student's lines)."""
    lines = text.split("\n")
    moved: list[int] = []
    directives = False
    long_lines: list[int] = []
    for index, line in enumerate(lines):
        match = _DIRECTIVE.match(line)
        if match:
            lines[index] = match.group(2)
            moved.append(index + first_line)
            directives = True
        elif _AT_COLUMN_1.match(line):
            directives = True
        elif len(line.rstrip()) > FREE_FORM_LIMIT:
            long_lines.append(index + first_line)
    flags: list[str] = []
    notes: list[str] = []
    if moved:
        notes.append(f"line {_lines_said(moved)}: a preprocessor line indented as nvfortran allows; "
                     "gfortran's preprocessor needs the # in column 1, so idrrun moved it there "
                     "(the line numbers are unchanged)")
    preprocessed = suffix in _PREPROCESSED_SUFFIXES or any(o in (CPP_FLAG, *_NO_CPP) for o in options)
    if directives and not preprocessed:
        flags.append(CPP_FLAG)
        notes.append("preprocessor lines (#ifdef, …) in a .f90 source: idrrun added -cpp, which "
                     "gfortran needs to run its preprocessor (nvfortran's -Mpreprocess)")
    fixed_form = suffix in _FIXED_SUFFIXES or "-ffixed-form" in options
    if long_lines and not fixed_form and not any(o.startswith("-ffree-line-length") for o in options):
        flags.append(LONG_LINES_FLAG)
        notes.append(f"line {_lines_said(long_lines)}: longer than the {FREE_FORM_LIMIT} columns "
                     f"gfortran reads by default (nvfortran reads longer ones): idrrun added "
                     f"{LONG_LINES_FLAG}")
    return FortranFixes("\n".join(lines), tuple(flags), tuple(notes))
