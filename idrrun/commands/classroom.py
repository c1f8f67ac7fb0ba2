"""`idrrun classroom release|fetch|submit|status|collect|return|feedback`: the class's exchange
(grading/exchange.py) with nbgrader's verbs; grading itself is `idrrun grade` on what was
collected."""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Sequence
from pathlib import Path

from ..cli import EXIT_FAILED, EXIT_OK
from ..display import neutralise
from ..errors import UsageError
from ..grading import exchange, gradebook
from ..grading.rows import stamp
from .common import Parser, deadline, print_json

DEFAULT_EXCHANGE = Path("/srv/idrrun/exchange")
VERBS = {
    "release": "(teacher, root) publish an exercise's files and make each student's inbox",
    "fetch": "(student) copy a released exercise into the current folder",
    "submit": "(student) hand files in (again: the last submission counts)",
    "status": "(teacher) who has submitted, when, and who is late",
    "collect": "(teacher, root) copy each submission once into a folder to grade",
    "return": "(teacher, root) give each student her feedback, readable by her alone",
    "feedback": "(student) print her feedback of an exercise",
}


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="idrrun classroom",
               description="Assignments out, submissions in, feedback back, through an exchange "
                           "folder on the file system the hub's nodes share. Grade what was "
                           "collected with 'idrrun grade NAME OUT/submissions/* --feedback DIR'.",
               epilog="Exit codes: 0 done; 1 done, but some student's submission or feedback "
                      "is an error row; 2 usage error. 'idrrun classroom VERB --help' for each.")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB",
                             parser_class=Parser)
    for verb, what in VERBS.items():
        sub = verbs.add_parser(verb, help=what, description=what)
        sub.add_argument("exercise", metavar="NAME", help="the exercise")
        sub.add_argument("--exchange", type=Path, default=DEFAULT_EXCHANGE, metavar="DIR",
                         help=f"the exchange folder (default {DEFAULT_EXCHANGE})")
        sub.add_argument("--json", action="store_true", help="print the rows as JSON")
        if verb in ("release", "status", "collect", "return"):
            sub.add_argument("--roster", type=Path, required=True, metavar="FILE.csv",
                             help="the class, as for idrrun gradebook: each student's login "
                                  "(column login, else submission)")
        if verb in ("release", "status", "collect"):
            sub.add_argument("--deadline", type=deadline, metavar="ISO-TIME",
                             help="submissions changed after it are late (release keeps it "
                                  "for status and collect)")
        if verb in ("release", "submit"):
            sub.add_argument("files", nargs="+", type=Path, metavar="FILE")
        if verb == "collect":
            sub.add_argument("--to", type=Path, required=True, metavar="OUT",
                             help="OUT/submissions/ (one per student) and OUT/collected.csv")
        if verb == "return":
            sub.add_argument("--feedback", type=Path, required=True, metavar="DIR",
                             help="the feedback folder of idrrun grade --feedback")
            sub.add_argument("--collected", type=Path, metavar="OUT",
                             help="the folder of collect: late submissions say so in the feedback")
    return p


def roster(path: Path) -> list[exchange.Student]:
    return exchange.students([s.login or s.submission for s in gradebook.read_roster(path)])


def main(tokens: Sequence[str]) -> int:
    args = parser().parse_args(list(tokens))
    name = exchange.exercise_name(args.exercise)
    if args.verb == "fetch":
        for path in exchange.fetch(args.exchange, name, Path.cwd()):
            print(neutralise(str(path)))
        return EXIT_OK
    if args.verb == "submit":
        print(neutralise(str(exchange.submit(args.exchange, name, args.files, getpass.getuser()))))
        return EXIT_OK
    if args.verb == "feedback":
        path = args.exchange / "feedback" / getpass.getuser() / f"{name}.md"
        try:
            print(neutralise(path.read_text(errors="replace")))
        except FileNotFoundError:
            raise UsageError(f"no feedback of {name} yet ({path})") from None
        return EXIT_OK
    return _teacher(args, name)


def _teacher(args: argparse.Namespace, name: str) -> int:
    klass = roster(args.roster)
    if args.verb == "release":
        done = exchange.release(args.exchange, name, args.files, klass, args.deadline)
        print(f"released {name}: {', '.join(done)} to {len(klass)} students")
        return EXIT_OK
    rows: Sequence[exchange.Collected | exchange.Returned]
    if args.verb == "return":
        late = exchange.read_collection(args.collected).late if args.collected else ()
        rows = exchange.give_back(args.exchange, name, klass, args.feedback, late)
    else:
        deadline = args.deadline or exchange.deadline_of(args.exchange, name)
        if args.verb == "status":
            rows = exchange.board(args.exchange, name, klass, deadline)
        else:
            rows = exchange.collect(args.exchange, name, klass, args.to, deadline)
    if args.json:
        print_json(exchange.to_json(rows))
    else:
        for row in rows:
            print(_line(row))
    return EXIT_FAILED if any(r.status == "error" for r in rows) else EXIT_OK


def _line(row: exchange.Collected | exchange.Returned) -> str:
    if isinstance(row, exchange.Returned):
        return neutralise(f"{row.student:<16} {row.status}  {row.problem}".rstrip())
    when = stamp(row.submitted)
    return neutralise(f"{row.student:<16} {row.status:<10} {when:<25} {'LATE' if row.late else '':<4} "
                      f"{' '.join(row.files)}  {row.problem}".rstrip())
