"""`idrrun grade NAME SUBMISSION...`: a class, graded in sandboxes, with its report."""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import toolchains
from ..checks import draw, specs
from ..cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..grading import classroom, rooms
from ..model import LauncherConfig
from ..request import config, options
from ..run import isolation
from ..toolchains import registry
from .common import CONFIG_HELP, Parser, console as _console, jobs as _jobs, print_json, row_dict
from .common import unread_config
from .common import with_progress as _with_progress

def grading_memory(jobs: int) -> int:
    """The memory cap of each graded program when [limits] memory says none: notebooks run
    without one (model.Limits), but a class of submissions runs unattended, -j at a time, and
    together they may take 3/4 of the machine, the rest left to the grader and the system."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(256 << 20, total * 3 // 4 // max(1, jobs))


def parser() -> argparse.ArgumentParser:
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
                   help="write the verdicts there after every row; the same command resumes")
    p.add_argument("--feedback", type=Path, metavar="DIR", help="write one Markdown file per student")
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
    p.add_argument("--config", type=Path, metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--json", action="store_true",
                   help="print the summary (counts and every row with its checks) as JSON on stdout")
    p.add_argument("--seed", metavar="TEXT",
                   help="the instructor's seed of the hidden argument sets drawn from the spec's "
                        "ranges ([args.draw]); default: [grading] seed in the config, "
                        "IDRRUN_GRADING_SEED, else one made once and kept in the grader's cache. "
                        "The report holds the values drawn, never the seed")
    return p


def main(tokens: Sequence[str]) -> int:
    try:
        args = parser().parse_args(list(tokens))
    except UsageError as exc:
        raise UsageError(str(exc) + options.dash_hint(tokens, "idrrun grade NAME [options]")) from None
    if args.report is not None and args.report.suffix.lower() not in (".csv", ".json"):
        raise UsageError(f"--report {args.report}: use a .csv or .json file name")
    workdir = Path.cwd()
    settings = config.load(workdir, project=args.config if args.config is not None else False)
    notes = unread_config(workdir, args.config)
    if args.launcher is not None:
        settings = dataclasses.replace(
            settings, launcher=dataclasses.replace(settings.launcher, kind=args.launcher,
                                                   command="" if args.launcher != settings.launcher.kind
                                                   else settings.launcher.command))
    if settings.launcher.kind == "srun":
        settings = dataclasses.replace(settings, launcher=grading_launcher(settings.launcher))
    if "memory" not in settings.values:
        settings = dataclasses.replace(settings, values={**settings.values,
                                                         "memory": grading_memory(args.jobs)})
    # The exercises come from the configuration or idrrun's own course, never from the working
    # folder, which may be the submissions' (a spec handed in would decide the grading).
    exercise = specs.find(args.exercise, settings, None)
    walked = specs.locate_examples(settings, workdir)
    if walked is not None and walked.origin == "found":
        notes.append(f"{walked.path} was not read (a grader reads no course from its working "
                     f"folder): give it with IDRRUN_EXAMPLES or examples_dir in --config")
    if exercise.students:
        raise UsageError(f"{exercise.path} is from a students' copy of the course (no solutions, "
                         "no grading-only checks): grade with the teacher's course (examples_dir "
                         "or IDRRUN_EXAMPLES)")
    support = isolation.sandbox_support()
    if support.level == "none" and not args.unsafe:
        raise UsageError(f"cannot grade safely here: {support.why}. Submissions would run as "
                         "you, seeing your files: install bubblewrap (or run as root), or give "
                         "--unsafe to grade anyway (the report says so)")
    if support.level == "uid" and not args.unsafe:
        open_to_all = classroom.exposed(exercise, args.submissions)
        if open_to_all:
            shown = ", ".join(str(p) for p in open_to_all[:3])
            raise UsageError(f"cannot grade safely here: without namespaces ({support.why}) a "
                             f"submission can read every file other users can, and these are "
                             f"readable by them: {shown}. Make them private (chmod -R o-rwx, on "
                             f"the course and the submissions), install bubblewrap, or give "
                             f"--unsafe to grade anyway")
    level = support.level if support.level != "none" else "none (--unsafe)"
    probe = toolchains.probe(settings, args.compiler)
    subs = classroom.discover(args.submissions, exercise, args.language)
    console = _console()

    def say(text: str) -> None:
        if not args.json:  # stdout holds the JSON only
            console.print(text, markup=False)

    say(neutralise(support.describe()))
    for note in notes:
        say(neutralise(note))
    if exercise.draw is not None:
        seed, origin = classroom.grading_seed(settings, args.seed)
        exercise = draw.drawn(exercise, seed)
        say(neutralise(f"hidden argument sets: {len(exercise.hidden_args)}, "
                       f"the spec's ranges drawn with the seed {origin}"))
    rooms.scratch_root(settings)  # a scratch folder of its own: refused now, not per row
    for orphan in rooms.remove_orphans(settings):
        say(f"removed what a killed grading left: {orphan}")
    already: dict[str, classroom.GradeRow] = {}
    key = classroom.grading_key(settings)
    if args.report is not None and not args.fresh:
        already = classroom.load_report(args.report, exercise.name, key)
        # A row graded with other hidden sets (another seed, another spec) is graded again:
        # one class, one set of hidden cases. A row that could not be graded ran none.
        redrawn = [p for p, r in already.items()
                   if r.status != "error" and r.hidden_args != exercise.hidden_args]
        for path in redrawn:
            del already[path]
        kept = sum(classroom.resumed(s, already) is not None for s in subs)
        if kept:
            say(f"resuming: {kept} rows kept from {args.report} (--fresh grades them again)")
        if redrawn:
            say(f"{len(redrawn)} rows of {args.report} graded again: their hidden argument sets "
                "were others (another seed or spec)")

    def save(rows: list[classroom.GradeRow]) -> None:
        if args.report is not None:
            classroom.write_report(rows, args.report, key)

    if args.report is not None and settings.launcher.kind == "srun":
        for note in classroom.adopt_session(args.report):
            say(note)
    todo = sum(classroom.resumed(s, already) is None for s in subs)
    try:
        with _signals_interrupt((signal.SIGTERM, signal.SIGHUP)):
            rows = _with_progress(console, todo, f"grading {exercise.name}",
                                  lambda done: classroom.grade_all(subs, exercise, settings, probe,
                                                                   args.jobs, args.timeout, done,
                                                                   already, save, sandbox=level),
                                  quiet=args.json)
    except KeyboardInterrupt:
        where = f"; the rows done are in {args.report}: run the same command to resume" \
            if args.report is not None else ""
        cancelled = "; its job steps were cancelled" if settings.launcher.kind == "srun" else ""
        print(f"idrrun grade: interrupted{cancelled}{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.report is not None:
        classroom.session_path(args.report).unlink(missing_ok=True)
    if args.report is not None:
        classroom.write_report(rows, args.report, key)
    if args.feedback is not None:
        classroom.write_feedback(rows, exercise, args.feedback)
    counts = {v: sum(r.status == v for r in rows) for v in ("pass", "fail", "incomplete", "error")}
    if args.json:
        print_json({"exercise": exercise.name, "sandbox": level, "counts": counts, "notes": notes,
                    "report": str(args.report) if args.report is not None else None,
                    "feedback": str(args.feedback) if args.feedback is not None else None,
                    "rows": [row_dict(r) for r in rows]})
    else:
        _summary(console, rows, counts)
        placement = _placement(rows)
        if placement:
            say(placement)
        if args.report is not None:
            say(f"report: {args.report}")
        if args.feedback is not None:
            say(f"feedback: {args.feedback}/")
    # Completed grading is a success whatever the students' verdicts (nbgrader, otter); rows the
    # grader could not judge at all are not.
    return EXIT_FAILED if counts["error"] else EXIT_OK


def grading_launcher(launcher: LauncherConfig) -> LauncherConfig:
    """srun for a class: the compilers run as job steps too (unless [launcher] builds = false:
    a login node's compilers are not the compute nodes'), and srun's own chatter ("job N queued
    and waiting for resources") stays out of the outputs that are checked."""
    options = launcher.options if "--quiet" in launcher.options else (*launcher.options, "--quiet")
    return dataclasses.replace(launcher, builds=launcher.builds is not False, options=options)


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


def _placement(rows: Sequence[classroom.GradeRow]) -> str:
    """"placement: n1 4 runs, n2 3 runs …" when the rows ran as job steps."""
    def count(nodes: Sequence[str]) -> str:
        tally = collections.Counter(n for ns in nodes for n in ns.split(",") if n)
        return ", ".join(f"{node} {tally[node]}" for node in sorted(tally))

    runs, builds = count([r.node for r in rows]), count([r.build_node for r in rows])
    if not runs and not builds:
        return ""
    return f"placement: runs {runs or 'none'}; builds {builds or 'none (cached)'}"


def _summary(console: Console, rows: Sequence[classroom.GradeRow], counts: dict[str, int]) -> None:
    table = Table(title="verdicts")
    on_nodes = any(r.node or r.build_node for r in rows)
    node_column = ("node",) if on_nodes else ()
    for col in ("student", "language", "verdict", "reasons", "build s", "run s", *node_column):
        table.add_column(col)
    for r in rows:
        style = {"pass": "green", "fail": "red", "incomplete": "yellow", "error": "magenta"}[r.status]
        # Students' text is never markup: Text cells are printed as they are, neutralised.
        table.add_row(Text(neutralise(r.student)), r.language, Text(r.status, style=style),
                      Text(neutralise(r.reasons)), f"{r.build_seconds:.2f}", f"{r.run_seconds:.2f}",
                      *((r.node,) if on_nodes else ()))
    console.print(table)
    console.print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['incomplete']} "
                  f"incomplete (could not be judged), {counts['error']} errors", markup=False)
