"""The class's exchange: assignments out, submissions in, feedback back (nbgrader's verbs:
release, fetch, submit, collect, return), kept in one folder that root alone writes.

    DIR/released/NAME/           root's, 0755: the files students fetch
    DIR/released/NAME.json       its files, deadline and the logins it is released to
    DIR/received/                root's, 0700: nobody else reads or writes anything below it
    DIR/received/LOGIN/NAME/N/   her N-th submission of NAME as it was received: her files and
                                 receipt.json (when, digest, deadline, late, unchanged)
    DIR/feedback/LOGIN/          root's, 0700: NAME.md and its pictures, handed to her alone

A student never writes into the exchange. Her submission reaches the receiver (`idrrun
classroom serve`, grading/receiver.py, run as root) as bytes over a socket; the receiver knows
who she is from the kernel (a Unix socket's peer credentials) or from the hub (her JupyterHub
token), takes the time of receipt from its own clock, hashes what it got and stores it under a
number of its own, in a folder named by her login alone. What she does to her files afterwards
(a write through a memory mapping, a rename, a link, a second submit) cannot change a submission
received before: collect copies what was received, with the time it was received. The shared
folder of earlier versions took the time from the files' ctime, which a write through a shared
mapping does not move (never on tmpfs), and the files themselves at collection time.

    release(...), receive(...) -> Receipt, status(...), collect(...) -> [Collected],
    give_back(...) -> [Returned], feedback_of(...)
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import hashlib
import io
import json
import os
import pwd
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..files import write_atomic_at
from ..run import boundary
from . import comparison, handout
from .discover import MAX_SOURCE_BYTES
from .feedback import feedback_names
from .rows import stamp

# What one student may hand in for one exercise: a few files (a source, a notebook, a header),
# each bounded as the grader bounds a source; more is refused at the receiver, never stored.
MAX_FILES = 16
MAX_TOTAL_BYTES = 4 * MAX_SOURCE_BYTES
# Submissions kept per student and exercise: every one stays (the record of what was handed in
# when); past this many she is asked to stop, so that one student cannot fill the disk.
MAX_SUBMISSIONS = 200
# A file name the exchange keeps: no path, no hidden file, nothing a shell or a CSV interprets.
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")
# A login or exercise name used as a folder name in the exchange.
SAFE_LOGIN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
RECEIPT = "receipt.json"


@dataclass(frozen=True)
class Student:
    login: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Receipt:
    """One submission as the receiver got it: what, from whom, when (its own clock)."""

    exercise: str
    student: str
    number: int  # 1, 2, ...: the receiver's order of her submissions of the exercise
    received: float  # epoch seconds, the receiver's clock when the last byte had arrived
    files: tuple[tuple[str, int, str], ...]  # (name, size, sha256), by name
    digest: str  # sha256 of the names and bytes received
    deadline: str | None = None  # ISO 8601, as released
    late: bool = False
    unchanged: tuple[str, ...] = ()  # why it looks like untouched work (handout.unchanged)

    @property
    def size(self) -> int:
        return sum(size for _, size, _ in self.files)

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "received_at": stamp(self.received),
                "files": [{"name": n, "size": s, "sha256": h} for n, s, h in self.files]}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Receipt:
        return cls(str(record["exercise"]), str(record["student"]), int(record["number"]),
                   float(record["received"]),
                   tuple((str(f["name"]), int(f["size"]), str(f["sha256"])) for f in record["files"]),
                   str(record["digest"]), record.get("deadline"), bool(record.get("late")),
                   tuple(str(u) for u in record.get("unchanged", ())))


@dataclass(frozen=True)
class Collected:
    """One student's submission of one exercise, as collected (files empty when none)."""

    student: str
    status: str  # "collected", "missing" (nothing submitted) or "error" (problem says why)
    submitted: float | None = None  # when the receiver got it (epoch seconds)
    late: bool = False
    files: tuple[str, ...] = ()
    digest: str = ""  # sha256 of the names and bytes collected
    problem: str = ""
    unchanged: tuple[str, ...] = ()
    number: int = 0  # which of her submissions (Receipt.number)
    note: str = ""  # e.g. a later submission, after the deadline, left out by --on-time


@dataclass(frozen=True)
class Returned:
    student: str
    status: str  # "returned", "no feedback" or "error"
    problem: str = ""


@dataclass(frozen=True)
class Assignment:
    """A released exercise: its files (name to bytes), deadline and the logins it went to."""

    exercise: str
    deadline: dt.datetime | None
    files: Mapping[str, bytes] = field(default_factory=dict)
    students: tuple[str, ...] = ()


def students(logins: Sequence[str]) -> list[Student]:
    """The roster's logins as users of this machine (the hub's users); unknown ones refused."""
    out = []
    for login in logins:
        if not SAFE_LOGIN.fullmatch(login):
            raise UsageError(f"{login!r} is not a login the exchange takes (a-z, 0-9, _ . -)")
        try:
            entry = pwd.getpwnam(login)
        except KeyError:
            raise UsageError(f"{login}: no such user on this machine") from None
        out.append(Student(login, entry.pw_uid, entry.pw_gid))
    return out


def exercise_name(name: str) -> str:
    if not SAFE_LOGIN.fullmatch(name.lower()) or not SAFE_NAME.fullmatch(name):
        raise UsageError(f"{name!r} is not an exercise name the exchange takes")
    return name


class Refused(Exception):
    """Why a submission is not taken, or a student's row is an error: words for her or the
    teacher (a name not allowed, too large, not released to her, ...)."""


# --- root's folders: made here, checked every time (owner, mode, not a link) ------------------
# Every descriptor the exchange opens, and every file it reads, goes through the grader's
# boundary (run/boundary): one rule of what is followed, refused and read, not a second copy.

def _own_dir(parent: int, name: str, mode: int, uid: int = 0, gid: int = 0) -> int:
    """A descriptor of the folder NAME under PARENT, made if absent, owned uid:gid with MODE;
    one that exists must already be so (boundary.own_dir_at: a folder someone else made is
    never taken over)."""
    try:
        return boundary.own_dir_at(parent, name, mode, uid, gid)
    except boundary.NotOwnFolder as exc:
        raise UsageError(f"{name}: {exc.strerror}, left alone") from None


def _sub_dir(parent: int, name: str) -> int | None:
    """The folder NAME under one of root's own (0700) folders, None when absent."""
    try:
        return boundary.open_folder(parent, name)
    except FileNotFoundError:
        return None


def open_exchange(root: Path, create: bool = False) -> int:
    """The exchange's folder, opened once: root's (or the teacher's when not root), writable by
    nobody else, and so is the way to it (boundary.open_published: a folder on the way that
    someone else could rename or replace by a link would let them choose where root writes).
    Made with its missing parents only with CREATE."""
    if not create and not os.path.lexists(root):
        raise UsageError(f"--exchange {root}: No such file or directory")
    try:
        return boundary.open_published(root, 0o755)
    except OSError as exc:
        raise UsageError(f"--exchange {root}: {exc.strerror or exc}") from None


def _read_own(folder: int, name: str, cap: int) -> bytes | None:
    """A file of one of our own folders, as the grader takes a box's (boundary.take: a regular
    file with no other name, not a link, at most CAP bytes, unchanged while it is read); None
    if there is none."""
    taken = boundary.take(folder, name, cap)
    if taken.data is not None:
        return taken.data
    if taken.why == "absent":
        return None
    raise UsageError(f"{name}: {'a link, not followed' if taken.why.startswith('a link,') else taken.why}")


# --- release ----------------------------------------------------------------------------------

def release(root: Path, name: str, files: Sequence[tuple[str, bytes]], roster: Sequence[Student],
            deadline: dt.datetime | None) -> list[str]:
    """Publish FILES ((name, bytes): what handout.released_copy made of the teacher's) as
    exercise NAME, read-only to all, released to the roster's students. Returns their names."""
    exercise_name(name)
    for file, _ in files:
        if not SAFE_NAME.fullmatch(file):
            raise UsageError(f"{file}: a released file's name is letters, digits, _ . + -")
    top = open_exchange(root, create=True)
    try:
        released = _own_dir(top, "released", 0o755)
        try:
            folder = _own_dir(released, name, 0o755)
            try:
                for old in boundary.names(folder):  # a file released before and not now goes
                    if SAFE_NAME.fullmatch(old) and old not in dict(files):
                        boundary.discard(folder, old)
                for file, data in files:
                    write_atomic_at(folder, file, data, 0o644)
            finally:
                os.close(folder)
            write_atomic_at(released, f"{name}.json", json.dumps(
                {"exercise": name, "files": [f for f, _ in files],
                 "deadline": deadline.isoformat() if deadline else None,
                 "students": [s.login for s in roster]}, indent=1).encode(), 0o644)
        finally:
            os.close(released)
        for folder_name in ("received", "feedback"):
            os.close(_own_dir(top, folder_name, 0o700))
        return [f for f, _ in files]
    finally:
        os.close(top)


def _assignment_at(released: int, name: str, with_files: bool) -> Assignment | None:
    try:
        raw = _read_own(released, f"{name}.json", 1 << 20)
        if raw is None:
            return None
        record = json.loads(raw)
        deadline = dt.datetime.fromisoformat(record["deadline"]) if record.get("deadline") else None
        logins = tuple(str(s) for s in record.get("students", ()))
        files: dict[str, bytes] = {}
        if with_files:
            folder = boundary.open_folder(released, name)
            try:
                for file in record.get("files", ()):
                    data = _read_own(folder, str(file), MAX_SOURCE_BYTES * 4) if SAFE_NAME.fullmatch(str(file)) else None
                    if data is not None:
                        files[str(file)] = data
            finally:
                os.close(folder)
        else:
            files = {str(f): b"" for f in record.get("files", ())}
    except (OSError, ValueError, KeyError, TypeError, UsageError) as exc:
        raise UsageError(f"released/{name}.json: not a release of idrrun classroom ({exc})") from None
    return Assignment(name, deadline, files, logins)


def assignment(root: Path, name: str, with_files: bool = True) -> Assignment:
    """The released exercise NAME; UsageError when it is not released."""
    exercise_name(name)
    top = open_exchange(root)
    try:
        released = _sub_dir(top, "released")
        found = None
        if released is not None:
            try:
                found = _assignment_at(released, name, with_files)
            finally:
                os.close(released)
    finally:
        os.close(top)
    if found is None:
        raise UsageError(f"{name} is not released in {root}")
    return found


def assignments(root: Path, login: str | None = None) -> list[Assignment]:
    """Every released exercise (to LOGIN when given), without their files' bytes."""
    top = open_exchange(root)
    try:
        released = _sub_dir(top, "released")
        if released is None:
            return []
        try:
            names = sorted(n.removesuffix(".json") for n in boundary.names(released)
                           if n.endswith(".json") and SAFE_NAME.fullmatch(n))
            out = [a for a in (_assignment_at(released, n, False) for n in names) if a is not None]
        finally:
            os.close(released)
    finally:
        os.close(top)
    return [a for a in out if login is None or login in a.students]


def deadline_of(root: Path, name: str) -> dt.datetime | None:
    try:
        return assignment(root, name, with_files=False).deadline
    except UsageError:
        return None


# --- receive: the receiver's one write of a submission ----------------------------------------

_numbering = threading.Lock()  # the receiver's threads take their numbers one at a time


def check_files(files: Mapping[str, bytes]) -> None:
    """What one submission may hold; Refused says what is wrong, in her terms."""
    if not files:
        raise Refused("no file: name the files to hand in")
    if len(files) > MAX_FILES:
        raise Refused(f"{len(files)} files: at most {MAX_FILES} a submission")
    for name, data in files.items():
        if not SAFE_NAME.fullmatch(name):
            raise Refused(f"{name!r}: a submitted file's name is letters, digits, _ . + - "
                          "(not starting with . - or +), at most 100 characters")
        if len(data) > MAX_SOURCE_BYTES:
            raise Refused(f"{name}: {len(data)} bytes, more than {MAX_SOURCE_BYTES} a file")
    total = sum(len(d) for d in files.values())
    if total > MAX_TOTAL_BYTES:
        raise Refused(f"{total} bytes in all, more than {MAX_TOTAL_BYTES} a submission")


def digest_of(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name, data in sorted(files.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def receive(root: Path, login: str, name: str, files: Mapping[str, bytes],
            now: float | None = None) -> Receipt:
    """Store FILES as LOGIN's next submission of NAME, in root's own folder, with the time of
    receipt (NOW, else the clock now) and its digest. Refused when it is not to be taken (not
    released to her, a bad name, too large); OSError when it could not be stored (a full disk):
    then nothing of it is kept."""
    exercise_name(name)
    check_files(files)
    task = assignment(root, name, with_files=True)
    if login not in task.students:
        raise Refused(f"{name} is not released to {login}")
    received = time.time() if now is None else now
    late = task.deadline is not None and received > task.deadline.timestamp()
    receipt_files = tuple((n, len(d), hashlib.sha256(d).hexdigest()) for n, d in sorted(files.items()))
    top = open_exchange(root)
    try:
        inbox = _own_dir(top, "received", 0o700)
        try:
            mine = _own_dir(inbox, login, 0o700)
            try:
                folder = _own_dir(mine, name, 0o700)
                try:
                    # Untouched work is the whole submission's: an untouched start file beside
                    # the notebook she worked in is no sign of it.
                    said = handout.unchanged(files, task.files, exercise=name)
                    unchanged = said if len(said) >= len(files) else ()
                    with _numbering:
                        while True:  # another receiver of the same exchange may take a number
                            receipt = Receipt(name, login, _next_number(folder), received,
                                              receipt_files, digest_of(files),
                                              task.deadline.isoformat() if task.deadline else None,
                                              late, unchanged)
                            try:
                                _store(folder, receipt, files)
                                break
                            except FileExistsError:
                                continue
                finally:
                    os.close(folder)
            finally:
                os.close(mine)
        finally:
            os.close(inbox)
    finally:
        os.close(top)
    return receipt


def _numbers(folder: int) -> list[int]:
    return sorted(int(n) for n in boundary.names(folder) if n.isdigit())


def _next_number(folder: int) -> int:
    taken = _numbers(folder)
    if len(taken) >= MAX_SUBMISSIONS:
        raise Refused(f"{len(taken)} submissions of this exercise already: ask your teacher")
    return (taken[-1] if taken else 0) + 1


def _store(folder: int, receipt: Receipt, files: Mapping[str, bytes]) -> None:
    """Her files, then the receipt last: a submission without its receipt was not received
    whole (a full disk) and is removed here, or ignored by whoever reads."""
    label = f"{receipt.number:06d}"
    os.mkdir(label, 0o700, dir_fd=folder)
    box = boundary.open_folder(folder, label)
    try:
        try:
            for file, data in files.items():
                write_atomic_at(box, file, data, 0o600)
            write_atomic_at(box, RECEIPT, json.dumps(receipt.to_json(), indent=1).encode(), 0o600)
        except OSError:
            boundary.remove_entry(folder, label, os.geteuid())
            raise
    finally:
        os.close(box)


def receipts(root: Path, login: str, name: str) -> list[Receipt]:
    """Her submissions of NAME as received, oldest first."""
    top = open_exchange(root)
    try:
        return _receipts_at(top, login, name)
    finally:
        os.close(top)


def _receipts_at(top: int, login: str, name: str) -> list[Receipt]:
    out: list[Receipt] = []
    fds: list[int] = []
    try:
        for part in ("received", login, name):
            fd = _sub_dir(fds[-1] if fds else top, part)
            if fd is None:
                return out
            fds.append(fd)
        for number in _numbers(fds[-1]):
            box = _sub_dir(fds[-1], f"{number:06d}")
            if box is None:
                continue
            try:
                raw = _read_own(box, RECEIPT, 1 << 20)
            finally:
                os.close(box)
            if raw is not None:  # else: not received whole (the disk was full then)
                out.append(Receipt.from_json(json.loads(raw)))
        return out
    finally:
        for fd in fds:
            os.close(fd)


def _files_of(top: int, receipt: Receipt) -> dict[str, bytes]:
    """The bytes of a receipt's files, checked against the digest recorded at receipt."""
    path = ("received", receipt.student, receipt.exercise, f"{receipt.number:06d}")
    fds: list[int] = []
    try:
        for part in path:
            fd = _sub_dir(fds[-1] if fds else top, part)
            if fd is None:
                raise Refused(f"submission {receipt.number}: its folder is gone")
            fds.append(fd)
        got = {}
        for file, _, _ in receipt.files:
            data = _read_own(fds[-1], file, MAX_SOURCE_BYTES)
            if data is None:
                raise Refused(f"submission {receipt.number}: {file} is gone")
            got[file] = data
    finally:
        for fd in fds:
            os.close(fd)
    if digest_of(got) != receipt.digest:
        raise Refused(f"submission {receipt.number}: its files differ from what was received")
    return got


# --- status and collect: what was received, never the students' files -------------------------

def _chosen(mine: Sequence[Receipt], limit: float | None, on_time: bool) -> tuple[Receipt | None, str]:
    """The submission that counts: her last; with ON_TIME, her last received by the deadline
    (and a note of what came after)."""
    if not mine:
        return None, ""
    last = mine[-1]
    if not on_time or limit is None or last.received <= limit:
        return last, ""
    kept = [r for r in mine if r.received <= limit]
    after = f"{len(mine) - len(kept)} submission(s) after the deadline left out (last {stamp(last.received)})"
    return (kept[-1] if kept else None), after


def _row(receipt: Receipt, limit: float | None, note: str = "") -> Collected:
    return Collected(receipt.student, "collected", receipt.received,
                     limit is not None and receipt.received > limit,
                     tuple(n for n, _, _ in receipt.files), receipt.digest,
                     unchanged=receipt.unchanged, number=receipt.number, note=note)


def status(root: Path, name: str, roster: Sequence[Student], deadline: dt.datetime | None,
           on_time: bool = False) -> list[Collected]:
    """Who has submitted NAME and when (as received), from the receipts alone."""
    assignment(root, name, with_files=False)  # UsageError: not released
    limit = deadline.timestamp() if deadline else None
    top = open_exchange(root)
    rows = []
    try:
        for student in roster:
            try:
                chosen, note = _chosen(_receipts_at(top, student.login, name), limit, on_time)
            except (OSError, ValueError, KeyError, TypeError, UsageError) as exc:
                rows.append(Collected(student.login, "error", problem=str(exc)))
                continue
            rows.append(Collected(student.login, "missing", note=note) if chosen is None else
                        dataclasses.replace(_row(chosen, limit, note), status="submitted"))
    finally:
        os.close(top)
    return rows


def collect(root: Path, name: str, roster: Sequence[Student], out: Path,
            deadline: dt.datetime | None, on_time: bool = False,
            problems: Sequence[Collected] = ()) -> list[Collected]:
    """Each student's submission of NAME that counts (her last; with ON_TIME her last received
    by the deadline), copied as it was received into OUT/submissions/LOGIN/ (a folder named
    by her login alone: what `idrrun grade` takes), and OUT/collected.csv. Every student gets a
    row; one that cannot be collected is an error row and the others are collected (PROBLEMS:
    the roster's lines that are no student here, recorded as they are)."""
    assignment(root, name, with_files=False)  # UsageError: not released
    limit = deadline.timestamp() if deadline else None
    # OUT as the boards' folder is: its way checked, opened once, written through descriptors
    # (root writes there what students handed in: a folder someone else could change would
    # let them choose where).
    try:
        out_fd = boundary.open_published(out, 0o700)
    except OSError as exc:
        raise UsageError(f"--to {out}: {exc.strerror or exc}") from None
    try:
        try:
            os.fchmod(out_fd, 0o700)
            # The last collection's: collected anew (removed through descriptors, as a box's).
            boundary.remove_entry(out_fd, SUBMISSIONS, os.geteuid())
            os.mkdir(SUBMISSIONS, 0o700, dir_fd=out_fd)
            target = boundary.open_folder(out_fd, SUBMISSIONS)
        except OSError as exc:
            raise UsageError(f"--to {out}: {exc.strerror or exc}") from None
        top = open_exchange(root)
        rows = []
        try:
            for student in roster:
                rows.append(_collected(top, name, student, target, limit, on_time))
        finally:
            os.close(top)
            os.close(target)
        rows += problems
        try:
            write_atomic_at(out_fd, COLLECTED, collected_csv(rows, deadline).encode(), 0o600)
        except OSError as exc:
            raise UsageError(f"{out / COLLECTED}: {exc.strerror or exc}") from None
    finally:
        os.close(out_fd)
    return rows


def _collected(top: int, name: str, student: Student, target: int, limit: float | None,
               on_time: bool) -> Collected:
    try:
        chosen, note = _chosen(_receipts_at(top, student.login, name), limit, on_time)
        if chosen is None:
            return Collected(student.login, "missing", note=note)
        files = _files_of(top, chosen)
        os.mkdir(student.login, 0o700, dir_fd=target)
        folder = boundary.open_folder(target, student.login)
        try:
            for file, data in files.items():
                write_atomic_at(folder, file, data, 0o600)
        finally:
            os.close(folder)
    except (Refused, OSError, ValueError, KeyError, TypeError, UsageError) as exc:
        return Collected(student.login, "error", problem=str(exc))
    return _row(chosen, limit, note)


SUBMISSIONS = "submissions"
# The collection's record, beside OUT/submissions/: what `idrrun grade` and `return` read.
COLLECTED = "collected.csv"


@dataclass(frozen=True)
class Lateness:
    """When each student handed her work in (epoch seconds, by the name `idrrun grade` gives
    her submission: her login for a collected one), and the deadline (None: none)."""

    deadline: dt.datetime | None
    submitted: Mapping[str, float]

    def of(self, student: str) -> tuple[float | None, float | None]:
        """(when she submitted, how many seconds after the deadline; None: not late, or not
        known)."""
        when = self.submitted.get(student)
        if when is None or self.deadline is None:
            return when, None
        past = when - self.deadline.timestamp()
        return when, past if past > 0 else None


@dataclass(frozen=True)
class Collection:
    """What a collection recorded (collected.csv): its deadline and each collected
    submission's time."""

    deadline: dt.datetime | None
    submitted: Mapping[str, float]
    late: tuple[str, ...]  # the students collected after the deadline
    unchanged: tuple[str, ...] = ()  # the students whose work looks untouched


def read_collection(folder: Path) -> Collection:
    """The record `collect` wrote in FOLDER (OUT of --to); UsageError when it cannot be read."""
    path = folder / COLLECTED
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            records = list(csv.DictReader(fh))
        deadlines = {r["deadline"] for r in records if r.get("deadline")}
        submitted = {r["student"]: dt.datetime.fromisoformat(r["submitted"]).timestamp()
                     for r in records if r.get("submitted")}
        late = tuple(r["student"] for r in records if r.get("late"))
        unchanged = tuple(r["student"] for r in records if r.get("unchanged"))
    except (OSError, KeyError, ValueError) as exc:
        raise UsageError(f"{path}: not a collection's record of idrrun classroom collect: {exc}") from None
    deadline = dt.datetime.fromisoformat(deadlines.pop()) if len(deadlines) == 1 else None
    return Collection(deadline, submitted, late, unchanged)


def modified(subs: Sequence[tuple[str, Path]]) -> dict[str, float]:
    """Each (student, path)'s modification time, where no collection recorded one (its owner
    can set it: the grader says so), looked at without following a link."""
    out = {}
    for student, path in subs:
        try:
            out[student] = os.lstat(path).st_mtime
        except OSError:
            continue
    return out


def collected_csv(rows: Sequence[Collected], deadline: dt.datetime | None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student", "status", "submitted", "late", "deadline", "files", "sha256",
                "unchanged", "submission", "problem", "note"])
    for r in rows:
        w.writerow([r.student, r.status, stamp(r.submitted), "late" if r.late else "",
                    deadline.isoformat() if deadline else "", " ".join(r.files), r.digest,
                    "; ".join(r.unchanged), r.number or "", r.problem, r.note])
    return buf.getvalue()


def summary(rows: Sequence[Collected]) -> str:
    """The teacher's line under a status or a collection: how many of each."""
    done = [r for r in rows if r.status in ("collected", "submitted")]
    parts = [f"{len(done)} of {len(rows)} {'collected' if any(r.status == 'collected' for r in rows) else 'submitted'}"]
    for what, count in (("late", sum(r.late for r in done)),
                        ("unchanged from the release", sum(bool(r.unchanged) for r in done)),
                        ("missing", sum(r.status == "missing" for r in rows)),
                        ("error", sum(r.status == "error" for r in rows))):
        if count:
            parts.append(f"{count} {what}")
    return ", ".join(parts)


# --- return: the feedback kept where root alone reads it, handed to her by the receiver -------

def give_back(root: Path, name: str, roster: Sequence[Student], feedback: Path,
              late: Sequence[str] = ()) -> list[Returned]:
    """Each student's feedback file of NAME (from `idrrun grade --feedback FEEDBACK`) kept as
    DIR/feedback/LOGIN/NAME.md, root's alone: the receiver hands it to her (`idrrun classroom
    feedback`), and to nobody else."""
    exercise_name(name)
    named = feedback_names([s.login for s in roster])
    source = open_feedback(feedback)
    rows = []
    try:
        top = open_exchange(root)
        try:
            folder = _own_dir(top, "feedback", 0o700)
            try:
                for student in roster:
                    rows.append(_return_one(folder, name, student, source, named[student.login],
                                            student.login in late))
            finally:
                os.close(folder)
        finally:
            os.close(top)
    finally:
        os.close(source)
    return rows


# A feedback file or a picture drawn beside it: more is not the grading's.
MAX_FEEDBACK_BYTES = 16 << 20


def open_feedback(feedback: Path) -> int:
    """The grading's feedback folder (`idrrun grade --feedback`), opened without following a
    link; refused when others may write in it (a name there would then be anyone's), or could
    change the way to it: root copies what it finds there into each student's feedback, and a
    folder on the way that someone else could rename would let them choose what
    (boundary.open_guarded)."""
    try:
        return boundary.open_guarded(feedback)
    except boundary.NotOwnFolder as exc:
        raise UsageError(f"--feedback {feedback}: {exc.strerror}: give the grading's own "
                         "folder") from None
    except OSError as exc:
        raise UsageError(f"--feedback {feedback}: {exc.strerror}") from None


def read_feedback(folder: int, name: str) -> bytes | None:
    """The file NAME of the feedback folder, read by its descriptor: a regular file, not
    followed if a link, at most MAX_FEEDBACK_BYTES; None when there is none."""
    try:
        return _read_own(folder, name, MAX_FEEDBACK_BYTES)
    except UsageError as exc:
        raise UsageError(f"feedback {exc}") from None


def _return_one(folder: int, name: str, student: Student, source: int, file: str,
                late: bool) -> Returned:
    try:
        text = read_feedback(source, file)
        if text is None:
            return Returned(student.login, "no feedback")
        text, pictures = pictures_of(source, file, name, text)
        if late:
            text = b"> Submitted after the deadline.\n\n" + text
        mine = _own_dir(folder, student.login, 0o700)
        try:
            for picture, data in pictures:
                write_atomic_at(mine, picture, data, 0o600)
            write_atomic_at(mine, f"{name}.md", text, 0o600)
        finally:
            os.close(mine)
    except (UsageError, OSError) as exc:
        return Returned(student.login, "error", str(exc))
    return Returned(student.login, "returned")


def pictures_of(source: int, file: str, name: str, text: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The pictures the grading drew beside her feedback FILE in the folder SOURCE
    (grading/comparison.py: her run's timeline and the solution's), named after the exercise
    where they go back (NAME.timeline.png: her folder holds the feedback of every exercise),
    and her feedback with its links to them renamed alike."""
    stem = file.removesuffix(".md")
    found = []
    for pattern in (comparison.TIMELINE, comparison.SOLUTION_TIMELINE):
        drawn, back = pattern.format(stem=stem), pattern.format(stem=name)
        data = read_feedback(source, drawn)
        if data is None:
            continue
        text = text.replace(f"]({drawn})".encode(), f"]({back})".encode())
        found.append((back, data))
    return text, found


def feedback_of(root: Path, login: str, name: str) -> dict[str, bytes] | None:
    """Her returned feedback of NAME: NAME.md and its pictures (name to bytes); None if none."""
    exercise_name(name)
    top = open_exchange(root)
    fds = [top]
    try:
        for part in ("feedback", login):
            fd = _sub_dir(fds[-1], part)
            if fd is None:
                return None
            fds.append(fd)
        text = read_feedback(fds[-1], f"{name}.md")
        if text is None:
            return None
        out = {f"{name}.md": text}
        for pattern in (comparison.TIMELINE, comparison.SOLUTION_TIMELINE):
            picture = pattern.format(stem=name)
            data = read_feedback(fds[-1], picture)
            if data is not None:
                out[picture] = data
        return out
    finally:
        for fd in fds:
            os.close(fd)


def to_json(rows: Sequence[Collected | Returned]) -> list[dict[str, object]]:
    return [dataclasses.asdict(r) for r in rows]
