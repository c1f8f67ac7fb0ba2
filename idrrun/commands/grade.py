"""`idrrun grade NAME SUBMISSION...`: a class, graded in sandboxes, with its report."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import toolchains
from ..checks import specs
from ..cli import EXIT_FAILED, EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..grading import classroom
from ..request import config, options
from ..run import isolation
from ..toolchains import registry
from .common import Parser, console as _console, jobs as _jobs, print_json, row_dict
from .common import with_progress as _with_progress

def grading_memory(jobs: int) -> int:
    """The memory cap of each graded program when [limits] memory says none: notebooks run
    without one (model.Limits), but a class of submissions runs unattended, -j at a time, and
    together they may take 3/4 of the machine, the rest left to the grader and the system."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(256 << 20, total * 3 // 4 // max(1, jobs))


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="idrrun grade", description="Grade submissions of one exercise, each in its "
                                                "own sandbox; the report says every verdict.",
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
                   help="run each submission through this launcher (srun: one SLURM job step each)")
    p.add_argument("--unsafe", action="store_true",
                   help="grade even where no sandbox can be made (the report says so): programs "
                        "then see the grader's files and processes")
    p.add_argument("--json", action="store_true",
                   help="print the summary (counts and every row with its checks) as JSON on stdout")
    return p


def main(tokens: Sequence[str]) -> int:
    args = parser().parse_args(list(tokens))
    if args.report is not None and args.report.suffix.lower() not in (".csv", ".json"):
        raise UsageError(f"--report {args.report}: use a .csv or .json file name")
    workdir = Path.cwd()
    settings = config.load(workdir)
    if args.launcher is not None:
        settings = dataclasses.replace(
            settings, launcher=dataclasses.replace(settings.launcher, kind=args.launcher,
                                                   command="" if args.launcher != settings.launcher.kind
                                                   else settings.launcher.command))
    if "memory" not in settings.values:
        settings = dataclasses.replace(settings, values={**settings.values,
                                                         "memory": grading_memory(args.jobs)})
    exercise = specs.find(args.exercise, settings, workdir)
    if exercise.students:
        raise UsageError(f"{exercise.path} is from a students' copy of the course (no solutions, "
                         "no grading-only checks): grade with the teacher's course (examples_dir "
                         "or IDRRUN_EXAMPLES)")
    support = isolation.sandbox_support()
    if support.level == "none" and not args.unsafe:
        raise UsageError(f"cannot grade safely here: {support.why}. Submissions would run as "
                         "you, seeing your files: install bubblewrap (or run as root), or give "
                         "--unsafe to grade anyway (the report says so)")
    level = support.level if support.level != "none" else "none (--unsafe)"
    probe = toolchains.probe(settings, args.compiler)
    subs = classroom.discover(args.submissions, exercise, args.language)
    console = _console()

    def say(text: str) -> None:
        if not args.json:  # stdout holds the JSON only
            console.print(text, markup=False)

    say(neutralise(support.describe()))
    for orphan in classroom.remove_orphans(settings):
        say(f"removed what a killed grading left: {orphan}")
    already: dict[str, classroom.GradeRow] = {}
    key = classroom.grading_key(settings)
    if args.report is not None and not args.fresh:
        already = classroom.load_report(args.report, exercise.name, key)
        kept = sum(str(s.path) in already for s in subs)
        if kept:
            say(f"resuming: {kept} rows kept from {args.report} (--fresh grades them again)")

    def save(rows: list[classroom.GradeRow]) -> None:
        if args.report is not None:
            classroom.write_report(rows, args.report, key)

    todo = sum(str(s.path) not in already for s in subs)
    rows = _with_progress(console, todo, f"grading {exercise.name}",
                          lambda done: classroom.grade_all(subs, exercise, settings, probe,
                                                           args.jobs, args.timeout, done,
                                                           already, save, sandbox=level),
                          quiet=args.json)
    if args.report is not None:
        classroom.write_report(rows, args.report, key)
    if args.feedback is not None:
        classroom.write_feedback(rows, exercise, args.feedback)
    counts = {v: sum(r.status == v for r in rows) for v in ("pass", "fail", "incomplete", "error")}
    if args.json:
        print_json({"exercise": exercise.name, "sandbox": level, "counts": counts,
                    "report": str(args.report) if args.report is not None else None,
                    "feedback": str(args.feedback) if args.feedback is not None else None,
                    "rows": [row_dict(r) for r in rows]})
    else:
        _summary(console, rows, counts)
        if args.report is not None:
            say(f"report: {args.report}")
        if args.feedback is not None:
            say(f"feedback: {args.feedback}/")
    # Completed grading is a success whatever the students' verdicts (nbgrader, otter); rows the
    # grader could not judge at all are not.
    return EXIT_FAILED if counts["error"] else EXIT_OK


def _summary(console: Console, rows: Sequence[classroom.GradeRow], counts: dict[str, int]) -> None:
    table = Table(title="verdicts")
    for col in ("student", "language", "verdict", "reasons", "build s", "run s"):
        table.add_column(col)
    for r in rows:
        style = {"pass": "green", "fail": "red", "incomplete": "yellow", "error": "magenta"}[r.status]
        # Students' text is never markup: Text cells are printed as they are, neutralised.
        table.add_row(Text(neutralise(r.student)), r.language, Text(r.status, style=style),
                      Text(neutralise(r.reasons)), f"{r.build_seconds:.2f}", f"{r.run_seconds:.2f}")
    console.print(table)
    console.print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['incomplete']} "
                  f"incomplete (could not be judged), {counts['error']} errors", markup=False)
