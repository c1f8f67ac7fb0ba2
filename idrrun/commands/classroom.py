"""`idrrun classroom release|serve|status|collect|return` (the teacher) and
`idrrun classroom list|fetch|submit|feedback` (the student): the class's exchange
(grading/exchange.py, its receiver grading/receiver.py, the student's client
grading/exchange_client.py) with nbgrader's verbs; grading itself is `idrrun grade` on what was
collected."""

from __future__ import annotations

import argparse
import os
import socketserver
import threading
from collections.abc import Sequence
from pathlib import Path

from ..cli import EXIT_FAILED, EXIT_OK
from ..display import neutralise
from ..checks import specs
from ..errors import UsageError
from ..grading import exchange, exchange_client, gradebook, handout, receiver
from ..grading.rows import stamp
from ..request import config
from .common import Parser, deadline, print_json

DEFAULT_EXCHANGE = Path("/srv/idrrun/exchange")
DEFAULT_SOCKET = Path(exchange_client.DEFAULT_URL.removeprefix("unix:"))
TEACHER = ("release", "serve", "status", "collect", "return")
VERBS = {
    "release": "(teacher, root) publish an exercise (its notebooks and start files, solution "
               "cells removed) to the roster's students",
    "serve": "(root) the exchange's receiver: takes each submission as it is handed in, with the "
             "time it was received (a Unix socket, or TCP as the hub's service)",
    "status": "(teacher) who has submitted, when, late, unchanged from the release",
    "collect": "(teacher, root) copy each student's submission, as it was received, into a "
               "folder to grade",
    "return": "(teacher, root) give each student her feedback, for her alone",
    "list": "(student) the exercises released to you, their deadlines, your last submission",
    "fetch": "(student) copy a released exercise into the current folder",
    "submit": "(student) hand files in (again: the last counts); says what was received, when",
    "feedback": "(student) your feedback of an exercise, saved into NAME/feedback/ and shown",
}


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="idrrun classroom",
               description="Assignments out, submissions in, feedback back. Students hand their "
                           "work to the exchange's receiver (idrrun classroom serve, as root), "
                           "which keeps it with the time it was received; the teacher collects "
                           "what was received. Grade it with 'idrrun grade NAME OUT/submissions/* "
                           "--feedback DIR'.",
               epilog="Exit codes: 0 done; 1 done, but some student's row is an error; 2 usage "
                      "error. 'idrrun classroom VERB --help' for each.")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=Parser)
    for verb, what in VERBS.items():
        sub = verbs.add_parser(verb, help=what, description=what)
        if verb not in ("serve", "list"):
            sub.add_argument("exercise", metavar="NAME", help="the exercise")
        if verb in TEACHER:
            sub.add_argument("--exchange", type=Path, default=DEFAULT_EXCHANGE, metavar="DIR",
                             help=f"the exchange folder, root's (default {DEFAULT_EXCHANGE})")
        else:
            sub.add_argument("--url", metavar="URL",
                             help="where the receiver is: unix:/PATH or http://HOST:PORT "
                                  f"(default: IDRRUN_EXCHANGE_URL, else {exchange_client.DEFAULT_URL})")
        if verb != "serve":
            sub.add_argument("--json", action="store_true", help="print the rows as JSON")
        if verb in ("release", "status", "collect", "return"):
            sub.add_argument("--roster", type=Path, required=True, metavar="FILE.csv",
                             help="the class, as for idrrun gradebook: each student's login "
                                  "(column login, else submission)")
        if verb in ("release", "status", "collect"):
            sub.add_argument("--deadline", type=deadline, metavar="ISO-TIME",
                             help="submissions received after it are late (release keeps it "
                                  "for the receiver, status and collect)")
        if verb in ("status", "collect"):
            sub.add_argument("--on-time", action="store_true",
                             help="take each student's last submission received by the "
                                  "deadline (default: her last, late if after it)")
        if verb == "release":
            sub.add_argument("files", nargs="*", type=Path, metavar="FILE",
                             help="the files to publish (notebooks are published without their "
                                  "solution cells); none: the exercise's own notebooks and "
                                  "start files, from the course (--course)")
            sub.add_argument("--course", type=Path, metavar="DIR",
                             help="the teacher's course (its notebooks/ and examples/; default: "
                                  "the folder above the configured examples)")
        if verb == "submit":
            sub.add_argument("files", nargs="+", type=Path, metavar="FILE",
                             help="files, or a folder (its files)")
        if verb == "collect":
            sub.add_argument("--to", type=Path, required=True, metavar="OUT",
                             help="OUT/submissions/LOGIN/ (one folder per student) and "
                                  "OUT/collected.csv")
        if verb == "return":
            sub.add_argument("--feedback", type=Path, required=True, metavar="DIR",
                             help="the feedback folder of idrrun grade --feedback")
            sub.add_argument("--collected", type=Path, metavar="OUT",
                             help="the folder of collect: late submissions say so in the feedback")
        if verb == "serve":
            sub.add_argument("--socket", type=Path, metavar="PATH",
                             help=f"listen on this Unix socket (students known by their uid; "
                                  f"default {DEFAULT_SOCKET} when --listen is not given)")
            sub.add_argument("--listen", metavar="HOST:PORT",
                             help="listen on TCP, students known by their JupyterHub token "
                                  "(as the hub's service: hub/jupyterhub_config.py)")
            sub.add_argument("--hub-api", metavar="URL",
                             help="the hub's API (default JUPYTERHUB_API_URL, as the hub gives "
                                  "its services)")
    return p


def roster(path: Path) -> tuple[list[exchange.Student], list[exchange.Collected]]:
    """The roster's students that are users here, and an error row for each that is not:
    one wrong line stops nobody else's collection."""
    found, rows = [], []
    for s in gradebook.read_roster(path):
        login = s.login or s.submission
        try:
            found.extend(exchange.students([login]))
        except UsageError as exc:
            rows.append(exchange.Collected(login, "error", problem=f"roster: {exc}"))
    return found, rows


def main(tokens: Sequence[str]) -> int:
    args = parser().parse_args(list(tokens))
    if args.verb in TEACHER:
        return _teacher(args)
    return _student(args)


def _student(args: argparse.Namespace) -> int:
    where = exchange_client.place(args.url)
    if args.verb == "list":
        answer = exchange_client.listing(where)
        if args.json:
            print_json(answer)
            return EXIT_OK
        for task in answer.get("assignments", []):
            last = task.get("last")
            mine = (f"submitted {last['received_at']}{' LATE' if last.get('late') else ''}"
                    if last else "not submitted")
            print(neutralise(f"{task['exercise']:<24} deadline {task.get('deadline') or 'none':<26} "
                             f"{mine}{'  feedback ready' if task.get('feedback') else ''}"))
        return EXIT_OK
    name = exchange.exercise_name(args.exercise)
    if args.verb == "fetch":
        got = exchange_client.fetch(where, name, Path.cwd())
        for path, written in got:
            print(neutralise(f"{path}{'' if written else '  (kept: yours already)'}"))
        return EXIT_OK
    if args.verb == "submit":
        receipt = exchange_client.submit(where, name, args.files)
        if args.json:
            print_json(receipt.to_json())
        else:
            print(neutralise(exchange_client.receipt_text(receipt)))
        return EXIT_OK
    files = exchange_client.feedback(where, name, Path.cwd() / name / "feedback")
    text = files.get(f"{name}.md", b"").decode(errors="replace")
    print(neutralise(text))
    print(neutralise(f"(saved in {Path.cwd() / name / 'feedback'}/: open {name}.md there)"))
    return EXIT_OK


def _release_files(args: argparse.Namespace, name: str) -> list[tuple[str, bytes]]:
    paths = [(p, p.name) for p in args.files] or _course_files(name, _course(args))
    out: dict[str, bytes] = {}
    for path, label in paths:
        if label in out:
            raise UsageError(f"release: two files named {label}: nothing was released")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"release: {path}: {exc.strerror}: nothing was released") from None
        copy = handout.released_copy(label, data, name)
        if copy.stripped:
            print(neutralise(f"{label}: {len(copy.stripped)} solution cell(s) left out "
                             f"({', '.join(copy.stripped)})"))
        out[copy.name] = copy.data
    return list(out.items())


def _course_files(name: str, course: Path) -> list[tuple[Path, str]]:
    """The course's files of the exercise, each with the name it is released under: a
    chapter's C and Fortran notebooks share a name (01_intro.ipynb), so a notebook goes out
    as LANGUAGE_NAME (C_01_intro.ipynb, Fortran_01_intro.ipynb)."""
    return [(p, f"{p.parent.name}_{p.name}" if p.suffix == ".ipynb" else p.name)
            for p in handout.course_handout(name, course)]


def _course(args: argparse.Namespace) -> Path:
    if args.course:
        return Path(args.course)
    examples = specs.examples_dir(config.load(project=False), None)
    if examples is None:
        raise UsageError("release NAME with no FILE needs the teacher's course: --course DIR "
                         "(the folder holding its notebooks/ and examples/)")
    return examples.parent


def _serve(args: argparse.Namespace) -> int:
    top = exchange.open_exchange(args.exchange, create=True)
    os.close(top)
    servers: list[socketserver.BaseServer] = []
    if args.listen:
        host, _, port = str(args.listen).rpartition(":")
        try:
            identify = receiver.hub_identity(args.hub_api)
        except ImportError:
            raise UsageError("--listen needs jupyterhub (the hub's environment): it asks the hub "
                             "who holds each token") from None
        servers.append(receiver.tcp_server((host or "0.0.0.0", int(port)),
                                           receiver.Receiver(args.exchange, identify,
                                                             os.environ.get("JUPYTERHUB_SERVICE_PREFIX", ""))))
    if args.socket or not args.listen:
        servers.append(receiver.unix_server(args.socket or DEFAULT_SOCKET,
                                            receiver.Receiver(args.exchange, receiver.peer_login)))
    where = ", ".join(f"unix:{s.server_address}" if isinstance(s, receiver.UnixServer)
                      else f"http://{args.listen}" for s in servers)
    print(f"idrrun classroom serve: receiving for {args.exchange} at {where}", flush=True)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers[1:]]
    for t in threads:
        t.start()
    try:
        servers[0].serve_forever()
    except KeyboardInterrupt:
        pass
    return EXIT_OK


# Complexity: the teacher's verbs, one branch each, after the checks they share.
def _teacher(args: argparse.Namespace) -> int:
    if args.verb == "serve":
        return _serve(args)
    name = exchange.exercise_name(args.exercise)
    klass, problems = roster(args.roster)
    if args.verb == "release":
        files = _release_files(args, name)
        done = exchange.release(args.exchange, name, files, klass, args.deadline)
        print(neutralise(f"released {name}: {', '.join(done)} to {len(klass)} student"
                         f"{'' if len(klass) == 1 else 's'}"
                         + (f" (deadline {args.deadline.isoformat()})" if args.deadline else "")))
        for problem in problems:
            print(_line(problem))
        return EXIT_FAILED if problems else EXIT_OK
    rows: list[exchange.Collected | exchange.Returned]
    if args.verb == "return":
        late = exchange.read_collection(args.collected).late if args.collected else ()
        rows = [*exchange.give_back(args.exchange, name, klass, args.feedback, late),
                *(exchange.Returned(p.student, "error", p.problem) for p in problems)]
    else:
        when = args.deadline or exchange.deadline_of(args.exchange, name)
        if args.verb == "status":
            got = exchange.status(args.exchange, name, klass, when, args.on_time)
        else:
            got = exchange.collect(args.exchange, name, klass, args.to, when, args.on_time, problems)
        rows = list(got) if args.verb == "collect" else [*got, *problems]
    if args.json:
        print_json(exchange.to_json(rows))
    else:
        for row in rows:
            print(_line(row))
        if args.verb != "return":
            print(neutralise(exchange.summary([r for r in rows if isinstance(r, exchange.Collected)])))
    return EXIT_FAILED if any(r.status == "error" for r in rows) else EXIT_OK


def _line(row: exchange.Collected | exchange.Returned) -> str:
    if isinstance(row, exchange.Returned):
        return neutralise(f"{row.student:<16} {row.status}  {row.problem}".rstrip())
    when = stamp(row.submitted)
    notes = [row.problem, *(f"[{u}]" for u in row.unchanged), row.note]
    return neutralise(f"{row.student:<16} {row.status:<10} {when:<25} {'LATE' if row.late else '':<4} "
                      f"{' '.join(row.files)}  {' '.join(n for n in notes if n)}".rstrip())
