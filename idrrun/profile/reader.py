"""The student's source read for the diagnosis: C and C++ (program_c.py), Fortran
(program_fortran.py), into program.py's Program.

    read(text, language, first_line) -> Program
"""

from __future__ import annotations

from .program import Program
from .program_c import read_c
from .program_fortran import read_fortran


def read(text: str, language: str, first_line: int = 1) -> Program:
    """The source's structure; an empty Program for a language it does not read."""
    lang = language.strip().lower()
    try:
        if lang == "fortran":
            return read_fortran(text, first_line)
        if lang in ("c", "c++", "cuda"):
            return read_c(text, lang, first_line)
    except (RecursionError, ValueError, IndexError):
        pass  # a source this reader cannot follow: it says nothing of it
    return Program(lang, first_line, tuple(text.split("\n")))
