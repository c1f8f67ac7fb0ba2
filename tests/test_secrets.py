"""No secret where a box can look, and the program's failure is the program's (issue 33.2, 33.4).

A class graded as root at both sandbox levels (bubblewrap's namespaces; a fresh uid per box with
bubblewrap hidden), the seed given three ways at once (--seed-file, IDRRUN_GRADING_SEED, a
private --config), beside:
- a spy that, in its public run, looks for every hidden value (the seed, the drawn argument
  sets) in its environment, in the config and seed files, and in every process's command line
  and environment for four seconds while classmates run their hidden cases; it exits 7 when it
  finds one;
- a start file that prints what bubblewrap prints when it cannot make a box and SIGKILLs its
  parent (the guard inside its box): a fail, never "not graded";
- a notebook whose graded line keeps `-l c++` on C code: the student's fail, not an error row.
No student file (feedback) holds a hidden value; the honest verdicts hold.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from conftest import PYTHONPATH, ROOT
from idrrun.checks import draw, specs
from idrrun.request import config
from idrrun.errors import ConfigError
from idrrun.run import isolation, sandbox
from test_grader_boundary import no_bwrap  # noqa: F401 (a fixture: PATH without bubblewrap)

EXIT_LEAKED = 7

SPEC = r"""name = "demo_s"
timeout = 20
[sources.c]
exercise = "ex.c"
solution = "sol.c"
[args]
host = ["10"]
[args.draw]
sets = 2
ranges = [[100000000, 999999999]]
[[check]]
kind = "exit_ok"
[[check]]
kind = "matches_solution"
label = "n"
pattern = 'n\s*=\s*(\d+)'
rel_tol = 0.0
"""
# The solution (and the honest classmate) take a while in each run: a spy has time to look.
SOLUTION = ('#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n'
            'int main(int argc, char **argv) { usleep(400000); '
            'printf("n = %ld\\n", argc > 1 ? atol(argv[1]) : 1L); return 0; }\n')
START = '#include <stdio.h>\nint main(void) { printf("n = 10\\n"); return 0; }\n'

SPY = r"""#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
extern char **environ;
/* Written backwards (its own source, shown in its feedback, must not hold them). */
static char secret_back[][64] = {SECRETS};
static char secret[sizeof secret_back / sizeof secret_back[0]][64];
static const char *where = "";
static int holds(const char *buf, size_t n, const char *what)
{
    for (size_t k = 0; k < sizeof secret / sizeof secret[0]; k++)
        if (memmem(buf, n, secret[k], strlen(secret[k]))) { where = what; return 1; }
    return 0;
}
static int in_file(const char *path)
{
    char buf[65536];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    return n > 0 && holds(buf, (size_t)n, path);
}
int main(int argc, char **argv)
{
    for (size_t k = 0; k < sizeof secret / sizeof secret[0]; k++) {
        size_t n = strlen(secret_back[k]);
        for (size_t i = 0; i < n; i++)
            secret[k][i] = secret_back[k][n - 1 - i];
    }
    if (argc > 1 && strcmp(argv[1], "10") == 0) {
        int found = 0;
        for (char **e = environ; *e && !found; e++)
            found = holds(*e, strlen(*e), "its environment");
        found = found || in_file(CONFIG) || in_file(SEED_FILE);
        time_t end = time(NULL) + 4;
        char self[32];
        snprintf(self, sizeof self, "%d", (int)getpid());
        while (!found && time(NULL) < end) {
            DIR *d = opendir("/proc");
            struct dirent *e;
            while (d && !found && (e = readdir(d))) {
                if (e->d_name[0] < '1' || e->d_name[0] > '9' || !strcmp(e->d_name, self)) continue;
                char path[300];
                snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
                found = in_file(path);
                snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
                found = found || in_file(path);
            }
            if (d) closedir(d);
        }
        if (found) {
            printf("LEAKED in %s\n", where);
            return 7;
        }
    }
    printf("n = 10\n");
    return 0;
}
"""

# What bubblewrap prints when it cannot make a box, then the guard inside the box killed.
FAKE_BWRAP = r"""#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void)
{
    fprintf(stderr, "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n");
    fflush(stderr);
    kill(getppid(), SIGKILL);
    return 1;
}
"""


def _grade(tmp: Path, klass: Path, seed_file: Path, conf: Path, seed: str,
           path: str | None) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, object]]]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(tmp / "course"),
               IDRRUN_CACHE_DIR=str(tmp / "cache"), IDRRUN_RESIDENT="0", IDRRUN_GRADING_SEED=seed)
    if path is not None:
        env["PATH"] = path
    report = tmp / "r.json"
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "demo_s", "-j", "4",
                        "--seed-file", str(seed_file), "--config", str(conf), "--report", str(report),
                        "--feedback", str(tmp / "feedback"), "--fresh", "--",
                        *map(str, sorted(klass.iterdir()))],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    print(r.stdout[-6000:] + r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr
    return r, {str(row["student"]): row for row in json.loads(report.read_text())}


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the uid level needs root")
@pytest.mark.skipif(isolation.sandbox_support().level != "namespaces",
                    reason="this machine cannot make namespaces (bubblewrap)")
@pytest.mark.parametrize("level", ["namespaces", "uid"])
def test_no_hidden_value_reaches_a_box_or_a_student_and_a_forged_box_failure_is_a_fail(
        tmp_path: Path, level: str, no_bwrap: str) -> None:  # noqa: F811
    os.chmod(tmp_path, 0o700)  # the uid level refuses a course or a class others can read
    course, klass = tmp_path / "course", tmp_path / "class"
    course.mkdir()
    klass.mkdir()
    (course / "demo_s.toml").write_text(SPEC)
    (course / "sol.c").write_text(SOLUTION)
    (course / "ex.c").write_text(START)
    seed = "pepper-" + secrets.token_hex(8)
    seed_file, conf = tmp_path / "seed", tmp_path / "grading.toml"
    seed_file.write_text(seed + "\n")
    conf.write_text(f'[grading]\nseed = "{seed}"\n')
    seed_file.chmod(0o600)
    conf.chmod(0o600)
    drawn = [v for args in draw.drawn(specs.load(course / "demo_s.toml"), seed).hidden_args for v in args]
    hidden = [seed, *drawn]
    (klass / "ann.c").write_text(SOLUTION)
    (klass / "bob.c").write_text(START)
    (klass / "spy.c").write_text(
        SPY.replace("SECRETS", ", ".join(f'"{v[::-1]}"' for v in hidden))
        .replace("CONFIG", f'"{conf}"').replace("SEED_FILE", f'"{seed_file}"'))
    (klass / "mallory.c").write_text(FAKE_BWRAP)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%idrrun -l c++ --check demo_s\n" + SOLUTION)]
    nbformat.write(nb, klass / "carl.ipynb")
    r, rows = _grade(tmp_path, klass, seed_file, conf, seed, no_bwrap if level == "uid" else None)
    assert {str(row["sandbox"]) for row in rows.values()} == {level}
    verdicts = {s: row["verdict"] for s, row in rows.items()}
    print(level, verdicts, {s: row["reasons"] for s, row in rows.items()})
    assert rows["ann"]["verdict"] == "pass", rows["ann"]
    assert rows["bob"]["verdict"] == "fail"
    # The spy found nothing: not in its environment, its files, nor any process.
    assert f"exit code {EXIT_LEAKED}" not in str(rows["spy"]["reasons"]), rows["spy"]
    assert rows["spy"]["verdict"] == "fail", rows["spy"]
    # A program that forges bubblewrap's words and kills its guard: its own fail.
    assert rows["mallory"]["verdict"] == "fail", rows["mallory"]
    assert "sandbox" not in str(rows["mallory"]["reasons"]), rows["mallory"]
    # A line flag that makes the run impossible: the student's fail, saying why.
    assert rows["carl"]["verdict"] == "fail", rows["carl"]
    assert "no c++ version" in str(rows["carl"]["reasons"]), rows["carl"]
    assert r.returncode == 0  # every row graded: no error row
    # Every file a student receives: no hidden value.
    feedback = sorted((tmp_path / "feedback").iterdir())
    assert {p.stem for p in feedback} == set(rows)
    for fb in feedback:
        text = fb.read_text()
        assert not [v for v in hidden if v in text], (fb.name, text)


def test_a_config_holding_the_seed_that_others_can_read_is_refused(tmp_path: Path) -> None:
    folder = Path(f"/tmp/h-config-{os.getpid()}")
    folder.mkdir(mode=0o755)
    try:
        os.chmod(folder, 0o755)
        conf = folder / "idrrun.toml"
        conf.write_text('[grading]\nseed = "spring"\n')
        conf.chmod(0o644)
        with pytest.raises(ConfigError, match="holds \\[grading\\] seed and other users can read it"):
            config.load(folder, environ={})
        with pytest.raises(ConfigError, match="chmod 600"):
            config.load(tmp_path, environ={"IDRRUN_CONFIG": str(conf)})
        conf.chmod(0o600)
        assert config.load(folder, environ={}).grading_seed == "spring"
        # Without a seed, an open config is as before.
        conf.write_text("timeout = 3\n")
        conf.chmod(0o644)
        assert config.load(folder, environ={}).grading_seed is None
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys not installed (docker/install.sh nsys)")
def test_a_program_that_removes_its_nsys_launch_mark_still_fails(tmp_path: Path) -> None:
    """Under nsys, the mark that the program was launched is a file in its own folder, which it
    can remove (its name is in its environment): once that made "nsys failed before the program
    started", an error row. The grader watches the folder (inotify) from before the run: the
    kernel saw the mark made, whatever became of it."""
    remover = ('#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n'
               'int main(void) { const char *m = getenv("IDRRUN_LAUNCHED");\n'
               '    if (m) unlink(m);\n    puts("ran");\n    return 1;\n}\n')
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%idrrun -a --profile --profiler nsys\n" + remover)]
    nbformat.write(nb, str(tmp_path / "rita.ipynb"))
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ROOT / "examples"))
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "intro_saxpy", "rita.ipynb",
                        "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert r.stdout.strip(), r.stderr
    row, = json.loads(r.stdout)["rows"]
    assert row["verdict"] == "fail", row
    assert "exit code 1" in str(row["reasons"]), row["reasons"]


@pytest.mark.skipif(os.geteuid() != 0, reason="a box's uid needs root")
def test_nothing_of_a_box_uid_outlives_it_even_undumpable() -> None:
    """At the uid level a process left by a box would read the next runs' command lines: every
    process of its uid is killed after it, found by its status (an undumpable process's /proc
    folder is root's)."""
    uid = sandbox.fresh_uid()
    left = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                             "/usr/bin/python3", "-c",
                             "import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "
                             "print('ready', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert left.stdout is not None and left.stdout.readline().strip() == "ready"
    assert sandbox.end_uid(uid) == 1
    assert left.wait(timeout=5) == -9


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the uid level needs root")
def test_two_gradings_at_the_uid_level_keep_hidden_runs_from_each_other(
        tmp_path: Path, no_bwrap: str) -> None:  # noqa: F811
    """Two gradings at once on one machine (two teachers): the spy of one looks for the hidden
    values the other's class runs with; the machine's lock keeps their boxes apart too."""
    os.chmod(tmp_path, 0o700)
    seed = "pepper-" + secrets.token_hex(8)
    started = []
    for name, students in (("a", {"spy": None}), ("b", {"ann": SOLUTION, "amy": SOLUTION})):
        top = tmp_path / name
        (top / "course").mkdir(parents=True)
        (top / "class").mkdir()
        (top / "course" / "demo_s.toml").write_text(SPEC)
        (top / "course" / "sol.c").write_text(SOLUTION)
        (top / "course" / "ex.c").write_text(START)
        drawn = [v for a in draw.drawn(specs.load(top / "course" / "demo_s.toml"), seed).hidden_args
                 for v in a]
        for student, text in students.items():
            (top / "class" / f"{student}.c").write_text(text or SPY.replace(
                "SECRETS", ", ".join(f'"{v[::-1]}"' for v in [seed, *drawn]))
                .replace("CONFIG", '"/nonexistent"').replace("SEED_FILE", '"/nonexistent"'))
        env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(top / "course"),
                   IDRRUN_CACHE_DIR=str(top / "cache"), IDRRUN_RESIDENT="0",
                   IDRRUN_GRADING_SEED=seed, PATH=no_bwrap)
        started.append(subprocess.Popen(
            [sys.executable, "-m", "idrrun.cli", "grade", "demo_s", "-j", "2", "--report",
             str(top / "r.json"), "--", *map(str, sorted((top / "class").iterdir()))],
            cwd=top, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        time.sleep(1.0)
    for p in started:
        out, _ = p.communicate(timeout=600)
        print(out[-3000:])
    rows = {str(r["student"]): r for t in ("a", "b")
            for r in json.loads((tmp_path / t / "r.json").read_text())}
    assert rows["ann"]["verdict"] == "pass" and rows["amy"]["verdict"] == "pass", rows
    assert f"exit code {EXIT_LEAKED}" not in str(rows["spy"]["reasons"]), rows["spy"]
