"""A class's rows: the verdicts of a grading as GradeRows, their reports (CSV for people, JSON,
and the signed state a resumed grading reads), the grader's secrets (its key, its seed) and the
students' feedback files.
Maintainability: rank C (radon MI 8.2) until issue 35's grading session work splits it.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import functools
import hashlib
import hmac
import io
import json
import os
import re
import secrets
import stat
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import annotate, escape
from ..checks import compare, visibility
from ..checks.verdict import passed_here
from ..checks.score import CheckPoints, Score, points, score
from ..checks.words import listing, plural
from ..checks.specs import Exercise
from ..errors import UsageError
from .. import files
from ..files import temp_beside
from ..model import CheckResult, Comparison, Diagnostic, Failure, FailureKind, Settings
from ..pipeline import Outcome
from ..run import boundary
from ..version import __version__
from . import comparison, grades, names
from .discover import Submission


GradeStatus = Literal["pass", "fail", "incomplete", "error"]


@dataclass(frozen=True)
class ContentKey:
    """What a row's verdict depends on, the key a resumed grading keeps rows by: the content of
    what was handed in (Submission.digest), of the exercise (its spec, solutions and data files:
    exercise_digest) and of idrrun itself (its version and a digest of its code: code_id);
    never the student's name or path."""

    submission: str
    exercise: str
    idrrun: str


# idrrun's own package: every file of it decides a verdict (the checks, the guard's C source,
# the tracer's), not only its version number, which an editable install never changes.
_PACKAGE = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def code_id() -> str:
    """idrrun's version and the sha256 of its package's files (names and bytes; compiled
    caches left out): "0.1.0+code.<16 hex>". A grading by other code never keeps a row."""
    digest = hashlib.sha256()
    for path in sorted(p for p in _PACKAGE.rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode("utf-8", "surrogateescape") +
                      b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return f"{__version__}+code.{digest.hexdigest()[:16]}"


# What a [[check]] says that only scores or shows a verdict: changing it re-scores the rows a
# resumed grading keeps (resume) and never runs a submission again.
SCORING_ONLY = frozenset({"points", "hidden_points", "visibility", "counts_when"})


def _spec_bytes(path: Path) -> bytes:
    """The spec as grading uses it: its tables without the scoring-only fields of its checks
    (canonical JSON); the raw bytes when it cannot be read as TOML (a grading then fails)."""
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return raw
    checks = data.get("check")
    if isinstance(checks, list):
        data["check"] = [{k: v for k, v in c.items() if k not in SCORING_ONLY}
                         if isinstance(c, dict) else c for c in checks]
    return json.dumps(data, sort_keys=True, default=str).encode()


def exercise_digest(exercise: Exercise) -> str:
    """sha256 of the exercise as a grading uses it: its spec (but for what only scores or shows
    a verdict), its solutions, its data files."""
    digest = hashlib.sha256()
    paths = [exercise.path, *(p.solution for p in exercise.sources.values()
                              if p.solution is not None), *exercise.files]
    for path in paths:
        digest.update(path.name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            data = _spec_bytes(path) if path == exercise.path else path.read_bytes()
            digest.update(hashlib.sha256(data).digest())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


def content_key(sub: Submission, exercise: Exercise) -> ContentKey:
    return ContentKey(sub.digest, exercise_digest(exercise), code_id())


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
    # The teacher's adjustment (grades.py), from the file beside the report as it is when the
    # report is written: never kept in the state (the file is what a regrading reads again).
    adjustment: grades.Adjustment | None = None

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
            "by_check": by_check(s) if s is not None else {},
        }


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


def resume(path: Path, exercise: Exercise, subs: Sequence[Submission],
           key: bytes) -> tuple[dict[str, GradeRow], list[str]]:
    """The rows an earlier grading with this report left that are kept, by the submission each
    now stands for (resumed), and what to say of them. A row is kept for a submission of the
    same content, graded with the same exercise (spec, solutions, data), idrrun version and
    hidden argument sets (one class, one set of hidden cases): a changed file is graded again,
    an unchanged one is kept, whatever its name. A row that could not be graded is never kept
    (the files may have changed since: one of two removed, a folder trimmed)."""
    already = load_report(path, exercise.name, key)
    by_content = {row.content: row for row in already.values()
                  if row.status != "error" and row.content is not None
                  and row.hidden_args == exercise.hidden_args}
    kept: dict[str, GradeRow] = {}
    again: collections.Counter[str] = collections.Counter()
    for sub in subs:
        if sub.source is None:
            continue
        now = content_key(sub, exercise)
        own = already.get(str(sub.path))
        # Its own row when it is unchanged, else that of a submission of the same content.
        row = None if not sub.digest else own if own is not None and own.content == now and \
            own.status != "error" and own.hidden_args == exercise.hidden_args else by_content.get(now)
        if row is not None:
            # Points are the spec's as it is now: a teacher who changes them scores the class
            # again without running anything.
            kept[str(sub.path)] = scored(dataclasses.replace(row, student=sub.student,
                                                             submission=str(sub.path)), exercise)
        elif str(sub.path) in already:
            again[_why_again(already[str(sub.path)], now, exercise)] += 1
    said = []
    if kept:
        said.append(f"resuming: {plural(len(kept), 'row')} kept from {path} (the same submission, "
                    "exercise and idrrun as when they were graded; --fresh grades them again)")
    if again:
        said.append(f"{plural(sum(again.values()), 'row')} of {path} graded again: " +
                    ", ".join(f"{n} {why}" for why, n in sorted(again.items())))
    return kept, said


def _why_again(old: GradeRow, now: ContentKey, exercise: Exercise) -> str:
    """Why the row an earlier grading left for this path is not kept, in words."""
    if old.status == "error":
        return "could not be graded before"
    if old.content is None:
        return "were graded before rows kept their content (no key)"
    if old.content.submission != now.submission:
        return "changed"
    if old.content.exercise != now.exercise:
        return "graded with another exercise spec, solution or data"
    if old.content.idrrun != now.idrrun:
        return f"graded by other idrrun code ({old.content.idrrun})"
    return "graded with other hidden argument sets (another seed or spec)"


def resumed(sub: Submission, already: dict[str, GradeRow] | None) -> GradeRow | None:
    """The row kept for `sub` (resume), when there is one: not for a submission that cannot be
    read now (alice.ipynb came beside the alice.c graded before), nor a row that said it could
    not be graded."""
    row = already.get(str(sub.path)) if already and sub.source is not None else None
    return row if row is not None and row.status != "error" else None


def scored(row: GradeRow, exercise: Exercise) -> GradeRow:
    """The row with its score from the spec's points; an error row has none."""
    if row.status == "error":
        return dataclasses.replace(row, score=None)
    return dataclasses.replace(row, score=score(exercise, row.checks, len(row.hidden_args)))


def _nodes(nodes: Sequence[str]) -> str:
    return ",".join(dict.fromkeys(n for n in nodes if n))


def row_from_outcome(sub: Submission, exercise: Exercise, outcome: Outcome,
                     sandbox_level: str) -> GradeRow:
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
        hidden_args=exercise.hidden_args, content=content_key(sub, exercise),
        score=score(exercise, outcome.verdict.checks if outcome.verdict is not None else (),
                    len(exercise.hidden_args)),
        failure_hint=failure.hint if failure is not None else "",
        failure_output=_unplaced_output(failure, listing),
        diagnostics=(*listing.diagnostics, *listing.elsewhere) if listing is not None else (),
        annotated=annotate.markdown(listing) if listing is not None else "",
        comparison=verdict.comparison if verdict is not None else None,
        lane=outcome.run.lane if outcome.run is not None else "",
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


def _check_from(record: Any) -> CheckResult:
    status = str(record["status"])
    if status not in ("pass", "fail", "incomplete"):
        raise ValueError(status)
    # A row written before checks named their [[check]] cannot be scored: it has none, and
    # is graded again (KeyError).
    return CheckResult(str(record["name"]), status,  # type: ignore[arg-type]
                       str(record.get("expected", "")), str(record.get("got", "")),
                       str(record.get("reason", "")), int(record.get("hidden") or 0),
                       str(record.get("kind") or ""),
                       line=int(record["line"]) if record.get("line") is not None else None,
                       excerpt=str(record.get("excerpt") or ""),
                       pattern=str(record.get("pattern") or ""), gpu_only=bool(record.get("gpu_only", False)), check=int(record["check"]))


def _content_from(record: Any) -> ContentKey | None:
    """A row's content key as the state keeps it; None for rows of older states."""
    if not isinstance(record, dict):
        return None
    return ContentKey(str(record["submission"]), str(record["exercise"]), str(record["idrrun"]))


def _feedback_fields(record: Any) -> dict[str, Any]:
    """What a row keeps for the student's feedback (absent from states written before)."""
    return {"failure_hint": str(record.get("failure_hint") or ""),
            "failure_output": str(record.get("failure_output") or ""),
            "diagnostics": tuple(_diagnostic_from(d) for d in record.get("diagnostics") or []),
            "annotated": str(record.get("annotated") or "")}


def _diagnostic_from(record: Any) -> Diagnostic:
    column = record.get("column")
    return Diagnostic(str(record["file"]), int(record["line"]),
                      int(column) if column is not None else None, str(record["severity"]),
                      str(record["message"]), str(record.get("code") or ""))


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


# The longest seed file read: a seed is a line.
_SEED_FILE_CAP = 4096


def read_seed_file(path: Path) -> str:
    """The seed in `path`, a file of the grader's own that no other user may read or write (a
    seed others can read draws every hidden case of the class). Its first line, stripped; read
    through one descriptor, never following a link. UsageError saying why it is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"--seed-file {path}: cannot read it ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        why = "not a regular file" if not stat.S_ISREG(st.st_mode) else \
            f"belongs to uid {st.st_uid}, not to the grader (uid {os.geteuid()})" \
            if st.st_uid != os.geteuid() else \
            f"other users can read or write it (mode {stat.S_IMODE(st.st_mode):o}): chmod 600 it" \
            if st.st_mode & 0o066 else ""
        if why:
            raise UsageError(f"--seed-file {path}: refused: {why}")
        data = os.read(fd, _SEED_FILE_CAP)
    finally:
        os.close(fd)
    seed = data.decode("utf-8", "replace").strip().split("\n", 1)[0].strip()
    if not seed:
        raise UsageError(f"--seed-file {path}: empty")
    return seed


def grading_seed(settings: Settings, seed_file: Path | None = None) -> tuple[str, str]:
    """The instructor's seed of the hidden argument sets drawn when grading, and where it came
    from: --seed-file, else IDRRUN_GRADING_SEED or [grading] seed (config.py refuses a config
    holding one that others can read), else one made at random the first time and kept beside
    the grading key, so that a regrading draws the same values. Never on a command line, never
    in a box's environment (sandbox.ENV_KEEP), never written into a report or a feedback file."""
    if seed_file is not None:
        return read_seed_file(seed_file), f"of {seed_file}"
    if settings.grading_seed:
        return settings.grading_seed, "of [grading] seed or IDRRUN_GRADING_SEED"
    kept = _private_secret(settings, "grading.seed", 32, lambda: secrets.token_hex(16).encode())
    return kept.decode("ascii", "replace").strip(), \
        f"kept in {settings.cache_dir / 'private' / 'grading.seed'}"


def _record(row: GradeRow) -> dict[str, Any]:
    return row.as_dict() | {"failure": row.failure.value if row.failure is not None else None,
                            "failure_what": row.failure_what,
                            "failure_hint": row.failure_hint,
                            "failure_output": row.failure_output,
                            "checks": [dataclasses.asdict(c) for c in row.checks],
                            "diagnostics": [dataclasses.asdict(d) for d in row.diagnostics],
                            "annotated": row.annotated,
                            "hidden_args": [list(args) for args in row.hidden_args],
                            "content": dataclasses.asdict(row.content)
                            if row.content is not None else None,
                            "comparison": compare.as_dict(row.comparison) if row.comparison else None}


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
                content=_content_from(rec.get("content")),
                **_feedback_fields(rec),
                comparison=compare.from_dict(rec.get("comparison")),
                lane=_text(rec, "lane"),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


def _text(record: Any, key: str) -> str:
    """A text field of a state record, "" when absent or null."""
    return str(record.get(key) or "")


REPORT_FIELDS = ("student", "exercise", "language", "verdict", "score", "points", "not_evaluated",
                 "evaluated", "adjustment", "adjustment_reason", "reasons", "build_seconds",
                 "run_seconds", "submission", "sandbox", "node", "build_node", "lane")
# A CSV report's column for the points earned on one check: "check: pi".
CHECK_COLUMN = "check: "


# A CSV cell no spreadsheet reads as a formula, and back (escape.py; the gradebook reads it).
inert, uninert = escape.csv_cell, escape.csv_uncell


def render_report(rows: Sequence[GradeRow], path: Path) -> str:
    """The report as people read it. JSON keeps every value as it is; in CSV every cell is
    inert and quoted (a spreadsheet set to another separator, the semicolon of a French Excel,
    would otherwise cut a cell at a student's ";" and start a new one)."""
    if path.suffix.lower() == ".json":
        return json.dumps([names.decodable_data(_record(r)) for r in rows], indent=2) + "\n"
    if path.suffix.lower() == ".csv":
        checks = list(dict.fromkeys(CHECK_COLUMN + label for r in rows
                                    for label in (by_check(r.score) if r.score else {})))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=[*REPORT_FIELDS, *checks], quoting=csv.QUOTE_ALL)
        writer.writeheader()
        for r in rows:
            cells = r.as_dict()
            earned = cells.pop("by_check")
            assert isinstance(earned, dict)
            cells |= {CHECK_COLUMN + label: value for label, value in earned.items()}
            writer.writerow({key: inert(value) for key, value in cells.items()})
        # One rule for every byte that is not UTF-8 (names.py), in every cell at once.
        return names.decodable(buf.getvalue())
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
    nothing in it read as Markdown or HTML (escape.markdown_cell)."""
    return escape.markdown_cell(" ".join(text.splitlines()))


# What a student's feedback says of a check on a hidden argument set, instead of its values.
HIDDEN_CASE = visibility.HIDDEN_CASE
# What went wrong before any check could judge, by the failure's step.
_FAILED_STEP = {"compile": "The program did not build", "run": "The program did not run to its end"}
# At most this many of the compiler's messages in a feedback file (the first ones matter).
FEEDBACK_MESSAGES = 10


def feedback_markdown(row: GradeRow, exercise: Exercise,
                      override: visibility.Override = "spec",
                      timelines: tuple[str, str] | None = None,
                      out_of: float | None = None) -> str:
    """A student's feedback: their score, what went wrong (the compiler's messages on their
    lines, the signal or limit and its hint), the checks as the spec (or the grader's override)
    lets students see them (checks/visibility.py: hidden runs say only their result and their
    kind, the arguments, drawn or fixed, stay the instructor's, unless `full`), the output
    around the failed checks they may see, the source annotated, and the public run beside the
    solution's, with the timelines (files beside it) named, when the student may see it all.
    out_of: what the class is graded out of (grades.scale; default: the row's own points
    evaluated)."""
    lines = [f"# {exercise.title}", "", f"Student: {escape.markdown_text(row.student)}  ", f"Verdict: **{row.status}**  "]
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
        lines += ["## Checks", "", "| check | result | expected | got | why |", "|---|---|---|---|---|"]
        for c in (c for c in shown if c is not None):
            cells = [c.name, c.status, c.expected, c.got, c.reason]
            lines.append("| " + " | ".join(_table_cell(c) for c in cells) + " |")
        if None in shown:
            lines += ["", NOT_SHOWN.format(checks=plural(shown.count(None), "more check"))]
        lines.append("")
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


def score_text(s: Score, adjustment: grades.Adjustment | None = None) -> str:
    """A score on one line, out of the points evaluated here: "15/18", "17/17 (1 of 18 not
    evaluated)", "13/17 (1 of 18 not evaluated) +1.5"."""
    text = f"{points(s.earned)}/{points(s.evaluated)}"
    if s.not_evaluated:
        text += f" ({points(s.not_evaluated)} of {points(s.possible)} not evaluated)"
    if adjustment is not None:
        text += f" {grades.signed(adjustment.points)}"
    return text


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
                   override: visibility.Override = "spec") -> None:
    named = feedback_names([row.student for row in rows])
    folder.mkdir(parents=True, exist_ok=True)
    out_of = class_scale(rows)
    for row in rows:
        drawn = comparison.pictures(row.comparison, folder, named[row.student].removesuffix(".md")) \
            if row.comparison is not None and visibility.comparison_seen(exercise, override) else None
        # The compiler's messages and the source lines quote bytes the student wrote: those
        # that are not UTF-8 are written by the one rule of names.py.
        files.write_atomic(folder / named[row.student],
                           names.decodable(feedback_markdown(row, exercise, override, drawn, out_of)))


def class_scale(rows: Sequence[GradeRow]) -> float:
    """What the class's grades are out of (grades.scale): the points most rows had evaluated."""
    return grades.scale([(r.score.possible, r.score.not_evaluated) for r in rows
                         if r.score is not None])
