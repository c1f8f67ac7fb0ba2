"""The reliability matrix: hostile student programs against the isolation layer.

Each test is one row of the matrix (issue 5); the GPU row is marked `gpu`. Kernel rows run in a
real Jupyter kernel, the others through `idrrun run`. Figures (times, counts) are printed so
that `pytest -s` shows them.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Kernel, PYTHONPATH, ROOT, has_gpu, started
from idrrun.checks.words import plural
from idrrun.grading import state as state_mod
from idrrun.run import isolation, jail
from idrrun.model import Limits

DONE = re.compile(r"^(exit 0|exit code -?\d+|killed by \S+|timed out|stopped at the [a-z ]+ limit) · ([\d.]+) s$",
                  re.MULTILINE)


def idrrun(*args: str, cwd: Path, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=PYTHONPATH, **(env or {}))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout)


def run_c(tmp: Path, body: str, *flags: str, name: str = "p.c") -> tuple[subprocess.CompletedProcess[str], str, float]:
    (tmp / name).write_text(body)
    r = idrrun("run", *flags, name, cwd=tmp)
    m = DONE.search(r.stdout)
    return r, m.group(1) if m else "", float(m.group(2)) if m else -1.0


def with_tag(tag: str) -> list[int]:
    """Live processes whose command line holds tag."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if tag in cmd and state not in ("Z", "X") and entry.name != str(os.getpid()):
            found.append(int(entry.name))
    return found


def gone_within(tag: str, seconds: float) -> float | None:
    """Seconds until no process holds tag, or None if some still do after `seconds`."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not with_tag(tag):
            return time.monotonic() - start
        time.sleep(0.05)
    return None


PROTECTIONS = isolation.probe(Path(os.environ.get("XDG_CACHE_HOME", "/tmp")) / "idrrun-probe")
HAS_CGROUP = PROTECTIONS.cgroups is not None


def test_doctor_line_says_what_is_active() -> None:
    line = PROTECTIONS.describe()
    print("protections:", line, PROTECTIONS.notes)
    assert "wall-clock limit" in line and "kernel-death cleanup" in line
    if not HAS_CGROUP:
        assert any("reduced protection" in n for n in PROTECTIONS.notes)


# -- rows 1 and 2: wall clock, whatever the program does ------------------------------------

@pytest.mark.parametrize("body", [
    '#include <stdio.h>\nint main(void){ printf("spinning\\n"); while (1); }\n',
    '#include <stdio.h>\n#include <unistd.h>\nint main(void){ printf("sleeping\\n"); sleep(1000); return 0; }\n',
    '#include <stdio.h>\n#include <unistd.h>\nint main(void){ printf("pausing\\n"); pause(); return 0; }\n',
    '#include <stdio.h>\n#include <signal.h>\nint main(void){ printf("stopping\\n"); fflush(stdout); raise(SIGSTOP); return 0; }\n',
], ids=["busy-loop", "sleep", "pause", "SIGSTOP"])
def test_rows_1_2_wall_clock(tmp_path: Path, body: str) -> None:
    r, how, seconds = run_c(tmp_path, body, "--timeout", "2")
    print(f"killed after {seconds:.2f} s")
    assert r.returncode == 124 and how == "timed out"
    assert seconds <= 3.0
    assert body.split('printf("')[1].split("\\n")[0] in r.stdout  # the line printed first is kept


# -- row 3: GPU kernel that never ends -----------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no GPU on this machine")
def test_row_3_hung_gpu_kernel(tmp_path: Path) -> None:
    body = ("#include <stdio.h>\nint main(void){\n  int flag = 0;\n  printf(\"launching\\n\"); fflush(stdout);\n"
            "  #pragma acc parallel num_gangs(1) copy(flag) async(1)\n  { while (flag == 0) { } }\n"
            "  #pragma acc wait(1)\n  return 0;\n}\n")
    r, how, seconds = run_c(tmp_path, body, "-a", "--timeout", "3", name="hang.c")
    print(f"GPU hang killed after {seconds:.2f} s", r.stdout[-500:])
    assert how == "timed out" and seconds <= 4.0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.split()
        if not apps:
            break
        time.sleep(0.1)
    print(f"GPU free {time.monotonic() - t0:.2f} s after the run")
    assert time.monotonic() - t0 <= 2.0
    ok, how, _ = run_c(tmp_path, "#include <stdio.h>\nint main(void){ int x = 0;\n#pragma acc parallel copy(x)\n"
                       "x = 42;\nprintf(\"x = %d\\n\", x); return 0; }\n", "-a", name="next.c")
    assert how == "exit 0" and "x = 42" in ok.stdout


# -- row 4: stdin ------------------------------------------------------------------------

SCANF = ('#include <stdio.h>\nint main(void){ int n = -1; int got = scanf("%d", &n);\n'
         '  printf("scanf returned %d, n = %d\\n", got, n); return 0; }\n')


def test_row_4_scanf_gets_eof_at_once(tmp_path: Path) -> None:
    r, how, seconds = run_c(tmp_path, SCANF, "--timeout", "5")
    assert how == "exit 0" and seconds < 1.0
    assert "scanf returned -1, n = -1" in r.stdout
    (tmp_path / "input.txt").write_text("17\n")
    r, how, _ = run_c(tmp_path, SCANF, "--stdin", "input.txt")
    assert "scanf returned 1, n = 17" in r.stdout
    r, how, _ = run_c(tmp_path, SCANF, "--stdin", "missing.txt")
    assert r.returncode == 3 and "cannot open the standard input file" in r.stderr


# -- rows 5 and 6: process trees -----------------------------------------------------------

def test_row_5_fork_bomb_in_a_kernel(kernel: Kernel, tmp_path_factory: pytest.TempPathFactory) -> None:
    tag = "bomb5x"
    # The kernel's programs: they run from its cache's builds (conftest's kernel environment;
    # another worker's tests have caches of their own)
    builds = f"{tmp_path_factory.getbasetemp() / 'home' / 'cache' / 'idrrun' / 'builds'}/"
    cell = ("%%idrrun --timeout 3 --tasks 64\n#include <stdio.h>\n#include <unistd.h>\n"
            f"int main(int argc, char **argv) {{\n  printf(\"{tag}\\n\"); fflush(stdout);\n"
            "  for (int i = 0; i < 1000; i++) fork();\n  pause();\n  return 0;\n}\n")
    r = kernel.run(cell)
    assert r.status == "error"
    if HAS_CGROUP:
        assert "tasks limit reached" in r.error_text
    else:
        assert "timed out" in r.error_text
    assert Path(builds).is_dir(), builds
    left = gone_within(builds, 2.0)
    print(f"fork bomb: {r.seconds:.2f} s in the cell; processes gone {left} s after")
    assert left is not None, with_tag(builds)
    assert kernel.alive()


def test_row_6_escaped_grandchildren_are_removed(tmp_path: Path) -> None:
    tag = "4321.5"
    body = ("#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\nint main(void){\n"
            f"  if (fork() == 0) {{ setsid(); if (fork() == 0) execlp(\"sleep\", \"sleep\", \"{tag}\", (char*)0); exit(0); }}\n"
            f"  system(\"setsid sleep {tag} &\");\n  printf(\"left two sleepers\\n\");\n  return 0;\n}}\n")
    r, how, _ = run_c(tmp_path, body)
    assert how == "exit 0", r.stdout + r.stderr
    left = gone_within(tag, 2.0)
    print(f"escaped sleepers gone {left} s after the run")
    assert left is not None, f"survivors: {with_tag(tag)}"


# -- row 7: memory ---------------------------------------------------------------------------

def test_row_7_memory_limit_in_a_kernel(kernel: Kernel) -> None:
    cell = ("%%idrrun --memory 256MiB --timeout 30\n#include <stdio.h>\n#include <stdlib.h>\nint main(void){\n"
            "  size_t n = (size_t)1 << 30; volatile char *p = malloc(n);\n"
            "  if (!p) { printf(\"malloc failed\\n\"); return 2; }\n"
            "  for (size_t i = 0; i < n; i += 4096) p[i] = 1;\n  printf(\"touched %d\\n\", p[0]); return 0;\n}\n")
    r = kernel.run(cell)
    print(r.stdout[-300:], r.error_text[-300:])
    assert r.status == "error"
    if HAS_CGROUP:
        assert "memory limit reached" in r.error_text
    else:  # RLIMIT_AS on a host run: malloc fails, and the program says so
        assert "malloc failed" in r.stdout and "exit code 2" in r.error_text
    assert kernel.alive()


# -- row 8: floods ---------------------------------------------------------------------------

def _kernel_rss_kib(kernel: Kernel) -> int:
    r = kernel.run("print('RSS', [l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1])")
    return int(r.stdout.split("RSS")[1].split()[0])


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_row_8_output_flood_is_capped(kernel: Kernel, stream: str) -> None:
    # A small cell first: what idrrun imports on its first cell is not what a flood keeps.
    kernel.run('%%idrrun\n#include <stdio.h>\nint main(void){ puts("warm"); return 0; }\n')
    before = _kernel_rss_kib(kernel)
    cell = (f"%%idrrun --timeout 60\n#include <stdio.h>\n#include <string.h>\nint main(void){{\n"
            f"  static char line[1001]; memset(line, 'x', 999); line[999] = '\\n';\n"
            f"  for (int i = 0; i < 100000; i++) fputs(line, {stream});\n  return 0;\n}}\n")
    r = kernel.run(cell)
    after = _kernel_rss_kib(kernel)
    shown = sum(len(c.text) for c in r.chunks)
    print(f"{stream} flood: {r.seconds:.2f} s, shown {shown} chars, kernel RSS {before} -> {after} KiB")
    assert r.status == "ok", r.error_text
    assert "output truncated at 1048576 bytes" in r.stdout and "output truncated (max_output)" in r.stdout
    assert shown < 2 * (1 << 20)
    # KiB: the 100 MB flood is not kept. Showing 1 MiB costs the kernel a few copies of it
    # (the text, the message to the front end), which the allocator keeps: measured 1.3-2.2 MiB
    # on the first flood in 2026-10, 5.2-6.0 MiB on 2026-11-25 with the same idrrun code as
    # then (the Python heap of the cell is 2.1 MB after it, 4.2 MB at its peak, tracemalloc).
    assert after - before < 12 * 1024
    assert kernel.alive()


def test_row_8_huge_compiler_output_is_capped(tmp_path: Path) -> None:
    # 5000 errors: about 680 KB of diagnostics, ten times the cap (gcc's time grows with the
    # square of the undeclared names it suggests from: 20000 took it 30 s)
    body = "int main(void) {\n" + "".join(f"  undefined_{i};\n" for i in range(5000)) + "}\n"
    r, _, _ = run_c(tmp_path, body, "--max-output", "64KiB")
    assert r.returncode == 1
    assert "output truncated at 65536 bytes" in r.stdout
    assert len(r.stdout) < 80_000


# -- row 9: a huge file ------------------------------------------------------------------------

def test_row_9_file_size_cap(tmp_path: Path) -> None:
    body = ('#include <stdio.h>\nint main(void){ FILE *f = fopen("big.bin", "w"); static char b[1 << 20];\n'
            '  for (int i = 0; i < 10240; i++) if (fwrite(b, 1, sizeof b, f) != sizeof b) break;\n'
            '  fclose(f); printf("wrote it all\\n"); return 0; }\n')
    r, how, seconds = run_c(tmp_path, body, "--file-size", "8MiB")
    print(f"file-size cap: {how} after {seconds:.2f} s")
    assert how == "stopped at the file size limit" and r.returncode == 3
    assert "file size limit reached" in r.stderr
    assert not (tmp_path / "big.bin").exists()  # the disk is back to where it was
    assert "removed" in r.stdout


# -- row 10: crashes -------------------------------------------------------------------------

@pytest.mark.parametrize("crash, expected", [
    ("volatile int *p = 0; *p = 1;", "killed by SIGSEGV"),
    ("abort();", "killed by SIGABRT"),
    ("volatile int z = 0, a = 7; printf(\"%d\\n\", a / z);", "killed by SIGFPE"),
    ("exit(3);", "exit code 3"),
])
def test_row_10_crash_verdicts_keep_partial_output(tmp_path: Path, crash: str, expected: str) -> None:
    body = ("#include <stdio.h>\n#include <stdlib.h>\nint main(void){\n  printf(\"before the crash\\n\");\n"
            f"  {crash}\n  return 0;\n}}\n")
    r, how, _ = run_c(tmp_path, body)
    assert how == expected and r.returncode == 3
    assert "before the crash" in r.stdout
    assert f"run failed: {expected}" in r.stderr


# -- row 11: compile bomb ------------------------------------------------------------------------

def test_row_11_compile_bomb_hits_the_compile_limit(tmp_path: Path) -> None:
    (tmp_path / "idrrun.toml").write_text("compile_timeout = 3\n")
    t0 = time.monotonic()
    r, _, _ = run_c(tmp_path, "#include __FILE__\n#include __FILE__\nint main(void){return 0;}\n", name="bomb.c")
    print(f"compile bomb stopped after {time.monotonic() - t0:.2f} s")
    assert r.returncode == 1 and "compile failed: compile timeout after 3 s" in r.stderr
    assert time.monotonic() - t0 < 6


# -- rows 12 and 13: interrupt, restart, kill -------------------------------------------------------

TREE = ("%%idrrun --timeout 60\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\nint main(void){\n"
        "  for (int i = 0; i < 3; i++) if (fork() == 0) { execlp(\"sleep\", \"sleep\", \"{tag}\", (char*)0); }\n"
        "  system(\"setsid sleep {tag} &\");\n  printf(\"tree started\\n\"); fflush(stdout);\n"
        "  sleep(100);\n  return 0;\n}}\n")


def test_row_12_interrupt_removes_the_whole_tree(kernel: Kernel) -> None:
    tag = "777.25"
    cell = kernel.start(TREE.replace("{tag}", tag).replace("}}", "}"))
    cell.wait_for("tree started")
    assert len(with_tag(tag)) >= 4
    kernel.km.interrupt_kernel()
    left = gone_within(tag, 2.0)
    print(f"interrupt: run tree gone after {left} s")
    assert left is not None
    r = cell.finish(timeout=30)  # the cell ends, failed, saying so
    assert r.error is not None and "run failed: interrupted" in r.error_text
    assert kernel.alive()


def test_row_12_kernel_restart_removes_the_whole_tree(tmp_path_factory: pytest.TempPathFactory) -> None:
    tag = "888.25"
    cwd = tmp_path_factory.mktemp("restart")
    with started(cwd, dict(os.environ, PYTHONPATH=PYTHONPATH)) as k:
        k.start(TREE.replace("{tag}", tag).replace("}}", "}")).wait_for("tree started")
        assert len(with_tag(tag)) >= 4
        k.km.restart_kernel(now=True)
        left = gone_within(tag, 2.0)
        print(f"kernel restart: run tree gone after {left} s")
        assert left is not None, f"survivors: {with_tag(tag)}"


def test_row_13_kernel_killed_while_compiling_loses_nothing(tmp_path_factory: pytest.TempPathFactory) -> None:
    cwd = tmp_path_factory.mktemp("killed")
    cache = tmp_path_factory.mktemp("killed-cache")
    (cwd / "idrrun.toml").write_text("compile_timeout = 60\n")
    with started(cwd, dict(os.environ, PYTHONPATH=PYTHONPATH, XDG_CACHE_HOME=str(cache))) as k:
        body = "// precious work 8d1f\n#include __FILE__\n#include __FILE__\nint main(void){return 0;}\n"
        k.start("%%idrrun -l c\n" + body)
        sources = cache / "idrrun" / "sources"
        deadline = time.monotonic() + 30
        while not list(sources.glob("*.c")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # compiling now
        assert with_tag(str(cache))  # compiling now: its processes name the cache
        k.km.signal_kernel(signal.SIGKILL)
        saved = list((cache / "idrrun" / "sources").glob("*.c"))
        assert [p.read_text() for p in saved] == [body]
        # This cell's compiler: its processes name the cell's cache (another test's cc1 may
        # run beside it)
        left = gone_within(str(cache), 2.0)
        print(f"kernel killed while compiling: compiler gone after {left} s")
        assert left is not None


# -- row 14: bytes that are not UTF-8 -------------------------------------------------------------

def test_row_14_non_utf8_output_is_escaped(kernel: Kernel) -> None:
    r = kernel.run('%%idrrun\n#include <stdio.h>\nint main(void){ printf("bad \\xff\\xfe bytes\\n"); return 0; }\n')
    assert r.status == "ok", r.error_text
    assert "bad \\xff\\xfe bytes" in r.stdout


# -- row 15: a class of 50, interrupted and resumed ---------------------------------------------------

CASES = {
    "ok": '#include <stdio.h>\nint main(void){ printf("C[0] = 42.0\\n"); return 0; }\n',
    "wrong": '#include <stdio.h>\nint main(void){ printf("C[0] = 41.0\\n"); return 0; }\n',
    "broken": "int main(void){ return 0 }\n",
    "segv": "int main(void){ volatile int *p = 0; *p = 1; return 0; }\n",
    "loop": "int main(void){ for (;;) {} }\n",
    "sleep": "#include <unistd.h>\nint main(void){ sleep(100); return 0; }\n",
    "bomb": "#include <unistd.h>\nint main(void){ for (int i = 0; i < 1000; i++) fork(); pause(); return 0; }\n",
    "flood": '#include <stdio.h>\nint main(void){ for (long i = 0; i < 10000000; i++) puts("flood"); return 0; }\n',
    "escape": '#include <stdlib.h>\n#include <stdio.h>\nint main(void){ system("setsid sleep 999.75 &"); printf("C[0] = 42\\n"); return 0; }\n',
    "stdin": '#include <stdio.h>\nint main(void){ int n; if (scanf("%d", &n) != 1) return 4; return 0; }\n',
}


def _spec(folder: Path) -> Path:
    ex = folder / "examples"
    (ex / "C").mkdir(parents=True)
    (ex / "C" / "answer_exercise.c").write_text(CASES["wrong"])
    (ex / "C" / "answer_solution.c").write_text(CASES["ok"])
    (ex / "answer.toml").write_text(
        'name = "answer"\ntimeout = 2\n[sources.c]\nexercise = "C/answer_exercise.c"\n'
        'solution = "C/answer_solution.c"\n[args]\nhost = []\n[[check]]\nkind = "exit_ok"\n'
        '[[check]]\nkind = "value"\nlabel = "C[0]"\npattern = \'C\\[0\\]\\s*=\\s*(\\S+)\'\nexpected = 42\n')
    return ex


@pytest.mark.slow
def test_row_15_class_of_50_killed_and_resumed(tmp_path: Path) -> None:
    ex = _spec(tmp_path)
    klass = tmp_path / "class"
    klass.mkdir()
    names = list(CASES)
    for i in range(50):
        (klass / f"s{i:02d}_{names[i % len(names)]}.c").write_text(CASES[names[i % len(names)]])
    report = tmp_path / "report.csv"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ex))
    argv = [sys.executable, "-m", "idrrun.cli", "grade", "answer", *sorted(map(str, klass.iterdir())),
            "-j", "2", "--report", str(report)]
    first = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = list(csv.DictReader(report.open())) if report.exists() else []
        if len(rows) >= 12:
            break
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)  # the whole grading dies mid-way
    first.wait()
    partial = list(csv.DictReader(report.open()))
    assert 12 <= len(partial) < 50  # a whole report, never half a line
    # The signed state is written just before the report: a kill between the two leaves it a
    # row (or a worker's rows) ahead, and those rows are as much the grader's own.
    signed = json.loads(state_mod.state_path(report).read_text())
    assert len(partial) <= len(signed) <= len(partial) + 2
    r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0  # every submission graded, whatever its verdict
    # A row is kept for every submission of the same content as a row the grader signed
    # (state.resume): here the class repeats its cases, so the copies of those cases too.
    graded = {Path(rec["submission"]).name.split("_", 1)[1] for rec in signed}
    same = sum(1 for p in klass.iterdir() if p.name.split("_", 1)[1] in graded)
    assert f"resuming: {plural(same, 'row')} kept" in r.stdout, r.stdout
    rows = list(csv.DictReader(report.open()))
    assert len(rows) == 50
    kept = {row["submission"]: row for row in partial}
    for row in rows:
        assert row["verdict"] in ("pass", "fail"), row
        if row["submission"] in kept:
            assert row == kept[row["submission"]]
    by_case = {row["student"].split("_", 1)[1]: row for row in rows}
    assert by_case["ok"]["verdict"] == "pass" and by_case["escape"]["verdict"] == "pass"
    assert "C[0] is 41" in by_case["wrong"]["reasons"]
    assert "compile failed" in by_case["broken"]["reasons"]
    assert "SIGSEGV" in by_case["segv"]["reasons"]
    assert "timed out" in by_case["loop"]["reasons"] and "timed out" in by_case["sleep"]["reasons"]
    assert "exit code 4" in by_case["stdin"]["reasons"]
    assert gone_within("999.75", 2.0) is not None


# -- row 16: two notebooks, one folder ----------------------------------------------------------

def test_row_16_two_kernels_one_folder(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    with started(tmp_path, env) as first, started(tmp_path, env) as second:
        cells = [k.start("%%idrrun -k shared.c\n#include <stdio.h>\n#include <unistd.h>\n"
                         f"int main(void){{ for (int i = 0; i < 5; i++) {{ printf(\"kernel {n} line %d\\n\", i); usleep(100000); }}"
                         " return 0; }\n") for n, k in ((1, first), (2, second))]
        outputs = [cell.finish(timeout=60).stdout for cell in cells]
        for n, out in ((1, outputs[0]), (2, outputs[1])):
            other = 3 - n
            assert f"kernel {n} line 4" in out and f"kernel {other} line" not in out
        assert (tmp_path / "shared.c").read_text().startswith("#include")  # whole, one of the two


# -- row 17: bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("line, message", [
    ('%%idrrun --cliopts "unterminated', "cannot read the line"),
    ("%%idrrun --frobnicate", "unrecognized arguments: --frobnicate"),
    ("%%idrrun --threads many", "expected a whole number"),
    ("%%idrrun --memory lots", "expected a size such as 2GiB"),
    ("%%idrrun --check no_such_exercise", "unknown exercise 'no_such_exercise'"),
])
def test_row_17_bad_lines_one_clear_line(kernel: Kernel, line: str, message: str) -> None:
    marker = kernel.cwd / "ran.txt"
    r = kernel.run(line + '\n#include <stdio.h>\nint main(void){ fopen("ran.txt", "w"); return 0; }\n')
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.status == "error" and len(lines) == 1 and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert not marker.exists()


def test_row_17_broken_config_one_clear_line(kernel: Kernel) -> None:
    (kernel.cwd / "idrrun.toml").write_text("[limits]\nmemory = 'lots'\n")
    try:
        r = kernel.run("%%idrrun\nint main(void){return 0;}\n")
    finally:
        (kernel.cwd / "idrrun.toml").unlink()
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "idrrun.toml: field 'limits.memory'" in lines[0]


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no GPU on this machine")
def test_row_7_gpu_runs_work_under_the_memory_limit(tmp_path: Path) -> None:
    """A CUDA context maps ~13 GiB of address space: the memory limit must not be RLIMIT_AS."""
    body = ("#include <stdio.h>\n#include <stdlib.h>\n#include <openacc.h>\nint main(void){\n"
            "  int n = 1 << 24; double *a = malloc(n * sizeof *a); double s = 0;\n"
            "  #pragma acc parallel loop copyout(a[0:n]) reduction(+:s)\n"
            "  for (int i = 0; i < n; i++) { a[i] = 1.0; s += 1.0; }\n"
            "  printf(\"on GPU: %d, s = %.0f\\n\", acc_get_num_devices(acc_device_nvidia) > 0, s);\n  return 0;\n}\n")
    r, how, seconds = run_c(tmp_path, body, "-a", "--memory", "1GiB", name="gpumem.c")
    print(r.stdout[-400:], PROTECTIONS.describe())
    assert how == "exit 0", r.stdout + r.stderr
    assert "on GPU: 1, s = 16777216" in r.stdout
    big = body.replace("1 << 24", "1 << 28")  # 2 GiB of host memory: over the limit
    r, how, _ = run_c(tmp_path, big, "-a", "--memory", "1GiB", name="gpumem2.c")
    print("over the limit:", how, r.stderr[-300:])
    assert how != "exit 0"
