"""Turning a cell or a file into a Source: its language, its name, its line numbering."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import UsageError
from ..model import Language, Source

SUFFIXES: dict[Language, str] = {"c": ".c", "c++": ".cpp", "fortran": ".f90", "cuda": ".cu"}
_BY_SUFFIX: dict[str, Language] = {
    ".c": "c", ".cpp": "c++", ".cc": "c++", ".cxx": "c++", ".c++": "c++", ".C": "c++",
    ".f90": "fortran", ".f95": "fortran", ".f03": "fortran", ".f08": "fortran", ".f": "fortran",
    ".F90": "fortran", ".F": "fortran", ".for": "fortran", ".cu": "cuda",
}

_FORTRAN = re.compile(
    r"^\s*(program|module|subroutine|(\w+\s+)*function|use|implicit\s+none)\b|^\s*!\$acc",
    re.IGNORECASE | re.MULTILINE,
)
_CUDA = re.compile(r"__global__|<<<")
_CXX = re.compile(r"#\s*include\s*<(iostream|vector|string|algorithm|cmath|cstdio|cstdlib)>|\bstd::|"
                  r"\busing\s+namespace\b|\btemplate\s*<")
_C = re.compile(r"^\s*#\s*include\b|\bint\s+main\s*\(", re.MULTILINE)


def guess_language(text: str) -> Language | None:
    """Fortran (`program`, `module`, `!$acc`) vs C (`#include`, `int main`), C++ and CUDA."""
    if _CUDA.search(text):
        return "cuda"
    if _CXX.search(text):
        return "c++"
    if _C.search(text):
        return "c"
    if _FORTRAN.search(text):
        return "fortran"
    return None


def language_of_path(path: str) -> Language | None:
    suffix = Path(path).suffix
    return _BY_SUFFIX.get(suffix) or _BY_SUFFIX.get(suffix.lower())


def from_cell(
    text: str, name: str, language: Language | None, default: str | None, workdir: Path
) -> Source:
    guessed = False
    if language is None and default is not None:
        language = default  # type: ignore[assignment]
    if language is None:
        language = guess_language(text)
        guessed = True
        if language is None:
            raise UsageError(
                "cannot tell the language of this cell: give it with -l c|c++|fortran|cuda"
            )
    return Source(text=text, name=name, language=language, language_guessed=guessed,
                  first_line=2, origin_dir=workdir, suffix=SUFFIXES[language])


def from_file(path: Path, language: Language | None, shown_as: str) -> Source:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no such file: {shown_as}") from None
    except IsADirectoryError:
        raise UsageError(f"{shown_as} is a folder, not a source file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {shown_as}: {exc.strerror}") from None
    return from_bytes(raw, path, language, shown_as, path.resolve().parent)


def from_bytes(raw: bytes, path: Path, language: Language | None, shown_as: str,
               origin_dir: Path) -> Source:
    """The source file `path` whose bytes were read already (the grader reads a submission
    through descriptors, once, and never resolves a name a student chose)."""
    text = raw.decode("utf-8", errors="surrogateescape")
    guessed = False
    suffix = path.suffix
    if language is None:
        language = language_of_path(str(path))
        if language is None:
            language = guess_language(text)
            guessed = True
        if language is None:
            raise UsageError(f"cannot tell the language of {shown_as}: give it with -l")
    if language_of_path(str(path)) != language:
        suffix = SUFFIXES[language]
    return Source(text=text, name=shown_as, language=language, language_guessed=guessed,
                  first_line=1, origin_dir=origin_dir, suffix=suffix)
