"""Students' words, escaped for each place they land: what a student controls (a file or folder
name, a program's output, a line of source) is data in the teacher's terminal, in Markdown
(feedback, the similarity report), in HTML and in a spreadsheet's CSV; nothing of it is ever
interpreted there. One helper per destination, stdlib only:

    terminal(text)       a program's output: controls shown as \\xNN, lines and tabs kept
    terminal_line(text)  a name or a one-line field: every control shown, line breaks too
    markdown_text(text)  inline Markdown on one line: no HTML, no link, no emphasis, no table cell
    markdown_joined(text)  several lines of output as one inline text
    markdown_cell(text)  a table's cell: markdown_text, and no formula for a spreadsheet
    markdown_code(text)  a code span; fenced(text) a code block nothing inside can close
    html_text(text)      text in HTML (an element or an attribute)
    csv_cell(value)      a CSV cell no spreadsheet reads as a formula; csv_uncell reverses it
"""

from __future__ import annotations

import html
import re

# Everything that can drive a terminal or break a line, shown rather than sent: C0 and C1
# controls and DEL (escape sequences set a title, write the clipboard, move the cursor; a
# carriage return rewrites the line), the Unicode line and paragraph separators, the
# bidirectional controls ("Trojan Source": text shown in another order than it is), the
# zero-width characters, and the bytes a name held that were not UTF-8 (read with
# surrogateescape: printing them would fail, so their byte is shown).
_LINE_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e"
                            "\u2066-\u2069\ufeff\udc80-\udcff]")
# In a program's output the lines and tabs stay (a run's output is read as it was printed);
# a carriage return too, as a notebook shows a progress line.
_TEXT_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\udc80-\udcff]")
# In a code block the lines stay; every other control (a lone carriage return is a line end to
# CommonMark) is shown.
_BLOCK_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                             "\udc80-\udcff]")


def _shown(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, as surrogateescape keeps it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: str) -> str:
    """A program's output or a message holding one, safe to print in a terminal."""
    return _TEXT_CONTROLS.sub(_shown, text)


def terminal_line(text: str) -> str:
    """A name (a file, a folder, a student) or a one-line field, on one line whatever it holds:
    "eve: pass\\n\\rmallory.c" prints as `eve: pass\\x0a\\x0dmallory.c`, never as two lines."""
    return _LINE_CONTROLS.sub(_shown, text)


# Markdown: what starts HTML or an entity becomes an entity; what starts a code span,
# emphasis, strikethrough, math (Jupyter and GitLab render $...$) or ends a table cell is
# escaped with a backslash (CommonMark: any ASCII punctuation may be). A link or an image needs
# a "]" followed by "(" or "[" (ours never define a reference), a definition a "[" opening a
# line: those are escaped (what follows the text is ours, never a "(" or "["), so that "C[0]"
# stays as it reads. An underscore between two letters or digits starts nothing
# (CommonMark's flanking rule): "a_b" stays.
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MARKDOWN = re.compile(r"[&<>\\`*|~$#]|^\[|\](?=[(\[])|(?<![^\W_])_|_(?![^\W_])")
# At the start of a line: a list item ("- x", "1. x", "1) x"), a rule or a heading's underline
# ("---", "==="). "-j" and "1234.5" start nothing and stay as they are.
_LINE_START = re.compile(r"^([-+=](?=[ \t]|$|[-=])|\d{1,9}(?=[.)](?:[ \t]|$)))")


def markdown_text(text: str) -> str:
    """Inline Markdown that shows `text` as it is, on one line (controls shown): no raw HTML,
    no link or image, no emphasis, no table cell ended, wherever in a line it is put."""
    escaped = _MARKDOWN.sub(lambda m: _ENTITIES.get(m.group(0), "\\" + m.group(0)),
                            terminal_line(text))
    m = _LINE_START.match(escaped)
    if m is None:
        return escaped
    if m.group(1)[0].isdigit():
        return m.group(1) + "\\" + escaped[m.end():]
    return "\\" + escaped


def markdown_joined(text: str) -> str:
    """Several lines of output or of a message as one inline text: joined by spaces."""
    return markdown_text(" ".join(text.splitlines()))


def markdown_cell(text: str) -> str:
    """A table's cell: inline text, and no formula where it starts (a table is pasted into
    spreadsheets too: a quote first). Lines joined first where they are output to read
    (report._table_cell), shown as \x0a in a name."""
    return markdown_text("'" + text if _formula(text) else text)


def markdown_code(text: str) -> str:
    """A code span on one line (controls shown): its backticks more than any run inside."""
    text = terminal_line(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str, info: str = "", indent: str = "") -> str:
    """A fenced code block that nothing in `text` can close: its fence longer than any run of
    backticks in it; lines split at newlines only, every other control shown (a lone carriage
    return would end a line for CommonMark). `info`: the language, ours, never a student's."""
    lines = _BLOCK_CONTROLS.sub(_shown, text.replace("\r\n", "\n")).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join(indent + line for line in (fence + info, *lines, fence))


def html_text(text: str) -> str:
    """Text in HTML, in an element or a quoted attribute: no tag, no entity, no attribute
    ended; controls shown (lines kept)."""
    return html.escape(terminal(text), quote=True)


# OWASP's rule against CSV injection: Excel, LibreOffice Calc and Google Sheets read a cell
# that starts with = + - or @ as a formula (=HYPERLINK, =WEBSERVICE, DDE), and some drop a
# leading tab or carriage return (or spaces, LibreOffice's "trim spaces") before looking.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
_NUMBER = re.compile(r"[-+]?\d+(\.\d+)?")


def _formula(text: str) -> bool:
    """Text a spreadsheet would read as a formula (a plain decimal number, "-2.5", is none)."""
    return text.lstrip(" ").startswith(FORMULA_START) and not _NUMBER.fullmatch(text)


def csv_cell(value: object) -> object:
    """A report cell no spreadsheet reads as a formula: text that would start one gets a single
    quote first, which they show as text. Numbers pass. Text that already starts with a quote
    gets one more, so that csv_uncell gives back every value as it was."""
    if isinstance(value, str) and (_formula(value) or value.startswith("'")):
        return "'" + value
    return value


def csv_uncell(value: str) -> str:
    """A CSV cell as it was before csv_cell (the gradebook reads reports back)."""
    return value[1:] if value.startswith("'") else value
