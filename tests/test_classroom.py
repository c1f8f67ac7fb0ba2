"""The class's exchange (`idrrun classroom`) with real users made by useradd, as root: release,
submit (as each student, by her own uid), collect (each file read once by descriptor, never
through a student's link), grade with `idrrun grade`, return (her feedback readable by her
alone), and a student who rewrites or swaps her file while it is collected.
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PYTHONPATH
from answer_course import PROGRAM, write_course
from idrrun.grading import comparison, exchange as exchange_mod
from idrrun.model import Comparison, Figure

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None,
    reason="needs root, useradd and runuser (real students are made with useradd)")

PNG = b"a picture of "  # (what a picture holds is not read: its bytes go back as they are)


def make_users(count: int) -> list[str]:
    tag = secrets.token_hex(3)
    logins = [f"icl{tag}{i}" for i in range(count)]
    for login in logins:
        subprocess.run(["useradd", "-M", "-U", "-s", "/bin/sh", login], check=True)
    return logins


@pytest.fixture
def klass() -> Iterator[tuple[Path, list[str], Path]]:
    """(a world-traversable folder of root's, the students' logins, the roster)."""
    logins = make_users(2)
    top = Path(tempfile.mkdtemp(prefix="idrrun-classroom-", dir="/var/tmp"))
    top.chmod(0o755)
    roster = top / "roster.csv"
    roster.write_text("submission,login\n" + "".join(f"{l},{l}\n" for l in logins))
    try:
        yield top, logins, roster
    finally:
        for login in logins:
            subprocess.run(["pkill", "-KILL", "-u", login], check=False)
            subprocess.run(["userdel", login], check=False)
        shutil.rmtree(top)


def idrrun(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": PYTHONPATH, **env})


def as_user(login: str, script: str, **kw: object) -> subprocess.CompletedProcess[str]:
    """A shell script run as the student (her uid and groups, not root's)."""
    return subprocess.run(["runuser", "-u", login, "--", "sh", "-c", script], text=True,
                          capture_output=True, timeout=60, **kw)  # type: ignore[call-overload]


def released(top: Path, roster: Path) -> Path:
    exchange = top / "exchange"
    start = top / "answer_exercise.c"
    start.write_text(PROGRAM.format(value=0))
    r = idrrun("classroom", "release", "answer", str(start), "--exchange", str(exchange),
               "--roster", str(roster), "--deadline", "2099-01-01T00:00+00:00")
    assert r.returncode == 0, r.stdout + r.stderr
    return exchange


def submit(exchange: Path, login: str, text: str, name: str = "answer.c") -> None:
    """What `idrrun classroom submit` does, as the student with plain tools."""
    inbox = exchange / "inbox" / login / "answer"
    r = as_user(login, f"mkdir -p {inbox} && cat > {inbox}/{name}", input=text)
    assert r.returncode == 0, r.stderr


def collected(out: Path) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader((out / "collected.csv").open())}


def test_release_submit_collect_grade_return(klass: tuple[Path, list[str], Path]) -> None:
    top, (ann, ben), roster = klass
    exchange = released(top, roster)
    # Each student reads the released file, and nobody else's inbox.
    assert as_user(ann, f"cat {exchange}/released/answer/answer_exercise.c").returncode == 0
    submit(exchange, ann, PROGRAM.format(value=42))
    submit(exchange, ben, PROGRAM.format(value=41))
    # Her inbox's mode is hers: opening it to others stops no release of the class's.
    assert as_user(ann, f"chmod 755 {exchange}/inbox/{ann}").returncode == 0
    released(top, roster)
    assert as_user(ann, f"chmod 700 {exchange}/inbox/{ann}").returncode == 0
    peek = as_user(ben, f"cat {exchange}/inbox/{ann}/answer/answer.c")
    assert peek.returncode != 0 and "Permission denied" in peek.stderr

    status = idrrun("classroom", "status", "answer", "--exchange", str(exchange),
                    "--roster", str(roster), "--json")
    assert [r["status"] for r in json.loads(status.stdout)] == ["submitted", "submitted"]

    out = top / "collected"
    r = idrrun("classroom", "collect", "answer", "--exchange", str(exchange), "--roster",
               str(roster), "--to", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = collected(out)
    assert rows[ann]["status"] == "collected" and rows[ann]["late"] == ""
    assert rows[ann]["deadline"].startswith("2099-01-01")
    assert (out / "submissions" / f"{ann}.c").read_text() == PROGRAM.format(value=42)

    feedback = top / "feedback"
    g = idrrun("grade", "answer", *sorted(map(str, (out / "submissions").iterdir())),
               "--feedback", str(feedback), "--report", str(top / "r.csv"), "--unsafe",
               cwd=top, IDRRUN_EXAMPLES=str(course(top)))
    assert g.returncode == 0, g.stdout + g.stderr
    # Her run's GPU timeline beside the solution's, as a grading on a GPU draws them beside her
    # feedback (comparison.pictures and .markdown; no GPU here to draw them).
    drawn = top / "drawn"
    drawn.mkdir()
    for png, data in (("run.png", PNG + b"hers"), ("solution.png", PNG + b"solution's")):
        (drawn / png).write_bytes(data)
    figures = Comparison((Figure("kernels", "1", "1", "trace"),), (), drawn / "run.png",
                         drawn / "solution.png")
    pictures = comparison.pictures(figures, feedback, ann)
    with (feedback / f"{ann}.md").open("a") as f:
        f.write("\n".join(comparison.markdown(figures, pictures, str)) + "\n")

    back = idrrun("classroom", "return", "answer", "--exchange", str(exchange), "--roster",
                  str(roster), "--feedback", str(feedback), "--collected", str(out), "--json")
    assert back.returncode == 0, back.stdout + back.stderr
    assert [r["status"] for r in json.loads(back.stdout)] == ["returned", "returned"]
    mine = as_user(ann, f"cat {exchange}/feedback/{ann}/answer.md")
    assert mine.returncode == 0 and "41" not in mine.stdout, mine.stdout + mine.stderr
    theirs = as_user(ben, f"cat {exchange}/feedback/{ben}/answer.md")
    assert theirs.returncode == 0 and "41" in theirs.stdout, theirs.stdout
    for who, other in ((ann, ben), (ben, ann)):
        r = as_user(who, f"cat {exchange}/feedback/{other}/answer.md")
        assert r.returncode != 0 and "Permission denied" in r.stderr
    # The pictures went back with her feedback, named after the exercise, hers alone.
    assert "[![your GPU timeline](answer.timeline.png)](answer.timeline.png)" in mine.stdout
    assert "(answer.solution-timeline.png)" in mine.stdout and f"{ann}.timeline" not in mine.stdout
    seen = as_user(ann, f"cat {exchange}/feedback/{ann}/answer.timeline.png "
                        f"{exchange}/feedback/{ann}/answer.solution-timeline.png")
    assert seen.returncode == 0 and seen.stdout == PNG.decode() + "hers" + PNG.decode() + "solution's"
    r = as_user(ben, f"cat {exchange}/feedback/{ann}/answer.timeline.png")
    assert r.returncode != 0 and "Permission denied" in r.stderr


def test_late_submission_is_late_in_the_collection(
        klass: tuple[Path, list[str], Path]) -> None:
    top, (ann, ben), roster = klass
    exchange = released(top, roster)
    submit(exchange, ann, PROGRAM.format(value=42))
    # She cannot backdate it: ctime, not the mtime she may set, is the time of submission.
    assert as_user(ann, f"touch -d 2000-01-01 {exchange}/inbox/{ann}/answer/answer.c").returncode == 0
    deadline = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - 60))
    out = top / "collected"
    r = idrrun("classroom", "collect", "answer", "--exchange", str(exchange), "--roster",
               str(roster), "--to", str(out), "--deadline", deadline)
    assert r.returncode == 0, r.stderr
    assert "LATE" in r.stdout
    rows = collected(out)
    assert rows[ann]["late"] == "late" and rows[ben]["status"] == "missing"


def course(top: Path) -> Path:
    return write_course(top / "examples")


def test_a_late_submission_is_late_in_the_report_and_the_gradebook(
        klass: tuple[Path, list[str], Path]) -> None:
    """Ann hands in before the deadline, Ben after it; the collected folder, graded, says when
    each was submitted and that Ben's came late (report, terminal, gradebook), his grade
    unchanged but where the teacher gives a late policy."""
    top, (ann, ben), roster = klass
    exchange = released(top, roster)
    submit(exchange, ann, PROGRAM.format(value=42))
    deadline = int(time.time()) + 1
    time.sleep(deadline + 1.2 - time.time())
    submit(exchange, ben, PROGRAM.format(value=42))
    out = top / "collected"
    r = idrrun("classroom", "collect", "answer", "--exchange", str(exchange), "--roster",
               str(roster), "--to", str(out), "--deadline",
               time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(deadline)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert collected(out)[ben]["late"] == "late" and collected(out)[ann]["late"] == ""

    report = top / "grades" / "answer.csv"
    g = idrrun("grade", "answer", *sorted(map(str, (out / "submissions").iterdir())),
               "--report", str(report), "--unsafe", cwd=top, IDRRUN_EXAMPLES=str(course(top)))
    assert g.returncode == 0, g.stdout + g.stderr
    assert f"submitted: the times {out / 'collected.csv'} recorded" in g.stdout, g.stdout
    rows = {row["student"]: row for row in csv.DictReader(report.open())}
    assert rows[ann]["verdict"] == rows[ben]["verdict"] == "pass"
    assert rows[ann]["late"] == "" and rows[ann]["late_seconds"] == ""
    assert rows[ann]["submitted"] == collected(out)[ann]["submitted"] != ""
    assert rows[ben]["submitted"] == collected(out)[ben]["submitted"] != ""
    assert 1 <= float(rows[ben]["late_seconds"]) < 60, rows[ben]
    assert rows[ben]["late"].endswith(" s"), rows[ben]
    assert rows[ben]["late"] in g.stdout  # the terminal's table has the late column

    book = top / "roster-ids.csv"
    book.write_text("submission,id\n" + "".join(f"{l},{i}\n" for i, l in enumerate((ann, ben))))
    plain, moodle = top / "book.csv", top / "moodle.csv"
    b = idrrun("gradebook", str(report), "--roster", str(book), "--csv", str(plain),
               "--moodle", str(moodle))
    assert b.returncode == 0, b.stdout + b.stderr
    assert f"{ben}, answer: submitted {rows[ben]['late']} after the deadline (no late penalty" in b.stdout
    cells = {r["submission"]: r for r in csv.DictReader(plain.open())}
    assert cells[ben]["answer late"] == rows[ben]["late"] and cells[ann]["answer late"] == ""
    assert cells[ben]["answer submitted"] == rows[ben]["submitted"]
    assert cells[ben]["answer"] == cells[ann]["answer"] != ""  # no policy: the grade stands
    marks = {r["ID number"]: r for r in csv.DictReader(moodle.open())}
    assert marks["1"]["answer late"] == rows[ben]["late"] and marks["0"]["answer late"] == ""

    b = idrrun("gradebook", str(report), "--roster", str(book), "--csv", str(plain),
               "--late-penalty", "25")
    assert b.returncode == 0, b.stdout + b.stderr
    cells = {r["submission"]: r for r in csv.DictReader(plain.open())}
    assert float(cells[ben]["answer"]) == 0.75 * float(cells[ann]["answer"]) > 0


def test_links_fifos_and_foreign_files_are_error_rows_never_read(
        klass: tuple[Path, list[str], Path]) -> None:
    top, (ann, ben), roster = klass
    exchange = released(top, roster)
    secret = top / "secret.c"  # root's, readable by root alone
    secret.write_text("int teachers_solution;\n")
    secret.chmod(0o600)
    inbox = exchange / "inbox"
    # ann's file is a link to root's secret; ben's exercise folder is a link to ann's inbox.
    assert as_user(ann, f"mkdir {inbox}/{ann}/answer && ln -s {secret} {inbox}/{ann}/answer/a.c"
                   ).returncode == 0
    assert as_user(ben, f"ln -s {inbox}/{ann}/answer {inbox}/{ben}/answer").returncode == 0
    # Watching does not follow them either: ann has handed in something (a link, which collect
    # refuses), ben's folder is a link: he has submitted nothing.
    status = idrrun("classroom", "status", "answer", "--exchange", str(exchange),
                    "--roster", str(roster), "--json")
    assert [r["status"] for r in json.loads(status.stdout)] == ["submitted", "missing"], status.stdout
    out = top / "collected"
    r = idrrun("classroom", "collect", "answer", "--exchange", str(exchange), "--roster",
               str(roster), "--to", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    rows = collected(out)
    assert rows[ann]["status"] == "error" and "a link, not followed" in rows[ann]["problem"]
    assert rows[ben]["status"] == "error" and "not a folder of hers" in rows[ben]["problem"]
    assert list((out / "submissions").iterdir()) == []
    # A FIFO would block a reader that opens it without O_NONBLOCK: an error row, at once.
    assert as_user(ann, f"rm {inbox}/{ann}/answer/a.c && mkfifo {inbox}/{ann}/answer/a.c"
                   ).returncode == 0
    r = idrrun("classroom", "collect", "answer", "--exchange", str(exchange), "--roster",
               str(roster), "--to", str(out), "--json")
    assert json.loads(r.stdout)[0]["problem"] == "a.c: not a regular file"


# A student's loop that swaps her submission, as fast as it can, between two versions (each
# written whole elsewhere, then renamed in place), one rewritten in place, and a link to a file
# of root's: whatever collection gets is one of her versions, or an error row.
RACER = """
import os, sys, time
folder, secret = sys.argv[1], sys.argv[2]
a, b = b"int a_version;\\n" * 2000, b"int b_version;\\n" * 3000
end = time.monotonic() + float(sys.argv[3])
i = 0
while time.monotonic() < end:
    i += 1
    tmp = os.path.join(folder, ".tmp")
    kind = i % 4
    if kind == 3:
        try: os.unlink(tmp)
        except FileNotFoundError: pass
        os.symlink(secret, tmp)
    else:
        with open(tmp, "wb") as f: f.write(a if kind else b)
    os.replace(tmp, os.path.join(folder, "a.c"))
    if kind == 2:
        with open(os.path.join(folder, "a.c"), "r+b") as f:
            f.write(b"int c_version;\\n" * 1000); f.truncate()
"""


def test_a_student_who_swaps_her_file_during_collection(klass: tuple[Path, list[str], Path]) -> None:
    top, (ann, _), roster = klass
    exchange = released(top, roster)
    secret = top / "secret.c"
    secret.write_text("int teachers_solution;\n")
    secret.chmod(0o600)
    folder = exchange / "inbox" / ann / "answer"
    submit(exchange, ann, "int first;\n", "a.c")
    racer = top / "racer.py"
    racer.write_text(RACER)
    racer.chmod(0o644)
    a, b, c = b"int a_version;\n" * 2000, b"int b_version;\n" * 3000, b"int c_version;\n" * 1000
    # Every state her file held: the last, c over a before its truncate, as she wrote it.
    versions = {b"int first;\n", a, b, c, c + a[len(c):]}
    proc = subprocess.Popen(["runuser", "-u", ann, "--", "/usr/bin/python3", str(racer),
                             str(folder), str(secret), "30"])
    seen: dict[str, int] = {}
    class_ = exchange_mod.students([ann])
    out = top / "collected"
    try:
        end = time.monotonic() + 8
        while time.monotonic() < end:
            [row] = exchange_mod.collect(exchange, "answer", class_, out, None)
            if row.status == "collected":
                assert (out / "submissions" / f"{ann}.c").read_bytes() in versions
            else:
                assert row.status == "error" and ("a link, not followed" in row.problem or
                                                  "changed while" in row.problem), row
            key = row.problem.split(": ", 1)[-1] if row.problem else row.status
            seen[key] = seen.get(key, 0) + 1
    finally:
        proc.kill()
        proc.wait()
    print(seen)
    assert seen.get("collected"), seen  # her versions were collected some of the time
    assert len(seen) > 1, seen  # and the loop did reach a collection mid-swap


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
