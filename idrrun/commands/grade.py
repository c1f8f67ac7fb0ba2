"""`idrrun grade NAME SUBMISSION...`: a class, graded in sandboxes, with its report."""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..checks import visibility
from ..checks.score import points, possible
from ..checks.words import listing, plural
from ..cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..escape import terminal_line
from ..checks.specs import Exercise
from ..grading import board as board_mod
from ..grading import feedback, grader, grades, names, report, session, state, stats
from ..grading import rows as rows_mod
from ..grading.rows import late_by
from ..model import Probe, Settings
from ..request import options
from ..run import lanes
from ..run.lanes import LaneUse
from ..toolchains import registry
from .common import CONFIG_HELP, Parser, console as _console, jobs as _jobs, print_json, row_dict
from .common import add_seed_options, deadline
from .common import with_progress as _with_progress

def parser() -> Parser:
    p = Parser(prog="idrrun grade", description="Grade submissions of one exercise, each in its "
                                                "own sandbox; the report says every verdict. "
                                                "Submission names that start with '-' go after "
                                                "'--': idrrun grade NAME [options] -- SUBMISSION...",
               epilog="Exit codes (as nbgrader autograde and otter grade): 0 every submission was "
                      "graded, whatever its verdict; 1 some could not be graded (an 'error' row: "
                      "unreadable, refused); 2 usage or configuration error; 130 interrupted.")
    p.add_argument("exercise", metavar="NAME", help="the exercise (its spec NAME.toml)")
    p.add_argument("submissions", nargs="+", type=Path, metavar="SUBMISSION",
                   help="source files, notebooks, or one folder per student")
    p.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                   help="submissions graded at once (default 1)")
    p.add_argument("--language", "-l", choices=("c", "c++", "fortran", "cuda"),
                   help="the submissions' language (default: from each file)")
    p.add_argument("--report", type=Path, metavar="FILE.csv|FILE.json",
                   help="write the verdicts there after every row; the same command resumes. "
                        "Beside it: the class's statistics (FILE.stats.csv|json), and the "
                        "teacher's adjustments it reads and never writes (FILE.adjustments.csv: "
                        "student,points,reason)")
    p.add_argument("--feedback", type=Path, metavar="DIR", help="write one Markdown file per student")
    p.add_argument("--visibility", choices=[o for o in visibility.OVERRIDES if o != "spec"],
                   help="what the feedback files show of the checks, instead of what each spec "
                        "says (visibility): summary (every check's result only, e.g. before the "
                        "deadline), shown (every check, hidden ones too), full (also the hidden "
                        "cases' arguments and values, after the deadline). The report always "
                        "has everything; run the same command again to rewrite the feedback "
                        "(the rows are resumed, nothing is run)")
    p.add_argument("--timeout", type=options.seconds, metavar="S",
                   help="seconds each program may run (default: the exercise's)")
    p.add_argument("-c", "--compiler", choices=registry.names(),
                   help="compiler family (default: from config, else detected)")
    p.add_argument("--fresh", action="store_true",
                   help="grade everything again, even rows already in the report")
    p.add_argument("--launcher", choices=("none", "mpirun", "srun"),
                   help="run each submission through this launcher (srun: its build and its run "
                        "are SLURM job steps, placed by SLURM; -j N steps at once)")
    p.add_argument("--unsafe", action="store_true",
                   help="grade even where no sandbox can be made (the report says so): programs "
                        "then see the grader's files and processes")
    p.add_argument("--board", nargs="?", const="pseudonyms", choices=board_mod.NAMINGS,
                   help="the class's times board, for an exercise with a timed check (its runs "
                        "alone on a GPU): each run's time beside the solution's, fastest first, "
                        "beside the report (FILE.board.md|html); names as pseudonyms (the "
                        "default: the grader's key makes them, the same on every board of the "
                        "exercise), or the students' names with --board names")
    p.add_argument("--board-page", type=Path, metavar="DIR",
                   help="also write the board's page as DIR/NAME.html, readable by all (the "
                        "folder the hub serves at /hub/boards/NAME: IDRRUN_HUB_BOARDS)")
    p.add_argument("--deadline", type=deadline, metavar="ISO-TIME",
                   help="submissions handed in after it are late: the report says when each was "
                        "submitted and how late (columns submitted, late), the gradebook too; "
                        "grading what `idrrun classroom collect` collected (OUT/submissions/*) "
                        "reads the times and the deadline it recorded, and this replaces its "
                        "deadline. A late submission's grade is not changed")
    p.add_argument("--config", type=Path, metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--json", action="store_true",
                   help="print the summary (counts and every row with its checks) as JSON on stdout")
    add_seed_options(p, "the instructor's seed of the hidden argument sets drawn from the "
                        "spec's ranges ([args.draw])")
    return p


def main(tokens: Sequence[str]) -> int:
    """Parse, open the grading's session (grading/session.py decides what may be graded here
    and how, and what an earlier grading left), grade, render."""
    args = _arguments(tokens)
    grading = session.open_session(_opening(args))
    [exercise] = grading.exercises
    if args.board is not None:  # said before grading, not after the class
        board_mod.require_timed(exercise, bool(grading.probe.gpus))
        if args.board_page is not None:
            board_mod.publishable(args.board_page, exercise.name)
    console = _console()

    def say(text: str) -> None:
        if not args.json:  # stdout holds the JSON only
            console.print(terminal_line(names.decodable(text)), markup=False)

    for note in grading.notes:
        say(note)
    say(_before_grading(exercise, grading.probe, grading.settings))
    # Read before grading: a teacher's typo in it stops the command now, not after the class.
    adjustments = _adjustments(args.report)
    before, started = lanes.held_alone(grading.lanes), time.monotonic()
    rows = _grade(args, console, grading)
    if rows is None:
        return EXIT_INTERRUPTED
    # What bounds the grading's time on a GPU machine: its timed runs, one after the other.
    use = lanes.use_since(grading.lanes, before, started)
    rows, said = _adjusted(args.report, adjustments, rows)
    for line in said:
        say(line)
    summary = stats.class_stats(exercise.name, rows, {r.student: r.adjustment for r in rows
                                                      if r.adjustment is not None})
    _write(args, rows, exercise, grading.key, summary)
    _board(args, rows, grading, say)
    counts = {v: sum(r.status == v for r in rows) for v in ("pass", "fail", "incomplete", "error")}
    if args.json:
        _print_json(args, exercise, grading.sandbox, counts, grading.notes, summary, rows, use)
    else:
        _render(console, args, rows, counts, summary, use)
    # Completed grading is a success whatever the students' verdicts (nbgrader, otter); rows the
    # grader could not judge at all are not.
    return EXIT_FAILED if counts["error"] else EXIT_OK


def _opening(args: argparse.Namespace) -> session.Opening:
    return session.Opening(
        Path.cwd(), (args.exercise,), config=args.config, compiler=args.compiler, jobs=args.jobs,
        launcher=args.launcher, timeout=args.timeout, unsafe=args.unsafe,
        seed_file=args.seed_file, submissions=tuple(args.submissions), language=args.language,
        report=args.report, fresh=args.fresh, deadline=args.deadline)


def _before_grading(exercise: Exercise, probe: Probe, settings: Settings) -> str:
    """What this machine cannot evaluate, said before a grading starts (a cluster's GPUs are
    on its nodes, not on this machine)."""
    return grades.before_grading(exercise, possible(exercise, len(exercise.hidden_args)),
                                 bool(probe.gpus) or settings.launcher.kind == "srun")


def _print_json(args: argparse.Namespace, exercise: Exercise, level: str, counts: dict[str, int],
                notes: Sequence[str], summary: stats.ClassStats,
                rows: Sequence[rows_mod.GradeRow], use: LaneUse | None = None) -> None:
    print_json({"exercise": exercise.name, "sandbox": level, "counts": counts, "notes": list(notes),
                "lanes": use.as_dict() if use is not None else None,
                "report": str(args.report) if args.report is not None else None,
                "feedback": str(args.feedback) if args.feedback is not None else None,
                "stats": stats.as_dict(summary),
                "rows": [row_dict(r) for r in rows]})


def _arguments(tokens: Sequence[str]) -> argparse.Namespace:
    try:
        args = parser().parse_tokens(tokens)
    except UsageError as exc:
        raise UsageError(str(exc) + options.dash_hint(tokens, "idrrun grade NAME [options]")) from None
    if args.report is not None and args.report.suffix.lower() not in (".csv", ".json"):
        raise UsageError(f"--report {args.report}: use a .csv or .json file name")
    if args.board_page is not None and args.board is None:
        args.board = "pseudonyms"
    if args.board is not None and args.report is None:
        raise UsageError("--board: the board is written beside the report: give --report FILE")
    return args


def _grade(args: argparse.Namespace, console: Console,
           grading: session.Session) -> list[rows_mod.GradeRow] | None:
    """The rows, the report written after each one; None when interrupted (said on stderr)."""
    def save(rows: list[rows_mod.GradeRow]) -> None:
        if args.report is not None:
            report.write_report(rows, args.report, grading.key)

    [exercise] = grading.exercises
    todo = sum(state.resumed(s, grading.resumed) is None for s in grading.submissions)
    try:
        with _signals_interrupt((signal.SIGTERM, signal.SIGHUP)):
            rows: list[rows_mod.GradeRow] = _with_progress(
                console, todo, f"grading {exercise.name}",
                lambda done: grader.grade_all(grading, exercise, grading.submissions, done,
                                                 save),
                quiet=args.json)
            return rows
    except KeyboardInterrupt:
        where = f"; the rows done are in {args.report}: run the same command to resume" \
            if args.report is not None else ""
        cancelled = "; its job steps were cancelled" \
            if grading.settings.launcher.kind == "srun" else ""
        print(f"idrrun grade: interrupted{cancelled}{where}", file=sys.stderr)
        return None


def _adjustments(path: Path | None) -> dict[str, grades.Adjustment]:
    """The teacher's adjustments beside the report ({} without a report)."""
    return grades.read_adjustments(grades.adjustments_path(path)) if path is not None else {}


def _adjusted(path: Path | None, found: dict[str, grades.Adjustment],
              rows: list[rows_mod.GradeRow]) -> tuple[list[rows_mod.GradeRow], list[str]]:
    """The rows with the teacher's adjustments (the file beside the report, which no grading
    writes: it outlives every regrading), and what to say of them."""
    if path is None:
        return rows, []
    where = grades.adjustments_path(path)
    said = grades.unknown_students(found, [r.student for r in rows if r.score is not None], where)
    rows = [dataclasses.replace(r, adjustment=found.get(r.student) if r.score is not None else None)
            for r in rows]
    adjusted = sum(r.adjustment is not None for r in rows)
    if adjusted:
        said.append(f"adjustments: {plural(adjusted, 'student')} adjusted, from {where}")
    return rows, said


def _write(args: argparse.Namespace, rows: list[rows_mod.GradeRow], exercise: Exercise,
           key: bytes, summary: stats.ClassStats) -> None:
    if args.report is not None:
        session.cluster_steps_path(args.report).unlink(missing_ok=True)
        report.write_report(rows, args.report, key)
        stats.write_stats(summary, stats.stats_path(args.report))
    if args.feedback is not None:
        # Her name on the exercise's times board, where it can have one: she finds herself there.
        named = board_mod.pseudonyms([r.student for r in rows], exercise.name, key) \
            if exercise.timed else None
        feedback.write_feedback(rows, exercise, args.feedback, args.visibility or "spec", named)


def _board(args: argparse.Namespace, rows: Sequence[rows_mod.GradeRow], grading: session.Session,
           say: Callable[[str], None]) -> None:
    """With --board, the class's times board beside the report (and on the hub's page): the
    rows' times as graded, the solution's as the grading kept it."""
    if args.board is None:
        return
    [exercise] = grading.exercises
    solution = board_mod.solution_times(grading, exercise,
                                        [r.language for r in rows if r.language])
    made = board_mod.board(rows, exercise, grading.key, solution, args.board)
    for path in board_mod.write(made, args.report, args.board_page):
        say(f"times board: {path}")

def _render(console: Console, args: argparse.Namespace, rows: list[rows_mod.GradeRow],
            counts: dict[str, int], summary: stats.ClassStats, use: LaneUse | None = None) -> None:
    _summary(console, rows, counts, use)
    _class(console, summary)
    for line in (_placement(rows),
                 f"report: {args.report}" if args.report is not None else "",
                 f"class statistics: {stats.stats_path(args.report)}" if args.report is not None else "",
                 f"adjustments: {grades.adjustments_path(args.report)} (student,points,reason; "
                 "kept by every regrading)" if args.report is not None else "",
                 f"feedback: {args.feedback}/" if args.feedback is not None else ""):
        if line:
            console.print(neutralise(names.decodable(line)), markup=False)


@contextlib.contextmanager
def _signals_interrupt(signals: Sequence[signal.Signals]) -> Iterator[None]:
    """These signals interrupt like Ctrl-C (a batch system or `kill` stops a grader with
    SIGTERM): the grader then cancels its job steps and keeps its report, instead of dying with
    its steps still running on the cluster."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _placement(rows: Sequence[rows_mod.GradeRow]) -> str:
    """"placement: n1 4 runs, n2 3 runs …" when the rows ran as job steps."""
    def count(nodes: Sequence[str]) -> str:
        tally = collections.Counter(n for ns in nodes for n in ns.split(",") if n)
        return ", ".join(f"{node} {tally[node]}" for node in sorted(tally))

    runs, builds = count([r.node for r in rows]), count([r.build_node for r in rows])
    if not runs and not builds:
        return ""
    return f"placement: runs {runs or 'none'}; builds {builds or 'none (cached)'}"


def _summary(console: Console, rows: Sequence[rows_mod.GradeRow], counts: dict[str, int],
             use: LaneUse | None = None) -> None:
    table = Table(title="verdicts")
    on_nodes = any(r.node or r.build_node for r in rows)
    in_lanes = any(r.lane for r in rows)
    some_late = any(r.late for r in rows)
    extra = (("node",) if on_nodes else ()) + (("lane",) if in_lanes else ()) + \
        (("late",) if some_late else ())
    for col in ("student", "language", "verdict", "score", "reasons", "build s", "run s", *extra):
        table.add_column(col)
    for r in rows:
        style = {"pass": "green", "fail": "red", "incomplete": "yellow", "error": "magenta"}[r.status]
        # Students' text is never markup: Text cells are printed as they are, neutralised.
        table.add_row(Text(terminal_line(names.decodable(r.student))), r.language, Text(r.status, style=style),
                      report.score_text(r.score, r.adjustment) if r.score is not None else "",
                      Text(terminal_line(names.decodable(r.reasons))), f"{r.build_seconds:.2f}", f"{r.run_seconds:.2f}",
                      *((r.node,) if on_nodes else ()), *((r.lane,) if in_lanes else ()),
                      *((late_by(r.late),) if some_late else ()))
    console.print(table)
    here = sum(r.passed_here for r in rows)
    console.print(f"{counts['pass']} passed, " +
                  (f"{here} passed here (but for the checks that need a GPU), " if here else "") +
                  f"{counts['fail']} failed, {counts['incomplete'] - here} incomplete (could not be "
                  f"judged), {plural(counts['error'], 'error')}" +
                  (f"; {use.describe()}" if use is not None else ""), markup=False)


def _class(console: Console, summary: stats.ClassStats) -> None:
    """The class's statistics: what the grades are out of, their spread, then each check."""
    if not summary.grades:
        return
    spread = summary.spread()
    out_of = f"grades out of {points(summary.out_of)}"
    if summary.not_evaluated_here > 0:
        left = listing([c.label for c in summary.unevaluated_checks()])
        out_of += (f", the points evaluated here ({plural(summary.not_evaluated_here, 'point')} "
                   f"of {points(summary.possible)} not evaluated here" +
                   (f": {left})" if left else ")"))
    console.print(f"class: {plural(len(summary.grades), 'student')} graded, {out_of}", markup=False)
    console.print("grades: " + ", ".join(f"{k} {points(v or 0.0)}" for k, v in spread.items()) +
                  (f" ({plural(summary.adjusted, 'adjustment')} included)" if summary.adjusted else ""),
                  markup=False)
    table = Table(title="checks")
    for col in ("check", "points", "passed", "failed", "not evaluated"):
        table.add_column(col, justify="left" if col == "check" else "right")
    for c in summary.checks:
        table.add_row(Text(c.label), points(c.worth), str(c.passed), str(c.failed),
                      str(c.not_evaluated))
    console.print(table)
