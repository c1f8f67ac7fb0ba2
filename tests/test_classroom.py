"""The class's exchange (`idrrun classroom`) with real users made by useradd, as root: release,
the receiver (`idrrun classroom serve` on a Unix socket, students known by their uid), submit
(as each student, by her own uid, with `idrrun classroom submit`), status, collect (what was
received, when it was received), grade with `idrrun grade`, return and feedback (hers alone).
And what a student may try at a deadline: a write through a memory mapping made before it (on
tmpfs and on disk), a folder swapped after it, a second submit after it, links, FIFOs, logins
that are prefixes of each other with suffixed file names, an untouched release.

Needs root, useradd and runuser, and a Python every user can run with idrrun's dependencies
(the hub's environment, IDRRUN_HUB_VENV, default /opt/idrrun-hub: hub/install.sh makes it);
the students run this checkout's idrrun (a copy of its package they can read).
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT
from answer_course import PROGRAM, write_course
from idrrun.grading import comparison, exchange as exchange_mod
from idrrun.model import Comparison, Figure
from idrrun.run import boundary

VENV = Path(os.environ.get("IDRRUN_HUB_VENV", "/opt/idrrun-hub"))

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None,
    reason="needs root, useradd and runuser (real students are made with useradd)")

PNG = b"a picture of "  # (what a picture holds is not read: its bytes go back as they are)


@dataclass
class Class:
    top: Path
    logins: list[str]
    roster: Path
    exchange: Path
    socket: Path
    package: Path  # a copy of idrrun's package every student can read
    released: tuple[Path, ...] = ()

    def idrrun(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        """The teacher's idrrun (root)."""
        return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd or self.top,
                              text=True, capture_output=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": PYTHONPATH, **env})

    def student(self, login: str, *args: str, cwd: Path | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`idrrun ARGS` typed by the student: her uid, her home, the exchange's socket."""
        home = self.top / "home" / login
        env = {"HOME": str(home), "PATH": f"{VENV}/bin:/usr/bin:/bin", "PYTHONPATH": str(self.package),
               "IDRRUN_EXCHANGE_URL": f"unix:{self.socket}", "LANG": "C.UTF-8"}
        return subprocess.run(["runuser", "-u", login, "--", "env", "-i",
                               *(f"{k}={v}" for k, v in env.items()),
                               f"{VENV}/bin/python", "-m", "idrrun.cli", *args],
                              cwd=cwd or home, text=True, capture_output=True, timeout=timeout)

    def as_user(self, login: str, script: str, **kw: object) -> subprocess.CompletedProcess[str]:
        """A shell script run as the student (her uid and groups, not root's)."""
        return subprocess.run(["runuser", "-u", login, "--", "sh", "-c", script], text=True,
                              capture_output=True, timeout=60, cwd=self.top / "home" / login,
                              **kw)  # type: ignore[call-overload]

    def release(self, *files: Path, deadline: str = "2099-01-01T00:00+00:00",
                name: str = "answer") -> subprocess.CompletedProcess[str]:
        r = self.idrrun("classroom", "release", name, *map(str, files), "--exchange",
                        str(self.exchange), "--roster", str(self.roster), "--deadline", deadline)
        assert r.returncode == 0, r.stdout + r.stderr
        self.released = files
        return r

    def deadline_passes(self) -> None:
        """The teacher moves the deadline to a second from now (released again), and it
        passes: what was received so far is on time, whatever the machine's load made it take."""
        deadline = int(time.time()) + 2
        self.release(*self.released, deadline=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(deadline)))
        time.sleep(max(0.0, deadline + 1.2 - time.time()))  # past it by more than a second

    def write(self, login: str, rel: str, text: str | bytes) -> Path:
        """A file of hers, in her home, written as her."""
        path = self.top / "home" / login / rel
        data = text.encode() if isinstance(text, str) else text
        r = self.as_user(login, f"mkdir -p '{path.parent}' && cat > '{path}'", input=data.decode())
        assert r.returncode == 0, r.stderr
        return path

    def collect(self, *more: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, str]]]:
        out = self.top / "collected"
        r = self.idrrun("classroom", "collect", "answer", "--exchange", str(self.exchange),
                        "--roster", str(self.roster), "--to", str(out), *more)
        rows = {row["student"]: row for row in csv.DictReader((out / "collected.csv").open())} \
            if (out / "collected.csv").exists() else {}
        return r, rows


def make_users(top: Path, logins: list[str]) -> None:
    homes = top / "home"
    homes.mkdir(mode=0o755, exist_ok=True)
    for login in logins:
        subprocess.run(["useradd", "-m", "-d", str(homes / login), "-U", "-s", "/bin/sh", login],
                       check=True)


def remove_users(logins: list[str]) -> None:
    for login in logins:
        subprocess.run(["pkill", "-KILL", "-u", login], check=False)
        subprocess.run(["userdel", login], check=False, capture_output=True)


def start_receiver(top: Path, exchange: Path, socket: Path) -> subprocess.Popen[bytes]:
    log = (top / "receiver.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "idrrun.cli", "classroom", "serve",
                             "--exchange", str(exchange), "--socket", str(socket)],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": PYTHONPATH})
    deadline = time.monotonic() + 30
    while not socket.is_socket():
        assert proc.poll() is None and time.monotonic() < deadline, (top / "receiver.log").read_text()
        time.sleep(0.05)
    return proc


def open_class(logins: list[str]) -> Iterator[Class]:
    if not (VENV / "bin" / "python").exists():
        pytest.skip(f"no Python every user can run ({VENV}: bash hub/install.sh {VENV})")
    top = Path(tempfile.mkdtemp(prefix="idrrun-classroom-", dir="/var/tmp"))
    top.chmod(0o755)
    make_users(top, logins)
    package = top / "package"
    shutil.copytree(ROOT / "idrrun", package / "idrrun",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    subprocess.run(["chmod", "-R", "a+rX", str(package)], check=True)
    roster = top / "roster.csv"
    roster.write_text("submission,login\n" + "".join(f"{l},{l}\n" for l in logins))
    exchange, socket = top / "exchange", top / "run" / "exchange.sock"
    (top / "run").mkdir(mode=0o755)
    proc = start_receiver(top, exchange, socket)
    try:
        yield Class(top, logins, roster, exchange, socket, package)
    finally:
        proc.terminate()
        proc.wait(10)
        remove_users(logins)
        shutil.rmtree(top)


@pytest.fixture
def klass() -> Iterator[Class]:
    tag = secrets.token_hex(3)
    yield from open_class([f"icl{tag}{i}" for i in range(2)])


def start_file(c: Class) -> Path:
    start = c.top / "answer_exercise.c"
    start.write_text(PROGRAM.format(value=0))
    return start


def course(top: Path) -> Path:
    return write_course(top / "examples")


def test_release_submit_collect_grade_return(klass: Class) -> None:
    c = klass
    ann, ben = c.logins
    c.release(start_file(c))
    fetched = c.student(ann, "classroom", "fetch", "answer")
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert (c.top / "home" / ann / "answer" / "answer_exercise.c").read_text() == PROGRAM.format(value=0)
    c.write(ann, "answer/answer.c", PROGRAM.format(value=42))
    c.write(ben, "answer/answer.c", PROGRAM.format(value=41))
    got = c.student(ann, "classroom", "submit", "answer", "answer/answer.c")
    assert got.returncode == 0, got.stdout + got.stderr
    # She reads what was received, when, and against which deadline.
    assert "received answer (submission 1): 1 file" in got.stdout and "on time" in got.stdout
    assert "answer.c  " in got.stdout and "2099-01-01" in got.stdout
    assert c.student(ben, "classroom", "submit", "answer", "answer/answer.c").returncode == 0
    listed = c.student(ann, "classroom", "list", "--json")
    [task] = json.loads(listed.stdout)["assignments"]
    assert task["exercise"] == "answer" and task["last"]["number"] == 1
    # Nothing of the exchange's store is open to the students.
    peek = c.as_user(ben, f"ls {c.exchange}/received")
    assert peek.returncode != 0 and "Permission denied" in peek.stderr

    status = c.idrrun("classroom", "status", "answer", "--exchange", str(c.exchange),
                      "--roster", str(c.roster), "--json")
    assert [r["status"] for r in json.loads(status.stdout)] == ["submitted", "submitted"]

    r, rows = c.collect()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 of 2 collected" in r.stdout
    assert rows[ann]["status"] == "collected" and rows[ann]["late"] == ""
    assert rows[ann]["deadline"].startswith("2099-01-01")
    out = c.top / "collected"
    assert (out / "submissions" / ann / "answer.c").read_text() == PROGRAM.format(value=42)

    feedback = c.top / "feedback"
    g = c.idrrun("grade", "answer", *sorted(map(str, (out / "submissions").iterdir())),
                 "--feedback", str(feedback), "--report", str(c.top / "r.csv"), "--unsafe",
                 IDRRUN_EXAMPLES=str(course(c.top)))
    assert g.returncode == 0, g.stdout + g.stderr
    grades = {row["student"]: row for row in csv.DictReader((c.top / "r.csv").open())}
    assert grades[ann]["verdict"] == "pass" and grades[ben]["verdict"] == "fail"
    # Her run's GPU timeline beside the solution's, as a grading on a GPU draws them beside her
    # feedback (comparison.pictures and .markdown; no GPU here to draw them).
    drawn = c.top / "drawn"
    drawn.mkdir()
    for png, data in (("run.png", PNG + b"hers"), ("solution.png", PNG + b"solution's")):
        (drawn / png).write_bytes(data)
    figures = Comparison((Figure("kernels", "1", "1", "trace"),), (), drawn / "run.png",
                         drawn / "solution.png")
    pictures = comparison.pictures(figures, feedback, ann)
    with (feedback / f"{ann}.md").open("a") as f:
        f.write("\n".join(comparison.markdown(figures, pictures, str)) + "\n")

    back = c.idrrun("classroom", "return", "answer", "--exchange", str(c.exchange), "--roster",
                    str(c.roster), "--feedback", str(feedback), "--collected", str(out), "--json")
    assert back.returncode == 0, back.stdout + back.stderr
    assert [r["status"] for r in json.loads(back.stdout)] == ["returned", "returned"]
    mine = c.student(ann, "classroom", "feedback", "answer")
    assert mine.returncode == 0 and "C[0] = 41" not in mine.stdout, mine.stdout + mine.stderr
    theirs = c.student(ben, "classroom", "feedback", "answer")
    assert theirs.returncode == 0 and "C[0] = 41" in theirs.stdout, theirs.stdout
    # Saved where she works (her JupyterLab opens it), with its pictures, named after the exercise.
    saved = c.top / "home" / ann / "answer" / "feedback"
    text = (saved / "answer.md").read_text()
    assert "[![your GPU timeline](answer.timeline.png)](answer.timeline.png)" in text
    assert "(answer.solution-timeline.png)" in text and f"{ann}.timeline" not in text
    assert (saved / "answer.timeline.png").read_bytes() == PNG + b"hers"
    assert os.stat(saved / "answer.md").st_uid == pwd.getpwnam(ann).pw_uid  # hers, in her folder
    for who in (ann, ben):
        r2 = c.as_user(who, f"cat {c.exchange}/feedback/{ann}/answer.md")
        assert r2.returncode != 0 and "Permission denied" in r2.stderr


def test_a_late_submission_is_late_in_the_report_and_the_gradebook(klass: Class) -> None:
    """Ann hands in before the deadline, Ben after it; the collected folder, graded, says when
    each was submitted and that Ben's came late (report, terminal, gradebook), his grade
    unchanged but where the teacher gives a late policy."""
    c = klass
    ann, ben = c.logins
    c.release(start_file(c))
    for who in (ann, ben):
        c.write(who, "answer.c", PROGRAM.format(value=42))
    assert c.student(ann, "classroom", "submit", "answer", "answer.c").returncode == 0
    # Ann sets her file's times back: what counts is when the receiver got it.
    assert c.as_user(ann, "touch -d 2000-01-01 answer.c").returncode == 0
    c.deadline_passes()
    late = c.student(ben, "classroom", "submit", "answer", "answer.c")
    assert late.returncode == 0 and "LATE" in late.stdout, late.stdout + late.stderr
    r, rows = c.collect()
    assert r.returncode == 0, r.stdout + r.stderr
    assert rows[ben]["late"] == "late" and rows[ann]["late"] == ""
    assert "LATE" in r.stdout and "1 late" in r.stdout

    out = c.top / "collected"
    report = c.top / "grades" / "answer.csv"
    g = c.idrrun("grade", "answer", *sorted(map(str, (out / "submissions").iterdir())),
                 "--report", str(report), "--unsafe", IDRRUN_EXAMPLES=str(course(c.top)))
    assert g.returncode == 0, g.stdout + g.stderr
    assert f"submitted: the times {out / 'collected.csv'} recorded" in g.stdout, g.stdout
    grades = {row["student"]: row for row in csv.DictReader(report.open())}
    assert grades[ann]["verdict"] == grades[ben]["verdict"] == "pass"
    assert grades[ann]["late"] == "" and grades[ann]["late_seconds"] == ""
    assert grades[ann]["submitted"] == rows[ann]["submitted"] != ""
    assert 1 <= float(grades[ben]["late_seconds"]) < 60, grades[ben]
    assert grades[ben]["late"] in g.stdout  # the terminal's table has the late column

    book = c.top / "roster-ids.csv"
    book.write_text("submission,id\n" + "".join(f"{l},{i}\n" for i, l in enumerate((ann, ben))))
    plain, moodle = c.top / "book.csv", c.top / "moodle.csv"
    b = c.idrrun("gradebook", str(report), "--roster", str(book), "--csv", str(plain),
                 "--moodle", str(moodle))
    assert b.returncode == 0, b.stdout + b.stderr
    assert f"{ben}, answer: submitted {grades[ben]['late']} after the deadline (no late penalty" in b.stdout
    cells = {r["submission"]: r for r in csv.DictReader(plain.open())}
    assert cells[ben]["answer late"] == grades[ben]["late"] and cells[ann]["answer late"] == ""
    assert cells[ben]["answer"] == cells[ann]["answer"] != ""  # no policy: the grade stands
    b = c.idrrun("gradebook", str(report), "--roster", str(book), "--csv", str(plain),
                 "--late-penalty", "25")
    assert b.returncode == 0, b.stdout + b.stderr
    cells = {r["submission"]: r for r in csv.DictReader(plain.open())}
    assert float(cells[ben]["answer"]) == 0.75 * float(cells[ann]["answer"]) > 0


# Her program: maps her file shared before the deadline, says so, waits for the word, then
# writes the solution through the mapping (no write(2): a shared mapping's writes move no
# ctime on tmpfs, and on ext4 not before writeback).
MAPPER = """
import mmap, os, sys, time
path, ready, go, text = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].encode()
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED)
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.02)
m[:len(text)] = text
m[len(text):] = b" " * (len(m) - len(text))
m.flush()
open(ready + ".done", "w").close()
time.sleep(30)
"""


@pytest.mark.parametrize("where", ["tmpfs", "disk"])
def test_a_write_through_a_mapping_after_the_deadline_changes_nothing_collected(
        klass: Class, where: str) -> None:
    c = klass
    ann, _ = c.logins
    folder = Path("/dev/shm") if where == "tmpfs" else c.top / "home" / ann
    if where == "tmpfs" and not os.access("/dev/shm", os.W_OK):
        pytest.skip("no /dev/shm")
    work = Path(tempfile.mkdtemp(prefix="idrrun-map-", dir=folder))
    os.chown(work, pwd.getpwnam(ann).pw_uid, pwd.getpwnam(ann).pw_gid)
    try:
        c.release(start_file(c))
        padded = PROGRAM.format(value=0) + " " * 200
        solution = PROGRAM.format(value=42)
        path = work / "answer.c"
        assert c.as_user(ann, f"cat > {path}", input=padded).returncode == 0
        (c.top / "mapper.py").write_text(MAPPER)
        (c.top / "mapper.py").chmod(0o644)
        ready, go = work / "ready", work / "go"
        mapper = subprocess.Popen(["runuser", "-u", ann, "--", "/usr/bin/python3", str(c.top / "mapper.py"),
                                   str(path), str(ready), str(go), solution])
        try:
            until = time.monotonic() + 20
            while not ready.exists():
                assert mapper.poll() is None and time.monotonic() < until
                time.sleep(0.02)
            sub = c.student(ann, "classroom", "submit", "answer", str(path))
            assert sub.returncode == 0 and "on time" in sub.stdout, sub.stdout + sub.stderr
            c.deadline_passes()
            assert c.as_user(ann, f"touch {go}").returncode == 0
            while not Path(str(ready) + ".done").exists():
                assert mapper.poll() is None and time.monotonic() < until + 10
                time.sleep(0.02)
            assert path.read_text().startswith(solution)  # the write did land in her file
            r, rows = c.collect()
            assert r.returncode == 0, r.stdout + r.stderr
            assert rows[ann]["late"] == "" and rows[ann]["status"] == "collected"
            assert (c.top / "collected" / "submissions" / ann / "answer.c").read_text() == padded
        finally:
            mapper.kill()
            mapper.wait()
    finally:
        shutil.rmtree(work)


def test_a_folder_swapped_or_a_second_submit_after_the_deadline(klass: Class) -> None:
    c = klass
    ann, ben = c.logins
    c.release(start_file(c))
    # Ann: a folder submission (a source and a header), and a spare folder ready meanwhile.
    c.write(ann, "answer/answer.c", PROGRAM.format(value=0))
    c.write(ann, "answer/values.h", "#define V 0\n")
    c.write(ann, "spare/answer.c", PROGRAM.format(value=42))
    c.write(ann, "spare/values.h", "#define V 42\n")
    assert c.student(ann, "classroom", "submit", "answer", "answer").returncode == 0
    # Ben: on time, then again after the deadline.
    c.write(ben, "answer.c", PROGRAM.format(value=1))
    assert c.student(ben, "classroom", "submit", "answer", "answer.c").returncode == 0
    c.deadline_passes()
    assert c.as_user(ann, "mv answer old && mv spare answer").returncode == 0
    c.write(ben, "answer.c", PROGRAM.format(value=2))
    again = c.student(ben, "classroom", "submit", "answer", "answer.c")
    assert again.returncode == 0 and "submission 2" in again.stdout and "LATE" in again.stdout

    r, rows = c.collect()
    assert r.returncode == 0, r.stdout + r.stderr
    subs = c.top / "collected" / "submissions"
    assert rows[ann]["late"] == "" and rows[ann]["files"] == "answer.c values.h"
    assert (subs / ann / "values.h").read_text() == "#define V 0\n"  # what was received
    # Her last counts (nbgrader's rule): late, and what came late.
    assert rows[ben]["late"] == "late" and rows[ben]["submission"] == "2"
    assert (subs / ben / "answer.c").read_text() == PROGRAM.format(value=2)
    # --on-time: her last received by the deadline, and a note of what came after.
    r, rows = c.collect("--on-time")
    assert rows[ben]["late"] == "" and rows[ben]["submission"] == "1"
    assert "after the deadline left out" in rows[ben]["note"]
    assert (subs / ben / "answer.c").read_text() == PROGRAM.format(value=1)


def test_links_fifos_and_files_not_hers_send_nothing(klass: Class) -> None:
    c = klass
    ann, ben = c.logins
    c.release(start_file(c))
    secret = c.top / "secret.c"  # root's, readable by root alone
    secret.write_text("int teachers_solution;\n")
    secret.chmod(0o600)
    assert c.as_user(ann, f"ln -s {secret} a.c && mkfifo b.c").returncode == 0
    r = c.student(ann, "classroom", "submit", "answer", "a.c")
    assert r.returncode == 2 and "Permission denied: nothing was sent" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = c.student(ann, "classroom", "submit", "answer", "b.c", timeout=20)  # a FIFO: at once
    assert r.returncode == 2 and "not a regular file: nothing was sent" in r.stderr, r.stderr
    r = c.student(ann, "classroom", "submit", "answer", "missing.c")
    assert r.returncode == 2 and "No such file" in r.stderr and "Traceback" not in r.stderr
    r = c.student(ann, "classroom", "submit", "other", "a.c")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    # A name the exchange does not keep is refused before anything is sent.
    c.write(ben, "-x.c", "int x;\n")
    r = c.student(ben, "classroom", "submit", "answer", "./-x.c")
    assert r.returncode == 2 and "rename it" in r.stderr, r.stderr
    status = c.idrrun("classroom", "status", "answer", "--exchange", str(c.exchange),
                      "--roster", str(c.roster), "--json")
    assert [r["status"] for r in json.loads(status.stdout)] == ["missing", "missing"]
    # Ben cannot hand in as Ann: the receiver knows him by his uid, whatever he says.
    assert c.student(ben, "classroom", "submit", "answer", f"{c.top}/answer_exercise.c"
                     ).returncode == 0
    assert exchange_mod.receipts(c.exchange, ann, "answer") == []


def test_the_receiver_down_or_the_exchange_full_loses_nothing_silently(klass: Class) -> None:
    c = klass
    ann, _ = c.logins
    c.release(start_file(c))
    c.write(ann, "answer.c", PROGRAM.format(value=42))
    r = c.student(ann, "classroom", "submit", "answer", "answer.c", "--url",
                  f"unix:{c.top}/run/none.sock")
    assert r.returncode == 2 and "did not answer" in r.stderr and "nothing was sent" in r.stderr
    # The release's files stay, whatever else a release fails on: a missing file says so.
    r = c.idrrun("classroom", "release", "answer", str(c.top / "nothing.c"), "--exchange",
                 str(c.exchange), "--roster", str(c.roster))
    assert r.returncode == 2 and "nothing.c" in r.stderr and "Traceback" not in r.stderr


def test_logins_that_are_prefixes_of_each_other_collect_apart() -> None:
    tag = secrets.token_hex(2)
    li, liwei = f"li{tag}", f"li{tag}.wei"
    for c in open_class([li, liwei]):
        c.release(start_file(c))
        c.write(li, f"x.wei", PROGRAM.format(value=1))
        c.write(liwei, "answer/answer.c", PROGRAM.format(value=2))
        assert c.student(li, "classroom", "submit", "answer", "x.wei").returncode == 0
        assert c.student(liwei, "classroom", "submit", "answer", "answer").returncode == 0
        r, rows = c.collect()
        assert r.returncode == 0, r.stdout + r.stderr
        subs = c.top / "collected" / "submissions"
        assert (subs / li / "x.wei").read_text() == PROGRAM.format(value=1)
        assert (subs / liwei / "answer.c").read_text() == PROGRAM.format(value=2)
        assert rows[li]["status"] == rows[liwei]["status"] == "collected"


def test_a_roster_line_that_is_no_user_is_a_row_and_the_rest_is_collected(klass: Class) -> None:
    c = klass
    ann, ben = c.logins
    c.release(start_file(c))
    c.write(ben, "answer.c", PROGRAM.format(value=42))
    assert c.student(ben, "classroom", "submit", "answer", "answer.c").returncode == 0
    c.roster.write_text(f"submission,login\n{ann},{ann}\nnobody{ann},nobody{ann}\n{ben},{ben}\n")
    r, rows = c.collect()
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert rows[f"nobody{ann}"]["status"] == "error" and "no such user" in rows[f"nobody{ann}"]["problem"]
    assert rows[ann]["status"] == "missing" and rows[ben]["status"] == "collected"


def test_the_untouched_release_is_said_unchanged_by_submit_status_and_collect(klass: Class) -> None:
    c = klass
    ann, ben = c.logins
    notebook = ROOT / "notebooks" / "C" / "01_intro.ipynb"
    c.release(start_file(c), notebook)
    assert c.student(ann, "classroom", "fetch", "answer").returncode == 0
    assert c.student(ben, "classroom", "fetch", "answer").returncode == 0
    # Ann hands in the notebook as fetched (she ran her port but did not save it).
    got = c.student(ann, "classroom", "submit", "answer", "answer/01_intro.ipynb")
    assert got.returncode == 0 and "unchanged from the release" in got.stdout, got.stdout
    # Ben edits the start file: not the release's bytes.
    c.write(ben, "answer/answer_exercise.c", PROGRAM.format(value=42))
    got = c.student(ben, "classroom", "submit", "answer", "answer/answer_exercise.c")
    assert got.returncode == 0 and "unchanged" not in got.stdout, got.stdout
    status = c.idrrun("classroom", "status", "answer", "--exchange", str(c.exchange),
                      "--roster", str(c.roster))
    assert "unchanged from the release" in status.stdout and "1 unchanged from the release" in status.stdout
    r, rows = c.collect()
    assert "unchanged from the release" in rows[ann]["unchanged"] and rows[ben]["unchanged"] == ""
    assert "1 unchanged from the release" in r.stdout


def test_release_of_a_chapter_notebook_leaves_its_solution_cells_out(klass: Class) -> None:
    c = klass
    ann, _ = c.logins
    chapter = ROOT / "notebooks" / "C" / "02_data.ipynb"
    cells = json.loads(chapter.read_text())["cells"]
    solutions = ["".join(cell["source"]) for cell in cells
                 if "solution" in cell.get("metadata", {}).get("tags", [])]
    assert solutions, "the chapter has solution cells to leave out"
    r = c.release(chapter)
    assert f"{len(solutions)} solution cell(s) left out" in r.stdout, r.stdout
    assert c.student(ann, "classroom", "fetch", "answer").returncode == 0
    published = (c.top / "home" / ann / "answer" / "02_data.ipynb").read_text()
    for source in solutions:
        assert json.dumps(source)[1:-1][:200] not in published


def test_feedback_is_read_by_descriptor_and_a_link_in_it_is_not_followed(tmp_path: Path) -> None:
    """As root, `return` reads the grading's feedback folder by descriptor: a picture that is a
    link (to a file of root's) is refused, not read; a folder others may write in is refused."""
    feedback = tmp_path / "feedback"
    feedback.mkdir(mode=0o755)
    secret = tmp_path / "secret"
    secret.write_text("root's own\n")
    (feedback / "ann.md").write_bytes(b"![run](ann.timeline.png)\n")
    (feedback / "ann.timeline.png").symlink_to(secret)
    folder = exchange_mod.open_feedback(feedback)
    try:
        assert exchange_mod.read_feedback(folder, "ann.md") == b"![run](ann.timeline.png)\n"
        assert exchange_mod.read_feedback(folder, "bob.md") is None
        with pytest.raises(exchange_mod.UsageError, match="a link, not followed"):
            exchange_mod.pictures_of(folder, "ann.md", "intro", b"")
        (feedback / "ann.timeline.png").unlink()
        (feedback / "ann.timeline.png").write_bytes(PNG)
        text, pictures = exchange_mod.pictures_of(folder, "ann.md", "intro",
                                                  b"![run](ann.timeline.png)\n")
        assert text == b"![run](intro.timeline.png)\n" and pictures == [("intro.timeline.png", PNG)]
    finally:
        os.close(folder)
    feedback.chmod(0o777)
    with pytest.raises(exchange_mod.UsageError, match="others may write in it"):
        exchange_mod.open_feedback(feedback)


def test_the_exchange_reads_one_state_of_each_file_as_the_grader_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exchange reads through the grader's boundary and its one rule: a feedback file
    written to while `return` reads it is refused; a released file replaced by a release
    published again while a receiver reads it (the file opened then has no name left) is read
    as it was opened, never refused as a hard link."""
    feedback = tmp_path / "feedback"
    feedback.mkdir(mode=0o755)
    (feedback / "ann.md").write_bytes(b"# ann\n")
    real, done = os.read, []

    def written_meanwhile(fd: int, n: int) -> bytes:
        data = real(fd, n)
        if not done and os.fstat(fd).st_ino == os.stat(feedback / "ann.md").st_ino:
            with open(feedback / "ann.md", "ab") as fh:
                fh.write(b"more\n")
            done.append(fd)
        return data

    folder = exchange_mod.open_feedback(feedback)
    try:
        with monkeypatch.context() as m:
            m.setattr(os, "read", written_meanwhile)
            with pytest.raises(exchange_mod.UsageError, match="changed while it was read"):
                exchange_mod.read_feedback(folder, "ann.md")
        assert done and exchange_mod.read_feedback(folder, "ann.md") == b"# ann\nmore\n"
    finally:
        os.close(folder)
    root = tmp_path / "exchange"
    ann = exchange_mod.Student("ann", 4242, 4242)
    exchange_mod.release(root, "answer", [("answer.c", b"version 1\n")], [ann], None)
    opened = boundary.reading.open_beneath

    def released_again(dirfd: int, rel: str, flags: int = boundary.READ_FLAGS) -> int:
        fd = opened(dirfd, rel, flags)
        if rel == "answer.c":
            exchange_mod.release(root, "answer", [("answer.c", b"version 2\n")], [ann], None)
        return fd

    monkeypatch.setattr(boundary.reading, "open_beneath", released_again)
    assert exchange_mod.assignment(root, "answer").files == {"answer.c": b"version 1\n"}
    monkeypatch.undo()
    assert exchange_mod.assignment(root, "answer").files == {"answer.c": b"version 2\n"}


def test_a_full_exchange_keeps_nothing_half_and_says_so(klass: Class) -> None:
    """The exchange on a small tmpfs: a submission that does not fit is refused whole (her
    client says nothing was received), none of it is left, and the next one that fits is taken."""
    c = klass
    ann, ben = c.logins
    small = c.top / "small"
    small.mkdir(mode=0o755)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", str(small)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        exchange, socket = small / "exchange", c.top / "run" / "small.sock"
        receiver = start_receiver(c.top, exchange, socket)
        try:
            r = c.idrrun("classroom", "release", "answer", str(start_file(c)), "--exchange",
                         str(exchange), "--roster", str(c.roster))
            assert r.returncode == 0, r.stdout + r.stderr
            url = f"unix:{socket}"
            c.write(ann, "big.c", "int x;\n" * 60_000)  # 420 kB: more than the disk holds
            full = c.student(ann, "classroom", "submit", "answer", "big.c", "--url", url)
            assert full.returncode == 2 and "nothing was received" in full.stderr, full.stderr
            assert "Traceback" not in full.stderr
            assert exchange_mod.receipts(exchange, ann, "answer") == []
            assert list((exchange / "received" / ann / "answer").iterdir()) == []
            c.write(ben, "answer.c", PROGRAM.format(value=42))
            ok = c.student(ben, "classroom", "submit", "answer", "answer.c", "--url", url)
            assert ok.returncode == 0, ok.stdout + ok.stderr
            out = c.top / "small-collected"
            r = c.idrrun("classroom", "collect", "answer", "--exchange", str(exchange),
                         "--roster", str(c.roster), "--to", str(out), "--json")
            assert [row["status"] for row in json.loads(r.stdout)] == ["missing", "collected"]
        finally:
            receiver.terminate()
            receiver.wait(10)
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_release_by_the_exercises_name_finds_its_notebooks_and_start_files(klass: Class) -> None:
    c = klass
    ann, _ = c.logins
    r = c.idrrun("classroom", "release", "intro_saxpy", "--course", str(ROOT), "--exchange",
                 str(c.exchange), "--roster", str(c.roster))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "solution cell(s) left out" in r.stdout
    assert c.student(ann, "classroom", "fetch", "intro_saxpy").returncode == 0
    got = sorted(p.name for p in (c.top / "home" / ann / "intro_saxpy").iterdir())
    assert got == ["C_01_intro.ipynb", "Fortran_01_intro.ipynb", "intro_saxpy_exercise.c",
                   "intro_saxpy_exercise.f90"], got
    for language in ("C", "Fortran"):
        published = json.loads((c.top / "home" / ann / "intro_saxpy" / f"{language}_01_intro.ipynb").read_text())
        assert not [cell for cell in published["cells"]
                    if "solution" in cell.get("metadata", {}).get("tags", [])]
    # A solution source is never released.
    r = c.idrrun("classroom", "release", "intro_saxpy", str(ROOT / "examples" / "C" / "intro_saxpy_solution.c"),
                 "--exchange", str(c.exchange), "--roster", str(c.roster))
    assert r.returncode == 2 and "release the start file intro_saxpy_exercise.c" in r.stderr, r.stderr


def test_root_writes_nowhere_a_student_could_redirect(klass: Class) -> None:
    """The exchange, the collection's folder and the grading's feedback folder, given below a
    folder of a student's (she could rename it, or put a link in its place, between the check
    and the write): refused before anything is written or read there."""
    c = klass
    ann, _ = c.logins
    c.release(start_file(c))
    hers = c.top / "home" / ann / "shared"
    assert c.as_user(ann, f"mkdir -p {hers}/feedback && chmod 755 {hers} {hers}/feedback").returncode == 0
    r = c.idrrun("classroom", "collect", "answer", "--exchange", str(c.exchange), "--roster",
                 str(c.roster), "--to", str(hers / "out"))
    assert r.returncode == 2 and "not safe" in r.stderr, r.stdout + r.stderr
    assert not (hers / "out").exists()
    r = c.idrrun("classroom", "release", "answer", str(start_file(c)), "--exchange",
                 str(hers / "exchange"), "--roster", str(c.roster))
    assert r.returncode == 2 and "not safe" in r.stderr, r.stdout + r.stderr
    assert not (hers / "exchange").exists()
    r = c.idrrun("classroom", "return", "answer", "--exchange", str(c.exchange), "--roster",
                 str(c.roster), "--feedback", str(hers / "feedback"))
    assert r.returncode == 2 and "not safe" in r.stderr, r.stdout + r.stderr


def test_unchanged_is_the_whole_submissions_not_one_untouched_file_beside_her_work(klass: Class) -> None:
    c = klass
    ann, ben = c.logins
    c.release(start_file(c))
    for who in (ann, ben):
        assert c.student(who, "classroom", "fetch", "answer").returncode == 0
    # Ann: the untouched start file beside a file of her own work; Ben: the start file alone.
    c.write(ann, "answer/port.c", PROGRAM.format(value=42))
    mine = c.student(ann, "classroom", "submit", "answer", "answer/answer_exercise.c", "answer/port.c")
    assert mine.returncode == 0 and "unchanged" not in mine.stdout, mine.stdout
    his = c.student(ben, "classroom", "submit", "answer", "answer/answer_exercise.c")
    assert his.returncode == 0 and "unchanged from the release" in his.stdout, his.stdout
