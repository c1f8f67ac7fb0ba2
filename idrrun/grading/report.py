"""A class's rows: the verdicts of a grading as GradeRows, their reports (CSV for people, JSON,
and the signed state a resumed grading reads), the grader's secrets (its key, its seed) and the
students' feedback files.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import hashlib
import hmac
import io
import json
import os
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..checks.specs import Exercise
from ..errors import UsageError
from .. import files
from ..files import temp_beside
from ..model import CheckResult, FailureKind, Settings
from ..pipeline import Outcome
from ..run import boundary
from .discover import Submission


GradeStatus = Literal["pass", "fail", "incomplete", "error"]


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
    # The GPU lane its run had (run/lanes.py): "GPU 0 alone, CPUs 14-15" for a timed run,
    # "GPU 1" shared; "" without lanes.
    lane: str = ""

    @property
    def reasons(self) -> str:
        """One line for the report: the failure, then each failed check with its reason."""
        if self.status == "error":
            return self.error
        parts = []
        if self.failure is not None and self.failure is not FailureKind.CHECK:
            parts.append(f"{self.failure.step} failed: {self.failure_what}")
        parts += [f"{c.name}: {c.reason}" for c in self.checks if c.status == "fail"]
        parts += [f"{c.name}: not evaluated ({c.reason})" for c in self.checks
                  if c.status == "incomplete"]
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "student": self.student, "exercise": self.exercise, "language": self.language,
            "verdict": self.status, "reasons": self.reasons,
            "build_seconds": round(self.build_seconds, 3), "run_seconds": round(self.run_seconds, 3),
            "submission": self.submission, "sandbox": self.sandbox, "node": self.node,
            "build_node": self.build_node, "lane": self.lane,
        }


def resume(path: Path, exercise: Exercise, subs: Sequence[Submission],
           key: bytes) -> tuple[dict[str, GradeRow], list[str]]:
    """The rows an earlier grading with this report left that are kept (load_report), and what
    to say of them. A row graded with other hidden sets (another seed, another spec) is graded
    again: one class, one set of hidden cases; a row that could not be graded ran none."""
    already = load_report(path, exercise.name, key)
    redrawn = [p for p, r in already.items()
               if r.status != "error" and r.hidden_args != exercise.hidden_args]
    for gone in redrawn:
        del already[gone]
    said = []
    kept = sum(resumed(s, already) is not None for s in subs)
    if kept:
        said.append(f"resuming: {kept} rows kept from {path} (--fresh grades them again)")
    if redrawn:
        said.append(f"{len(redrawn)} rows of {path} graded again: their hidden argument sets "
                    "were others (another seed or spec)")
    return already, said


def resumed(sub: Submission, already: dict[str, GradeRow] | None) -> GradeRow | None:
    """The row an earlier grading left for `sub`, when it is kept: not for a submission that
    cannot be read now (alice.ipynb came beside the alice.c graded before), and not when that
    row said it could not be graded (the files may have changed since: one of two removed, a
    folder trimmed; such a row costs little to make again)."""
    row = already.get(str(sub.path)) if already and sub.source is not None else None
    return row if row is not None and row.status != "error" else None


def _nodes(nodes: Sequence[str]) -> str:
    return ",".join(dict.fromkeys(n for n in nodes if n))


def row_from_outcome(sub: Submission, exercise: Exercise, outcome: Outcome,
                     sandbox_level: str) -> GradeRow:
    failure = outcome.failure
    verdict = outcome.verdict
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
        hidden_args=exercise.hidden_args,
        lane=outcome.run.lane if outcome.run is not None else "",
    )


def _check_from(record: Any) -> CheckResult:
    status = str(record["status"])
    if status not in ("pass", "fail", "incomplete"):
        raise ValueError(status)
    return CheckResult(str(record["name"]), status,  # type: ignore[arg-type]
                       str(record.get("expected", "")), str(record.get("got", "")),
                       str(record.get("reason", "")), int(record.get("hidden") or 0),
                       str(record.get("kind") or ""))


def state_path(report: Path) -> Path:
    """Where the grader keeps every row in full (typed checks included) beside its report:
    a CSV report is for people, this is what a resumed grading reads."""
    return report.with_name(f".{report.name}.idrrun-state.json")


def private_cache(settings: Settings) -> None:
    """The cache as a grader needs it: the grader's own (refused when someone else made it or
    can write it), passable (a box's uid reaches its room through CACHE/scratch with srun) but
    not listable, and what no program may read (builds, the solutions' outputs, the grader's
    key) private to the grader."""
    cache = boundary.own_dir(settings.cache_dir, 0o711, parents=True)
    for name in ("builds", "solutions", "private"):
        boundary.own_dir(cache / name, 0o700)


def _private_secret(settings: Settings, name: str, size: int, make: Callable[[], bytes]) -> bytes:
    """CACHE/private/NAME (which no box sees), made once with make() when missing or shorter
    than size bytes, readable by the grader alone."""
    path = settings.cache_dir / "private" / name
    private_cache(settings)
    try:
        secret = path.read_bytes()
        if len(secret) >= size:
            return secret
    except OSError:
        pass
    tmp = temp_beside(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(make())
    os.replace(tmp, path)
    return path.read_bytes()


def grading_key(settings: Settings) -> bytes:
    """The grader's secret (in its cache, which no box sees): rows it wrote carry a MAC made
    with it, so that a resumed grading keeps only those — a forged row is graded again."""
    return _private_secret(settings, "grading.key", 32, lambda: secrets.token_bytes(32))


def grading_seed(settings: Settings, given: str | None = None) -> tuple[str, str]:
    """The instructor's seed of the hidden argument sets drawn when grading, and where it came
    from: --seed, else [grading] seed or IDRRUN_GRADING_SEED, else one made at random the first
    time and kept beside the grading key, so that a regrading draws the same values. It is
    never written into a report or a feedback file."""
    if given:
        return given, "given by --seed"
    if settings.grading_seed:
        return settings.grading_seed, "of [grading] seed or IDRRUN_GRADING_SEED"
    kept = _private_secret(settings, "grading.seed", 32, lambda: secrets.token_hex(16).encode())
    return kept.decode("ascii", "replace").strip(), \
        f"kept in {settings.cache_dir / 'private' / 'grading.seed'}"


def _record(row: GradeRow) -> dict[str, Any]:
    return row.as_dict() | {"failure": row.failure.value if row.failure is not None else None,
                            "failure_what": row.failure_what,
                            "checks": [dataclasses.asdict(c) for c in row.checks],
                            "hidden_args": [list(args) for args in row.hidden_args]}


def _mac(record: dict[str, Any], key: bytes) -> str:
    body = json.dumps({k: v for k, v in record.items() if k != "mac"}, sort_keys=True)
    return hmac.new(key, body.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def load_report(path: Path, exercise: str, key: bytes) -> dict[str, GradeRow]:
    """Rows of an earlier grading of the same exercise, by submission, that this grader can
    prove it wrote (their MAC); {} when none or unreadable. Rows that ended in an internal
    error are left out, so they are graded again."""
    state = state_path(path)
    if not state.is_file():
        return {}
    try:
        records = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    out: dict[str, GradeRow] = {}
    for rec in records if isinstance(records, list) else []:
        try:
            if not hmac.compare_digest(str(rec.get("mac", "")), _mac(rec, key)):
                continue
            status = str(rec["verdict"])
            if rec["exercise"] != exercise or status not in ("pass", "fail", "incomplete", "error") or \
                    str(rec["reasons"]).startswith("internal error"):
                continue
            kind = rec.get("failure")
            failure = FailureKind(kind) if kind else None
            out[str(rec["submission"])] = GradeRow(
                student=str(rec["student"]), exercise=exercise, language=str(rec["language"]),
                status=status,  # type: ignore[arg-type]
                build_seconds=float(rec["build_seconds"]), run_seconds=float(rec["run_seconds"]),
                submission=str(rec["submission"]), failure=failure,
                failure_what=str(rec.get("failure_what") or ""),
                error=str(rec["reasons"]) if status == "error" else "",
                checks=tuple(_check_from(c) for c in rec.get("checks") or []),
                sandbox=str(rec.get("sandbox", "")),
                # Absent from states written before rows had nodes or lanes: those resume too.
                node=_text(rec, "node"), build_node=_text(rec, "build_node"),
                hidden_args=tuple(tuple(str(a) for a in args) for args in rec.get("hidden_args") or []),
                lane=_text(rec, "lane"),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


def _text(record: Any, key: str) -> str:
    """A text field of a state record, "" when absent or null."""
    return str(record.get(key) or "")


REPORT_FIELDS = ("student", "exercise", "language", "verdict", "reasons", "build_seconds",
                 "run_seconds", "submission", "sandbox", "node", "build_node", "lane")


# OWASP's rule against CSV injection: Excel, LibreOffice Calc and Google Sheets read a cell
# that starts with = + - or @ as a formula (=HYPERLINK, =WEBSERVICE, DDE), and some drop a
# leading tab or carriage return (or spaces, LibreOffice's "trim spaces") before looking.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def inert(value: object) -> object:
    """A report cell no spreadsheet reads as a formula: text that would start one gets a single
    quote first, which they show as text. Numbers pass (ours are never negative)."""
    if isinstance(value, str) and value.lstrip(" ").startswith(_FORMULA_START):
        return "'" + value
    return value


def render_report(rows: Sequence[GradeRow], path: Path) -> str:
    """The report as people read it. JSON keeps every value as it is; in CSV every cell is
    inert and quoted (a spreadsheet set to another separator, the semicolon of a French Excel,
    would otherwise cut a cell at a student's ";" and start a new one)."""
    if path.suffix.lower() == ".json":
        return json.dumps([_record(r) for r in rows], indent=2) + "\n"
    if path.suffix.lower() == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=REPORT_FIELDS, quoting=csv.QUOTE_ALL)
        writer.writeheader()
        for r in rows:
            writer.writerow({key: inert(value) for key, value in r.as_dict().items()})
        return buf.getvalue()
    raise UsageError(f"--report {path}: use a .csv or .json file name")


def write_report(rows: Sequence[GradeRow], path: Path, key: bytes) -> None:
    """The report, and the state a resumed grading reads (state_path, every row signed with
    the grader's key), both written atomically."""
    records = [_record(r) for r in rows]
    for rec in records:
        rec["mac"] = _mac(rec, key)
    files.write_atomic(state_path(path), json.dumps(records, indent=1) + "\n")
    files.write_atomic(path, render_report(rows, path))


def _table_cell(text: str) -> str:
    """A Markdown table cell: on one line, inert (a table is pasted into spreadsheets too),
    its bars escaped."""
    return str(inert(" ".join(text.splitlines()))).replace("|", "\\|")


# What a student's feedback says of a check on a hidden argument set, instead of its values.
HIDDEN_CASE = "{kind} check on a hidden case (its arguments and values are not shown)"


def feedback_markdown(row: GradeRow, exercise: Exercise) -> str:
    """A student's feedback: every check with its values, but those of hidden runs, which say
    only their result and their kind (the arguments, drawn or fixed, stay the instructor's)."""
    lines = [f"# {exercise.title}", "", f"Student: {row.student}  ", f"Verdict: **{row.status}**", ""]
    if row.checks:
        lines += ["| check | result | expected | got | why |", "|---|---|---|---|---|"]
        for c in row.checks:
            cells = [c.name, c.status, c.expected, c.got, c.reason] if not c.hidden else \
                [c.name, c.status, "", "", HIDDEN_CASE.format(kind=c.kind or "output")]
            lines.append("| " + " | ".join(_table_cell(c) for c in cells) + " |")
    elif row.reasons:
        lines.append(row.reasons)
    return "\n".join(lines) + "\n"


def feedback_names(students: Sequence[str]) -> dict[str, str]:
    """A file name for each student's feedback, no two alike, nor alike but for case (a file
    system may ignore it). A name the sanitiser changes, that starts with "." or "-", or that
    another's matches but for case, gets a digest of the name as it was after a "~", which the
    sanitiser never lets through: two students never share a file."""
    safe = {s: re.sub(r"[^A-Za-z0-9_.-]+", "_", s) for s in students}
    folded = collections.Counter(name.casefold() for name in safe.values())
    names = {}
    for student, name in safe.items():
        if name == student and name and name[0] not in ".-" and folded[name.casefold()] == 1:
            names[student] = f"{name}.md"
        else:
            digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:12]
            names[student] = f"{re.sub(r'^[.-]', '_', name)}~{digest}.md"
    return names


def write_feedback(rows: Sequence[GradeRow], exercise: Exercise, folder: Path) -> None:
    names = feedback_names([row.student for row in rows])
    for row in rows:
        files.write_atomic(folder / names[row.student], feedback_markdown(row, exercise))
