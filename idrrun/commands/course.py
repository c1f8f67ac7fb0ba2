"""`idrrun course check|new|strip|init`: the course's own checks, a new exercise of the teacher's
own, students' copies of its notebooks, working copies of the whole course."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import toolchains
from ..checks import reference, specs
from ..cli import EXIT_FAILED, EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..authoring import copies, references
from ..grading import course, ladder, session
from ..grading.rows import GradeRow
from ..model import CheckResult
from ..request import config, options
from ..toolchains import registry
from ..checks.words import plural
from .common import CONFIG_HELP, Parser, check_dict, console as _console, jobs as _jobs, print_json
from .common import row_dict
from .common import add_seed_options
from .common import with_progress as _with_progress


def _selection(p: argparse.ArgumentParser, what: str) -> None:
    """The options `course check` and `course references` share: what they run, and with what."""
    p.add_argument("-j", "--jobs", type=_jobs, default=2, metavar="N",
                   help=f"{what} built and run at once (default 2)")
    p.add_argument("--language", "-l", choices=("c", "fortran"), action="append",
                   help="only this language (repeat for several; default: all)")
    p.add_argument("--exercise", action="append", metavar="NAME",
                   help="only this exercise (repeat for several; default: all)")
    p.add_argument("-c", "--compiler", choices=registry.names(),
                   help="compiler family (default: from config, else detected)")
    p.add_argument("--config", type=Path, metavar="FILE", help=CONFIG_HELP)


def parser() -> Parser:
    p = Parser(prog="idrrun course", description="The course's own checks and tools.",
               epilog="Exit codes: 0 done (check: every exercise is right), 1 check: some exercise "
                      "is not, 2 usage or configuration error, 130 interrupted.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=Parser)
    chk = sub.add_parser("check", help="every solution passes, every start file builds and fails",
                         description="Run every exercise's solution (it must pass its checks) and "
                                     "start file (it must build and fail them).")
    _selection(chk, "programs")
    chk.add_argument("--json", action="store_true",
                     help="print the results as JSON on stdout (no table, no progress)")
    chk.add_argument("--ladder", action="store_true",
                     help="also grade each exercise's near-misses, made from its solution (slow, "
                          "half port, wrong result, a region with no work, directives in "
                          "comments): their marks must keep a teacher's order and bounds "
                          "(examples/README.md, \"The ladder\")")
    add_seed_options(chk, "the seed of the hidden argument sets drawn from the specs' ranges, as "
                          "`idrrun grade --seed-file`")
    refs = sub.add_parser("references", help="the solutions' outputs, kept for the students' course",
                          description="Run every solution with the exercise's public arguments and "
                                      "keep what it prints (and the pictures its image checks "
                                      "compare) in examples/reference/NAME/: a students' course, "
                                      "which has no solutions, compares with them. Nothing is kept "
                                      "for hidden argument sets.")
    _selection(refs, "solutions")
    refs.add_argument("--gpu", action="store_true",
                      help="also the GPU arguments where the solutions run on the host (long: "
                           "each run within --gpu-timeout); on a GPU they are always made")
    refs.add_argument("--host-only", action="store_true",
                      help="only the host arguments, even on a GPU")
    refs.add_argument("--gpu-timeout", type=options.seconds, metavar="S",
                      help="seconds a GPU-size run may take on a host (default: the exercise's "
                           "timeout); one that takes longer is recorded as missing, with why")
    new = sub.add_parser("new", help="a new exercise of your own: spec, start file, solution",
                         description="Write a new exercise from idrrun's template into a course "
                                     "folder of your own (its examples/): a spec with points, "
                                     "hidden cases and a visibility, a start file and a solution "
                                     "per language. Then edit them, and run `idrrun course check "
                                     "--exercise NAME` (docs/teaching.md).")
    new.add_argument("name", metavar="NAME", help="topic_name, e.g. loops_dot")
    new.add_argument("--dir", type=Path, default=Path("."), metavar="FOLDER",
                     help="the course folder: NAME.toml goes into FOLDER/examples/, the sources "
                          "into FOLDER/examples/C and FOLDER/examples/Fortran (default: here)")
    new.add_argument("--language", "-l", choices=("c", "fortran"), action="append",
                     help="only this language (repeat for several; default: c and fortran)")
    new.add_argument("--title", metavar="TEXT", help="a one-line title (default: from the name)")
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
    args = parser().parse_tokens(tokens)
    if args.action == "strip":
        return _strip(args.notebooks, args.out)
    if args.action == "init":
        return _init(args.dest, args.students, args.source)
    if args.action == "references":
        return _references(args)
    if args.action == "new":
        return _new(args.dir, args.name, args.title, args.language or ["c", "fortran"])
    return _check(args)


def _references(args: argparse.Namespace) -> int:
    workdir = Path.cwd()
    settings = config.load(workdir, project=args.config if args.config is not None else False)
    folder = specs.exercises_folder_or_fail(settings, workdir)
    exercises = session.chosen_exercises(folder, args.exercise or ())
    probe = toolchains.probe(settings, args.compiler)
    on_gpu = bool(probe.gpus)
    targets = ("host",) if args.host_only else ("host", "gpu") if args.gpu or on_gpu else ("host",)
    console = _console()
    console.print(f"course references: {folder / reference.FOLDER}, {probe.family} family, "
                  f"{'GPU: ' + probe.gpus[0].name if on_gpu else 'host (no GPU)'}; arguments: "
                  f"{' and '.join(targets)}", markup=False)
    rows = references.make_references(exercises, args.language, settings, probe, args.jobs, targets,
                                  args.gpu_timeout,
                                  lambda row: console.print(neutralise(
                                      f"{row.exercise} {row.language} {row.target}: "
                                      f"{row.made or row.missing}"), markup=False))
    table = Table(title="course references")
    for col in ("exercise", "language", "arguments", "reference"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.exercise, r.language, f"{r.target}: {' '.join(r.args)}",
                      Text(r.made, style="green") if r.made else Text(r.missing, style="yellow"))
    console.print(table)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    """Parse, open the session (the chosen exercises, the probe, the lanes), check, render."""
    grading = session.open_session(session.Opening(
        Path.cwd(), tuple(args.exercise or ()), config=args.config, compiler=args.compiler,
        jobs=args.jobs, seed_file=args.seed_file, own_course=True))
    exercises, probe, notes = grading.exercises, grading.probe, list(grading.notes)
    folder = specs.exercises_folder_or_fail(grading.settings, Path.cwd())
    console = _console()
    where = "GPU: " + probe.gpus[0].name if probe.gpus else "host (no GPU)"
    if not args.json:
        for note in notes:
            console.print(neutralise(note), markup=False)
        console.print(f"course check: {plural(len(exercises), 'exercise')} in {folder}, {probe.family} "
                      f"family, {where}", markup=False)
    per = 2 + (len(ladder.RUNGS) - 2 if args.ladder else 0)
    total = sum(per * len([lang for lang in e.sources if not args.language or lang in args.language])
                for e in exercises)
    rows = _with_progress(console, total, "course check",
                          lambda done: course.course_check(grading, args.language, done,
                                                           ladder=args.ladder),
                          quiet=args.json)
    by_name = {e.name: e for e in exercises}
    found = [course.findings(r, by_name[r.exercise]) for r in rows]
    if args.json:
        _print_check_json({"examples": str(folder), "family": probe.family, "where": where,
                           "notes": notes}, rows, found)
    else:
        _table(console, rows)
        if args.ladder:
            _ladder_table(console, rows)
        _findings(console, rows, found)
    return EXIT_OK if rows and all(r.ok for r in rows) else EXIT_FAILED


def _print_check_json(head: dict[str, object], rows: Sequence[course.CourseRow],
                      found: Sequence[list[str]]) -> None:
    """`course check --json`: where it ran, the counts, every row with what to fix."""
    bad = sum(not r.ok for r in rows)
    print_json(head | {
        "passed": len(rows) - bad, "incomplete": sum(r.incomplete for r in rows), "failed": bad,
        "rows": [{"exercise": r.exercise, "language": r.language, "ok": r.ok,
                  "incomplete": r.incomplete, "scores": _scores_dict(r),
                  "solution": row_dict(r.solution), "start": row_dict(r.start),
                  "reference": [check_dict(c) for c in r.reference], "findings": said,
                  **({"ladder": _ladder_dicts(r)} if r.ladder else {})}
                 for r, said in zip(rows, found)],
    })


def _score_dict(row: GradeRow) -> dict[str, float] | None:
    s = row.score
    return None if s is None else {"earned": s.earned, "possible": s.possible,
                                   "evaluated": s.evaluated, "not_evaluated": s.not_evaluated}


def _scores_dict(r: course.CourseRow) -> dict[str, object]:
    """The two bounds of the marks, as `course check` judges them."""
    return {"solution": _score_dict(r.solution), "start": _score_dict(r.start),
            "start_share": r.start_share, "start_share_max": course.START_SHARE,
            "solution_full": r.solution_full, "start_low": r.start_low}


def _ladder_dicts(r: course.CourseRow) -> list[dict[str, object]]:
    """`course check --ladder --json`: each rung's score, share and what was changed."""
    judged = r.judged
    rungs = [ladder.Graded(ladder.Rung("solution", "", "the solution as published"), r.solution),
             *r.ladder, ladder.Graded(ladder.Rung("start", "", "the start file as published"), r.start)]
    out: list[dict[str, object]] = [
        {"rung": g.rung.name, "how": g.rung.how, "made": g.row is not None,
         "score": _score_dict(g.row) if g.row is not None else None, "share": g.share,
         "not_judged": ladder.unlike(r.checked, g)
         if g.rung.name != "solution" and r.checked is not None else "",
         "unpassed": _unpassed(g.row) if g.row is not None else [],
         # Where a ladder's time goes: each rung's runs and the lane they had.
         "run_seconds": g.row.run_seconds if g.row is not None else None,
         "run_times": list(g.row.run_times) if g.row is not None else [],
         "lane": g.row.lane if g.row is not None else ""}
        for g in rungs]
    return out + [{"findings": list(judged.findings), "notes": list(judged.notes)}]


def _unpassed(row: GradeRow) -> list[dict[str, object]]:
    """A rung's checks that did not pass, with what they measured and why: what tells a rung
    that breaks the order from a figure that was not judged."""
    return [{"check": c.name, "status": c.status, "got": c.got, "reason": c.reason[:400],
             "credit": c.credit} for c in row.checks if c.status != "pass"]


def _ladder_cell(r: course.CourseRow, g: ladder.Graded) -> Text:
    if g.row is None:
        return Text("-")
    share = g.share
    said = f"{100 * share:.0f} %" if share is not None else "?"
    odd = r.checked is not None and g.rung.name != "solution" and bool(ladder.unlike(r.checked, g))
    return Text(said + (" *" if odd else ""), style="yellow" if odd else "")


def _ladder_table(console: Console, rows: Sequence[course.CourseRow]) -> None:
    """The ladder's marks, each a share of the points evaluated here; * not judged (the
    generator's change did not make what the rung claims); - not made."""
    table = Table(title="the ladder (share of the points evaluated here)")
    for col in ("exercise", "language", *ladder.RUNGS, "order"):
        table.add_column(col)
    for r in rows:
        by = {g.rung.name: g for g in r.ladder}
        by["solution"] = ladder.Graded(ladder.Rung("solution", "", ""), r.solution)
        by["start"] = ladder.Graded(ladder.Rung("start", "", ""), r.start)
        held = not r.judged.findings
        table.add_row(r.exercise, r.language, *(_ladder_cell(r, by[n]) if n in by else Text("-")
                                                 for n in ladder.RUNGS),
                      Text("held", style="green") if held else Text("BROKEN", style="red"))
    console.print(table)


def _findings(console: Console, rows: Sequence[course.CourseRow], found: Sequence[list[str]]) -> None:
    """Under the table: what to fix, each line naming the spec's line or the source file."""
    for r, said in zip(rows, found):
        for line in said:
            console.print(neutralise(f"{r.exercise} ({r.language}): {line}"), markup=False)


def _table(console: Console, rows: Sequence[course.CourseRow]) -> None:
    table = Table(title="course check")
    in_lanes = any(r.solution.lane or r.start.lane for r in rows)
    for col in ("exercise", "language", "solution", "start file", "reference", "points",
                "solution s", "start s", "ok", *(("lanes (solution; start)",) if in_lanes else ())):
        table.add_column(col)
    for r in rows:
        ok = Text("yes", style="green") if r.ok and not r.incomplete else \
            Text("yes, here", style="yellow") if r.ok else Text("NO", style="red")
        table.add_row(r.exercise, r.language, Text(_solution_cell(r.solution)),
                      Text(_start_cell(r.start)), Text(_reference_cell(r.reference)),
                      Text(r.scores(), style="" if r.solution_full and r.start_low else "red"),
                      f"{r.solution.run_seconds:.2f}", f"{r.start.run_seconds:.2f}", ok,
                      *((f"{r.solution.lane}; {r.start.lane}",) if in_lanes else ()))
    console.print(table)
    bad = sum(not r.ok for r in rows)
    console.print(f"{len(rows) - bad} passed ({sum(r.incomplete for r in rows)} of them "
                  f"incomplete here: their solution has checks this machine cannot evaluate, "
                  f"e.g. GPU traces), {bad} failed", markup=False)


def _reference_cell(checks: Sequence[CheckResult]) -> str:
    """How the solution's output here compares with its reference (- when it needs none)."""
    if not checks:
        return "-"
    wrong = [c for c in checks if c.status != "pass"]
    if not wrong:
        return "matches"
    return "; ".join(f"{c.status}: {c.name}: {c.reason}" for c in wrong)


def _solution_cell(row: GradeRow) -> str:
    if row.passed_here:
        return row.reasons
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
    for rel, removed in copies.strip_tree(notebooks, out):
        print(f"{out / rel}: {removed} solution cells removed", flush=True)
    return EXIT_OK


def _new(folder: Path, name: str, title: str | None, languages: Sequence[str]) -> int:
    made = copies.new_exercise(folder, name, title, languages)
    print(f"{made.spec}: a new exercise from idrrun's template", flush=True)
    for path in made.sources:
        print(f"  {path}", flush=True)
    examples = made.spec.parent.resolve()
    print(f"Edit them (docs/teaching.md), keep the solution's outputs for the students' course, "
          f"then check the exercise: its solution must pass, its start file fail:\n"
          f"  export IDRRUN_EXAMPLES={examples}\n"
          f"  idrrun course references --exercise {name}\n"
          f"  idrrun course check --exercise {name}", flush=True)
    return EXIT_OK


def _init(dest: Path, students: bool, source: Path | None) -> int:
    if source is None:
        source = specs.course_root()
        if source is None:
            raise UsageError("idrrun carries no course here (neither installed nor in a checkout): "
                             "give --from COURSE, a folder with examples/ and notebooks/")
    done = copies.init_course(source, dest, students)
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
    print(f"  {LOAD_EVERYWHERE}", flush=True)
    return EXIT_OK


# How a kernel gets %%idrrun without a notebook's `%load_ext idrrun` cell (a cell run before it
# gets IPython's bare "Cell magic not found").
# The line docker/install.sh's `config` part writes for the images' user.
LOAD_EVERYWHERE = ("each notebook's first cell loads the magic (`%load_ext idrrun`); to load it in "
                   "every kernel, add `c.InteractiveShellApp.extensions.append(\"idrrun\")` to "
                   "~/.ipython/profile_default/ipython_config.py")
