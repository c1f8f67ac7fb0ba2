"""What a student reads of a check: its label, and what it expected, in words.

A spec's regular expressions are for the grader; a student is told "a line 'y_last = <number>'",
never `y_last\\s*=\\s*(\\S+)`. The words come from the spec when it gives them (`expect`), else
from the pattern when it is a plain one (a name, spaces, an equals sign and the number), else
from the check's kind and label. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import registry


def holds(kind: str, label: str, minimum: int | None = None) -> str:
    """What a passed check of `kind` says of the work: "the saxpy loop runs in a compute
    region", "2 compute regions run"."""
    known = registry.get(kind)
    template = known.holds if known is not None else "'{label}' passes"
    return template.format(label=label, min=minimum if minimum is not None else 1)


def kind_label(kind: str) -> str:
    """A kind in words: "uses OpenACC"; "output" for a row of no kind."""
    if not kind:
        return "output"
    known = registry.get(kind)
    return known.label if known is not None else kind.replace("_", " ")


NUMBER = "<number>"
# A pattern's pieces and what a student reads for each. Anything else (alternatives, classes of
# characters, repeats of a literal) leaves the pattern without words: the kind's words are used.
_PIECES = re.compile(r"""
    (?P<flags>\(\?[a-zA-Z]+\))
  | (?P<anchor>\^|\$|\\b|\\A|\\z)
  | (?P<space>\\s[*+?]|\\s|[ ][*+?])
  | (?P<digits>(?:\\d|\[0-9\])(?:[*+]|\{\d+(?:,\d*)?\})?)
  | (?P<any>(?:\\S|\\w|\.|\[\^[^\]\\]+\])[*+])
  | (?P<group>\((?!\?)(?:[^()\\]|\\.)*\))
  | (?P<escaped>\\[^\w\s])
  | (?P<literal>[^\\^$.|?*+()\[\]{}])
""", re.VERBOSE)


def plural(count: float, one: str, many: str | None = None) -> str:
    """'1 value', '2 values', '1 compute region', '0 queues', '0.5 points': the one helper for
    a count in words (a number of points as people write marks)."""
    return f"{round(count, 2):g} {one if count == 1 else (many or one + 's')}"


def listing(items: Sequence[str], last: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


def pattern_words(pattern: str, group_is_number: bool = True) -> str | None:
    """The text a plain pattern matches, as a student reads it: `y_last\\s*=\\s*(\\S+)` gives
    'y_last = <number>', `generation\\s+\\d+\\s+population\\s*=\\s*(\\d+)` gives
    'generation <n> population = <number>'. None when the pattern is not a plain one."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        m = _PIECES.match(pattern, i)
        if m is None:
            return None
        i = m.end()
        kind = m.lastgroup
        if kind == "space":
            out.append(" ")
        elif kind == "digits":
            out.append("<n>")
        elif kind == "any":
            out.append("…")
        elif kind == "group":
            if not group_is_number:
                return None
            out.append(NUMBER)
        elif kind == "escaped":
            out.append(m.group(0)[1])
        elif kind == "literal":
            out.append(m.group(0))
    text = re.sub(r" +", " ", "".join(out)).strip()
    return text or None


def printed_name(pattern: str) -> str | None:
    """The name a value's line starts with: 'y_last' of `y_last\\s*=\\s*(\\S+)`, 'mean T' of
    `mean T\\s*=\\s*(\\S+)`, 'bin' of `bin\\s+\\d+\\s*=\\s*(\\d+)`; None when the pattern has
    no plain name before its value."""
    words = pattern_words(pattern)
    if words is None or NUMBER not in words:
        return None
    head = re.split(r"[<…]", words.split(NUMBER)[0])[0].rstrip(" =:[(")
    if head.count("(") > head.count(")"):
        head = head[:head.rfind("(")].rstrip()
    return head if head and len(head) <= 40 else None


def default_label(kind: str, pattern: str | None = None, exact: str | None = None,
                  file: str | None = None) -> str:
    """The label of a check whose spec gives none: its kind's from what the spec names
    (Kind.label_from), else the kind's own."""
    known = registry.get(kind)
    if known is not None and known.label_from is not None:
        found = known.label_from(printed_name(pattern) if pattern else None, exact, file)
        if found:
            return found
    return kind_label(kind)


def output_line(expect: str, pattern: str | None, label: str, group_is_number: bool = True) -> str:
    """What a check looks for in the output, in words: the spec's `expect`, else the plain
    pattern as a quoted line, else the label's value (no label: the line the exercise asks for)."""
    if expect:
        return expect
    words = pattern_words(pattern, group_is_number) if pattern else None
    if words:
        return f"a line '{words}'"
    return f"a line that prints {label}" if label else "the line the exercise asks for"


def listed(items: Sequence[str], limit: int = 4, sep: str = ", ") -> str:
    """The first `limit` items joined, then "…" when some were left out: a list cut short says
    so ("1, 2, 3, 4, …")."""
    shown = sep.join(items[:limit])
    return shown + sep + "…" if len(items) > limit else shown
