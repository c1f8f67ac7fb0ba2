"""What the student sees: text for notebooks and terminals. No decisions are taken here."""

from __future__ import annotations

import base64
import html
import os
import shlex
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from . import annotate, escape
from .build import shown_command
from .annotate import Listing
from .checks.verdict import passed_here
from .checks.visibility import MORE_AT_GRADING
from .checks.words import plural
from .model import (VERDICT_WORDS, BuildResult, Comparison, Failure, RunRequest, RunResult,
                    Toolchain, Verdict)
from .profile.model import ProfileReport
from .profile.render import ProfileView

# Message templates, kept as constants so tests can check the rendered text.
HEADER = "idrrun: {version} [{family}] · {language}{guess} · {target}"
# Where the OpenACC regions run, as the header says it: (Toolchain.target, Toolchain.offload).
# The notes below the header say why, never the contrary.
TARGETS = {("gpu", True): "OpenACC on the GPU",
           ("host", True): "OpenACC built for a GPU, none found here",
           ("host", False): "OpenACC on the host (no GPU offload)"}
NO_OPENACC = "no OpenACC"
BUILD_DONE = "built in {seconds:.2f} s"
BUILD_CACHED = "build cached, not recompiled (--force rebuilds)"
RUN_DONE = "{status} · {seconds:.2f} s"
RUN_DONE_NOTIME = "{status}"
FAILURE = "idrrun: {step} failed: {what}"
FAILURE_COMMAND = "  command: {command}"  # left out when the failure has no command (a check)
FAILURE_HINT = "  hint: {hint}"
OUTPUT_BLOCK = "  [{n} lines of output, last {shown}]\n{lines}\n  [end of output]"
# While the program runs (a display updated in place in a notebook, a status line in a
# terminal), from its first second on; gone when it ends.
ELAPSED = "running… {seconds:.0f} s (time limit {limit:g} s)"
# A terminal's status line: back to the line's start, the line erased.
ERASE_LINE = "\r\x1b[K"

_COLORS = {"dim": "2", "note": "33", "ok": "32", "bad": "31;1"}


def short_command(argv: Sequence[str]) -> str:
    """The command as a shell line, the compiler or program shown by its name only."""
    if not argv:
        return ""
    first = os.path.basename(argv[0])
    return shlex.join([first, *argv[1:]])


def render_failure(failure: Failure, with_output: bool = False, max_lines: int = 20) -> str:
    lines = [FAILURE.format(step=failure.step, what=failure.what)]
    if failure.command:
        lines.append(FAILURE_COMMAND.format(command=short_command(failure.command)))
    if failure.hint:
        lines.append(FAILURE_HINT.format(hint=failure.hint))
    text = "\n".join(lines)
    if with_output and failure.output.strip():
        lines = failure.output.rstrip("\n").splitlines()
        tail = lines[-max_lines:]
        text += "\n" + OUTPUT_BLOCK.format(n=len(lines), shown=len(tail),
                                           lines="\n".join("    " + ln for ln in tail))
    return text




def color_allowed() -> bool:
    """NO_COLOR (https://no-color.org): set and not empty, no colour anywhere."""
    return not os.environ.get("NO_COLOR")


def neutralise(text: str) -> str:
    """Text from a program or a student, safe to print in a terminal (escape.terminal)."""
    return escape.terminal(text)


def where_it_runs(request: RunRequest, toolchain: Toolchain) -> str:
    """The header's words on where the OpenACC regions run."""
    if not request.acc or toolchain.target == "none":
        return NO_OPENACC
    return TARGETS.get((toolchain.target, toolchain.offload or toolchain.target == "gpu"),
                       NO_OPENACC)


class ElapsedView:
    """How long the program has been running, and its limit; empty once the run has ended
    (seconds None): what a notebook's display of it is updated to."""

    def __init__(self, seconds: float | None, limit: float = 0.0) -> None:
        self.seconds = seconds
        self.limit = limit

    def __str__(self) -> str:
        return "" if self.seconds is None else ELAPSED.format(seconds=self.seconds, limit=self.limit)

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text(str(self))  # type: ignore[attr-defined]

    def _repr_html_(self) -> str:
        text = str(self)
        return f"<span class='idrrun-elapsed' style='color:#57606a'>{html.escape(text)}</span>" \
            if text else ""


def live_terminal(stream: TextIO) -> bool:
    """The stream is a terminal that can keep a status line (not a dumb one, not a pipe)."""
    try:
        return stream.isatty() and os.environ.get("TERM", "dumb") != "dumb"
    except (AttributeError, ValueError):
        return False


class TextReporter:
    """Writes the pipeline's events to a text stream (a notebook cell's stdout, a terminal).

    In a terminal (sanitize=True) the program's output is neutralised: notebooks render only
    colour codes of it, but a terminal would obey any escape sequence. live: a terminal where
    the run's time is shown on a status line while the program runs (erased before anything
    else is written on it), when the program is not in the middle of a line."""

    def __init__(self, stream: TextIO, color: bool = False, sanitize: bool = False,
                 live: bool = False) -> None:
        self._out = stream
        self._color = color
        self._sanitize = sanitize
        self._live = live
        self._status = False  # a status line is on the screen
        self._limit = 0.0
        self._at_line_start = True
        # A kernel's stdout sends what was written every flush_interval (ipykernel: 0.2 s) by
        # itself; an explicit flush waits for its I/O thread (0.6-0.8 ms each, four in a cached cell).
        interval = getattr(stream, "flush_interval", None)
        self._flush_steps = not (isinstance(interval, (int, float)) and 0 < interval <= 1)

    def _step_done(self) -> None:
        """The end of a step: flushed where the stream would not show it by itself."""
        if self._flush_steps:
            self._out.flush()

    def _paint(self, text: str, style: str) -> str:
        if not self._color or not style:
            return text
        return f"\x1b[{_COLORS[style]}m{text}\x1b[0m"

    def _erase_status(self) -> None:
        if self._status:
            self._out.write(ERASE_LINE)
            self._status = False

    def _line(self, text: str, style: str = "dim") -> None:
        # No flush per line: in a kernel each flush is a message to the front end. The stream
        # is flushed once per step (notes, build, run) and with every piece of program output,
        # unless it flushes itself on a timer (_step_done).
        self._erase_status()
        if not self._at_line_start:
            self._out.write("\n")
        self._out.write(self._paint(text, style) + "\n")
        self._at_line_start = True

    def started(self, request: RunRequest, toolchain: Toolchain) -> None:
        src = request.source
        guess = ", guessed from the code (-l sets it)" if src.language_guessed else ""
        version = toolchain.compiler.version or toolchain.compiler.command
        self._limit = request.timeout
        self._line(HEADER.format(family=toolchain.label or toolchain.family, version=version,
                                 language=src.language, guess=guess,
                                 target=where_it_runs(request, toolchain)))

    def notes(self, notes: Sequence[str]) -> None:
        for note in notes:
            self._line(f"note: {note}", "note")
        self._step_done()

    def built(self, request: RunRequest, result: BuildResult) -> None:
        if result.cached:
            self._line(f"$ {short_command(shown_command(result.command, request.source))}")
            if result.output.strip():
                self._out.write(result.output if result.output.endswith("\n") else result.output + "\n")
            self._line(BUILD_CACHED)
            self._step_done()
            return
        self._line(f"$ {short_command(shown_command(result.command, request.source))}")
        if result.output.strip():
            self._out.write(result.output if result.output.endswith("\n") else result.output + "\n")
        if result.ok:
            self._line(BUILD_DONE.format(seconds=result.seconds) if request.show_time else "built")
        self._step_done()

    def output(self, text: str) -> None:
        self._erase_status()
        self._out.write(neutralise(text) if self._sanitize else text)
        self._step_done()
        self._at_line_start = text.endswith("\n")

    def running(self, seconds: float) -> None:
        if self._live and self._at_line_start:
            self._out.write(ERASE_LINE + self._paint(str(ElapsedView(seconds, self._limit)), "dim"))
            self._out.flush()
            self._status = True

    def ran(self, request: RunRequest, result: RunResult) -> None:
        self._erase_status()
        p = result.proc
        status = "exit 0" if p.ok else p.describe()
        style = "ok" if p.ok else "bad"
        if p.truncated:
            self._line("output truncated (max_output)", "note")
        for name in request.get_files:
            state = "missing" if name in result.missing_files else "written"
            self._line(f"--get {name}: {state}", "note" if state == "missing" else "dim")
        if request.show_time:
            self._line(RUN_DONE.format(status=status, seconds=p.seconds), style)
        else:
            self._line(RUN_DONE_NOTIME.format(status=status), style)
        self._step_done()

    def profile(self, report: ProfileReport) -> None:
        self._line(str(ProfileView(report)), "dim")
        self._step_done()

    def failure(self, failure: Failure) -> None:
        self._line(render_failure(failure), "bad")
        self._step_done()

    def verdict(self, verdict: Verdict) -> None:
        self._line(str(VerdictView(verdict)), "ok" if verdict.passed or verdict.passed_here else "bad")
        self._step_done()

    def annotated(self, listing: Listing) -> None:
        self._line(AnnotatedView(listing).title(), "dim")
        for text, kind in annotate.text_lines(listing):
            # The code as written: a student's source may hold what drives a terminal.
            self._line(neutralise(text) if self._sanitize else text, _TEXT_STYLE.get(kind, ""))
        self._step_done()


# ---------------------------------------------------------------------------------------
# Verdicts

_MARK = VERDICT_WORDS
_COLUMN = 28
_COMPARED = 40  # the comparison's columns: a figure with its parts ("269 kB (host → device ...)")
_HTML_COLOR = {"pass": "#1a7f37", "fail": "#cf222e", "incomplete": "#9a6700"}
# JupyterLab and Notebook 7 right-align the cells of every table in an output; a table of words
# reads from the left. Inline, on each cell: a <style> block is dropped from the output of a
# notebook that is not trusted (one opened again later), a style attribute is kept.
_CELL = "text-align:left;vertical-align:top"


def _wrapped_row(row: Sequence[str], widths: Sequence[int]) -> list[str]:
    """One row of a terminal table: each cell but the last wrapped to its column's width, on as
    many lines as its longest cell needs; the last cell (the why) runs on, on the first line."""
    cells = [textwrap.wrap(row[i], widths[i], break_on_hyphens=False, break_long_words=False)
             or [""]
             for i in range(len(widths))]
    height = max(len(c) for c in cells)
    out = []
    for k in range(height):
        parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths)]
        last = row[len(widths)] if k == 0 else ""
        out.append(("  " + "  ".join(parts) + "  " + last).rstrip())
    return out


class VerdictView:
    """A verdict as a small table: HTML in the notebook, plain text elsewhere."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict

    def headline(self) -> str:
        v = self.verdict
        word = VERDICT_WORDS[v.status]
        if v.passed:
            return f"{v.exercise}: {word}, {plural(len(v.checks), 'check')}"
        if v.passed_here:
            return f"{v.exercise}: {word}, {passed_here(v.gpu_checks)}"
        if v.incomplete:
            missing = v.incomplete_checks
            return (f"{v.exercise}: {word}, {plural(len(v.checks) - len(missing), 'check')} "
                    f"passed, {len(missing)} could not be evaluated here "
                    f"({', '.join(c.name for c in missing)}: {missing[0].reason})")
        return (f"{v.exercise}: {word}, {len(v.failed_checks)} of "
                f"{plural(len(v.checks), 'check')} failed")

    def __str__(self) -> str:
        rows = [("check", "result", "expected", "got", "why")]
        rows += [(c.name, _MARK[c.status], c.expected, c.got, c.reason) for c in self.verdict.checks]
        # Columns as wide as their longest cell up to a cap; a longer cell wraps inside its
        # column, whole (the columns after it stay in place; nothing of it is lost).
        widths = [min(max(len(r[i]) for r in rows), _COLUMN) for i in range(4)]
        lines = [self.headline()]
        for r in rows:
            lines += _wrapped_row(r, widths)
        if self.verdict.comparison is not None:
            lines += comparison_text(self.verdict.comparison)
        if self.verdict.more_at_grading:
            lines.append(MORE_AT_GRADING)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        v = self.verdict
        color = _HTML_COLOR["pass" if v.passed else "incomplete" if v.incomplete else "fail"]
        td = f"<td style='{_CELL}'>"
        body = "".join(
            f"<tr>{td}{html.escape(c.name)}</td>"
            f"<td style='{_CELL};color:{_HTML_COLOR[c.status]};font-weight:bold'>{_MARK[c.status]}</td>"
            f"{td}{html.escape(c.expected)}</td>{td}{html.escape(c.got)}</td>"
            f"{td}{html.escape(c.reason)}</td></tr>"
            for c in v.checks
        )
        head = "".join(f"<th style='{_CELL}'>{name}</th>"
                       for name in ("check", "result", "expected", "got", "why"))
        return (
            f"<div class='idrrun-verdict'><b style='color:{color}'>{html.escape(self.headline())}</b>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"{comparison_html(v.comparison) if v.comparison is not None else ''}"
            + (f"<p>{html.escape(MORE_AT_GRADING)}</p>" if v.more_at_grading else "") + "</div>"
        )

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text(str(self))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# The annotated source (annotate.py): the lines near a note, each note under its line

# Terminal styles (_COLORS) and HTML colours of the notes, by kind.
_TEXT_STYLE = {"gap": "dim", "error": "bad", "check": "bad", "slow": "note", "warning": "note",
               "implicit": "note", "note": "dim", "data": "dim", "region": "dim", "loop": "dim",
               "remark": "dim"}
_NOTE_COLOR = {"error": "#cf222e", "check": "#cf222e", "slow": "#bc4c00", "warning": "#9a6700",
               "implicit": "#bc4c00", "data": "#0969da", "region": "#8250df", "loop": "#1a7f37",
               "note": "#57606a", "remark": "#57606a"}
_OPEN_KINDS = ("error", "warning", "check", "slow")


class AnnotatedView:
    """A student's source with the compiler's messages and remarks, and the failed checks, on
    their lines: HTML in the notebook (open when something is wrong there), text elsewhere."""

    def __init__(self, listing: Listing) -> None:
        self.listing = listing

    def _counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for line in self.listing.lines:
            for note in line.notes:
                counts[note.kind] = counts.get(note.kind, 0) + 1
        for d in self.listing.elsewhere:
            counts[d.severity] = counts.get(d.severity, 0) + 1
        return counts

    def title(self) -> str:
        counts = self._counts()
        said = [plural(counts[k], one, many) for k, one, many in (
            ("error", "error", None), ("warning", "warning", None),
            ("check", "failed check", None), ("slow", "cause of slowness", "causes of slowness"),
            ("implicit", "implicit data movement", None))
            if counts.get(k)]
        remarks = sum(counts.get(k, 0) for k in ("data", "region", "loop", "remark", "note"))
        if remarks:
            said.append(plural(remarks, "remark"))
        return f"{self.listing.name}, annotated" + (f": {', '.join(said)}" if said else "")

    def __str__(self) -> str:
        return self.title() + "\n" + annotate.text(self.listing)

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text(str(self))  # type: ignore[attr-defined]

    def _repr_html_(self) -> str:
        listing = self.listing
        body: list[str] = []
        for row in annotate.rows(listing):
            if row[0] == "gap":
                body.append("<tr class='idrrun-gap'><td style='text-align:right;color:#8c959f'>⋮"
                            "</td><td></td></tr>")
            elif row[0] == "code":
                body.append(f"<tr><td style='{_NUMBER_STYLE}'>{row[1].number}</td>"
                            f"<td style='{_CODE_STYLE}'>{html.escape(row[1].code) or ' '}</td></tr>")
            else:
                body.append(_note_html(row[1], row[2]))
        for d in listing.elsewhere:
            body.append(f"<tr><td></td><td style='color:{_NOTE_COLOR.get(d.severity, '#57606a')}'>"
                        f"{html.escape(f'{d.file}:{d.line}: {d.severity}: {d.message}')}</td></tr>")
        wrong = any(n.kind in _OPEN_KINDS for line in listing.lines for n in line.notes) or \
            bool(listing.elsewhere)
        return (f"<details class='idrrun-annotated'{' open' if wrong else ''}>"
                f"<summary><b>{html.escape(self.title())}</b></summary>"
                "<table style='border-collapse:collapse;font-family:monospace'>"
                f"<tbody>{''.join(body)}</tbody></table></details>")


_NUMBER_STYLE = "text-align:right;color:#8c959f;padding-right:1em;vertical-align:top"
_CODE_STYLE = "white-space:pre;text-align:left"


def _note_html(line: annotate.Line, note: annotate.Note) -> str:
    indent = len(line.code) - len(line.code.lstrip(" \t"))
    color = _NOTE_COLOR.get(note.kind, "#57606a")
    meaning = f"<br><span style='color:#57606a'>{html.escape(note.meaning)}</span>" \
        if note.meaning else ""
    return (f"<tr class='idrrun-note idrrun-note-{note.kind}' data-line='{line.number}'>"
            f"<td></td><td style='text-align:left;white-space:normal;font-family:sans-serif;"
            f"padding:1px 0 3px {indent}ch'><div style='border-left:3px solid {color};"
            f"padding-left:6px'><b style='color:{color}'>{annotate.LABELS[note.kind]}:</b> "
            f"{html.escape(note.text)}{meaning}</div></td></tr>")


# ---------------------------------------------------------------------------------------
# The run beside the solution's (checks/compare.py)

COMPARISON_TITLE = "your run beside the solution's (same arguments, same compiler)"


def comparison_text(comparison: Comparison) -> list[str]:
    rows = [("", "you", "the solution")] + [(f.label, f.yours, f.solution) for f in comparison.figures]
    # As the verdict's table: columns capped, a longer value wrapped inside its column.
    widths = [min(max(len(r[i]) for r in rows), _COMPARED) for i in range(2)]
    lines = ["", COMPARISON_TITLE]
    for r in rows:
        lines += _wrapped_row(r, widths)
    return lines + [f"  {note}" for note in comparison.notes]


def _picture(path: Path | None, alt: str) -> str:
    if path is None or not path.is_file():
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<div>{html.escape(alt)}</div><img alt='{html.escape(alt)}' src='data:image/png;base64,{data}'/>"


def comparison_html(comparison: Comparison) -> str:
    """The table, then the two timelines one above the other when both were drawn."""
    td = f"<td style='{_CELL}'>"
    body = "".join(f"<tr>{td}{html.escape(f.label)}</td>{td}{html.escape(f.yours)}</td>"
                   f"{td}{html.escape(f.solution)}</td></tr>" for f in comparison.figures)
    notes = "".join(f"<div><small>{html.escape(n)}</small></div>" for n in comparison.notes)
    pictures = ""
    if comparison.timeline is not None and comparison.solution_timeline is not None:
        pictures = (_picture(comparison.timeline, "your GPU timeline")
                    + _picture(comparison.solution_timeline, "the solution's GPU timeline"))
    return (f"<div class='idrrun-comparison'><b>{html.escape(COMPARISON_TITLE)}</b>"
            f"<table><thead><tr><th style='{_CELL}'></th><th style='{_CELL}'>you</th>"
            f"<th style='{_CELL}'>the solution</th></tr></thead>"
            f"<tbody>{body}</tbody></table>{notes}{pictures}</div>")
