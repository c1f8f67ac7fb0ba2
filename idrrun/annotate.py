"""The student's source, annotated: on the lines they concern, the compiler's errors and
warnings, its remarks with their meaning (gcc's -fopt-info and tree dumps, nvhpc's -Minfo),
the data each region moves (named in a clause or moved implicitly), and the checks that failed
there.

    annotate(source, build output, AccReport, checks) -> Listing   (pure; it runs on every
                                                                     --check cell: 300 lines in
                                                                     well under 20 ms)
    rows(listing)      the lines near a note, the notes under their line, gaps between
    markdown(listing)  a fenced listing, the notes as comments under their lines (feedback files)
    text(listing)      the same without the fence (display.py colours it for a terminal)

display.py renders the same rows as HTML for the notebook. A check of a hidden argument set is
never placed (nothing of a hidden case shows); a note about another file (a header) is listed
apart. Nothing here raises on odd input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from . import escape
from .model import AccReport, CheckResult, Diagnostic
from .profile.model import Cause
from .profile.render import gain_text
from .toolchains import diagnostics
from .toolchains.remarks import REGION_MADE, explain

NoteKind = Literal["error", "warning", "note", "check", "slow", "implicit", "data", "region",
                   "loop", "remark"]
# Under a line, its notes in this order: what is wrong first, then what the compiler did.
_ORDER: dict[str, int] = {k: i for i, k in enumerate(
    ("error", "warning", "check", "slow", "note", "implicit", "data", "region", "loop", "remark"))}
# The word a note starts with.
LABELS: dict[str, str] = {"error": "error", "warning": "warning", "note": "note",
                          "check": "check failed", "slow": "slow", "implicit": "implicit data",
                          "data": "data", "region": "region", "loop": "loop", "remark": "compiler"}
_COMMENT = {"fortran": "!"}
CONTEXT = 1  # lines of code shown around an annotated line


@dataclass(frozen=True)
class Note:
    kind: NoteKind
    text: str  # what the compiler or the check says
    meaning: str = ""  # what it means, in one line ("" when the table has nothing, or said above)


@dataclass(frozen=True)
class Line:
    number: int  # as the student counts: a cell's first code line is 2 (the magic line is 1)
    code: str
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True)
class Listing:
    name: str  # the cell's or the file's name
    language: str
    lines: tuple[Line, ...]
    elsewhere: tuple[Diagnostic, ...] = ()  # errors and warnings about other files (headers)
    diagnostics: tuple[Diagnostic, ...] = ()  # the compiler's errors, warnings and notes here

    @property
    def notes(self) -> int:
        return sum(len(line.notes) for line in self.lines) + len(self.elsewhere)

    @property
    def comment(self) -> str:
        return _COMMENT.get(self.language, "//")


Row = tuple[Literal["code"], Line] | tuple[Literal["note"], Line, Note] | tuple[Literal["gap"]]


def _severity_kind(severity: str, said: str) -> tuple[NoteKind, str]:
    """A diagnostic's kind of note, and the meaning of a remark or of a warning the table has."""
    if severity in ("optimized", "missed", "remark", "info"):
        meaning, kind = explain(said)
        return kind, meaning
    if severity == "warning":
        return "warning", explain(said)[0]
    return ("error" if severity == "error" else "note"), ""


def annotate(text: str, name: str, language: str, first_line: int, build_output: str,
             acc: AccReport | None, checks: Sequence[CheckResult] = (),
             causes: Sequence[Cause] = ()) -> Listing:
    """The source `text` (whose first line is `first_line`), with what the build said of it
    (its output: diagnostics renamed to `name`), the compiler's report, the failed checks and
    why the run was slow (profile/diagnose.py: the cause on its line, the fix and its gain)."""
    code = text.splitlines()
    last = first_line + len(code) - 1
    found: dict[int, list[Note]] = {}
    elsewhere: list[Diagnostic] = []
    messages: list[Diagnostic] = []

    def place(line: int | None, note: Note) -> None:
        if line is not None and first_line <= line <= last:
            found.setdefault(line, []).append(note)

    for d in diagnostics.parse(build_output):
        kind, meaning = _severity_kind(d.severity, d.message)
        if d.file == name and first_line <= d.line <= last:
            place(d.line, Note(kind, d.message, meaning))
            if kind in ("error", "warning", "note"):
                messages.append(Diagnostic(d.file, d.line, d.column, d.severity, d.message,
                                           code[d.line - first_line]))
        elif kind in ("error", "warning"):
            elsewhere.append(d)
    for r in acc.remarks if acc is not None else ():
        place(r.line, Note(r.kind, r.text, r.meaning))
    for c in checks:
        if c.status == "fail" and not c.hidden and c.line is not None:
            place(c.line, Note("check", f"{c.name}: {c.reason}"))
    for cause in causes:
        place(cause.line, Note("slow", f"{cause.title}: {cause.evidence}",
                               f"{cause.fix}; {gain_text(cause.gain, cause.matters)}"))
    lines = tuple(Line(first_line + i, code_line, _tidy(found.get(first_line + i, ())))
                  for i, code_line in enumerate(code))
    return Listing(name, language, lines, tuple(elsewhere), tuple(messages))


def _tidy(notes: Iterable[Note]) -> tuple[Note, ...]:
    """A line's notes, worst first, each said once; a meaning already given on the line is
    not given again, nor a region's when the line's loop remark says how it runs."""
    seen: set[tuple[str, str]] = set()
    meanings: set[str] = set()
    ordered = sorted(notes, key=lambda n: _ORDER.get(n.kind, len(_ORDER)))
    loops = any(n.kind == "loop" for n in ordered)
    out = []
    for note in ordered:
        if (note.kind, note.text) in seen:
            continue
        seen.add((note.kind, note.text))
        if note.meaning in meanings or (loops and note.kind == "region" and
                                        note.meaning == REGION_MADE):
            note = Note(note.kind, note.text)
        meanings.add(note.meaning)
        out.append(note)
    return tuple(out)


def rows(listing: Listing, context: int = CONTEXT) -> list[Row]:
    """The lines within `context` of an annotated line, each followed by its notes, and a gap
    where lines are left out; nothing when no line has a note."""
    lines = listing.lines
    marked = [i for i, line in enumerate(lines) if line.notes]
    if not marked:
        return []
    shown = [False] * len(lines)
    for i in marked:
        for k in range(max(0, i - context), min(len(lines), i + context + 1)):
            shown[k] = True
    out: list[Row] = []
    for i, line in enumerate(lines):
        if not shown[i]:
            if out and out[-1][0] != "gap":
                out.append(("gap",))
            continue
        out.append(("code", line))
        out += [("note", line, note) for note in line.notes]
    if out and out[-1][0] == "gap":
        out.pop()
    return out


def _indent(code: str) -> str:
    return code[:len(code) - len(code.lstrip(" \t"))]


def text_lines(listing: Listing, context: int = CONTEXT) -> list[tuple[str, str]]:
    """(text, kind) of every line of the annotated listing: "code", "gap", or a note's kind."""
    shown = rows(listing, context)
    width = len(str(listing.lines[-1].number)) if listing.lines else 1
    pad = " " * (width + 2)
    out: list[tuple[str, str]] = []
    for row in shown:
        if row[0] == "gap":
            out.append((" " * (width - 1) + "⋮", "gap"))
        elif row[0] == "code":
            out.append((f"{row[1].number:>{width}}  {row[1].code}", "code"))
        else:
            line, note = row[1], row[2]
            lead = f"{pad}{_indent(line.code)}{listing.comment} "
            out.append((f"{lead}^ {LABELS[note.kind]}: {note.text}", note.kind))
            if note.meaning:
                out.append((f"{lead}  {note.meaning}", note.kind))
    for d in listing.elsewhere:
        out.append((f"{d.file}:{d.line}: {d.severity}: {d.message}", d.severity))
    return out


def text(listing: Listing, context: int = CONTEXT) -> str:
    return "\n".join(t for t, _ in text_lines(listing, context))


_FENCE_LANGUAGE = {"c": "c", "c++": "cpp", "cuda": "cuda", "fortran": "fortran"}


def markdown(listing: Listing, context: int = CONTEXT) -> str:
    """A fenced listing (its fence longer than any run of backticks in it), the notes as
    comments under their lines; "" when nothing is annotated."""
    body = text(listing, context)
    if not body:
        return ""
    return escape.fenced(body, _FENCE_LANGUAGE.get(listing.language, "")) + "\n"
