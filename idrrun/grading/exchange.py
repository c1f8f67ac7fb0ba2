"""The class's exchange: assignments out, submissions in, feedback back, in one folder on the
file system the hub's nodes share (nbgrader's verbs: release, fetch, submit, collect, return).

    DIR/released/NAME/        root's, 0755: what students fetch (NAME.json: its deadline)
    DIR/inbox/LOGIN/          the student's own, 0700: she submits into LOGIN/NAME/
    DIR/feedback/LOGIN/       root's, group the student's private group, 0750: NAME.md, 0640

release, collect and return run as root (the teacher, who grades with the teacher's course);
fetch and submit as the student, on her own files only. Collect reads each of her files once,
through descriptors of folders opened without following a link (O_NOFOLLOW at every step),
regular files she owns only, bounded, and takes the time of submission from the file's ctime,
which no user can set (nbgrader's timestamp.txt is written by the student).

    release(...), collect(...) -> [Collected], give_back(...) -> [Returned], board(...)
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import errno
import grp
import hashlib
import io
import json
import os
import pwd
import re
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..files import write_atomic, write_atomic_at
from .discover import MAX_SOURCE_BYTES
from . import comparison
from .feedback import feedback_names
from .rows import stamp

# What one student may hand in for one exercise: a few files (a source, a notebook, a header),
# each bounded as the grader bounds a source; more is an error row, never read.
MAX_FILES = 16
MAX_TOTAL_BYTES = 4 * MAX_SOURCE_BYTES
# A file name the exchange keeps: no path, no hidden file, nothing a shell or a CSV interprets.
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")
# A login or exercise name used as a folder name in the exchange.
SAFE_LOGIN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class Collected:
    """One student's submission of one exercise, as collected (files empty when none)."""

    student: str
    status: str  # "collected", "missing" (nothing submitted) or "error" (problem says why)
    submitted: float | None = None  # the newest ctime of the files collected (epoch seconds)
    late: bool = False
    files: tuple[str, ...] = ()
    digest: str = ""  # sha256 of the names and bytes collected
    problem: str = ""


@dataclass(frozen=True)
class Returned:
    student: str
    status: str  # "returned", "no feedback" or "error"
    problem: str = ""


@dataclass(frozen=True)
class Student:
    login: str
    uid: int
    gid: int


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


# --- root's folders: made here, checked every time (owner, mode, not a link) ------------------

def _own_dir(parent: int, name: str, mode: int, uid: int = 0, gid: int = 0) -> int:
    """A descriptor of the folder NAME under PARENT, made if absent, owned uid:gid with MODE;
    one that exists must already be so (a folder someone else made is never taken over)."""
    try:
        os.mkdir(name, mode, dir_fd=parent)
        fd = os.open(name, DIR_FLAGS, dir_fd=parent)
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    except FileExistsError:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent)
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (uid, gid, mode):
        os.close(fd)
        raise UsageError(f"{name}: expected owner {uid}:{gid} and mode {mode:o}, found "
                         f"{st.st_uid}:{st.st_gid} {stat.S_IMODE(st.st_mode):o}: not ours, left alone")
    return fd


def open_exchange(root: Path, create: bool = False) -> int:
    """The exchange's folder: root's (or the teacher's when not root), not writable by others."""
    if create:
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
    try:
        fd = os.open(root, DIR_FLAGS)
    except OSError as exc:
        raise UsageError(f"--exchange {root}: {exc.strerror}") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise UsageError(f"--exchange {root}: must be yours and writable by you alone")
    return fd


def private_group(student: Student) -> bool:
    """Whether the student's primary group is hers alone (the group that reads her feedback)."""
    try:
        group = grp.getgrgid(student.gid)
    except KeyError:
        return False
    if any(member != student.login for member in group.gr_mem):
        return False
    return all(p.pw_gid != student.gid or p.pw_name == student.login for p in pwd.getpwall())


def release(root: Path, name: str, files: Sequence[Path], roster: Sequence[Student],
            deadline: dt.datetime | None) -> list[str]:
    """Publish FILES as exercise NAME (read-only to all), and make each student's inbox and
    feedback folders. Returns what was released."""
    exercise_name(name)
    top = open_exchange(root, create=True)
    try:
        released = _own_dir(top, "released", 0o755)
        folder = _own_dir(released, name, 0o755)
        out = []
        for path in files:
            if not SAFE_NAME.fullmatch(path.name):
                raise UsageError(f"{path}: a released file's name is letters, digits, _ . + -")
            write_atomic_at(folder, path.name, path.read_bytes(), 0o644)
            out.append(path.name)
        write_atomic_at(released, f"{name}.json", json.dumps(
            {"exercise": name, "files": out,
             "deadline": deadline.isoformat() if deadline else None}).encode(), 0o644)
        os.close(folder)
        os.close(released)
        inbox, feedback = _own_dir(top, "inbox", 0o711), _own_dir(top, "feedback", 0o711)
        for student in roster:
            os.close(_inbox(inbox, student))
            if private_group(student):
                os.close(_own_dir(feedback, student.login, 0o750, 0, student.gid))
        os.close(inbox)
        os.close(feedback)
        return out
    finally:
        os.close(top)


def _inbox(inbox: int, student: Student) -> int:
    """Her inbox, made hers (0700) if absent; one that exists must be hers (its mode is hers
    to choose: a student who opens it to others does not stop the release for the class)."""
    try:
        os.mkdir(student.login, 0o700, dir_fd=inbox)
        fd = os.open(student.login, DIR_FLAGS, dir_fd=inbox)
        os.fchown(fd, student.uid, student.gid)
        return fd
    except FileExistsError:
        fd = os.open(student.login, DIR_FLAGS, dir_fd=inbox)
    if os.fstat(fd).st_uid != student.uid:
        os.close(fd)
        raise UsageError(f"inbox/{student.login}: not {student.login}'s: left alone")
    return fd


def deadline_of(root: Path, name: str) -> dt.datetime | None:
    try:
        text = (root / "released" / f"{name}.json").read_text()
    except FileNotFoundError:
        return None
    value = json.loads(text).get("deadline")
    return dt.datetime.fromisoformat(value) if value else None


# --- collect: one read of each file, by descriptor --------------------------------------------

class Refused(Exception):
    """Why a student's submission is an error row (her doing, or what her folder holds)."""


def _read_file(folder: int, name: str, student: Student, budget: int) -> tuple[bytes, float]:
    """The file NAME of her folder, read once by its descriptor: a regular file of hers with
    one link, at most `budget` bytes, unchanged while it was read. Returns (bytes, ctime)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=folder)
    except OSError as exc:
        why = "a link, not followed" if exc.errno == errno.ELOOP else exc.strerror
        raise Refused(f"{name}: {why}") from None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise Refused(f"{name}: not a regular file")
        # No hard link: a file linked from elsewhere is not hers alone (0 links: she replaced
        # it since it was opened; what is read is the file as it was then).
        if before.st_uid != student.uid or before.st_nlink > 1:
            raise Refused(f"{name}: not a file of hers alone (owner {before.st_uid}, "
                          f"{before.st_nlink} links)")
        chunks, size = [], 0
        while size <= budget:
            chunk = os.read(fd, min(1 << 16, budget + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > budget:
            raise Refused(f"{name}: more than {budget} bytes")
        after = os.fstat(fd)
        if (after.st_ctime_ns, after.st_size) != (before.st_ctime_ns, before.st_size) or \
                size != after.st_size:
            raise Refused(f"{name}: changed while it was collected: submit again")
        return b"".join(chunks), before.st_ctime
    finally:
        os.close(fd)


def _entries(folder: int) -> list[str]:
    names = sorted(os.listdir(folder))
    if len(names) > MAX_FILES:
        raise Refused(f"more than {MAX_FILES} files")
    return names


def _collect_one(inbox: int, name: str, student: Student) -> tuple[dict[str, bytes], float]:
    """Her files of exercise NAME, each read once. Raises Refused, FileNotFoundError (none)."""
    try:
        home = os.open(student.login, DIR_FLAGS, dir_fd=inbox)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Refused(f"inbox/{student.login}: {exc.strerror}") from None
    try:
        if os.fstat(home).st_uid != student.uid:
            raise Refused(f"inbox/{student.login} is not hers")
        try:
            folder = os.open(name, DIR_FLAGS, dir_fd=home)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise Refused(f"{name}: not a folder of hers ({exc.strerror})") from None
        try:
            got: dict[str, bytes] = {}
            newest, budget = 0.0, MAX_TOTAL_BYTES
            for entry in _entries(folder):
                if not SAFE_NAME.fullmatch(entry):
                    continue  # hidden files (editors', checkpoints) and odd names are not hers to hand in
                data, ctime = _read_file(folder, entry, student, min(budget, MAX_SOURCE_BYTES))
                got[entry] = data
                budget -= len(data)
                newest = max(newest, ctime)
            if not got:
                raise FileNotFoundError(name)
            return got, newest
        finally:
            os.close(folder)
    finally:
        os.close(home)


def collect(root: Path, name: str, roster: Sequence[Student], out: Path,
            deadline: dt.datetime | None) -> list[Collected]:
    """Each student's submission of NAME copied once into OUT/submissions/ (LOGIN.ext for one
    file, LOGIN/ for several: what `idrrun grade` takes), and OUT/collected.csv."""
    exercise_name(name)
    top = open_exchange(root)
    target = out / "submissions"
    if target.exists():
        shutil.rmtree(target)  # ours, made by the last collection: collected anew
    target.mkdir(parents=True, mode=0o700)
    os.chmod(out, 0o700)
    limit = deadline.timestamp() if deadline else None
    rows = []
    try:
        try:
            inbox = os.open("inbox", DIR_FLAGS, dir_fd=top)
        except FileNotFoundError:
            raise UsageError(f"{root}: nothing released yet (no inbox/)") from None
        try:
            for student in roster:
                rows.append(_collected(inbox, name, student, target, limit))
        finally:
            os.close(inbox)
    finally:
        os.close(top)
    write_atomic(out / COLLECTED, collected_csv(rows, deadline))
    return rows


def _collected(inbox: int, name: str, student: Student, target: Path,
               limit: float | None) -> Collected:
    try:
        got, when = _collect_one(inbox, name, student)
    except FileNotFoundError:
        return Collected(student.login, "missing")
    except (Refused, OSError) as exc:
        return Collected(student.login, "error", problem=str(exc))
    digest = hashlib.sha256()
    for entry, data in sorted(got.items()):
        digest.update(entry.encode() + b"\0" + hashlib.sha256(data).digest())
    if len(got) == 1:
        [(entry, data)] = got.items()
        (target / (student.login + Path(entry).suffix)).write_bytes(data)
    else:
        (target / student.login).mkdir(mode=0o700)
        for entry, data in got.items():
            (target / student.login / entry).write_bytes(data)
    return Collected(student.login, "collected", when, limit is not None and when > limit,
                     tuple(sorted(got)), digest.hexdigest())


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
    except (OSError, KeyError, ValueError) as exc:
        raise UsageError(f"{path}: not a collection's record of idrrun classroom collect: {exc}") from None
    deadline = dt.datetime.fromisoformat(deadlines.pop()) if len(deadlines) == 1 else None
    return Collection(deadline, submitted, late)


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
    w.writerow(["student", "status", "submitted", "late", "deadline", "files", "sha256", "problem"])
    for r in rows:
        w.writerow([r.student, r.status, stamp(r.submitted), "late" if r.late else "",
                    deadline.isoformat() if deadline else "", " ".join(r.files), r.digest,
                    r.problem])
    return buf.getvalue()


def board(root: Path, name: str, roster: Sequence[Student],
          deadline: dt.datetime | None) -> list[Collected]:
    """Who has submitted NAME and when (the newest ctime in her folder), by stat alone through
    descriptors, as collect opens them: for watching, never for grading."""
    exercise_name(name)
    rows = []
    limit = deadline.timestamp() if deadline else None
    top = open_exchange(root)
    try:
        inbox = os.open("inbox", DIR_FLAGS, dir_fd=top)
    except FileNotFoundError:
        raise UsageError(f"{root}: nothing released yet (no inbox/)") from None
    finally:
        os.close(top)
    try:
        for student in roster:
            when = _newest(inbox, name, student)
            rows.append(Collected(student.login, "missing") if when is None else
                        Collected(student.login, "submitted", when,
                                  limit is not None and when > limit))
    finally:
        os.close(inbox)
    return rows


def _newest(inbox: int, name: str, student: Student) -> float | None:
    """The newest ctime of her files of NAME, None if none (or none that can be looked at)."""
    try:
        home = os.open(student.login, DIR_FLAGS, dir_fd=inbox)
    except OSError:
        return None
    try:
        folder = os.open(name, DIR_FLAGS, dir_fd=home)
    except OSError:
        return None
    finally:
        os.close(home)
    try:
        times = [os.stat(entry, dir_fd=folder, follow_symlinks=False).st_ctime
                 for entry in os.listdir(folder)[:MAX_FILES] if SAFE_NAME.fullmatch(entry)]
    except OSError:
        return None
    finally:
        os.close(folder)
    return max(times, default=None)


# --- return: the feedback written where only she reads it -------------------------------------

def give_back(root: Path, name: str, roster: Sequence[Student], feedback: Path,
              late: Sequence[str] = ()) -> list[Returned]:
    """Each student's feedback file of NAME (from `idrrun grade --feedback FEEDBACK`) written
    as DIR/feedback/LOGIN/NAME.md, root's, readable by her private group alone."""
    exercise_name(name)
    named = feedback_names([s.login for s in roster])
    source = open_feedback(feedback)
    top = open_exchange(root)
    rows = []
    try:
        folder = _own_dir(top, "feedback", 0o711)
        try:
            for student in roster:
                rows.append(_return_one(folder, name, student, source, named[student.login],
                                        student.login in late))
        finally:
            os.close(folder)
    finally:
        os.close(top)
        os.close(source)
    return rows


# A feedback file or a picture drawn beside it: more is not the grading's.
MAX_FEEDBACK_BYTES = 16 << 20


def open_feedback(feedback: Path) -> int:
    """The grading's feedback folder (`idrrun grade --feedback`), opened without following a
    link; refused when others may write in it (a name there would then be anyone's)."""
    try:
        fd = os.open(feedback, DIR_FLAGS)
    except OSError as exc:
        raise UsageError(f"--feedback {feedback}: {exc.strerror}") from None
    info = os.fstat(fd)
    if info.st_mode & 0o022 or info.st_uid not in (0, os.geteuid()):
        os.close(fd)
        raise UsageError(f"--feedback {feedback}: others may write in it (owner {info.st_uid}, "
                         f"mode {stat.S_IMODE(info.st_mode):o}): give the grading's own folder")
    return fd


def read_feedback(folder: int, name: str) -> bytes | None:
    """The file NAME of the feedback folder, read by its descriptor: a regular file, not
    followed if a link, at most MAX_FEEDBACK_BYTES; None when there is none."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = "a link, not followed" if exc.errno == errno.ELOOP else exc.strerror
        raise UsageError(f"feedback {name}: {why}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"feedback {name}: not a regular file")
        data = b""
        while len(data) <= MAX_FEEDBACK_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return data
            data += chunk
        raise UsageError(f"feedback {name}: more than {MAX_FEEDBACK_BYTES} bytes")
    finally:
        os.close(fd)


def _return_one(folder: int, name: str, student: Student, source: int, file: str,
                late: bool) -> Returned:
    try:
        text = read_feedback(source, file)
        if text is None:
            return Returned(student.login, "no feedback")
        text, pictures = pictures_of(source, file, name, text)
    except UsageError as exc:
        return Returned(student.login, "error", str(exc))
    if not private_group(student):
        return Returned(student.login, "error", f"the group {student.gid} is not hers alone: "
                                                "her feedback would be readable by others")
    if late:
        text = b"> Submitted after the deadline.\n\n" + text
    try:
        mine = _own_dir(folder, student.login, 0o750, 0, student.gid)
    except UsageError as exc:
        return Returned(student.login, "error", str(exc))
    try:
        for picture, data in pictures:
            write_atomic_at(mine, picture, data, 0o640, student.gid)
        write_atomic_at(mine, f"{name}.md", text, 0o640, student.gid)
    finally:
        os.close(mine)
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


def fetch(root: Path, name: str, into: Path) -> list[Path]:
    """The released files of NAME copied into INTO/NAME/ (a file already there is kept)."""
    source = root / "released" / exercise_name(name)
    if not source.is_dir():
        raise UsageError(f"{name} is not released in {root}")
    (into / name).mkdir(parents=True, exist_ok=True)
    out = []
    for path in sorted(source.iterdir()):
        target = into / name / path.name
        if not target.exists():
            shutil.copyfile(path, target)
            out.append(target)
    return out


def submit(root: Path, name: str, files: Sequence[Path], login: str) -> Path:
    """FILES copied into her inbox (DIR/inbox/LOGIN/NAME/), replacing what she submitted."""
    inbox = root / "inbox" / login
    if not inbox.is_dir():
        raise UsageError(f"{inbox}: no inbox of yours (is the exercise released to you?)")
    folder = inbox / exercise_name(name)
    folder.mkdir(mode=0o700, exist_ok=True)
    for old in folder.iterdir():
        if SAFE_NAME.fullmatch(old.name) and old.is_file():
            old.unlink()
    for path in files:
        if not SAFE_NAME.fullmatch(path.name):
            raise UsageError(f"{path}: a submitted file's name is letters, digits, _ . + -")
        shutil.copyfile(path, folder / path.name)
    return folder


def to_json(rows: Sequence[Collected | Returned]) -> list[dict[str, object]]:
    return [dataclasses.asdict(r) for r in rows]
