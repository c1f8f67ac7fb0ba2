"""The terminal front end: `idrrun run|grade|course|doctor`, thin over the pipeline and grading.

Exit codes of `idrrun run` (EXIT_CODES, from the failure's kind): 0 ok, 1 build failed, 2 usage
or configuration error, 3 run failed (or the check failed), 124 timeout, 130 interrupted.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from . import __version__, doctor, toolchains
from .checks import specs
from .display import TextReporter, render_failure
from .errors import IdrrunError, UsageError
from .grading import classroom, course
from .grading.checked import run_with_options
from .model import FailureKind, LauncherConfig, Outcome
from .request import config, options, source
from .toolchains import registry

EXIT_OK, EXIT_BUILD, EXIT_USAGE, EXIT_RUN, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 124, 130
EXIT_CODES: dict[FailureKind, int] = {
    FailureKind.COMPILE_ERROR: EXIT_BUILD,
    FailureKind.COMPILE_TIMEOUT: EXIT_BUILD,
    FailureKind.NOT_STARTED: EXIT_RUN,
    FailureKind.TIMEOUT: EXIT_TIMEOUT,
    FailureKind.LIMIT: EXIT_RUN,
    FailureKind.SIGNAL: EXIT_RUN,
    FailureKind.EXIT_STATUS: EXIT_RUN,
    FailureKind.MISSING_FILES: EXIT_RUN,
    FailureKind.INTERRUPTED: EXIT_INTERRUPTED,
    FailureKind.CHECK: EXIT_RUN,
}


def exit_code(outcome: Outcome) -> int:
    if outcome.failure is None:
        return EXIT_OK if outcome.ok else EXIT_RUN
    return EXIT_CODES[outcome.failure.kind]


def _run(tokens: Sequence[str]) -> int:
    opts = options.parse_tokens(list(tokens), prog="idrrun run", with_file=True)
    if opts is None:
        return EXIT_OK
    workdir = Path.cwd()
    settings = config.load(workdir)
    assert opts.file is not None
    src = source.from_file(workdir / os.path.expanduser(opts.file), opts.language, opts.file)
    reporter = TextReporter(sys.stdout, color=sys.stdout.isatty())
    probe = toolchains.probe(settings, opts.family)
    if probe.protections is not None:
        reporter.notes(probe.protections.notes)
    outcome = run_with_options(opts, src, settings, workdir, probe, reporter)
    if outcome.failure is not None:
        print(render_failure(outcome.failure), file=sys.stderr)
    return exit_code(outcome)


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("expected at least 1")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _console() -> Console:
    return Console(stderr=False, highlight=False)


def _grade(tokens: Sequence[str]) -> int:
    p = _Parser(prog="idrrun grade", description="Grade submissions of one exercise.")
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
                   help="run each submission through this launcher (srun: its build and its run "
                        "are SLURM job steps, placed by SLURM; -j N steps at once)")
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
    if settings.launcher.kind == "srun":
        settings = dataclasses.replace(settings, launcher=grading_launcher(settings.launcher))
    exercise = specs.find(args.exercise, settings, workdir)
    probe = toolchains.probe(settings, args.compiler)
    subs = classroom.discover(args.submissions, exercise, args.language)
    console = _console()
    already: dict[str, classroom.GradeRow] = {}
    if args.report is not None and not args.fresh:
        already = classroom.load_report(args.report, exercise.name)
        kept = sum(str(s.path) in already for s in subs)
        if kept:
            console.print(f"resuming: {kept} rows kept from {args.report} (--fresh grades them again)")

    def save(rows: list[classroom.GradeRow]) -> None:
        if args.report is not None:
            classroom.write_report(rows, args.report)

    if args.report is not None and settings.launcher.kind == "srun":
        for note in classroom.adopt_session(args.report):
            console.print(note)
    todo = sum(str(s.path) not in already for s in subs)
    try:
        with _signals_interrupt((signal.SIGTERM, signal.SIGHUP)):
            rows = _with_progress(console, todo, f"grading {exercise.name}",
                                  lambda done: classroom.grade_all(subs, exercise, settings, probe,
                                                                   args.jobs, args.timeout, done,
                                                                   already, save))
    except KeyboardInterrupt:
        where = f"; the rows done are in {args.report}: run the same command to resume" \
            if args.report is not None else ""
        cancelled = "; its job steps were cancelled" if settings.launcher.kind == "srun" else ""
        print(f"idrrun grade: interrupted{cancelled}{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.report is not None:
        classroom.session_path(args.report).unlink(missing_ok=True)
    _summary(console, rows)
    placement = _placement(rows)
    if placement:
        console.print(placement)
    if args.report is not None:
        classroom.write_report(rows, args.report)
        console.print(f"report: {args.report}")
    if args.feedback is not None:
        classroom.write_feedback(rows, exercise, args.feedback)
        console.print(f"feedback: {args.feedback}/")
    return EXIT_OK if all(r.status == "pass" for r in rows) else 1


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


T = TypeVar("T")


def _with_progress(console: Console, total: int, label: str,
                   work: Callable[[Callable[[classroom.GradeRow], None]], list[T]]) -> list[T]:
    """Run work(done_callback) under a progress bar with ETA on a terminal, plain lines elsewhere."""
    if console.is_terminal:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=console) as progress:
            task = progress.add_task(label, total=total)
            return work(lambda row: progress.advance(task))
    return work(lambda row: print(f"{row.student}: {row.status}", flush=True))


def _summary(console: Console, rows: Sequence[classroom.GradeRow]) -> None:
    table = Table(title="verdicts")
    on_nodes = any(r.node or r.build_node for r in rows)
    node_column = ("node",) if on_nodes else ()
    for col in ("student", "language", "verdict", "reasons", "build s", "run s", *node_column):
        table.add_column(col)
    for r in rows:
        style = {"pass": "green", "fail": "red", "error": "magenta"}[r.status]
        table.add_row(r.student, r.language, f"[{style}]{r.status}[/]", r.reasons,
                      f"{r.build_seconds:.2f}", f"{r.run_seconds:.2f}", *((r.node,) if on_nodes else ()))
    console.print(table)
    counts = {v: sum(r.status == v for r in rows) for v in ("pass", "fail", "error")}
    console.print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors")


def _course(tokens: Sequence[str]) -> int:
    p = _Parser(prog="idrrun course", description="The course's own checks and tools.")
    sub = p.add_subparsers(dest="action", required=True)
    chk = sub.add_parser("check", help="every solution passes, every start file builds and fails")
    chk.add_argument("-j", "--jobs", type=_jobs, default=2, metavar="N")
    chk.add_argument("--language", "-l", choices=("c", "fortran"), action="append")
    chk.add_argument("--exercise", action="append", metavar="NAME")
    chk.add_argument("-c", "--compiler", choices=registry.names())
    strip = sub.add_parser("strip", help="students' copies of the notebooks, without solution cells")
    strip.add_argument("notebooks", nargs="+", type=Path, help="notebooks or folders of notebooks")
    strip.add_argument("--out", type=Path, required=True, metavar="DIR")
    args = p.parse_args(list(tokens))
    if args.action == "strip":
        return _strip(args.notebooks, args.out)
    workdir = Path.cwd()
    settings = config.load(workdir)
    folder = specs.exercises_folder_or_fail(settings, workdir)
    exercises = specs.all_exercises(folder)
    if args.exercise:
        unknown = set(args.exercise) - {e.name for e in exercises}
        if unknown:
            raise UsageError(f"unknown exercise(s): {', '.join(sorted(unknown))}")
        exercises = [e for e in exercises if e.name in args.exercise]
    probe = toolchains.probe(settings, args.compiler)
    console = _console()
    where = "GPU: " + probe.gpus[0].name if probe.gpus else "host (no GPU)"
    console.print(f"course check: {len(exercises)} exercises, {probe.family} family, {where}")
    total = sum(2 * len([l for l in e.sources if not args.language or l in args.language]) for e in exercises)
    rows = _with_progress(console, total, "course check",
                          lambda done: course.course_check(exercises, args.language, settings,
                                                           probe, args.jobs, done))
    table = Table(title="course check")
    for col in ("exercise", "language", "solution", "start file", "solution s", "start s", "ok"):
        table.add_column(col)
    for r in rows:
        sol = r.solution.status + ("" if r.solution.status == "pass" else f": {r.solution.reasons}")
        failed = [c.name for c in r.start.checks if c.status == "fail"]
        start = r.start.status + (f" ({', '.join(failed)})" if failed else
                                  ("" if r.start.status == "fail" else f": {r.start.reasons}"))
        table.add_row(r.exercise, r.language, sol, start, f"{r.solution.run_seconds:.2f}",
                      f"{r.start.run_seconds:.2f}", "[green]yes[/]" if r.ok else "[red]NO[/]")
    console.print(table)
    bad = [r for r in rows if not r.ok]
    console.print(f"{len(rows) - len(bad)} passed, {len(bad)} failed")
    return EXIT_OK if not bad and rows else 1


def _strip(paths: Sequence[Path], out: Path) -> int:
    notebooks: list[tuple[Path, Path]] = []
    for path in paths:
        if path.is_dir():
            notebooks += [(nb, out / nb.relative_to(path)) for nb in sorted(path.rglob("*.ipynb"))
                          if ".ipynb_checkpoints" not in nb.parts]
        elif path.suffix == ".ipynb" and path.is_file():
            notebooks.append((path, out / path.name))
        else:
            raise UsageError(f"{path}: not a notebook or a folder")
    for nb, dest in notebooks:
        removed = course.strip_solutions(nb, dest)
        print(f"{dest}: {removed} solution cells removed")
    return EXIT_OK


def _doctor(tokens: Sequence[str]) -> int:
    p = _Parser(prog="idrrun doctor", description="What this machine offers for the course.")
    p.parse_args(list(tokens))
    report = doctor.diagnose(config.load(Path.cwd()))
    print(report)
    if not report.can_compile:
        print("idrrun doctor: no compiler found: nothing can be built here", file=sys.stderr)
        return 1
    return EXIT_OK


COMMANDS = {"run": _run, "grade": _grade, "course": _course, "doctor": _doctor}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="idrrun", description="Compile, run and check OpenACC course code.",
        epilog="Commands: run FILE (compile and run), grade NAME SUBMISSION... (grade a class), "
               "course check|strip, doctor (what this machine offers). "
               "'idrrun COMMAND --help' for details.",
    )
    parser.add_argument("--version", action="version", version=f"idrrun {__version__}")
    parser.add_argument("command", nargs="?", choices=sorted(COMMANDS), help="what to do")
    if not argv or argv[0] in ("-h", "--help", "--version"):
        parser.parse_args(argv)
        parser.print_help()
        return EXIT_USAGE
    command, rest = argv[0], argv[1:]
    try:
        if command not in COMMANDS:
            raise UsageError(f"unknown command {command!r} (known: {', '.join(sorted(COMMANDS))})")
        return COMMANDS[command](rest)
    except IdrrunError as exc:
        print(f"idrrun: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("idrrun: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
