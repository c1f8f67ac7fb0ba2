"""How text we did not choose is written in a report: the one rule for bytes that are not UTF-8
and for control characters in students' names. Pure.

A file name is bytes; Python reads the bytes that are not UTF-8 as lone surrogates
(os.fsdecode's "surrogateescape"), which no UTF-8 file can hold. Each such byte is written
`\\xNN`, visibly: a report, a feedback file and a gradebook stay UTF-8 that every reader takes.
A student's name is also an identity the teacher types (the roster's `submission`, the
adjustments' `student`): its control characters are written escaped as well, and its
backslashes `\\\\`, so that no two names are ever written alike (the rule can be undone).
"""

from __future__ import annotations

import re
from typing import Any

# A byte that is not UTF-8, as os.fsdecode leaves it (U+DC80..U+DCFF stand for 0x80..0xFF).
_UNDECODED = re.compile("[\udc80-\udcff]")
# What a name never holds as it is: those bytes, C0 and C1 controls, DEL, and the backslash
# that starts every escape.
_NAME_ESCAPED = re.compile("[\udc80-\udcff\x00-\x1f\x7f-\x9f\\\\]")


def _escape(char: str) -> str:
    """A byte that is not UTF-8 as `\\xNN`; a C0 control or DEL as `\\xNN` too (below 0x80, where
    no such byte is); a C1 control, a character of its own, as `\\u00NN`; a backslash doubled."""
    code = ord(char)
    if char == "\\":
        return "\\\\"
    if code >= 0xdc80:
        return f"\\x{code - 0xdc00:02x}"
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def student_name(raw: str) -> str:
    """A student's name as every report, feedback file and gradebook writes it: 'café' stays,
    the byte 0xE9 of a Latin-1 'caf\\xe9.c' is `caf\\xe9`, a tab `\\x09`, a backslash `\\\\`."""
    return _NAME_ESCAPED.sub(lambda m: _escape(m.group(0)), raw)


def decodable(text: str) -> str:
    """Any text for a report (a reason, a path, a compiler's message, a source line): its bytes
    that are not UTF-8 written `\\xNN`, the rest as it is."""
    return _UNDECODED.sub(lambda m: _escape(m.group(0)), text)


def decodable_data(value: Any) -> Any:
    """JSON-like data (dicts, lists, texts, numbers) with every text in it decodable: what a
    JSON report or --json writes, UTF-8 that every reader takes."""
    if isinstance(value, str):
        return decodable(value)
    if isinstance(value, dict):
        return {decodable(k) if isinstance(k, str) else k: decodable_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [decodable_data(v) for v in value]
    return value
