"""`idrrun similarity NAME SUBMISSION...`: a class's submissions compared with each other and
with the published solution, the start file removed first; the pairs for the instructor.

A command of its own rather than an option of `grade`: it runs none of the students' code (no
sandbox, no compiler, no GPU), takes seconds where grading takes minutes, and is run again with
another threshold without grading again; it reads the submissions as `grade` does
(grading/discover.py), so that both reports name the same students. It has no --feedback: what
it finds goes to the instructor alone.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table
from rich.text import Text

from ..checks.specs import Exercise
from ..cli import EXIT_FAILED, EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..escape import terminal_line
from ..files import write_atomic
from ..grading import discover, session, similarity
from ..request import config
from ..checks.words import plural
from .common import CONFIG_HELP, Parser, console as _console, print_json


def _share(text: str) -> float:
    """A threshold: 0.7 or 70%."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share such as 0.7 or 70%, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share above 0 and at most 1 (100%), got {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="idrrun similarity",
               description="Compare a class's submissions of one exercise with each other and "
                           "with the published solution, the start file's code removed first "
                           "(copydetect: pip install 'idrrun[similarity]'). Lists the pairs "
                           "where one shares most of its own code with the other, with the "
                           "passages: for the instructor, never for the students' feedback.",
               epilog="Exit codes: 0 compared (whatever was found); 1 some submissions could not "
                      "be read (listed, not compared); 2 usage or configuration error.")
    p.add_argument("exercise", metavar="NAME", help="the exercise (its spec NAME.toml)")
    p.add_argument("submissions", nargs="+", type=Path, metavar="SUBMISSION",
                   help="source files, notebooks, or one folder per student (as for grade)")
    p.add_argument("--threshold", type=_share, default=similarity.THRESHOLD, metavar="SHARE",
                   help="list a pair when one of the two shares at least this much of its own "
                        f"code with the other (default {similarity.THRESHOLD:.0%}%)")
    p.add_argument("--report", type=Path, metavar="FILE.md|FILE.json",
                   help="write the pairs and their passages there (Markdown or JSON)")
    p.add_argument("--language", "-l", choices=("c", "c++", "fortran", "cuda"),
                   help="the submissions' language (default: from each file)")
    p.add_argument("--no-solution", action="store_true",
                   help="leave the published solution out of the comparison")
    p.add_argument("--config", type=Path, metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    return p


def documents(subs: Sequence[discover.Submission], exercise: Exercise,
              with_solution: bool) -> list[similarity.Document]:
    """The submissions that could be read, then the published solution of each of their
    languages."""
    docs = [similarity.joined(s.student, s.source.language,
                              [(_graded_name(s), s.source.text), *s.headers],
                              s.source.first_line)
            for s in subs if s.source is not None]
    for language in dict.fromkeys(d.language for d in docs):
        pair = exercise.sources.get(language)
        if with_solution and pair is not None and pair.solution is not None:
            name = pair.solution.relative_to(exercise.path.parent).as_posix() \
                if pair.solution.is_relative_to(exercise.path.parent) else pair.solution.name
            docs.append(similarity.Document(name, language, pair.solution.read_text(errors="replace"),
                                            published=True))
    return docs


def _graded_name(sub: discover.Submission) -> str:
    """The graded file's name, beside its headers' (they are named from its folder)."""
    return (sub.chosen or sub.path).name


def starts(exercise: Exercise) -> dict[str, str]:
    return {language: pair.exercise.read_text(errors="replace")
            for language, pair in exercise.sources.items()}


def main(tokens: Sequence[str]) -> int:
    args = parser().parse_args(list(tokens))
    if args.report is not None and args.report.suffix.lower() not in (".md", ".json"):
        raise UsageError(f"--report {args.report}: use a .md or .json file name")
    similarity.library()  # said before anything is read
    workdir = Path.cwd()
    settings = config.load(workdir, project=args.config if args.config is not None else False)
    notes = session.unread_config(workdir, args.config)
    exercise, found = session.exercise_for_grading(args.exercise, settings, workdir)
    subs = discover.discover(args.submissions, exercise, args.language)
    result = similarity.compare(documents(subs, exercise, not args.no_solution), starts(exercise),
                                args.threshold)
    unread = [s for s in subs if s.source is None]
    if args.report is not None:
        text = (json.dumps(similarity.as_json(result, exercise.name), indent=1, ensure_ascii=False) + "\n"
                if args.report.suffix.lower() == ".json" else
                similarity.render_markdown(result, exercise.name))
        write_atomic(args.report, text)
    if args.json:
        print_json(similarity.as_json(result, exercise.name)
                   | {"not_read": [{"student": s.student, "why": s.problem} for s in unread]})
    else:
        _render(result, [*notes, *found], unread, args.report)
    return EXIT_FAILED if unread else EXIT_OK


def _render(result: similarity.Similarity, notes: Sequence[str],
            unread: Sequence[discover.Submission], report: Path | None) -> None:
    console = _console()
    for note in notes:
        console.print(neutralise(note), markup=False)
    for sub in unread:
        console.print(terminal_line(f"{sub.student}: not compared: {sub.problem}"), markup=False)
    if result.unchanged:
        console.print("no code of their own beyond the start file: "
                      + ", ".join(map(terminal_line, result.unchanged)), markup=False)
    table = Table(title=f"pairs sharing at least {result.threshold:.0%} of one's own code")
    for col in ("first", "second", "share of the first's", "of the second's", "passages"):
        table.add_column(col)
    for p in result.pairs:
        where = "; ".join(f"{a.first}-{a.last} / {b.first}-{b.last}" for a, b in p.passages)
        table.add_row(Text(terminal_line(p.first.label)), Text(terminal_line(p.second.label)),
                      f"{p.shares[0]:.0%}", f"{p.shares[1]:.0%}", where)
    console.print(table)
    students = sum(not d.published for d in result.compared)
    console.print(f"{plural(students, 'submission')} compared ({result.library}); "
                  f"{plural(len(result.pairs), 'pair')} above the threshold" +
                  (f"; passages in {report}" if report is not None else ""),
                  markup=False)
