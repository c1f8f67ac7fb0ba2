"""`idrrun grade` on a class of the asynchronism exercise, and --check in a real kernel."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from conftest import Kernel, PYTHONPATH, ROOT, has_gpu
from idrrun import build as build_mod
from idrrun import cli
from idrrun.checks import draw, specs
from idrrun.grading import report as report_mod
from idrrun.grading import rows as rows_mod
from idrrun.grading import state as state_mod
from idrrun.run import rooms
from idrrun.request import config
from idrrun.run import isolation

EXAMPLES = ROOT / "examples"
SOLUTION_C = (EXAMPLES / "C" / "async_matmul_solution.c").read_text()
SOLUTION_F = (EXAMPLES / "Fortran" / "async_matmul_solution.f90").read_text()
SERIAL_C = (EXAMPLES / "C" / "async_matmul_exercise.c").read_text()


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} not in the solution: update the test"
    return text.replace(old, new, 1)


def make_class(folder: Path) -> dict[str, tuple[str, str]]:
    """Ten submissions; returns student -> (expected verdict, a word of the expected reason)."""
    folder.mkdir()
    main = "int main(int argc, char *argv[])\n{\n"
    subs = {
        "alice.c": (SOLUTION_C, ("pass", "")),
        "bob.f90": (SOLUTION_F, ("pass", "")),
        "carol.c": (_edit(SOLUTION_C, "init_mat(A, dim, 6.0, 1);", "init_mat(A, dim, 5.0, 1);"),
                    ("fail", "C[0]: C[0] is 35, expected 42")),
        "dave.c": (_edit(SOLUTION_C, "size_t n = (size_t)dim * dim;\n\n", "size_t n = (size_t)dim * dim\n\n"),
                   ("fail", "compile failed")),
        "erin.c": (_edit(SOLUTION_C, main, main + "    volatile int *p = NULL; *p = 1;\n"),
                   ("fail", "killed by SIGSEGV")),
        "frank.c": (_edit(SOLUTION_C, main, main + "    for (;;) {}\n"), ("fail", "timed out")),
        "grace.c": (SERIAL_C, ("fail", "uses OpenACC: the source has no OpenACC directive")),
        "heidi.c": (_edit(SOLUTION_C, "present(A[0:n], B[0:n], C[0:n]) wait(1, 2, 3)", "wait(1, 2, 3)"),
                    ("fail", "data clauses")),
    }
    for name, (text, _) in subs.items():
        (folder / name).write_text(text)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("My solution"),
                nbformat.v4.new_code_cell("%load_ext idrrun"),
                nbformat.v4.new_code_cell("%%idrrun -a --check async_matmul\n" + SOLUTION_C)]
    (folder / "ivan").mkdir()
    nbformat.write(nb, folder / "ivan" / "async.ipynb")
    (folder / "judy.ipynb").write_text("{ this is not json")
    expected = {Path(name).stem: verdict for name, (_, verdict) in subs.items()}
    expected["ivan"] = ("pass", "")
    if not has_gpu():
        # On a host the GPU-trace checks (ran_on_gpu, queues) cannot be evaluated: a correct
        # program is "incomplete", never a bare pass.
        expected = {k: (("incomplete", "every check this machine can evaluate passed; a GPU also evaluates: runs on the GPU, async queues, run time")
                        if v[0] == "pass" else v)
                    for k, v in expected.items()}
    expected["judy"] = ("error", "not a readable notebook")
    return expected


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(EXAMPLES))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_grade_a_class(tmp_path: Path) -> None:
    klass = tmp_path / "class"
    expected = make_class(klass)
    before = {p: p.read_bytes() for p in klass.rglob("*") if p.is_file()}
    entries = sorted(str(p) for p in klass.iterdir())
    r = run_cli("grade", "async_matmul", *entries, "-j", "2", "--timeout", "4",
                "--report", str(tmp_path / "report.csv"), "--feedback", str(tmp_path / "fb"), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # some fail
    rows = {row["student"]: row for row in csv.DictReader((tmp_path / "report.csv").open())}
    assert set(rows) == set(expected)
    for student, (verdict, reason) in expected.items():
        assert rows[student]["verdict"] == verdict, (student, rows[student])
        assert reason in rows[student]["reasons"], (student, rows[student])
        assert rows[student]["exercise"] == "async_matmul"
    assert rows["bob"]["language"] == "fortran" and rows["alice"]["language"] == "c"
    assert "heidi" in rows and any(v in rows["heidi"]["reasons"] for v in ("A", "B", "C"))
    # the originals are untouched, no build output left beside them
    assert {p: p.read_bytes() for p in klass.rglob("*") if p.is_file()} == before
    assert "| C[0] | 0/" in (tmp_path / "fb" / "carol.md").read_text() and " | fail | 42" in (tmp_path / "fb" / "carol.md").read_text()
    assert ("3 passed, 6 failed, 0 incomplete" if has_gpu() else
            "0 passed, 3 passed here (but for the checks that need a GPU), 6 failed, 0 incomplete") in r.stdout
    # the same class into JSON: same verdicts, checks listed per row
    r = run_cli("grade", "async_matmul", *entries, "-j", "2", "--timeout", "4",
                "--report", str(tmp_path / "report.json"), cwd=tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    assert {d["student"]: d["verdict"] for d in data} == {k: v[0] for k, v in expected.items()}
    carol = next(d for d in data if d["student"] == "carol")
    value = next(c for c in carol["checks"] if c["name"] == "C[0]")
    assert value["status"] == "fail" and value["got"] == "35"


def test_grade_usage_errors(tmp_path: Path) -> None:
    r = run_cli("grade", "no_such_exercise", "x.c", cwd=tmp_path)
    assert r.returncode == 2 and "unknown exercise 'no_such_exercise'" in r.stderr
    r = run_cli("grade", "async_matmul", "x.c", "--report", "out.txt", cwd=tmp_path)
    assert r.returncode == 2 and "use a .csv or .json" in r.stderr
    r = run_cli("grade", "async_matmul", "x.c", "-j", "0", cwd=tmp_path)
    assert r.returncode == 2 and "expected at least 1" in r.stderr


def test_check_in_a_kernel_shows_the_table_and_fails_on_wrong_value(kernel: Kernel) -> None:
    (kernel.cwd / "idrrun.toml").write_text(f'examples_dir = "{EXAMPLES}"\n')
    good = kernel.run("%%idrrun -a --check async_matmul\n" + SOLUTION_C)
    assert good.status == "ok", good.error_text + good.stdout
    html = [d["text/html"] for d in good.displays if "text/html" in d]
    # Without --profile on a GPU the trace checks cannot be evaluated: INCOMPLETE, not PASS;
    # on a host, where only those are left, it says so: INCOMPLETE, and which need a GPU.
    if has_gpu():
        assert html and "async_matmul: INCOMPLETE, 4 checks passed, 2 could not be evaluated" in html[0]
        assert "<table>" in html[0] and "needs a GPU trace" in html[0]
    else:
        assert html and "async_matmul: INCOMPLETE, every check this machine can evaluate passed; a GPU also evaluates: runs on the GPU, async queues" in html[0]  # (run time: grading only)
        assert "<table>" in html[0] and "needs a GPU: this run was built for the host" in html[0]
    wrong = _edit(SOLUTION_C, "init_mat(B, dim, 7.0, 2);", "init_mat(B, dim, 8.0, 2);")
    bad = kernel.run("%%idrrun -a --exercise async_matmul\n" + wrong)
    assert bad.status == "error"
    html = [d["text/html"] for d in bad.displays if "text/html" in d]
    assert html and "FAIL, " in html[0] and "C[0] is 48, expected 42" in html[0]
    assert "check failed: 1 of" in bad.error_text
    (kernel.cwd / "idrrun.toml").unlink()


def test_rows_keep_their_nodes_and_run_times_across_a_resume_and_unsigned_states_are_graded_again(tmp_path: Path) -> None:

    report = tmp_path / "r.csv"
    key = b"k" * 32
    row = rows_mod.GradeRow("ann", "answer", "c", "pass", 0.5, 0.25, "/class/ann.c",
                             node="n2,n3", build_node="n1", run_times=(0.25, 0.5, 0.125))
    report_mod.write_report([row], report, key)
    assert state_mod.load_report(report, "answer", key) == {"/class/ann.c": row}
    assert next(csv.DictReader(report.open()))["node"] == "n2,n3"
    assert state_mod.load_report(report, "answer", b"x" * 32) == {}  # another grader's key
    # A state written before rows were signed (or with a row edited): graded again.
    state = state_mod.state_path(report)
    records = json.loads(state.read_text())
    for record in records:
        del record["mac"]
    state.write_text(json.dumps(records))
    assert state_mod.load_report(report, "answer", key) == {}

def test_a_sandboxed_solution_is_built_once_for_all_its_argument_sets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # data_laplace has public and hidden arguments: the solution's output is needed for each,
    # from one build (it was compiled again per argument set, in a folder of its own).
    if isolation.sandbox_support().level == "none":
        pytest.skip("no sandbox on this machine: the solution is built in the shared cache")
    builds: list[str] = []
    real = build_mod.build

    def counting(request, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = real(request, *args, **kwargs)
        if not result.cached:
            builds.append(request.room.name.rsplit("-", 1)[0] if request.room else "cache")
        return result

    monkeypatch.setattr(build_mod, "build", counting)
    monkeypatch.setenv("IDRRUN_OFFLOAD", "host")
    monkeypatch.setenv("IDRRUN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("IDRRUN_EXAMPLES", str(ROOT / "examples"))
    monkeypatch.chdir(tmp_path)
    student = tmp_path / "ann.c"
    student.write_text((ROOT / "examples" / "C" / "data_laplace_solution.c").read_text())
    try:
        cli.main(["grade", "data_laplace", str(student), "-j", "1", "--report", str(tmp_path / "r.csv")])
    except SystemExit:
        pass
    row = next(csv.DictReader((tmp_path / "r.csv").open()))
    assert "error" not in row["verdict"] and "matches" not in row["reasons"], row
    assert builds.count("idrrun-solution") == 1 and builds.count("idrrun-grade") == 1, builds
    # The grader's scratch folder goes with it (at exit); one that a killed grader left goes at
    # the next grading, and never one of a grader still running.
    root = rooms.scratch_root(config.load())
    assert root.name == str(os.getpid())
    left = root.parent / "999999999"
    left.mkdir()
    (left / "idrrun-solution-x").mkdir()
    removed = rooms.remove_orphans(config.load())
    assert str(left) in removed and not left.exists() and str(root) not in removed


DEMO_SPEC = r"""name = "demo_n"
timeout = 20
[sources.c]
exercise = "ex.c"
solution = "sol.c"
[args]
host = ["10"]
[args.draw]
sets = 2
ranges = [[100000, 999999]]
[[check]]
kind = "exit_ok"
[[check]]
kind = "matches_solution"
label = "n"
pattern = 'n\s*=\s*(\d+)'
rel_tol = 0.0
"""
DEMO_SOLUTION = ('#include <stdio.h>\n#include <stdlib.h>\n'
                 'int main(int argc, char **argv) { printf("n = %d\\n", argc > 1 ? atoi(argv[1]) : 1); return 0; }\n')
DEMO_START = '#include <stdio.h>\nint main(void) { printf("n = 10\\n"); return 0; }\n'


def test_hidden_sets_are_drawn_with_the_seed_and_never_shown_in_feedback(tmp_path: Path) -> None:
    examples, klass = tmp_path / "examples", tmp_path / "class"
    examples.mkdir()
    klass.mkdir()
    (examples / "demo_n.toml").write_text(DEMO_SPEC)
    (examples / "sol.c").write_text(DEMO_SOLUTION)
    (examples / "ex.c").write_text(DEMO_START)
    (klass / "ann.c").write_text(DEMO_SOLUTION)
    (klass / "bob.c").write_text(DEMO_START)  # prints what the public run expects, whatever n
    exercise = specs.load(examples / "demo_n.toml")
    seed = "s3cret-spring"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples),
               IDRRUN_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("IDRRUN_GRADING_SEED", None)

    def grade(*args: str, **extra: str) -> list[dict[str, object]]:
        r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "demo_n", str(klass / "ann.c"),
                            str(klass / "bob.c"), "--report", str(tmp_path / "r.json"), *args],
                           cwd=tmp_path, env={**env, **extra}, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert seed not in r.stdout + r.stderr
        return list(json.loads((tmp_path / "r.json").read_text()))

    # Never on a command line (ps shows it to every user): --seed is refused, saying why.
    refused = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "demo_n", str(klass / "ann.c"),
                              "--seed", seed], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "--seed-file FILE" in refused.stderr, refused.stderr
    assert "IDRRUN_GRADING_SEED" in refused.stderr and not (tmp_path / "r.json").exists()
    seed_file = tmp_path / "seed"
    seed_file.write_text(seed + "\n")
    seed_file.chmod(0o644)
    refused = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "demo_n", str(klass / "ann.c"),
                              "--seed-file", str(seed_file)], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "other users can read" in refused.stderr, refused.stderr
    seed_file.chmod(0o600)
    rows = grade("--seed-file", str(seed_file), "--feedback", str(tmp_path / "fb"))
    drawn = draw.drawn(exercise, seed).hidden_args
    assert len(drawn) == 2 and all(100000 <= int(n) <= 999999 for (n,) in drawn)
    assert {r["student"]: r["verdict"] for r in rows} == {"ann": "pass", "bob": "fail"}
    # The instructor's report and its state hold the drawn values, never the seed.
    for text in ((tmp_path / "r.json").read_text(), state_mod.state_path(tmp_path / "r.json").read_text()):
        assert all(n in text for (n,) in drawn) and seed not in text
    assert all(r["hidden_args"] == [list(a) for a in drawn] for r in rows)
    # Feedback: that a hidden case failed, and the kind of its check; no value, no seed.
    bob = (tmp_path / "fb" / "bob.md").read_text()
    assert "| n (hidden run 1) | 0/1 | fail |" in bob and "hidden case (same as the solution)" in bob, bob
    for feedback in (tmp_path / "fb").iterdir():
        text = feedback.read_text()
        assert seed not in text and not any(n in text for (n,) in drawn), text
    # The same seed from the environment, or from the config: the same sets.
    assert grade("--fresh", IDRRUN_GRADING_SEED=seed)[0]["hidden_args"] == [list(a) for a in drawn]
    (tmp_path / "grading.toml").write_text(f'[grading]\nseed = "{seed}"\n')
    (tmp_path / "grading.toml").chmod(0o600)
    assert grade("--fresh", IDRRUN_CONFIG=str(tmp_path / "grading.toml"))[0]["hidden_args"] == \
        [list(a) for a in drawn]
    # No seed given: one made once and kept in the grader's private cache, so that a regrading
    # draws the same sets; another seed draws others and grades the rows again.
    kept = grade("--fresh")[0]["hidden_args"]
    assert kept != [list(a) for a in drawn] and grade("--fresh")[0]["hidden_args"] == kept
    stored = tmp_path / "cache" / "private" / "grading.seed"
    assert stored.stat().st_mode & 0o777 == 0o600
    assert grade()[0]["hidden_args"] == kept  # resumed
    another = [list(a) for a in draw.drawn(exercise, "another").hidden_args]
    assert [r["hidden_args"] for r in grade(IDRRUN_GRADING_SEED="another")] == [another, another]


FEEDBACK_SPEC = r"""name = "demo_fb"
title = "Sum on the device"
timeout = 20
[sources.c]
exercise = "ex.c"
solution = "sol.c"
[args]
host = ["10"]
[[check]]
kind = "exit_ok"
[[check]]
kind = "value"
pattern = 'total\s*=\s*(\S+)'
expected = 55
[[check]]
kind = "uses_openacc"
[[check]]
kind = "no_implicit_data"
"""
FEEDBACK_SOLUTION = """\
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10;
    double *a = malloc(n * sizeof *a), total = 0;
    for (int i = 0; i < n; i++) a[i] = i + 1;
    #pragma acc parallel loop reduction(+:total) copyin(a[0:n])
    for (int i = 0; i < n; i++) total += a[i];
    printf("n = %d\\ntotal = %g\\n", n, total);
    return 0;
}
"""


def test_feedback_carries_the_compiler_s_messages_the_signal_and_the_output(tmp_path: Path) -> None:
    examples, klass = tmp_path / "examples", tmp_path / "class"
    examples.mkdir()
    klass.mkdir()
    (examples / "demo_fb.toml").write_text(FEEDBACK_SPEC)
    (examples / "sol.c").write_text(FEEDBACK_SOLUTION)
    (examples / "ex.c").write_text(FEEDBACK_SOLUTION)
    (klass / "ann.c").write_text(_edit(FEEDBACK_SOLUTION, "total += a[i];", "totl += a[i];"))
    (klass / "bob.c").write_text(_edit(FEEDBACK_SOLUTION, "    for (int i = 0; i < n; i++) a[i]",
                                       "    a = NULL; a[0] = 1;\n    for (int i = 0; i < n; i++) a[i]"))
    (klass / "carol.c").write_text(_edit(_edit(FEEDBACK_SOLUTION, " copyin(a[0:n])", ""),
                                         "a[i] = i + 1;", "a[i] = i;"))
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples),
               IDRRUN_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "demo_fb",
                        *(str(klass / f"{s}.c") for s in ("ann", "bob", "carol")),
                        "--report", str(tmp_path / "r.json"), "--feedback", str(tmp_path / "fb")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {row["student"]: row for row in json.loads((tmp_path / "r.json").read_text())}
    ann = (tmp_path / "fb" / "ann.md").read_text()
    # The compile error: the compiler's message on the student's line, with the line shown.
    assert "The program did not build: exit code 1." in ann
    assert "- `ann.c:9:33` error: ‘totl’ undeclared" in ann, ann
    assert "9 |     for (int i = 0; i < n; i++) totl += a[i];" in ann
    assert "source.c" not in ann and "source.c" not in json.dumps(rows["ann"])
    assert {(d["file"], d["line"], d["severity"]) for d in rows["ann"]["diagnostics"]} >= \
        {("ann.c", 9, "error")}
    assert " 9      for (int i = 0; i < n; i++) totl += a[i];\n        // ^ error: ‘totl’ undeclared" in ann
    assert "could judge it, and it earns no points." in ann, ann
    bob = (tmp_path / "fb" / "bob.md").read_text()
    assert "The program did not run to its end: killed by SIGSEGV." in bob
    assert "Hint: the program touched memory it does not own" in bob
    assert rows["bob"]["failure_hint"].startswith("the program touched memory it does not own")
    carol = (tmp_path / "fb" / "carol.md").read_text()
    # The output around the failed value, the line marked; the implicit copy on its line.
    assert "**total** (total is 45, expected 55)" in carol and "> 2 | total = 45" in carol, carol
    value = next(c for c in rows["carol"]["checks"] if c["name"] == "total")
    assert value["excerpt"] == "  1 | n = 10\n> 2 | total = 45" and value["pattern"]
    assert "// ^ check failed: data clauses: The pointer a is used in the parallel region at line 8" in carol
    assert "// ^ implicit data: firstprivate(a) added by the compiler" in carol


MPI_PROGRAM = ('#include <mpi.h>\n#include <stdio.h>\nint main(int argc, char **argv) {\n'
               '  int rank, size;\n  MPI_Init(&argc, &argv);\n  MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n'
               '  MPI_Comm_size(MPI_COMM_WORLD, &size);\n'
               '  if (rank == 0) printf("answer = %d\\n", {value} * size / 2);\n'
               '  MPI_Finalize();\n  return 0;\n}\n')


def gcc_in(prefix: Path) -> Path:
    """A gcc of its own in `prefix` that forces a header of its prefix into every compile."""
    (prefix / "bin").mkdir(parents=True)
    (prefix / "include").mkdir()
    (prefix / "include" / "forced.h").write_text("#define FROM_THE_PREFIX 42\n")
    gcc = prefix / "bin" / "gcc"
    gcc.write_text(f'#!/bin/sh\nexec /usr/bin/gcc -include {prefix}/include/forced.h "$@"\n')
    gcc.chmod(0o755)
    return prefix / "bin"


@pytest.mark.skipif(isolation.sandbox_support().level == "none",
                    reason="no sandbox on this machine: idrrun grade refuses")
def test_an_mpi_build_reads_the_prefix_of_the_compiler_its_wrapper_runs(tmp_path: Path) -> None:
    """On the GPU machine gcc lives in /opt/gcc-offload and mpicc in /usr/bin: the course check
    refused the MPI solutions there for reading gfortran's openacc.mod ("from outside the
    submission"), a sandboxed compile did not see that gcc, and the ranks, each in a box of its
    own, could not reach mpirun (MPI_Init failed): no MPI submission could pass. Here mpicc runs
    a gcc of a folder of its own, found on PATH, that forces a header of its prefix in."""
    examples = tmp_path / "examples"
    (examples / "C").mkdir(parents=True)
    (examples / "C" / "ranks_exercise.c").write_text(MPI_PROGRAM.replace("{value}", "0"))
    (examples / "C" / "ranks_solution.c").write_text(MPI_PROGRAM.replace("{value}", "FROM_THE_PREFIX"))
    (examples / "ranks.toml").write_text(
        'name = "ranks"\nranks = 2\ntimeout = 30\n[sources.c]\nexercise = "C/ranks_exercise.c"\n'
        'solution = "C/ranks_solution.c"\n[args]\nhost = []\n[[check]]\nkind = "exit_ok"\n'
        # the start file runs too: its run counts once its answer is right (course check)
        'counts_when = ["answer"]\n[[check]]\nkind = "value"\nlabel = "answer"\npattern = \'answer = (\\S+)\'\nexpected = 42\n')
    (tmp_path / "ann.c").write_text(MPI_PROGRAM.replace("{value}", "FROM_THE_PREFIX"))

    def idrrun(bin_dir: Path, *args: str, path: str = os.environ["PATH"]) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples),
                   PATH=f"{bin_dir}:{path}", XDG_CACHE_HOME=str(tmp_path / "cache"))
        return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)

    # A compiler the box's users cannot reach (pytest's folders are root's alone): bubblewrap
    # cannot make the build's box. The grader's failure, not the student's: an error row that
    # says why, never a "compile failed".
    private = idrrun(gcc_in(tmp_path / "private"), "grade", "ranks", "ann.c", "--json")
    ann, = json.loads(private.stdout)["rows"]
    assert ann["verdict"] == "error", ann
    assert ann["reasons"].startswith("not graded: the build could not start: the sandbox could "
                                     "not be set up (bubblewrap: exit status ") and \
        "Permission denied" in ann["reasons"], ann

    shared = Path(tempfile.mkdtemp(prefix="idrrun-test-gcc-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        bin_dir = gcc_in(shared / "gcc")
        checked = idrrun(bin_dir, "course", "check", "--json")
        assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]
        row, = json.loads(checked.stdout)["rows"]
        assert row["ok"] and row["solution"]["verdict"] == "pass", row["findings"]
        graded = idrrun(bin_dir, "grade", "ranks", "ann.c", "--json", "--fresh")
        ann, = json.loads(graded.stdout)["rows"]
        assert ann["verdict"] == "pass", ann["reasons"]
        assert ann["sandbox"] == "namespaces", ann["sandbox"]
        if os.geteuid() == 0:
            # The "uid" level (bubblewrap hidden): mpirun and its ranks as the box's uid.
            hidden = shared / "no-bwrap"
            hidden.mkdir()
            for folder in ("/usr/local/bin", "/usr/bin", "/usr/sbin"):
                for entry in os.scandir(folder):
                    if entry.name != "bwrap" and not (hidden / entry.name).exists():
                        (hidden / entry.name).symlink_to(entry.path)
            graded = idrrun(bin_dir, "grade", "ranks", "ann.c", "--json", "--fresh", path=str(hidden))
            ann, = json.loads(graded.stdout)["rows"]
            assert (ann["verdict"], ann["sandbox"]) == ("pass", "uid"), (ann, graded.stderr)
    finally:
        shutil.rmtree(shared)


def test_the_collection_s_record_is_read_for_the_submissions_it_collected(tmp_path: Path) -> None:
    """Submissions graded from OUT/submissions/ take their times and deadline from
    OUT/collected.csv, as collect wrote it; anything else has no record."""
    import datetime as dt
    from idrrun.grading import exchange, session
    out = tmp_path / "out"
    (out / "submissions").mkdir(parents=True)
    paths = [out / "submissions" / "ann.c", out / "submissions" / "ben"]
    deadline = dt.datetime(2026, 12, 1, 18, 0, tzinfo=dt.timezone.utc)
    assert session.collection_of(paths) is None  # no record yet
    rows = [exchange.Collected("ann", "collected", deadline.timestamp() - 60),
            exchange.Collected("ben", "collected", deadline.timestamp() + 7500, late=True),
            exchange.Collected("cy", "missing")]
    (out / "collected.csv").write_text(exchange.collected_csv(rows, deadline))
    assert session.collection_of(paths) == out
    assert session.collection_of([*paths, tmp_path / "eve.c"]) is None  # not all of them
    record = exchange.read_collection(out)
    assert record.deadline == deadline and record.late == ("ben",)
    lateness = exchange.Lateness(record.deadline, record.submitted)
    assert lateness.of("ann") == (deadline.timestamp() - 60, None)
    assert lateness.of("ben") == (deadline.timestamp() + 7500, 7500)
    assert lateness.of("cy") == (None, None)
    # The teacher's --deadline over the collection's: both now late.
    earlier = exchange.Lateness(deadline - dt.timedelta(hours=1), record.submitted)
    assert earlier.of("ann")[1] == 3540 and rows_mod.late_by(earlier.of("ben")[1]) == "3 h 05 min"
