"""`idrrun grade NAME SUBMISSION...`: a class, graded in sandboxes, with its report."""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import toolchains
from ..checks import draw, visibility
from ..checks.score import points, possible
from ..checks.words import listing, plural
from ..cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..escape import terminal_line
from ..checks.specs import Exercise
from ..grading import board as board_mod
from ..grading import classroom, discover, grades, names, report, stats
from ..model import Lanes, Probe, Settings
from ..request import config, options, policy
from ..run import isolation, lanes as lanes_mod, rooms
from ..toolchains import registry
from .common import CONFIG_HELP, Parser, console as _console, jobs as _jobs, print_json, row_dict
from .common import add_seed_options, unread_config
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
    p.add_argument("--config", type=Path, metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--json", action="store_true",
                   help="print the summary (counts and every row with its checks) as JSON on stdout")
    add_seed_options(p, "the instructor's seed of the hidden argument sets drawn from the "
                        "spec's ranges ([args.draw])")
    return p


def main(tokens: Sequence[str]) -> int:
    """Parse, prepare the grading (grading/classroom.py decides what may be graded here and how),
    resume, grade, render."""
    args = _arguments(tokens)
    workdir = Path.cwd()
    settings = policy.grading_settings(
        config.load(workdir, project=args.config if args.config is not None else False),
        args.launcher, args.jobs)
    notes = unread_config(workdir, args.config)
    exercise, found = classroom.exercise_for_grading(args.exercise, settings, workdir)
    notes += found
    _check_language(args.language, exercise, args.board)
    level = classroom.sandbox_level(exercise, args.submissions, args.unsafe)
    probe = toolchains.probe(settings, args.compiler)
    console = _console()

    def say(text: str) -> None:
        if not args.json:  # stdout holds the JSON only
            console.print(terminal_line(names.decodable(text)), markup=False)

    say(isolation.sandbox_support().describe())
    for note in notes:
        say(note)
    exercise = _drawn(exercise, settings, args.seed_file, say)
    lanes, lane_notes = lanes_mod.for_machine(len(probe.gpus), settings)
    for note in lane_notes:
        say(note)
    say(_before_grading(exercise, probe, settings))
    rooms.scratch_root(settings)  # a scratch folder of its own: refused now, not per row
    for orphan in rooms.remove_orphans(settings):
        say(f"removed what a killed grading left: {orphan}")
    subs = discover.discover(args.submissions, exercise, args.language,
                             into=rooms.intake_room(settings))
    key = report.grading_key(settings)
    # Read before grading: a teacher's typo in it stops the command now, not after the class.
    adjustments = _adjustments(args.report)
    already: dict[str, report.GradeRow] = {}
    if args.report is not None and not args.fresh:
        already, said = report.resume(args.report, exercise, subs, key)
        for line in said:
            say(line)
    if args.report is not None and settings.launcher.kind == "srun":
        for note in classroom.adopt_session(args.report):
            say(note)
    rows = _grade(args, console, subs, exercise, settings, probe, level, already, key, lanes)
    if rows is None:
        return EXIT_INTERRUPTED
    rows, said = _adjusted(args.report, adjustments, rows)
    for line in said:
        say(line)
    summary = stats.class_stats(exercise.name, rows, {r.student: r.adjustment for r in rows
                                                      if r.adjustment is not None})
    _write(args, rows, exercise, key, summary)
    _board(args, rows, exercise, key, settings, probe, level, lanes, say)
    counts = {v: sum(r.status == v for r in rows) for v in ("pass", "fail", "incomplete", "error")}
    if args.json:
        _print_json(args, exercise, level, counts, notes, summary, rows)
    else:
        _render(console, args, rows, counts, summary)
    # Completed grading is a success whatever the students' verdicts (nbgrader, otter); rows the
    # grader could not judge at all are not.
    return EXIT_FAILED if counts["error"] else EXIT_OK


def _before_grading(exercise: Exercise, probe: Probe, settings: Settings) -> str:
    """What this machine cannot evaluate, said before a grading starts (a cluster's GPUs are
    on its nodes, not on this machine)."""
    return grades.before_grading(exercise, possible(exercise, len(exercise.hidden_args)),
                                 bool(probe.gpus) or settings.launcher.kind == "srun")


def _print_json(args: argparse.Namespace, exercise: Exercise, level: str, counts: dict[str, int],
                notes: Sequence[str], summary: stats.ClassStats,
                rows: Sequence[report.GradeRow]) -> None:
    print_json({"exercise": exercise.name, "sandbox": level, "counts": counts, "notes": list(notes),
                "report": str(args.report) if args.report is not None else None,
                "feedback": str(args.feedback) if args.feedback is not None else None,
                "stats": stats.as_dict(summary),
                "rows": [row_dict(r) for r in rows]})


def _check_language(language: str | None, exercise: Exercise, board: str | None) -> None:
    """The teacher's --language must be one of the exercise's (a student's file or line that
    chooses another is that student's fail: grading/classroom.py); --board needs a timed check
    (said before grading, not after the class)."""
    if board is not None:
        board_mod.require_timed(exercise)
    if language is not None and language not in exercise.sources:
        raise UsageError(f"--language {language}: exercise {exercise.name!r} has no {language} "
                         f"version (it has: {', '.join(exercise.sources)})")


def _drawn(exercise: Exercise, settings: Settings, seed_file: Path | None,
           say: Callable[[str], None]) -> Exercise:
    """The exercise with its hidden argument sets drawn with the grader's seed, when its spec
    has ranges ([args.draw]); the seed itself is never said."""
    if exercise.draw is None:
        return exercise
    seed, origin = report.grading_seed(settings, seed_file)
    drawn = draw.drawn(exercise, seed)
    say(f"hidden argument sets: {len(drawn.hidden_args)}, the spec's ranges drawn with the seed "
        f"{origin}")
    return drawn


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


def _grade(args: argparse.Namespace, console: Console, subs: list[discover.Submission],
           exercise: Exercise, settings: Settings, probe: Probe, level: str,
           already: dict[str, report.GradeRow], key: bytes,
           lanes: Lanes | None) -> list[report.GradeRow] | None:
    """The rows, the report written after each one; None when interrupted (said on stderr)."""
    def save(rows: list[report.GradeRow]) -> None:
        if args.report is not None:
            report.write_report(rows, args.report, key)

    todo = sum(report.resumed(s, already) is None for s in subs)
    try:
        with _signals_interrupt((signal.SIGTERM, signal.SIGHUP)):
            rows: list[report.GradeRow] = _with_progress(
                console, todo, f"grading {exercise.name}",
                lambda done: classroom.grade_all(subs, exercise, settings, probe, args.jobs,
                                                 args.timeout, done, already, save, sandbox=level,
                                                 lanes=lanes),
                quiet=args.json)
            return rows
    except KeyboardInterrupt:
        where = f"; the rows done are in {args.report}: run the same command to resume" \
            if args.report is not None else ""
        cancelled = "; its job steps were cancelled" if settings.launcher.kind == "srun" else ""
        print(f"idrrun grade: interrupted{cancelled}{where}", file=sys.stderr)
        return None


def _adjustments(path: Path | None) -> dict[str, grades.Adjustment]:
    """The teacher's adjustments beside the report ({} without a report)."""
    return grades.read_adjustments(grades.adjustments_path(path)) if path is not None else {}


def _adjusted(path: Path | None, found: dict[str, grades.Adjustment],
              rows: list[report.GradeRow]) -> tuple[list[report.GradeRow], list[str]]:
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


def _write(args: argparse.Namespace, rows: list[report.GradeRow], exercise: Exercise,
           key: bytes, summary: stats.ClassStats) -> None:
    if args.report is not None:
        classroom.session_path(args.report).unlink(missing_ok=True)
        report.write_report(rows, args.report, key)
        stats.write_stats(summary, stats.stats_path(args.report))
    if args.feedback is not None:
        report.write_feedback(rows, exercise, args.feedback, args.visibility or "spec")


def _board(args: argparse.Namespace, rows: Sequence[report.GradeRow], exercise: Exercise,
           key: bytes, settings: Settings, probe: Probe, level: str, lanes: Lanes | None,
           say: Callable[[str], None]) -> None:
    """With --board, the class's times board beside the report (and on the hub's page): the
    rows' times as graded, the solution's as the grading kept it."""
    if args.board is None:
        return
    solution = board_mod.solution_times(exercise, [r.language for r in rows if r.language],
                                        settings, probe, args.timeout, level, lanes)
    made = board_mod.board(rows, exercise, key, solution, args.board)
    for path in board_mod.write(made, args.report, args.board_page):
        say(f"times board: {path}")


def _render(console: Console, args: argparse.Namespace, rows: list[report.GradeRow],
            counts: dict[str, int], summary: stats.ClassStats) -> None:
    _summary(console, rows, counts)
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


def _placement(rows: Sequence[report.GradeRow]) -> str:
    """"placement: n1 4 runs, n2 3 runs …" when the rows ran as job steps."""
    def count(nodes: Sequence[str]) -> str:
        tally = collections.Counter(n for ns in nodes for n in ns.split(",") if n)
        return ", ".join(f"{node} {tally[node]}" for node in sorted(tally))

    runs, builds = count([r.node for r in rows]), count([r.build_node for r in rows])
    if not runs and not builds:
        return ""
    return f"placement: runs {runs or 'none'}; builds {builds or 'none (cached)'}"


def _summary(console: Console, rows: Sequence[report.GradeRow], counts: dict[str, int]) -> None:
    table = Table(title="verdicts")
    on_nodes = any(r.node or r.build_node for r in rows)
    in_lanes = any(r.lane for r in rows)
    extra = (("node",) if on_nodes else ()) + (("lane",) if in_lanes else ())
    for col in ("student", "language", "verdict", "score", "reasons", "build s", "run s", *extra):
        table.add_column(col)
    for r in rows:
        style = {"pass": "green", "fail": "red", "incomplete": "yellow", "error": "magenta"}[r.status]
        # Students' text is never markup: Text cells are printed as they are, neutralised.
        table.add_row(Text(terminal_line(names.decodable(r.student))), r.language, Text(r.status, style=style),
                      report.score_text(r.score, r.adjustment) if r.score is not None else "",
                      Text(terminal_line(names.decodable(r.reasons))), f"{r.build_seconds:.2f}", f"{r.run_seconds:.2f}",
                      *((r.node,) if on_nodes else ()), *((r.lane,) if in_lanes else ()))
    console.print(table)
    here = sum(r.passed_here for r in rows)
    console.print(f"{counts['pass']} passed, " +
                  (f"{here} passed here (but for the checks that need a GPU), " if here else "") +
                  f"{counts['fail']} failed, {counts['incomplete'] - here} incomplete (could not be "
                  f"judged), {plural(counts['error'], 'error')}", markup=False)


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
