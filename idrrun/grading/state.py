"""The grader's signed state beside a report: every row in full, each with a MAC made with the
grader's key, which a resumed grading reads back; the keys rows are resumed by (the content of
the submission and how it is built, of the exercise, of idrrun itself, the grader's policy); the
grader's secrets (its key, its seed).

    write_state(rows, report, key); resume(report, exercise, subs, key, policy) -> (rows kept, notes)
    grading_key(settings); grading_seed(settings, seed_file) -> (seed, where from)
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import hmac
import json
import os
import secrets
import stat
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import files
from ..checks import compare
from ..checks.specs import Exercise
from ..checks.words import plural
from ..errors import UsageError
from ..files import temp_beside
from ..model import CheckResult, Diagnostic, FailureKind, Probe, Settings
from ..run import boundary
from ..version import __version__
from .discover import Submission
from .rows import ContentKey, GradeRow, record, scored


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


def _canonical(value: object) -> object:
    """A value of a key as JSON can write it, the same every time: dataclasses as their fields,
    mappings as dicts (json sorts their keys), paths as text, the rest by repr."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(repr(v) for v in value)
    return str(value) if isinstance(value, Path) else repr(value)


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=_canonical)
                          .encode("utf-8", "surrogateescape")).hexdigest()


def request_digest(sub: Submission) -> str:
    """sha256 of how the submission asks to be built, beyond its bytes: the bytes of a C
    program in a file named .f90 are a Fortran submission (one that fails), and a notebook's
    line or the teacher's --language can choose another language for the same bytes. So: its
    language, the suffix the compiler is given (.F90 is preprocessed, .f90 not), the line its
    code starts on (the lines the checks name), the file of a folder that is graded, and every
    flag its %%idrrun line gives (the grader's policy keeps some: which, is idrrun's code)."""
    src = sub.source
    chosen = sub.chosen.relative_to(sub.path).as_posix() \
        if sub.chosen is not None and sub.chosen.is_relative_to(sub.path) else ""
    return _digest({"language": src.language if src is not None else None,
                    "suffix": src.suffix if src is not None else None,
                    "first_line": src.first_line if src is not None else None,
                    "chosen": chosen, "line": sub.options.given()})


def policy_digest(settings: Settings, probe: Probe, sandbox: str, timeout: float | None) -> str:
    """sha256 of what the grader forces on every row of a grading: the settings under its
    policy (the flags and limits of the configuration, the memory cap per program its --jobs
    gives, the compilers' commands and flags, the offload choice, the launcher, the profiler),
    its time limit, the sandbox level, and what the machine offers (the compilers found and
    their versions, the GPUs, the protections in force: a cap without cgroups is not enforced
    the same way). A row graded under another limit or compiler may have another verdict.

    Left out: where the cache and the course are (the course's files are the exercise's
    digest), which config files were read (what they said is in the settings), and the
    grading seed: the hidden sets it draws are kept with each row and compared (hidden_args),
    and a secret goes into no report."""
    protections = probe.protections.describe() if probe.protections is not None else ""
    return _digest({"values": settings.values, "offload": settings.offload,
                    "compilers": settings.compilers, "launcher": settings.launcher,
                    "profiler": settings.profiler, "family": probe.family,
                    "found": probe.compilers, "gpus": probe.gpus, "can_offload": probe.offload,
                    "targets": probe.offload_targets, "protections": protections,
                    "sandbox": sandbox, "timeout": timeout})


def content_key(sub: Submission, exercise: Exercise, policy: str) -> ContentKey:
    """The key of the row graded for `sub`: everything that decided it (ContentKey); `policy`
    is the grading's policy_digest."""
    return ContentKey(sub.digest, exercise_digest(exercise), code_id(), request_digest(sub),
                      policy)



def resume(path: Path, exercise: Exercise, subs: Sequence[Submission], key: bytes,
           policy: str) -> tuple[dict[str, GradeRow], list[str]]:
    """The rows an earlier grading with this report left that are kept, by the submission each
    now stands for (resumed), and what to say of them. A row is kept for a submission of the
    same content built the same way (language, flags), graded with the same exercise (spec,
    solutions, data), idrrun code, grader's policy (`policy`: policy_digest) and hidden
    argument sets (one class, one set of hidden cases): a changed file is graded again, an
    unchanged one is kept, whatever its name. A row that could not be graded is never kept
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
        now = content_key(sub, exercise, policy)
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
                    "language, flags, exercise, grader's settings and idrrun as when they were "
                    "graded; --fresh grades them again)")
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
    if not old.content.request or not old.content.policy:
        return "were graded before rows kept their language, flags and grader's settings (no key)"
    if old.content.request != now.request:
        return "graded as another language or with other flags of their own"
    if old.content.policy != now.policy:
        return ("graded with other grader settings (time limit, memory cap, compiler, "
                "sandbox, machine)")
    return "graded with other hidden argument sets (another seed or spec)"


def resumed(sub: Submission, already: Mapping[str, GradeRow] | None) -> GradeRow | None:
    """The row kept for `sub` (resume), when there is one: not for a submission that cannot be
    read now (alice.ipynb came beside the alice.c graded before), nor a row that said it could
    not be graded."""
    row = already.get(str(sub.path)) if already and sub.source is not None else None
    return row if row is not None and row.status != "error" else None



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
                       pattern=str(record.get("pattern") or ""), gpu_only=bool(record.get("gpu_only", False)), check=int(record["check"]),
                       credit=float(record["credit"]) if record.get("credit") is not None else None)


def _content_from(record: Any) -> ContentKey | None:
    """A row's content key as the state keeps it; None for rows of older states."""
    if not isinstance(record, dict):
        return None
    # (States written before keys held the language and the grader's settings have neither:
    # "", which no key made now matches.)
    return ContentKey(str(record["submission"]), str(record["exercise"]), str(record["idrrun"]),
                      str(record.get("request") or ""), str(record.get("policy") or ""))


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



def _mac(record: dict[str, Any], key: bytes) -> str:
    body = json.dumps({k: v for k, v in record.items() if k != "mac"}, sort_keys=True)
    return hmac.new(key, body.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


# Complexity: each reason an earlier row is not trusted (unreadable, another exercise, no MAC, an
# internal error), one guard each.
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
                run_times=tuple(float(t) for t in rec.get("run_times") or ()),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


def _text(record: Any, key: str) -> str:
    """A text field of a state record, "" when absent or null."""
    return str(record.get(key) or "")



def write_state(rows: Sequence[GradeRow], report: Path, key: bytes) -> None:
    """Every row in full beside the report (state_path), each signed with the grader's key,
    written atomically."""
    records = [record(r) for r in rows]
    for rec in records:
        rec["mac"] = _mac(rec, key)
    files.write_atomic(state_path(report), json.dumps(records, indent=1) + "\n")
