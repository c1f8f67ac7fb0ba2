"""`idrrun grade NAME SUBMISSION...`: a class, graded in sandboxes, with its report."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import toolchains
from ..checks import specs
from ..cli import EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..grading import classroom
from ..request import config, options
from ..run import isolation
from ..toolchains import registry
from .common import Parser, console as _console, jobs as _jobs, with_progress as _with_progress

def main(tokens: Sequence[str]) -> int:
    p = Parser(prog="idrrun grade", description="Grade submissions of one exercise.")
    p.add_argument("exercise", metavar="NAME")
    p.add_argument("submissions", nargs="+", type=Path, metavar="SUBMISSION",
                   help="source files, notebooks, or one folder per student")
    p.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N")
    p.add_argument("--language", "-l", choices=("c", "c++", "fortran", "cuda"))
    p.add_argument("--report", type=Path, metavar="FILE.csv|FILE.json")
    p.add_argument("--feedback", type=Path, metavar="DIR", help="write one Markdown file per student")
    p.add_argument("--timeout", type=options.seconds, metavar="S")
    p.add_argument("-c", "--compiler", choices=registry.names())
    p.add_argument("--fresh", action="store_true",
                   help="grade everything again, even rows already in the report")
    p.add_argument("--launcher", choices=("none", "mpirun", "srun"),
                   help="run each submission through this launcher (srun: one SLURM job step each)")
    p.add_argument("--unsafe", action="store_true",
                   help="grade even where no sandbox can be made (the report says so): programs "
                        "then see the grader's files and processes")
    args = p.parse_args(list(tokens))
    if args.report is not None and args.report.suffix.lower() not in (".csv", ".json"):
        raise UsageError(f"--report {args.report}: use a .csv or .json file name")
    workdir = Path.cwd()
    settings = config.load(workdir)
    if args.launcher is not None:
        settings = dataclasses.replace(
            settings, launcher=dataclasses.replace(settings.launcher, kind=args.launcher,
                                                   command="" if args.launcher != settings.launcher.kind
                                                   else settings.launcher.command))
    exercise = specs.find(args.exercise, settings, workdir)
    support = isolation.sandbox_support()
    if support.level == "none" and not args.unsafe:
        raise UsageError(f"cannot grade safely here: {support.why}. Submissions would run as "
                         "you, seeing your files: install bubblewrap (or run as root), or give "
                         "--unsafe to grade anyway (the report says so)")
    level = support.level if support.level != "none" else "none (--unsafe)"
    probe = toolchains.probe(settings, args.compiler)
    subs = classroom.discover(args.submissions, exercise, args.language)
    console = _console()
    console.print(neutralise(support.describe()), markup=False)
    for orphan in classroom.remove_orphans(settings):
        console.print(f"removed what a killed grading left: {orphan}", markup=False)
    already: dict[str, classroom.GradeRow] = {}
    key = classroom.grading_key(settings)
    if args.report is not None and not args.fresh:
        already = classroom.load_report(args.report, exercise.name, key)
        kept = sum(str(s.path) in already for s in subs)
        if kept:
            console.print(f"resuming: {kept} rows kept from {args.report} (--fresh grades them again)")

    def save(rows: list[classroom.GradeRow]) -> None:
        if args.report is not None:
            classroom.write_report(rows, args.report, key)

    todo = sum(str(s.path) not in already for s in subs)
    rows = _with_progress(console, todo, f"grading {exercise.name}",
                          lambda done: classroom.grade_all(subs, exercise, settings, probe,
                                                           args.jobs, args.timeout, done,
                                                           already, save, sandbox=level))
    _summary(console, rows)
    if args.report is not None:
        classroom.write_report(rows, args.report, key)
        console.print(f"report: {args.report}", markup=False)
    if args.feedback is not None:
        classroom.write_feedback(rows, exercise, args.feedback)
        console.print(f"feedback: {args.feedback}/")
    return EXIT_OK if all(r.status == "pass" for r in rows) else 1


def _summary(console: Console, rows: Sequence[classroom.GradeRow]) -> None:
    table = Table(title="verdicts")
    for col in ("student", "language", "verdict", "reasons", "build s", "run s"):
        table.add_column(col)
    for r in rows:
        style = {"pass": "green", "fail": "red", "incomplete": "yellow", "error": "magenta"}[r.status]
        # Students' text is never markup: Text cells are printed as they are, neutralised.
        table.add_row(Text(neutralise(r.student)), r.language, Text(r.status, style=style),
                      Text(neutralise(r.reasons)), f"{r.build_seconds:.2f}", f"{r.run_seconds:.2f}")
    console.print(table)
    counts = {v: sum(r.status == v for r in rows) for v in ("pass", "fail", "incomplete", "error")}
    console.print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['incomplete']} "
                  f"incomplete (could not be judged), {counts['error']} errors")


