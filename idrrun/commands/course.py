"""`idrrun course check|strip|init`: the course's own checks, students' copies of its notebooks,
working copies of the whole course."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import toolchains
from ..checks import draw, specs
from ..checks.specs import Exercise
from ..cli import EXIT_FAILED, EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..grading import course, report
from ..grading.report import GradeRow
from ..model import Settings
from ..request import config
from ..run import lanes as lanes_mod
from ..toolchains import registry
from .common import CONFIG_HELP, Parser, console as _console, jobs as _jobs, print_json, row_dict
from .common import unread_config
from .common import with_progress as _with_progress


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="idrrun course", description="The course's own checks and tools.",
               epilog="Exit codes: 0 done (check: every exercise is right), 1 check: some exercise "
                      "is not, 2 usage or configuration error, 130 interrupted.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=Parser)
    chk = sub.add_parser("check", help="every solution passes, every start file builds and fails",
                         description="Run every exercise's solution (it must pass its checks) and "
                                     "start file (it must build and fail them).")
    chk.add_argument("-j", "--jobs", type=_jobs, default=2, metavar="N",
                     help="programs built and run at once (default 2)")
    chk.add_argument("--language", "-l", choices=("c", "fortran"), action="append",
                     help="only this language (repeat for several; default: all)")
    chk.add_argument("--exercise", action="append", metavar="NAME",
                     help="only this exercise (repeat for several; default: all)")
    chk.add_argument("-c", "--compiler", choices=registry.names(),
                     help="compiler family (default: from config, else detected)")
    chk.add_argument("--config", type=Path, metavar="FILE", help=CONFIG_HELP)
    chk.add_argument("--json", action="store_true",
                     help="print the results as JSON on stdout (no table, no progress)")
    chk.add_argument("--seed", metavar="TEXT",
                     help="the seed of the hidden argument sets drawn from the specs' ranges, as "
                          "`idrrun grade --seed` (default: the grader's, as there)")
    strip = sub.add_parser("strip", help="students' copies of the notebooks, without solution cells",
                           description="Copy notebooks without the cells tagged 'solution' and "
                                       "without outputs, into a new folder (all or nothing).")
    strip.add_argument("notebooks", nargs="+", type=Path, metavar="NOTEBOOK",
                       help="notebooks or folders of notebooks")
    strip.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help="the new folder for the copies (must not exist, or be empty)")
    init = sub.add_parser("init", help="a working copy of the course (examples and notebooks)",
                          description="Write the course idrrun carries (or --from's) into a new "
                                      "folder: DIR/examples and DIR/notebooks, all or nothing.")
    init.add_argument("dest", type=Path, metavar="DIR",
                      help="the new folder (must not exist, or be empty)")
    init.add_argument("--students", action="store_true",
                      help="the students' version: no solution cells, no solution sources (but "
                           "those the notebooks run themselves), no grading-only data in the specs")
    init.add_argument("--from", dest="source", type=Path, metavar="COURSE",
                      help="copy this course (a folder with examples/ and notebooks/) instead")
    return p


def main(tokens: Sequence[str]) -> int:
    args = parser().parse_args(list(tokens))
    if args.action == "strip":
        return _strip(args.notebooks, args.out)
    if args.action == "init":
        return _init(args.dest, args.students, args.source)
    return _check(args)


def _check(args: argparse.Namespace) -> int:
    """Parse, choose the exercises, check them, render."""
    workdir = Path.cwd()
    settings = config.load(workdir, project=args.config if args.config is not None else False)
    notes = unread_config(workdir, args.config)
    folder = specs.exercises_folder_or_fail(settings, workdir)
    exercises = _chosen(specs.all_exercises(folder), args.exercise, settings, args.seed)
    probe = toolchains.probe(settings, args.compiler)
    console = _console()
    where = "GPU: " + probe.gpus[0].name if probe.gpus else "host (no GPU)"
    lanes, lane_notes = lanes_mod.for_machine(len(probe.gpus), settings)
    notes += lane_notes
    if not args.json:
        for note in notes:
            console.print(neutralise(note), markup=False)
        console.print(f"course check: {len(exercises)} exercises in {folder}, {probe.family} "
                      f"family, {where}", markup=False)
    total = sum(2 * len([lang for lang in e.sources if not args.language or lang in args.language])
                for e in exercises)
    rows = _with_progress(console, total, "course check",
                          lambda done: course.course_check(exercises, args.language, settings,
                                                           probe, args.jobs, done, lanes),
                          quiet=args.json)
    bad = [r for r in rows if not r.ok]
    if args.json:
        print_json({
            "examples": str(folder), "family": probe.family, "where": where, "notes": notes,
            "passed": len(rows) - len(bad), "incomplete": sum(r.incomplete for r in rows),
            "failed": len(bad),
            "rows": [{"exercise": r.exercise, "language": r.language, "ok": r.ok,
                      "incomplete": r.incomplete, "solution": row_dict(r.solution),
                      "start": row_dict(r.start)} for r in rows],
        })
    else:
        _table(console, rows)
    return EXIT_OK if not bad and rows else EXIT_FAILED


def _chosen(exercises: list[Exercise], names: Sequence[str] | None, settings: Settings,
            seed: str | None) -> list[Exercise]:
    """The exercises asked for (all when none is named), with the hidden sets `idrrun grade`
    would draw: the solutions must pass on them."""
    if names:
        unknown = set(names) - {e.name for e in exercises}
        if unknown:
            raise UsageError(f"unknown exercise(s): {', '.join(sorted(unknown))}")
        exercises = [e for e in exercises if e.name in names]
    if any(e.draw is not None for e in exercises):
        drawn = report.grading_seed(settings, seed)[0]
        exercises = [draw.drawn(e, drawn) for e in exercises]
    return exercises


def _table(console: Console, rows: Sequence[course.CourseRow]) -> None:
    table = Table(title="course check")
    in_lanes = any(r.solution.lane or r.start.lane for r in rows)
    for col in ("exercise", "language", "solution", "start file", "solution s", "start s", "ok",
                *(("lanes (solution; start)",) if in_lanes else ())):
        table.add_column(col)
    for r in rows:
        ok = Text("yes", style="green") if r.ok and not r.incomplete else \
            Text("yes, here", style="yellow") if r.ok else Text("NO", style="red")
        table.add_row(r.exercise, r.language, Text(_solution_cell(r.solution)),
                      Text(_start_cell(r.start)), f"{r.solution.run_seconds:.2f}",
                      f"{r.start.run_seconds:.2f}", ok,
                      *((f"{r.solution.lane}; {r.start.lane}",) if in_lanes else ()))
    console.print(table)
    bad = sum(not r.ok for r in rows)
    console.print(f"{len(rows) - bad} passed ({sum(r.incomplete for r in rows)} of them "
                  f"incomplete here: their solution has checks this machine cannot evaluate, "
                  f"e.g. GPU traces), {bad} failed", markup=False)


def _solution_cell(row: GradeRow) -> str:
    if row.status == "incomplete":
        missing = [c.name for c in row.checks if c.status == "incomplete"]
        return f"incomplete: {', '.join(missing)} not evaluated here"
    return row.status + ("" if row.status == "pass" else f": {row.reasons}")


def _start_cell(row: GradeRow) -> str:
    failed = [c.name for c in row.checks if c.status == "fail"]
    return row.status + (f" ({', '.join(failed)})" if failed else
                         ("" if row.status == "fail" else f": {row.reasons}"))


def _strip(paths: Sequence[Path], out: Path) -> int:
    notebooks: list[tuple[Path, Path]] = []
    for path in paths:
        if path.is_dir():
            notebooks += [(nb, nb.relative_to(path)) for nb in sorted(path.rglob("*.ipynb"))
                          if ".ipynb_checkpoints" not in nb.parts]
        elif path.suffix == ".ipynb" and path.is_file():
            notebooks.append((path, Path(path.name)))
        else:
            raise UsageError(f"{path}: not a notebook or a folder")
    for rel, removed in course.strip_tree(notebooks, out):
        print(f"{out / rel}: {removed} solution cells removed", flush=True)
    return EXIT_OK


def _init(dest: Path, students: bool, source: Path | None) -> int:
    if source is None:
        source = specs.course_root()
        if source is None:
            raise UsageError("idrrun carries no course here (neither installed nor in a checkout): "
                             "give --from COURSE, a folder with examples/ and notebooks/")
    done = course.init_course(source, dest, students)
    kind = "students' copy" if students else "copy"
    print(f"{dest}: a {kind} of the course in {source}: {done.notebooks} notebooks, examples/",
          flush=True)
    if students:
        print(f"  {done.solution_cells_removed} solution cells removed, "
              f"{len(done.solutions_left_out)} solution sources left out", flush=True)
        if done.solutions_kept:
            print(f"  kept, because the notebooks run them in cells of their own: "
                  f"{', '.join(done.solutions_kept)}", flush=True)
    print(f"  open {dest / 'notebooks'} in Jupyter; `%%idrrun --check NAME` finds {dest / 'examples'}",
          flush=True)
    return EXIT_OK
