"""`idrrun course check|strip`: the course's own checks, and students' copies of its notebooks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.table import Table
from rich.text import Text

from .. import toolchains
from ..checks import specs
from ..cli import EXIT_OK
from ..errors import UsageError
from ..grading import course
from ..request import config
from ..toolchains import registry
from .common import Parser, console as _console, jobs as _jobs, with_progress as _with_progress

def main(tokens: Sequence[str]) -> int:
    p = Parser(prog="idrrun course", description="The course's own checks and tools.")
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
        if r.solution.status == "incomplete":
            missing = [c.name for c in r.solution.checks if c.status == "incomplete"]
            sol = f"incomplete: {', '.join(missing)} not evaluated here"
        else:
            sol = r.solution.status + ("" if r.solution.status == "pass" else f": {r.solution.reasons}")
        failed = [c.name for c in r.start.checks if c.status == "fail"]
        start = r.start.status + (f" ({', '.join(failed)})" if failed else
                                  ("" if r.start.status == "fail" else f": {r.start.reasons}"))
        ok = Text("yes", style="green") if r.ok and not r.incomplete else \
            Text("yes, here", style="yellow") if r.ok else Text("NO", style="red")
        table.add_row(r.exercise, r.language, Text(sol), Text(start),
                      f"{r.solution.run_seconds:.2f}", f"{r.start.run_seconds:.2f}", ok)
    console.print(table)
    bad = [r for r in rows if not r.ok]
    partly = [r for r in rows if r.incomplete]
    console.print(f"{len(rows) - len(bad)} passed ({len(partly)} of them incomplete here: their "
                  f"solution has checks this machine cannot evaluate, e.g. GPU traces), "
                  f"{len(bad)} failed", markup=False)
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


