"""The students' feedback files: one Markdown file per student (their score, what went wrong,
the checks as the spec lets them see them, their source annotated, their run beside the
solution's), under a name no two students share.

    write_feedback(rows, exercise, folder, override); feedback_markdown(row, exercise, ...)
"""

from __future__ import annotations

import collections
import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import escape, files
from ..checks import visibility
from ..checks.score import Score, points
from ..checks.specs import Exercise
from ..checks.words import listing, plural
from ..model import CheckResult, FailureKind
from . import comparison, grades, names
from .rows import GradeRow


def _table_cell(text: str) -> str:
    """A Markdown table cell: on one line, inert (a table is pasted into spreadsheets too),
    nothing in it read as Markdown or HTML (escape.markdown_cell)."""
    return escape.markdown_cell(" ".join(text.splitlines()))


# What a student's feedback says of a check on a hidden argument set, instead of its values.
HIDDEN_CASE = visibility.HIDDEN_CASE
# What went wrong before any check could judge, by the failure's step.
_FAILED_STEP = {"compile": "The program did not build", "run": "The program did not run to its end"}
# At most this many of the compiler's messages in a feedback file (the first ones matter).
FEEDBACK_MESSAGES = 10


# Complexity: the feedback's sections in the order the student reads them, each present or not.
def feedback_markdown(row: GradeRow, exercise: Exercise,
                      override: visibility.Override = "spec",
                      timelines: tuple[str, str] | None = None,
                      out_of: float | None = None, pseudonym: str | None = None) -> str:
    """A student's feedback: their score, what went wrong (the compiler's messages on their
    lines, the signal or limit and its hint), the checks as the spec (or the grader's override)
    lets students see them (checks/visibility.py: hidden runs say only their result and their
    kind, the arguments, drawn or fixed, stay the instructor's, unless `full`), the output
    around the failed checks they may see, the source annotated, and the public run beside the
    solution's, with the timelines (files beside it) named, when the student may see it all.
    out_of: what the class is graded out of (grades.scale; default: the row's own points
    evaluated); pseudonym: her name on the exercise's times board, when it has one."""
    lines = [f"# {exercise.title}", "", f"Student: {escape.markdown_text(row.student)}  ", f"Verdict: **{row.status}**  "]
    if pseudonym:
        lines.append(f"On the class's times board: **{escape.markdown_text(pseudonym)}** (your "
                     "name there: only you and your teacher know it is yours)  ")
    if row.score is not None:
        lines += score_lines(row.score, out_of, row.adjustment)
    lines.append("")
    lines += _what_went_wrong(row)
    shown = [visibility.seen(c, exercise, override, row.hidden_args) for c in row.checks]
    if row.checks and row.failure is not None and row.failure.step == "compile":
        # A build that failed has one row (checks/verdict.py): the exercise's checks never ran.
        lines += [f"The program did not build: none of the exercise's "
                  f"{plural(len(exercise.checks), 'check')} could judge it, and it earns no points.",
                  ""]
    elif row.checks:
        worth = _points_of(row.score)
        lines += ["## Checks", "", "| check | points | result | expected | got | why |",
                  "|---|---|---|---|---|---|"]
        for c in (c for c in shown if c is not None):
            cells = [c.name, worth.get((c.check, c.hidden), ""), c.status, c.expected, c.got, c.reason]
            lines.append("| " + " | ".join(_table_cell(c) for c in cells) + " |")
        if None in shown:
            lines += ["", NOT_SHOWN.format(checks=plural(shown.count(None), "more check"))]
        lines.append("")
        lines += _waiting(row.score)
    elif row.reasons:
        lines += [escape.markdown_joined(row.reasons), ""]
    lines += _excerpts([c for c in shown if c is not None])
    if row.annotated:
        lines += ["## Your source, annotated", "", row.annotated]
    if row.comparison is not None and visibility.comparison_seen(exercise, override):
        lines += comparison.markdown(row.comparison, timelines, _table_cell)
    return "\n".join(lines).rstrip("\n") + "\n"


# What a feedback says of the checks the spec does not let students see.
NOT_SHOWN = "{checks} graded and not shown here."
WAITING = "Points that do not count yet:"


def _points_of(s: Score | None) -> dict[tuple[int, int], str]:
    """Each check's points on each run, as the checks' table shows them: "2/2", "0/3",
    "not evaluated here (3)"."""
    # A check's points on a run may be in parts (counts_in_part, a wrong result's bound):
    # its worth, what was earned, what could not be evaluated here.
    parts: dict[tuple[int, int], list[float]] = {}
    for item in (s.items if s is not None else ()):
        part = parts.setdefault((item.check, item.hidden), [0.0, 0.0, 0.0])
        part[0] += item.worth
        part[1] += item.worth if item.outcome == "earned" else 0.0
        part[2] += item.worth if item.outcome == "not_evaluated" else 0.0
    out: dict[tuple[int, int], str] = {}
    for key, (worth, earned, unknown) in parts.items():
        out[key] = f"not evaluated here ({points(worth)})" if unknown >= worth else \
            f"{points(earned)}/{points(worth)}" + (f", {points(unknown)} not evaluated here"
                                                   if unknown else "")
    return out


def _waiting(s: Score | None) -> list[str]:
    """Why a passed check's points did not count: what they wait for (score.counts_when),
    in the student's terms ("3 points for y_last count once the saxpy loop runs in a compute
    region")."""
    why = [i.why for i in (s.items if s is not None else ()) if i.why and i.outcome != "earned"
           and not i.why.startswith(("the program did not build", "not run:", "the check did not"))]
    if not why:
        return []
    return [WAITING, "", *(f"- {escape.markdown_text(w)}" for w in dict.fromkeys(why)), ""]



def score_lines(s: Score, out_of: float | None = None,
                adjustment: grades.Adjustment | None = None) -> list[str]:
    """A feedback's score as a student reads it: the points earned out of those evaluated here
    (those that were not, and why, said), the teacher's adjustment, and the grade when it is
    not the score (grades.py: adjusted, or brought to the class's scale)."""
    scale = s.evaluated if out_of is None else out_of
    if s.not_evaluated:
        left = [i for i in s.items if i.outcome == "not_evaluated"]
        what = listing(list(dict.fromkeys(i.label for i in left)))
        lines = [f"Score: **{points(s.earned)}/{points(s.evaluated)}**, out of the "
                 f"{plural(s.evaluated, 'point')} evaluated here; not evaluated here: {what} "
                 f"({plural(s.not_evaluated, 'point')} of {points(s.possible)})  "]
    else:
        lines = [f"Score: **{points(s.earned)}/{points(s.possible)}**  "]
    if adjustment is not None:
        lines.append(f"Adjustment: **{grades.signed(adjustment.points)}**: "
                     f"{_table_cell(adjustment.reason)}  ")
    value, _ = grades.grade(s.earned, s.possible, s.not_evaluated, scale, adjustment=adjustment)
    if value is not None and (value != round(s.earned, 2) or scale != s.evaluated):
        lines.append(f"Grade: **{points(value)}/{points(scale)}**  ")
    return lines


def _what_went_wrong(row: GradeRow) -> list[str]:
    if row.failure is None or row.failure is FailureKind.CHECK:
        return []
    lines = ["## What went wrong", "",
             f"{_FAILED_STEP.get(row.failure.step, 'It failed')}: "
             f"{escape.markdown_joined(row.failure_what)}.", ""]
    shown = [d for d in row.diagnostics if d.severity in ("error", "warning")][:FEEDBACK_MESSAGES]
    if shown:
        lines += ["The compiler's messages:", ""]
        for d in shown:
            where = f"{d.file}:{d.line}" + (f":{d.column}" if d.column else "")
            lines.append(f"- {escape.markdown_code(where)} {d.severity}: "
                         f"{escape.markdown_joined(d.message)}")
            if d.code.strip():
                lines += ["", _fenced(f"{d.line} | {d.code}", "  ")]
        more = sum(d.severity in ("error", "warning") for d in row.diagnostics) - len(shown)
        if more > 0:
            lines.append(f"- and {more} more")
        lines.append("")
    if row.failure_output:
        lines += ["The end of the build's output:", "", _fenced(row.failure_output), ""]
    if row.failure_hint:
        lines += [f"Hint: {escape.markdown_joined(row.failure_hint)}", ""]
    return lines


def _excerpts(shown: Sequence[CheckResult]) -> list[str]:
    """The output around each failed check of the public run that the student may see in
    full (visibility.seen leaves no excerpt to a hidden run's, nor to a summarised check)."""
    failed = [c for c in shown if c.status == "fail" and not c.hidden and c.excerpt]
    if not failed:
        return []
    lines = ["## The output around the failed checks", ""]
    for c in failed:
        lines += [f"**{_table_cell(c.name)}** ({_table_cell(c.reason)})", "", _fenced(c.excerpt), ""]
    return lines


def _fenced(text: str, indent: str = "") -> str:
    """A code block nothing in `text` can end (escape.fenced)."""
    return escape.fenced(text, indent=indent)


def feedback_names(students: Sequence[str]) -> dict[str, str]:
    """A file name for each student's feedback, no two alike, nor alike but for case (a file
    system may ignore it). A name the sanitiser changes, that starts with "." or "-", or that
    another's matches but for case, gets a digest of the name as it was after a "~", which the
    sanitiser never lets through: two students never share a file."""
    safe = {s: re.sub(r"[^A-Za-z0-9_.-]+", "_", s) for s in students}
    folded = collections.Counter(name.casefold() for name in safe.values())
    out = {}
    for student, name in safe.items():
        if name == student and name and name[0] not in ".-" and folded[name.casefold()] == 1:
            out[student] = f"{name}.md"
        else:
            digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:12]
            out[student] = f"{re.sub(r'^[.-]', '_', name)}~{digest}.md"
    return out


def write_feedback(rows: Sequence[GradeRow], exercise: Exercise, folder: Path,
                   override: visibility.Override = "spec",
                   pseudonyms: Mapping[str, str] | None = None) -> None:
    named = feedback_names([row.student for row in rows])
    folder.mkdir(parents=True, exist_ok=True)
    out_of = class_scale(rows)
    for row in rows:
        drawn = comparison.pictures(row.comparison, folder, named[row.student].removesuffix(".md")) \
            if row.comparison is not None and visibility.comparison_seen(exercise, override) else None
        # The compiler's messages and the source lines quote bytes the student wrote: those
        # that are not UTF-8 are written by the one rule of names.py.
        files.write_atomic(folder / named[row.student],
                           names.decodable(feedback_markdown(
                               row, exercise, override, drawn, out_of,
                               (pseudonyms or {}).get(row.student))))


def class_scale(rows: Sequence[GradeRow]) -> float:
    """What the class's grades are out of (grades.scale): the points most rows had evaluated."""
    return grades.scale([(r.score.possible, r.score.not_evaluated) for r in rows
                         if r.score is not None])
