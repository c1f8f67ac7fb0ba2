"""OpenACC directives as the source spells them: what the `uses_openacc` and `source` checks read.

Pure; a check helper never raises on odd input.
"""

from __future__ import annotations

import re

# Comments and string literals of C, matched together so that a `/*` inside a string stays a
# string and a `#pragma acc` inside a block comment is not counted.
_C_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*',
                                  re.DOTALL)
_C_PRAGMA = re.compile(r'^[ \t]*#[ \t]*pragma[ \t]+acc\b|_Pragma[ \t]*\([ \t]*"[ \t]*acc\b',
                       re.MULTILINE)
# Free form: `!$acc` after blanks. Fixed form: `c$acc`, `*$acc` or `!$acc` in column 1. The
# sentinel must end there: `!$accx` is a comment, `!$acc&` a continued directive.
_F_SENTINEL = re.compile(r"^(?:[ \t]*!|[cC*])\$acc(?![A-Za-z0-9_$])", re.MULTILINE | re.IGNORECASE)


def _strip_c_comments(text: str) -> str:
    return _C_COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else " ", text)


def source_has_directives(text: str, language: str) -> bool:
    """Whether the source holds at least one OpenACC directive ("c", "c++", "cuda", "fortran")."""
    try:
        lang = language.strip().lower()
        if lang in ("c", "c++", "cuda"):
            return bool(_C_PRAGMA.search(_strip_c_comments(text)))
        if lang == "fortran":
            return bool(_F_SENTINEL.search(text))
        # An unknown language name: either spelling of a directive counts.
        return bool(_C_PRAGMA.search(_strip_c_comments(text)) or _F_SENTINEL.search(text))
    except Exception:  # noqa: BLE001 - a check helper never breaks a run
        return False


