"""The grader stays up (issue 23, item 6; the config part of item 2): submissions a hostile
tester handed in, each graded with the real CLI beside an honest classmate. Every one becomes a
clear row or message: no crash, nothing on the wrong channel, no formula in the report, nothing
run from a config that came with the submissions."""

from __future__ import annotations

import csv
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from conftest import PYTHONPATH, ROOT
from idrrun.escape import csv_cell
from idrrun.grading.names import student_name
from idrrun.grading import discover
from idrrun.run import boundary, isolation

EXAMPLES = ROOT / "tests" / "data" / "integrity"
SOLUTION = (EXAMPLES / "C" / "secret_sum_solution.c").read_text()
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
pytestmark = pytest.mark.skipif(isolation.sandbox_support().level == "none",
                                reason="no sandbox on this machine: idrrun grade refuses")


def grade(*args: str, cwd: Path, env: dict[str, str] | None = None,
          exercise: str = "secret_sum") -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(EXAMPLES), **(env or {}))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", exercise, *args], cwd=cwd,
                          env=full, capture_output=True, text=True, timeout=300)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def json_rows(r: subprocess.CompletedProcess[str]) -> dict[str, dict[str, object]]:
    """--json's rows by student: stdout must be one JSON document and nothing else."""
    return {str(row["student"]): row for row in json.loads(r.stdout)["rows"]}


def notebook(path: Path, line: str, body: str = SOLUTION) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"%%idrrun{line}\n{body}")]
    nbformat.write(nb, path)
    return path


def nest(top: Path, depth: int) -> None:
    """`depth` folders, one in the other, made through descriptors (a path this long could not
    be named whole)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
    finally:
        os.close(fd)


def unnest(top: Path, depth: int) -> None:
    """Remove nest's folders from the bottom up (shutil.rmtree recurses once per level)."""
    for level in range(depth, 0, -1):
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(level - 1):
                below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = below
            os.rmdir("d", dir_fd=fd)
        finally:
            os.close(fd)


def test_a_folder_1100_deep_and_one_of_2001_entries_are_one_error_row_each(tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "good.c").write_text(SOLUTION)
    deep = klass / "deep"
    deep.mkdir()
    (deep / "secret_sum.c").write_text(SOLUTION)
    nest(deep, 1100)
    wide = klass / "wide"
    wide.mkdir()
    (wide / "secret_sum.c").write_text(SOLUTION)
    for i in range(2000):
        (wide / f"f{i}.txt").touch()
    try:
        r = grade(*sorted(map(str, klass.iterdir())), "--report", str(tmp_path / "r.csv"), cwd=tmp_path)
        assert r.returncode == 1, r.stdout + r.stderr  # error rows: some could not be graded
        assert "Traceback" not in r.stderr, r.stderr
        rows = {row["student"]: row for row in csv_rows(tmp_path / "r.csv")}
        assert set(rows) == {"good", "deep", "wide"}
        assert rows["good"]["verdict"] == "pass", rows["good"]
        budget = boundary.Budget()
        assert rows["deep"]["verdict"] == "error"
        assert f"folders more than {budget.depth} deep" in rows["deep"]["reasons"], rows["deep"]
        assert rows["wide"]["verdict"] == "error"
        assert f"more than {budget.entries} files and folders" in rows["wide"]["reasons"], rows["wide"]
    finally:
        unnest(deep, 1100)


@pytest.mark.parametrize("line, reason", [
    (" --help", "asks for the help"),
    (" -a -h", "asks for the help"),
    (" -ah --check secret_sum", "asks for the help"),
    (" --frobnicate", "unrecognized arguments: --frobnicate"),
    (" --cliopts 'unterminated", "cannot read the line"),
])
def test_a_notebook_asking_for_help_or_unreadable_is_one_error_row_and_prints_nothing(
        tmp_path: Path, line: str, reason: str) -> None:
    notebook(tmp_path / "nb.ipynb", line)
    r = grade(str(tmp_path / "nb.ipynb"), "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "usage:" not in r.stdout and "usage:" not in r.stderr
    rows = json_rows(r)  # stdout is the JSON document alone
    assert list(rows) == ["nb"]
    assert rows["nb"]["verdict"] == "error" and reason in str(rows["nb"]["reasons"]), rows["nb"]


def test_two_submissions_of_one_student_are_one_error_row_and_feedback_files_never_collide(
        tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "alice.c").write_text(SOLUTION)
    notebook(klass / "alice.ipynb", " -a --check secret_sum")
    # Three students whose names the file-name sanitiser maps to one ("a_b"), and two that differ
    # in case only: a notebook without an %%idrrun cell is an error row, graded at once.
    for name in ("a b", "a_b", "a:b", "Carl", "carl"):
        (klass / f"{name}.ipynb").write_text(json.dumps({"cells": [], "nbformat": 4,
                                                         "nbformat_minor": 5, "metadata": {}}))
    feedback = tmp_path / "fb"
    r = grade(*sorted(map(str, klass.iterdir())), "--report", str(tmp_path / "r.json"),
              "--feedback", str(feedback), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = json.loads((tmp_path / "r.json").read_text())
    alice = [row for row in rows if row["student"] == "alice"]
    assert len(alice) == 1 and alice[0]["verdict"] == "error", alice
    assert str(klass / "alice.c") in alice[0]["reasons"] and str(klass / "alice.ipynb") in alice[0]["reasons"]
    assert "neither graded" in alice[0]["reasons"]
    assert len(rows) == 6
    # One feedback file per row, none overwritten; names that were never changed stay as they are.
    files = sorted(p.name for p in feedback.iterdir())
    assert len(files) == len({f.lower() for f in files}) == 6, files
    students = {p.read_text().split("Student: ")[1].split("  \n")[0] for p in feedback.iterdir()}
    assert students == {"alice", "a b", "a_b", "a:b", "Carl", "carl"}
    assert "alice.md" in files
    # The teacher removes one: the same command grades alice (an unreadable submission's row is
    # never kept by a resumed grading, whatever it said).
    (klass / "alice.ipynb").unlink()
    r = grade(*sorted(map(str, klass.iterdir())), "--report", str(tmp_path / "r.json"), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # the five notebooks
    rows = json.loads((tmp_path / "r.json").read_text())
    assert [row["verdict"] for row in rows if row["student"] == "alice"] == ["pass"], [r for r in rows if r["student"] == "alice"]


def _no_formula(cell: str) -> bool:
    return not cell.lstrip(" ").startswith(FORMULA_START)


def test_formulas_in_names_and_outputs_are_neutralised_in_csv_and_feedback(tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    # (A file name holds no "/": the link's address has none.)
    names = ['=HYPERLINK("x.example","y")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\r=1", " =1+2",
             "x;=1+1"]
    for name in names:
        (klass / f"{name}.c").write_text('#include "/etc/hostname"\n')  # refused: an error row
    # A program whose output puts a formula into a check's "got" (the feedback table).
    (klass / "printer.c").write_text(SOLUTION.replace('printf("sum = %.12e\\n", sum);',
                                                      'printf("sum = =1+%g\\n", sum);'))
    report, feedback = tmp_path / "r.csv", tmp_path / "fb"
    r = grade("--report", str(report), "--feedback", str(feedback), "--",
              *sorted(map(str, klass.iterdir())), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = csv_rows(report)
    assert len(rows) == len(names) + 1
    for row in rows:
        for column, cell in row.items():
            assert _no_formula(cell), (column, cell)
    # Each name as every report writes it (grading/names.py: controls escaped), in a cell no
    # spreadsheet reads as a formula (escape.csv_cell: a leading quote where one would start).
    written = {student_name(n) for n in names}
    assert {row["student"] for row in rows} == {csv_cell(n) for n in written} | {"printer"}
    assert {"'=HYPERLINK(\"x.example\",\"y\")", "'+1+1", "' =1+2", "\\x09x", "x;=1+1"} <= \
        {row["student"] for row in rows}
    # Every cell is quoted: a semicolon (the separator of a French Excel) cannot start a cell.
    text = report.read_bytes().decode()
    assert all(line.startswith('"') for line in text.split("\r\n") if line)
    assert '"x;=1+1"' in text
    # The JSON report keeps the raw values.
    json_report = tmp_path / "r.json"
    grade("--report", str(json_report), "--", *sorted(map(str, klass.iterdir())), cwd=tmp_path)
    assert {row["student"] for row in json.loads(json_report.read_text())} == written | {"printer"}
    table = (feedback / "printer.md").read_text()
    assert "| '=1+" in table, table
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            assert all(_no_formula(c.strip(" ")) for c in line.strip("|").split(" | ")), line


def test_a_file_named_like_an_option_is_graded_after_double_dash(tmp_path: Path) -> None:
    (tmp_path / "-j.c").write_text(SOLUTION)
    r = grade("--report", "r.csv", "--", "-j.c", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    [row] = csv_rows(tmp_path / "r.csv")
    assert row["student"] == "'-j" and row["verdict"] == "pass", row
    assert row["submission"] == "'-j.c"
    # Without "--" it is an option, and the message says what to do.
    r = grade("-j.c", cwd=tmp_path)
    assert r.returncode == 2 and "-j.c is a file: names that start with '-' go after '--'" in r.stderr, r.stderr
    # `idrrun run` the same.
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_RESIDENT="0")
    ran = subprocess.run([sys.executable, "-m", "idrrun.cli", "run", "--cliopts", "977", "--", "-j.c"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and "sum = " in ran.stdout, ran.stdout + ran.stderr
    ran = subprocess.run([sys.executable, "-m", "idrrun.cli", "run", "-j.c"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2 and "(idrrun run [flags] -- -j.c)" in ran.stderr, ran.stderr
    helped = grade("--help", cwd=tmp_path)
    assert "idrrun grade NAME [options] -- SUBMISSION" in " ".join(helped.stdout.split())
    assert "idrrun grade NAME [options] -- SUBMISSION" in (ROOT / "README.md").read_text()


def test_a_config_in_the_working_folder_is_not_read_by_the_grader(tmp_path: Path) -> None:
    """A handed-in idrrun.toml whose launcher and compiler would leave a marker: the teacher
    grades from the submissions folder, as root; nothing of it runs."""
    marker = tmp_path / "MARKER"
    evil = tmp_path / "evil.sh"
    evil.write_text(f'#!/bin/sh\ntouch {marker}\nexec "$@"\n')
    evil.chmod(0o755)
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "idrrun.toml").write_text(
        f'family = "gcc"\n[compilers.gcc]\nc = "{evil}"\n'
        f'[launcher]\nkind = "mpirun"\ncommand = "{evil}"\ntasks = "-np"\n')
    (klass / "ann.c").write_text(SOLUTION)
    r = grade("ann.c", "--report", str(tmp_path / "r.csv"), cwd=klass)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not marker.exists()
    [row] = csv_rows(tmp_path / "r.csv")
    assert row["verdict"] == "pass", row
    assert f"{klass / 'idrrun.toml'}: not read" in r.stdout, r.stdout
    # Given explicitly, it is read (here a broken one: the error names it).
    (tmp_path / "teacher.toml").write_text("timeout = -1\n")
    r = grade("ann.c", "--config", str(tmp_path / "teacher.toml"), cwd=klass)
    assert r.returncode == 2 and "teacher.toml: field 'timeout'" in r.stderr, r.stderr
    r = grade("ann.c", "--config", str(tmp_path / "missing.toml"), cwd=klass)
    assert r.returncode == 2 and "missing.toml" in r.stderr, r.stderr
    # course check: the same.
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(EXAMPLES))
    course = [sys.executable, "-m", "idrrun.cli", "course", "check", "--json"]
    r = subprocess.run(course, cwd=klass, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and json.loads(r.stdout)["failed"] == 0, r.stdout + r.stderr
    assert not marker.exists()
    r = subprocess.run([*course, "--config", str(tmp_path / "teacher.toml")], cwd=klass, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "teacher.toml: field 'timeout'" in r.stderr, r.stderr


def test_a_notebook_over_the_cap_is_refused_unparsed_and_a_folder_over_the_budget_at_discovery(
        tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    # Not JSON at all: parsed, it would say "not a readable notebook".
    (klass / "big.ipynb").write_bytes(b"{" + b" " * discover.MAX_SOURCE_BYTES + b"oops")
    heavy = klass / "heavy"
    heavy.mkdir()
    (heavy / "secret_sum.c").write_text(SOLUTION)
    with (heavy / "data.bin").open("wb") as fh:  # sparse: its apparent size counts
        fh.truncate(boundary.Budget().size)
    (klass / "good.c").write_text(SOLUTION)
    r = grade(*sorted(map(str, klass.iterdir())), "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = json_rows(r)
    assert rows["good"]["verdict"] == "pass"
    assert rows["big"]["verdict"] == "error"
    assert "refused" in str(rows["big"]["reasons"]) and "bytes" in str(rows["big"]["reasons"])
    assert rows["heavy"]["verdict"] == "error"
    assert f"more than {boundary.Budget().size >> 20} MiB" in str(rows["heavy"]["reasons"]), rows["heavy"]
    assert rows["heavy"]["build_seconds"] == 0  # refused before anything was built


def test_a_link_or_a_fifo_in_place_of_a_submission_is_an_error_row(tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "linked").symlink_to(EXAMPLES / "C", target_is_directory=True)
    os.mkfifo(klass / "fifo.c")
    (klass / "folder").mkdir()
    os.mkfifo(klass / "folder" / "secret_sum.c")
    r = grade(*sorted(map(str, klass.iterdir())), "--json", cwd=tmp_path, env={})
    assert r.returncode == 1, r.stdout + r.stderr
    rows = json_rows(r)
    assert {s: str(row["verdict"]) for s, row in rows.items()} == \
        {"linked": "error", "fifo": "error", "folder": "error"}
    assert "link" in str(rows["linked"]["reasons"]) and "regular file" in str(rows["fifo"]["reasons"])
    assert stat.S_ISFIFO(os.lstat(klass / "fifo.c").st_mode)


def test_a_grader_stopped_by_sigterm_kills_every_rows_run_at_once(tmp_path: Path) -> None:
    """`timeout`, `kill` or a batch system stops a grader with SIGTERM, which only the main
    thread sees: the runs of the rows in worker threads must die with it, not at their time
    limit (a grader on the H100 took 61 s to stop so)."""
    from test_hostile import gone_within, with_tag

    waits = '#include <unistd.h>\nint main(void){ execl("/bin/sleep", "sleep", "59.375", (char *)0); return 1; }\n'
    for name in ("ann", "bob"):
        (tmp_path / f"{name}.c").write_text(waits)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(EXAMPLES))
    grader = subprocess.Popen(
        [sys.executable, "-m", "idrrun.cli", "grade", "secret_sum", "ann.c", "bob.c", "-j", "2",
         "--timeout", "90", "--report", "report.csv"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(with_tag("59.375")) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(with_tag("59.375")) == 2, "both rows' programs should be running"
        stopped = time.monotonic()
        grader.send_signal(signal.SIGTERM)
        out, err = grader.communicate(timeout=30)
        took = time.monotonic() - stopped
    finally:
        grader.kill()
    print(f"stopped in {took:.2f} s")
    assert took < 10, err
    assert grader.returncode == 130 and "idrrun grade: interrupted" in err, err
    assert gone_within("59.375", 2.0) is not None
    # The rows cut short are not kept: the same command grades them again.
    report = tmp_path / "report.csv"
    kept = csv_rows(report) if report.exists() else []
    assert kept == [], kept
