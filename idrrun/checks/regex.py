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


# A pattern matches within one line: `\s*` after `^` would otherwise start a match on the
# blank line above what it names ("found at line 45: ''"), and a line number is the line the
# student reads. Each line is matched on its own, which also keeps every match on one line.


def _lines(text: str) -> list[str]:
    return text.split("\n")


def search(pattern: str, text: str) -> bool:
    compiled = compile(pattern)
    return any(compiled.search(line) is not None for line in _lines(text))


def findall(pattern: str, text: str) -> list[str]:
    """Group 1 of every match (the whole match when the pattern has no group)."""
    return [found for _, found in matches(pattern, text)]


def matches(pattern: str, text: str) -> list[tuple[int, str]]:
    """(the 0-based line it is on, group 1 or the whole match) of every match, in order."""
    compiled = compile(pattern)
    out = []
    for number, line in enumerate(_lines(text)):
        for m in compiled.finditer(line):
            out.append((number, m.group(1) if m.re.groups else m.group(0)))
    return out
