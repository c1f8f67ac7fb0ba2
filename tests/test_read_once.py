"""Read once (issue 33.1): a submission is read once, by descriptor, into the grader's own copy;
its digest, its source and what is compiled are that copy, and a resumed grading never hands a
row to another content.

A second local user owns her folder (a home on a shared course machine) and watches it with
inotify: each time a reader closes her file she swaps it (the start file, then the solution,
then the start file again). A grader that read the file twice (once for the digest, once for the
compile) recorded the solution's verdict under the start file's digest, and a classmate handing
in the unchanged start file then inherited that pass by content.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PYTHONPATH
from idrrun.grading import report as report_mod
from idrrun.grading import state as state_mod

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="a second local user needs root"),
]

STUDENT = "idrrun-eve"

SPEC = r"""name = "demo_n"
timeout = 20
[sources.c]
exercise = "ex.c"
solution = "sol.c"
[args]
host = ["10"]
hidden = [["123457"]]
[[check]]
kind = "exit_ok"
[[check]]
kind = "matches_solution"
label = "n"
pattern = 'n\s*=\s*(\d+)'
rel_tol = 0.0
"""
SOLUTION = ('#include <stdio.h>\n#include <stdlib.h>\n'
            'int main(int argc, char **argv) { printf("n = %d\\n", argc > 1 ? atoi(argv[1]) : 1); return 0; }\n')
START = '#include <stdio.h>\nint main(void) { printf("n = 10\\n"); return 0; }\n'

# Run as the student: every time a reader closes eve.c, the other version takes its place
# (rename, atomic). It says "ready" once it watches, and counts the swaps in its folder.
SWAPPER = r"""
import ctypes, os, struct, sys
folder, start, solution = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
IN_CLOSE_NOWRITE = 0x10
assert libc.inotify_add_watch(fd, folder.encode(), IN_CLOSE_NOWRITE) >= 0
versions, now, swaps = [solution, start], 0, 0
print("ready", flush=True)
while True:
    data = os.read(fd, 65536)
    at = 0
    while at < len(data):
        wd, mask, cookie, length = struct.unpack_from("iIII", data, at)
        name = data[at + 16:at + 16 + length].rstrip(b"\0")
        at += 16 + length
        if name == b"eve.c":
            tmp = os.path.join(folder, ".next")
            with open(tmp, "wb") as fh:
                fh.write(versions[now % 2])
            os.rename(tmp, os.path.join(folder, "eve.c"))
            now += 1
            swaps += 1
            with open(os.path.join(folder, ".swaps"), "w") as fh:
                fh.write(str(swaps))
"""


def _student() -> tuple[int, int]:
    try:
        pw = pwd.getpwnam(STUDENT)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        STUDENT], check=True)
        pw = pwd.getpwnam(STUDENT)
    return pw.pw_uid, pw.pw_gid


def _grade(course: Path, subs: list[Path], report: Path, cwd: Path) -> list[dict[str, object]]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(course),
               IDRRUN_CACHE_DIR=str(cwd / "cache"), IDRRUN_RESIDENT="0")
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "demo_n", "--report",
                        str(report), "--", *map(str, subs)],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in r.stderr, r.stderr
    print(r.stdout + r.stderr)
    return list(json.loads(report.read_text()))


def test_a_file_swapped_while_graded_is_judged_as_read_and_poisons_no_resume(tmp_path: Path) -> None:
    uid, gid = _student()
    course = tmp_path / "course"
    course.mkdir()
    (course / "demo_n.toml").write_text(SPEC)
    (course / "sol.c").write_text(SOLUTION)
    (course / "ex.c").write_text(START)
    os.chmod(tmp_path, 0o755)
    # Her home: her own folder, outside the grader's.
    home = Path(f"/tmp/h-read-once-{os.getpid()}")
    home.mkdir()
    os.chmod(home, 0o755)
    os.chown(home, uid, gid)
    eve = home / "eve.c"
    eve.write_text(START)
    os.chown(eve, uid, gid)
    swapper = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--",
                                "/usr/bin/python3", "-c", SWAPPER, str(home), START, SOLUTION],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "ready"
        report = tmp_path / "r.json"
        rows = {r["student"]: r for r in _grade(course, [eve], report, tmp_path)}
        time.sleep(0.5)
        swaps = int((home / ".swaps").read_text()) if (home / ".swaps").exists() else 0
    finally:
        swapper.kill()
        swapper.wait()
    print(f"swaps during the grading: {swaps}")
    assert swaps >= 1  # the grader read her file, and she swapped it right after
    state = {r["student"]: r for r in json.loads(state_mod.state_path(report).read_text())}
    digest = state["eve"]["content"]["submission"]
    start_digest = hashlib.sha256(START.encode()).hexdigest()
    solution_digest = hashlib.sha256(SOLUTION.encode()).hexdigest()
    # The verdict is that of the content its digest names: the one copy read.
    assert digest in (start_digest, solution_digest)
    expected = "fail" if digest == start_digest else "pass"
    assert rows["eve"]["verdict"] == expected, (rows["eve"], digest == start_digest)
    # A classmate hands in the untouched start file: resumed or graded, never eve's pass.
    frank = tmp_path / "class" / "frank.c"
    frank.parent.mkdir()
    frank.write_text(START)
    rows = {r["student"]: r for r in _grade(course, [eve, frank], report, tmp_path)}
    assert rows["frank"]["verdict"] == "fail", rows["frank"]
    shutil.rmtree(home)


def test_the_resume_key_holds_the_code_of_the_grader(tmp_path: Path) -> None:
    """An editable install always says 0.1.0: the key holds a digest of the package's files."""
    copy = tmp_path / "idrrun"
    shutil.copytree(Path(report_mod.__file__).resolve().parents[1], copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    probe = "from idrrun.grading import state; print(state.code_id())"

    def code_id() -> str:
        return subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=dict(
            os.environ, PYTHONPATH=str(tmp_path)), capture_output=True, text=True,
            check=True).stdout.strip()

    before = code_id()
    assert before == state_mod.code_id()
    checks = copy / "checks" / "verdict.py"
    checks.write_text(checks.read_text() + "\n# a fix\n")
    after = code_id()
    assert after != before and after.split("+")[0] == before.split("+")[0]
