"""The regular expressions of exercise specs, run in linear time.

Spec patterns are matched against what students control (a program's output, up to the output
cap; a source file): Python's backtracking `re` can take minutes on one crafted line, holding
the grader. RE2 (google-re2) matches in time linear in the text, whatever the pattern; patterns
it does not support (backreferences, lookarounds) are refused when the spec is read.
"""

from __future__ import annotations

from functools import cache

import re2


class PatternError(ValueError):
    pass


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is a SpecError naming the field, not a log line


@cache
def compile(pattern: str) -> re2._Regexp:  # noqa: A001 - the name every regex module uses
    """`pattern` with ^ and $ at line ends (as re.MULTILINE), compiled once."""
    try:
        return re2.compile("(?m)" + pattern, _OPTIONS)
    except re2.error as exc:
        message = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(message) from None


def groups(pattern: str) -> int:
    return int(compile(pattern).groups)


def search(pattern: str, text: str) -> bool:
    return compile(pattern).search(text) is not None


def findall(pattern: str, text: str) -> list[str]:
    """Group 1 of every match (the whole match when the pattern has no group)."""
    out = []
    for m in compile(pattern).finditer(text):
        out.append(m.group(1) if m.re.groups else m.group(0))
    return out


def matches(pattern: str, text: str) -> list[tuple[int, str]]:
    """(the 0-based line it starts on, group 1 or the whole match) of every match, in order."""
    out = []
    line, counted = 0, 0
    for m in compile(pattern).finditer(text):
        line += text.count("\n", counted, m.start())
        counted = m.start()
        out.append((line, m.group(1) if m.re.groups else m.group(0)))
    return out
