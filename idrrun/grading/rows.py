"""A class's rows: the verdict of one submission as a GradeRow (its status, checks, score, what
its feedback says), made from the pipeline's Outcome; pure values, no file.

    row_from_outcome(sub, exercise, outcome, sandbox, content) -> GradeRow; scored(row, exercise)
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import annotate
from ..checks import compare
from ..checks.verdict import passed_here
from ..checks.score import CheckPoints, Score, score
from ..checks.specs import Exercise
from ..model import CheckResult, Comparison, Diagnostic, Failure, FailureKind
from ..pipeline import Outcome
from . import grades
from .discover import Submission


GradeStatus = Literal["pass", "fail", "incomplete", "error"]


@dataclass(frozen=True)
class ContentKey:
    """What a row's verdict depends on, the key a resumed grading keeps rows by: the content of
    what was handed in (Submission.digest), of the exercise (its spec, solutions and data files:
    exercise_digest), of idrrun itself (its version and a digest of its code: code_id), how the
    submission is built (its language, its file's suffix, its line's flags: state.request_digest)
    and what the grader forces on every row (state.policy_digest); never the student's name or
    path. The same bytes graded as another language are another row."""

    submission: str
    exercise: str
    idrrun: str
    request: str
    policy: str



@dataclass(frozen=True)
class GradeRow:
    student: str
    exercise: str
    language: str
    status: GradeStatus
    build_seconds: float
    run_seconds: float
    submission: str
    failure: FailureKind | None = None  # why it did not pass; CHECK: the checks said so
    failure_what: str = ""  # the failure in words: "exit code 3", "killed by SIGSEGV"
    error: str = ""  # status "error": why it could not be graded
    checks: tuple[CheckResult, ...] = ()
    sandbox: str = ""  # how it was walled off: the machine's level, or "none (--unsafe)"
    # Where the run's tasks ran and where the compiler ran, when they were cluster job steps
    # (SLURMD_NODENAME of the step; nodes joined by "," for a run over several).
    node: str = ""
    build_node: str = ""
    # The hidden argument sets its checks ran with (drawn ones included): for the instructor's
    # report (JSON, state), never for a student's feedback.
    hidden_args: tuple[tuple[str, ...], ...] = ()
    content: ContentKey | None = None  # what the verdict was made of (resume keeps rows by it)
    # Its points, from its checks and the spec's points (checks/score.py); None: not graded.
    score: Score | None = None
    # What the student reads besides the checks: the failure's hint (a signal's, a limit's),
    # the compiler's messages about their lines, and their source annotated (Markdown).
    failure_hint: str = ""
    diagnostics: tuple[Diagnostic, ...] = ()
    # The build's last lines when it failed with no message the feedback can place (a linker's,
    # a wrapper's, the box's own): a student must see why their program did not build.
    failure_output: str = ""
    annotated: str = ""
    # The public run's figures beside the solution's (checks/compare.py), and the timelines.
    comparison: Comparison | None = None
    # The GPU lane its run had (run/lanes.py): "GPU 0 alone, CPUs 14-15" for a timed run,
    # "GPU 1" shared; "" without lanes.
    lane: str = ""
    # The wall times of every run of its build the grading made (the graded run first, then
    # the timed checks' repeats: Verdict.run_times); () where it was run once.
    run_times: tuple[float, ...] = ()
    # The teacher's adjustment (grades.py), from the file beside the report as it is when the
    # report is written: never kept in the state (the file is what a regrading reads again).
    adjustment: grades.Adjustment | None = None
    # When it was handed in (epoch seconds: the collection's record, else the file's time) and
    # how many seconds after the deadline (None: on time, or no deadline); like the adjustment,
    # set on every row when the report is written (classroom.late), and never a verdict's.
    submitted: float | None = None
    late: float | None = None

    @property
    def reasons(self) -> str:
        """One line for the report: the failure, then each failed check with its reason."""
        if self.status == "error":
            return self.error
        if self.passed_here:
            return passed_here([c for c in self.checks if c.status == "incomplete"])
        parts = []
        if self.failure is not None and self.failure is not FailureKind.CHECK:
            parts.append(f"{self.failure.step} failed: {self.failure_what}" + self._first_error())
        parts += [f"{c.name}: {c.reason}" for c in self.checks if c.status == "fail"]
        parts += [f"{c.name}: not evaluated ({c.reason})" for c in self.checks
                  if c.status == "incomplete"]
        return "; ".join(parts)

    def _first_error(self) -> str:
        """A build that failed: its first error, as the compiler placed it (" (carl.c:28:
        expected ';' before 'printf')"), or the end of its output's last line; "" otherwise."""
        if self.failure is None or self.failure.step != "compile":
            return ""
        first = next((d for d in self.diagnostics if d.severity == "error"), None)
        if first is not None:
            return f" ({first.file}:{first.line}: {first.message})"
        last = self.failure_output.strip().splitlines()[-1:] if self.failure_output.strip() else []
        return f" ({last[0].strip()[:200]})" if last else ""

    @property
    def passed_here(self) -> bool:
        """Incomplete only for checks that need a GPU (Verdict.passed_here)."""
        left = [c for c in self.checks if c.status == "incomplete"]
        return self.status == "incomplete" and bool(left) and all(c.gpu_only for c in left)

    def as_dict(self) -> dict[str, object]:
        s = self.score
        a = self.adjustment
        return {
            "student": self.student, "exercise": self.exercise, "language": self.language,
            "verdict": self.status,
            # Not graded (an error row): no score at all, rather than a zero it did not earn.
            "score": s.earned if s is not None else None,
            "points": s.possible if s is not None else None,
            "not_evaluated": s.not_evaluated if s is not None else None,
            "evaluated": s.evaluated if s is not None else None,
            "adjustment": a.points if a is not None else None,
            "adjustment_reason": a.reason if a is not None else "",
            "reasons": self.reasons,
            "build_seconds": round(self.build_seconds, 3), "run_seconds": round(self.run_seconds, 3),
            "submission": self.submission, "sandbox": self.sandbox, "node": self.node,
            "build_node": self.build_node, "lane": self.lane,
            "submitted": stamp(self.submitted), "late": late_by(self.late),
            "late_seconds": math.ceil(self.late) if self.late is not None else None,
            "by_check": by_check(s) if s is not None else {},
        }


def stamp(when: float | None) -> str:
    """A time as the reports write it: ISO 8601 in UTC, to the second ("" for none)."""
    return "" if when is None else \
        dt.datetime.fromtimestamp(when, dt.timezone.utc).isoformat(timespec="seconds")


def late_by(seconds: float | None) -> str:
    """How late, in words a teacher reads at a glance: "3 d 2 h", "2 h 05 min", "4 min 10 s",
    "12 s"; "" when not late."""
    if seconds is None or seconds <= 0:
        return ""
    s = math.ceil(seconds)  # late by a fraction of a second is late
    days, hours, minutes = s // 86400, s // 3600 % 24, s // 60 % 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {s % 60} s" if minutes else f"{s} s"


def by_check(score: Score) -> dict[str, float | None]:
    """The points earned on each [[check]] (its main and hidden runs together), by its label
    (a label two checks share gets its index: "pi #3"); None where none of its runs could be
    evaluated here."""
    items: dict[int, list[CheckPoints]] = {}
    for item in score.items:
        items.setdefault(item.check, []).append(item)
    labels = {c: next((i.label for i in its if not i.hidden), its[0].label) for c, its in items.items()}
    shared = collections.Counter(labels.values())
    out: dict[str, float | None] = {}
    for check in sorted(items):
        label = labels[check] if shared[labels[check]] == 1 else f"{labels[check]} #{check}"
        out[label] = None if all(i.outcome == "not_evaluated" for i in items[check]) else \
            sum(i.worth for i in items[check] if i.outcome == "earned")
    return out



def scored(row: GradeRow, exercise: Exercise) -> GradeRow:
    """The row with its score from the spec's points; an error row has none."""
    if row.status == "error":
        return dataclasses.replace(row, score=None)
    return dataclasses.replace(row, score=score(exercise, row.checks, len(row.hidden_args)))


def _nodes(nodes: Sequence[str]) -> str:
    return ",".join(dict.fromkeys(n for n in nodes if n))


# Complexity: one field of the row per part of the outcome (build, run, verdict, failure, score),
# each optional.
def row_from_outcome(sub: Submission, exercise: Exercise, outcome: Outcome,
                     sandbox_level: str, content: ContentKey) -> GradeRow:
    """The row of a submission that was graded (content: what its verdict was made of,
    state.content_key)."""
    failure = outcome.failure
    verdict = outcome.verdict
    listing = outcome.annotated
    status: GradeStatus = "pass" if outcome.ok else \
        "incomplete" if failure is None and verdict is not None and verdict.incomplete else "fail"
    return GradeRow(
        student=sub.student, exercise=exercise.name, language=outcome.request.source.language,
        status=status, sandbox=sandbox_level,
        build_seconds=outcome.build.seconds if outcome.build is not None else 0.0,
        run_seconds=outcome.run.proc.seconds if outcome.run is not None else 0.0,
        submission=str(sub.path),
        failure=failure.kind if failure is not None else None,
        failure_what=failure.what if failure is not None else "",
        checks=outcome.verdict.checks if outcome.verdict is not None else (),
        node=_nodes(outcome.run.nodes) if outcome.run is not None else "",
        build_node=_nodes(outcome.build.nodes) if outcome.build is not None else "",
        hidden_args=exercise.hidden_args, content=content,
        score=score(exercise, outcome.verdict.checks if outcome.verdict is not None else (),
                    len(exercise.hidden_args)),
        failure_hint=failure.hint if failure is not None else "",
        failure_output=_unplaced_output(failure, listing),
        diagnostics=(*listing.diagnostics, *listing.elsewhere) if listing is not None else (),
        annotated=annotate.markdown(listing) if listing is not None else "",
        comparison=verdict.comparison if verdict is not None else None,
        lane=outcome.run.lane if outcome.run is not None else "",
        run_times=verdict.run_times if verdict is not None else (),
    )


# How much of an unexplained build's output the feedback shows: its end, where the reason is.
FAILURE_OUTPUT_LINES = 15


def _unplaced_output(failure: Failure | None, listing: annotate.Listing | None) -> str:
    """The end of a failed build's output when none of its errors was placed on a line."""
    if failure is None or not (failure.compile_step or failure.kind.step == "compile") or \
            not failure.output.strip():
        return ""
    if listing is not None and any(d.severity == "error"
                                   for d in (*listing.diagnostics, *listing.elsewhere)):
        return ""
    return "\n".join(failure.output.rstrip("\n").splitlines()[-FAILURE_OUTPUT_LINES:])



def record(row: GradeRow) -> dict[str, Any]:
    return row.as_dict() | {"failure": row.failure.value if row.failure is not None else None,
                            "failure_what": row.failure_what,
                            "failure_hint": row.failure_hint,
                            "failure_output": row.failure_output,
                            "checks": [dataclasses.asdict(c) for c in row.checks],
                            "diagnostics": [dataclasses.asdict(d) for d in row.diagnostics],
                            "annotated": row.annotated,
                            "hidden_args": [list(args) for args in row.hidden_args],
                            "run_times": [round(t, 6) for t in row.run_times],
                            "content": dataclasses.asdict(row.content)
                            if row.content is not None else None,
                            "comparison": compare.as_dict(row.comparison) if row.comparison else None}

