"""The class's times board (`idrrun grade --board`): for an exercise where speed is the lesson,
each student's run time beside the solution's, fastest first, as the grading measured it.

No student's program is run again for it: her time is the median of the runs the grading
made of her build (`GradeRow.run_times`: the graded run and her timed checks' repeats, each
alone on its GPU, in its lane: run/lanes.py; checks/measure.py repeats them until the figures
settle), beside her timed checks' figures ("59 % (median of 3 runs: 57–61 %)", "your run
1.04× the solution's"). The solution's time is the median of its runs, made as a timed
figure's are (measure.REPEAT: until the last 3 times settle within 10 %, 7 at most): the one
the grading keeps beside its output, and more of the same build in the same lane. Every
exercise graded on a GPU has a board (most of the course's have a timed `speed` check); one
with no timed check shared its GPUs, and its board says so; on a host, only a timed exercise
has one.

Names as the teacher chooses: pseudonyms by default, each made from the student's name with
the grader's key (state.grading_key: in its private cache, never shown), so that a student
keeps hers on every board of an exercise and nobody without the key can tell whose it is;
real names only when asked. Students' names are data: escaped for Markdown and HTML.

    board(rows, exercise, key, solution, names) -> Board
    markdown(board), page(board)                  its renderings
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from .. import escape, files
from ..checks import specs
from ..checks.specs import Exercise
from ..errors import IdrrunError, UsageError
from ..model import CheckResult, FailureKind, Language
from ..request import resolve
from ..request import source as source_mod
from ..request.options import Options
from ..checking import solution_times as solution_runs
from ..checks.measure import REPEAT, Repeat
from ..run import boundary, rooms
from . import grader, names as names_mod
from .rows import GradeRow, stamp
from .session import Session

Naming = Literal["pseudonyms", "names"]
NAMINGS: tuple[Naming, ...] = ("pseudonyms", "names")

# A pseudonym: two words and hex digits of the keyed digest (16 x 16 x 4096: two students of
# a class share one with odds below 1 in 1000 for 30; then both get more digits).
_ADJECTIVES = ("amber", "brisk", "calm", "deft", "eager", "fleet", "gentle", "hardy", "keen",
               "lucid", "nimble", "quiet", "rapid", "steady", "swift", "vivid")
_ANIMALS = ("badger", "crane", "dolphin", "falcon", "gecko", "heron", "ibex", "jaguar", "koala",
            "lynx", "marten", "otter", "puffin", "raven", "stoat", "wren")
_DIGITS = 3

NO_TIMED_CHECK = ("--board: exercise {name!r} has no timed check and this machine no GPU: its "
                  "runs would not be measured alone on a GPU, so their times would not compare "
                  "(specs' timed kinds: {kinds})")


@dataclass(frozen=True)
class BoardRow:
    """One student's run on the board."""

    name: str  # her pseudonym, or her name as reports write it
    language: str
    verdict: str  # the row's
    runs: tuple[float, ...]  # her build's runs' times (run_times), else the graded run's alone
    lane: str  # where it ran (run/lanes.py): "GPU 0 alone, CPUs 14-15"; "" without lanes
    figures: tuple[tuple[str, str], ...]  # each timed check's label and measured figure
    # No check but a timed one failed: a fast program with a wrong answer is shown, not ranked.
    ranked: bool = True

    @property
    def seconds(self) -> float:
        """Her time on the board: the median of her runs."""
        return statistics.median(self.runs)


@dataclass(frozen=True)
class Board:
    exercise: str
    rows: tuple[BoardRow, ...]  # ranked ones fastest first, then the unranked, fastest first
    # each language's solution times (their median is its time; (): unknown)
    solution: tuple[tuple[str, tuple[float, ...]], ...]
    naming: Naming
    not_run: int  # rows with no finished run: an error, a failed build, a timeout, a crash

    @property
    def alone(self) -> bool:
        """Every run held its GPU alone (lanes): the times compare."""
        return bool(self.rows) and all("alone" in r.lane for r in self.rows)

    def solution_time(self, language: str) -> float | None:
        times = dict(self.solution).get(language)
        return statistics.median(times) if times else None


def require_timed(exercise: Exercise, on_gpu: bool = False) -> None:
    """UsageError unless the exercise has a timed check (its runs measured alone) or is graded
    on a GPU (every exercise with a GPU run has a board; the board says when its runs shared
    their GPU)."""
    if not exercise.timed and not on_gpu:
        raise UsageError(NO_TIMED_CHECK.format(name=exercise.name,
                                               kinds=", ".join(specs.TIMED_KINDS)))


def pseudonyms(students: Sequence[str], exercise: str, key: bytes,
               digits: int = _DIGITS) -> dict[str, str]:
    """Each student's pseudonym on this exercise's board: from her name and the grader's key
    (HMAC-SHA256), the same on every board of the exercise, no two alike."""
    digests = {s: hmac.new(key, b"idrrun board\0" + exercise.encode("utf-8", "surrogateescape") +
                           b"\0" + s.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()
               for s in students}

    def named(digest: str, digits: int) -> str:
        return " ".join((_ADJECTIVES[int(digest[0], 16)], _ANIMALS[int(digest[1], 16)],
                         digest[2:2 + digits])).strip()

    out = {s: named(d, digits) for s, d in digests.items()}
    shared = {n for n, count in collections.Counter(out.values()).items() if count > 1}
    return {s: named(digests[s], 16) if n in shared else n for s, n in out.items()}


def _ran(row: GradeRow) -> bool:
    """Her program built and ended by itself: its time is a run time."""
    return row.status != "error" and row.run_seconds > 0 and \
        (row.failure is None or row.failure is FailureKind.CHECK)


def board(rows: Sequence[GradeRow], exercise: Exercise, key: bytes,
          solution: Mapping[str, Sequence[float]], naming: Naming = "pseudonyms") -> Board:
    """The board of a graded class's rows (pure)."""
    ran = [r for r in rows if _ran(r)]
    shown = pseudonyms([r.student for r in ran], exercise.name, key) if naming == "pseudonyms" \
        else {r.student: names_mod.student_name(r.student) for r in ran}
    kinds = set(specs.TIMED_KINDS)

    def timed(c: CheckResult) -> bool:  # by the [[check]] it names (a public result has no kind)
        spec = exercise.check_at(c.check)
        return spec is not None and spec.kind in kinds

    entries = [BoardRow(shown[r.student], r.language, r.status, r.run_times or (r.run_seconds,),
                        r.lane, tuple((c.name, c.got) for c in r.checks
                                      if timed(c) and c.hidden == 0 and c.got),
                        not any(c.status == "fail" and not timed(c) for c in r.checks))
               for r in ran]
    entries.sort(key=lambda e: (not e.ranked, e.seconds, e.name))
    return Board(exercise.name, tuple(entries),
                 tuple(sorted((lang, tuple(times)) for lang, times in solution.items())), naming,
                 len(rows) - len(ran))


def solution_times(session: Session, exercise: Exercise, languages: Sequence[str],
                   how: Repeat = REPEAT) -> dict[str, tuple[float, ...]]:
    """The solution's times in each language, run until they settle as a timed figure does
    (checking.solution_times; asked as a row's run is: the public arguments, the same policy
    and lanes); () where there is none (a students' course) or it failed."""
    out: dict[str, tuple[float, ...]] = {}
    settings, probe = session.settings, session.probe
    for language in get_args(Language):
        pair = exercise.sources.get(language)
        if language not in languages or pair is None:
            continue
        out[language] = ()
        if pair.solution is None:
            continue
        try:
            src = source_mod.from_file(pair.solution, language, str(pair.solution))
            request, toolchain = resolve.resolve(
                Options(), src, pair.solution.parent, settings, probe, exercise,
                grader.policy(session, exercise, rooms.scratch_root(settings)))
            out[language] = solution_runs(
                session.job(request, toolchain).with_args(tuple(request.program_args)),
                exercise, how)
        except IdrrunError:
            pass  # the board says it is not known
    return out


# --- renderings: no decisions below -------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f} s"


def _median_of(times: Sequence[float]) -> str:
    """"1.021 s (median of 3 runs: 1.010–1.050 s)"; one run: its time; none: "?"."""
    if len(times) < 2:
        return _seconds(times[0] if times else None)
    return (f"{statistics.median(times):.3f} s (median of {len(times)} runs: "
            f"{min(times):.3f}–{max(times):.3f} s)")


def _ratio(row: BoardRow, b: Board) -> str:
    solution = b.solution_time(row.language)
    return f"{row.seconds / solution:.2f}x" if solution else "?"


def _rank(b: Board) -> list[str]:
    ranks, n = [], 0
    for r in b.rows:
        n += r.ranked
        ranks.append(str(n) if r.ranked else "—")
    return ranks


def _labels(b: Board) -> list[str]:
    return list(dict.fromkeys(label for r in b.rows for label, _ in r.figures))


def _notes(b: Board) -> list[str]:
    where = "each run alone on its GPU (the exclusive lane of a timed check)" if b.alone else \
        "not every run held a GPU alone (no lanes here, or a shared one): the times may not compare"
    solution = ", ".join(f"{lang} {_median_of(times)}" for lang, times in b.solution) or "?"
    said = [f"Each time is the median of the runs the grading made of that build (the graded run "
            f"and its timed checks' repeats), {where}; the solution: {solution}.",
            "Names: pseudonyms (each student's own, the same on every board of this exercise)."
            if b.naming == "pseudonyms" else "Names: the students' names."]
    if any(not r.ranked for r in b.rows):
        said.append("A run that failed a check (other than a timed one) is shown after the "
                    "others, not ranked.")
    if b.not_run:
        said.append(f"Not on the board: {b.not_run} submission(s) with no finished run.")
    return said


def _cells(b: Board) -> list[list[str]]:
    labels, lanes = _labels(b), any(r.lane for r in b.rows)
    return [[rank, r.name, r.language, _median_of(r.runs), _ratio(r, b), r.verdict,
             *((r.lane,) if lanes else ()), *(dict(r.figures).get(label, "") for label in labels)]
            for rank, r in zip(_rank(b), b.rows)]


def _header(b: Board) -> list[str]:
    return ["rank", "student", "language", "time", "x the solution", "verdict",
            *(("lane",) if any(r.lane for r in b.rows) else ()), *_labels(b)]


def markdown(b: Board) -> str:
    """The board as a section of the grading report (REPORT.board.md)."""
    header = _header(b)
    lines = [f"# Times board: {escape.markdown_text(b.exercise)}", "",
             *[escape.markdown_text(n) for n in _notes(b)], "",
             "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(escape.markdown_cell(names_mod.decodable(c)) for c in row) + " |"
              for row in _cells(b)]
    return "\n".join(lines) + "\n"


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left}}tr.unranked{{color:#777}}</style>
</head><body>
<nav><a href="../home">the hub's home</a> &middot; <a href="./">every board</a></nav>
<h1>{title}</h1>
{notes}
<table>
<thead><tr>{header}</tr></thead>
<tbody>
{rows}
</tbody></table>
</body></html>
"""


def page(b: Board) -> str:
    """The board as a page of its own (REPORT.board.html; the hub serves a copy: hub/)."""
    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(f"<{tag}>{escape.html_text(names_mod.decodable(c))}</{tag}>" for c in row)

    rows = [f'<tr class="{"ranked" if r.ranked else "unranked"}">{cells("td", c)}</tr>'
            for r, c in zip(b.rows, _cells(b))]
    return PAGE.format(title=escape.html_text(f"Times board: {b.exercise}"),
                       notes="\n".join(f"<p>{escape.html_text(n)}</p>" for n in _notes(b)),
                       header=cells("th", _header(b)), rows="\n".join(rows))


def board_paths(report: Path) -> tuple[Path, Path]:
    """REPORT.board.md and REPORT.board.html, beside the report (as its statistics are)."""
    return report.with_suffix(".board.md"), report.with_suffix(".board.html")


INDEX = "index.html"


def index_page(boards: Sequence[tuple[str, float]]) -> str:
    """The page that lists the published boards: (exercise, when its page was written)."""
    rows = [f'<tr><td><a href="{escape.html_text(name)}.html">{escape.html_text(name)}</a></td>'
            f"<td>{escape.html_text(stamp(when))}</td></tr>" for name, when in sorted(boards)]
    return PAGE.format(title="Times boards",
                       notes="<p>One board per exercise whose speed is the lesson.</p>",
                       header="<th>exercise</th><th>written (UTC)</th>", rows="\n".join(rows))


def _bytes(text: str) -> bytes:
    """A page as files.write_atomic writes text (UTF-8, a name's undecodable bytes kept)."""
    return text.encode("utf-8", "surrogateescape")


def _published(folder: int) -> list[tuple[str, float]]:
    """The boards in the folder open as `folder`: its regular NAME.html files but the index
    (never a link)."""
    found = []
    for entry in os.scandir(folder):
        if entry.name.endswith(".html") and entry.name != INDEX and \
                entry.is_file(follow_symlinks=False):
            found.append((entry.name[:-len(".html")], entry.stat(follow_symlinks=False).st_mtime))
    return found


def _open_boards(published: Path, exercise: str) -> int:
    """A descriptor of the boards' folder (made when missing), refused with a UsageError unless
    it is the grader's own, writable by nobody else, on a way nobody else can change
    (boundary.open_published): its index lists the pages it finds there, and the hub serves
    them as the teacher's (STYLE 16: a name in a folder others can write is theirs)."""
    if f"{exercise}.html" == INDEX:
        raise UsageError(f"--board-page: an exercise named {exercise!r} would overwrite the "
                         f"boards' {INDEX}: publish it in a folder of its own")
    try:
        return boundary.open_published(published)
    except boundary.NotOwnFolder as exc:
        raise UsageError(f"--board-page: {exc.strerror}: the boards' folder must be yours, "
                         "writable by nobody else, in folders nobody else can change (its "
                         "index lists every page found there)") from None


def publishable(published: Path, exercise: str) -> None:
    """_open_boards's refusal, said before grading (the folder is opened again to write)."""
    os.close(_open_boards(published, exercise))


def write(b: Board, report: Path, published: Path | None = None) -> list[Path]:
    """The board beside the report, and its page as PUBLISHED/EXERCISE.html (the folder the
    hub serves: hub/jupyterhub_config.py) when given, with PUBLISHED/index.html listing every
    board there, both written through the folder's descriptor; the paths written."""
    folder = _open_boards(published, b.exercise) if published is not None else None
    try:
        md, html = board_paths(report)
        files.write_atomic(md, markdown(b))
        files.write_atomic(html, page(b))
        written = [md, html]
        if published is not None and folder is not None:
            # The hub reads them (a page holds a real name only when the teacher asked for names).
            files.write_atomic_at(folder, f"{b.exercise}.html", _bytes(page(b)), mode=0o644)
            files.write_atomic_at(folder, INDEX, _bytes(index_page(_published(folder))), mode=0o644)
            written += [published / f"{b.exercise}.html", published / INDEX]
        return written
    finally:
        if folder is not None:
            os.close(folder)
