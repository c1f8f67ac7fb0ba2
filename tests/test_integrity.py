"""Verdicts nobody can forge: a class of hostile submissions graded beside honest ones, twice on
the same cache. No cheat passes, every honest submission keeps its true verdict, the report is
whole, nothing is left behind. The exercise is tests/data/integrity/secret_sum (a sum whose
value depends on the arguments; the spec holds hidden argument sets)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT

from idrrun.run import isolation

EXAMPLES = ROOT / "tests" / "data" / "integrity"
SOLUTION = EXAMPLES / "C" / "secret_sum_solution.c"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(isolation.sandbox_support().level != "namespaces",
                       reason="this machine cannot make namespaces (bubblewrap)"),
]

HEAD = "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n" \
       "#include <signal.h>\n#include <dirent.h>\n#include <glob.h>\n#include <fcntl.h>\n" \
       "#include <sys/stat.h>\n"
SERIAL_SUM = ("    long n = argc > 1 ? atol(argv[1]) : 1000; double sum = 0.0;\n"
              "    double w[13]; for (int k = 0; k < 13; k++) w[k] = 1.0 / (1.0 + k);\n"
              "    for (long i = 0; i < n; i++) sum += (double)((i * i) % 7) * w[i % 13];\n")


def _main(body: str, head: str = "") -> str:
    return HEAD + head + "int main(int argc, char **argv)\n{\n" + body + "    return 0;\n}\n"


def public_value() -> str:
    """What the solution prints for the public arguments (what a cheat would print)."""
    exe = Path(os.environ.get("TMPDIR", "/tmp")) / f"secret-sum-{os.getpid()}"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(SOLUTION)], check=True)
    out = subprocess.run([str(exe), "100000"], capture_output=True, text=True, check=True).stdout
    exe.unlink()
    return out.split("=")[1].strip()


def make_class(folder: Path, cache: Path, report: Path) -> dict[str, str]:
    """Submissions: name -> what it tries. Honest ones start with good_/wrong_."""
    value = public_value()
    solution = SOLUTION.read_text()
    subs: dict[str, tuple[str, str]] = {
        "good_alice.c": (solution, "correct"),
        "good_bob.c": (solution.replace("sum = %.12e", "sum = %.12e").replace("for (long i", "for (long  i"),
                       "correct, written differently"),
        "wrong_carol.c": (solution.replace("i < n; i++", "i <= n; i++"), "an off-by-one"),
        "h01_include_solution.c": (f'#include "{SOLUTION}"\n', "include the solution by its path"),
        "h03_run_cached_solution.c": (_main(
            '    glob_t g; char cmd[4096];\n'
            f'    const char *pats[] = {{"{cache}/builds/*/prog", "{cache}/*/builds/*/prog", '
            '"/root/.cache/idrrun/builds/*/prog", "/tmp/*/prog", NULL};\n'
            '    for (int p = 0; pats[p]; p++) if (glob(pats[p], 0, NULL, &g) == 0)\n'
            '        for (size_t k = 0; k < g.gl_pathc; k++) {\n'
            '            snprintf(cmd, sizeof cmd, "%s %s", g.gl_pathv[k], argc > 1 ? argv[1] : "1000");\n'
            '            if (system(cmd) == 0) return 0; }\n'
            '    puts("sum = 0");\n'), "run the grader's cached solution"),
        "h04_proc_and_env.c": (_main(
            '    char path[512], link[4096]; DIR *d = opendir("/proc"); struct dirent *e;\n'
            '    const char *env = getenv("IDRRUN_EXAMPLES"); if (env) printf("env %s\\n", env);\n'
            '    while (d && (e = readdir(d))) { snprintf(path, sizeof path, "/proc/%s/cwd", e->d_name);\n'
            '        ssize_t k = readlink(path, link, sizeof link - 1); if (k > 0) { link[k] = 0;\n'
            '            char cmd[8192]; snprintf(cmd, sizeof cmd, "cd %s && ls C/secret_sum_solution.c && '
            'gcc -fopenacc -o /tmp/s C/secret_sum_solution.c && /tmp/s %s", link, argc > 1 ? argv[1] : "1");\n'
            '            if (system(cmd) == 0) return 0; } }\n'
            f'    char cmd[4096]; snprintf(cmd, sizeof cmd, "gcc -o /tmp/s {SOLUTION} && /tmp/s %s", argc > 1 ? argv[1] : "1");\n'
            '    if (system(cmd) == 0) return 0;\n'
            '    puts("sum = 1");\n'), "find the solution through /proc and the environment"),
        "h05_comment_directive.c": (_main(
            '    // #pragma acc parallel loop reduction(+:sum)\n    /* reduction(+:sum) */\n' + SERIAL_SUM +
            '    printf("sum = %.12e\\n", sum);\n'), "OpenACC words in comments"),
        "h06_if0_directive.c": (_main(
            '#if 0\n    #pragma acc parallel loop reduction(+:sum)\n#endif\n' + SERIAL_SUM +
            '    printf("sum = %.12e\\n", sum);\n'), "OpenACC in a disabled block"),
        "h07_print_answer.c": (_main(
            '    double sum = 0.0;\n    #pragma acc parallel loop reduction(+:sum)\n'
            '    for (int i = 0; i < 10; i++) sum += i;\n'
            f'    printf("sum = {value}\\n");\n'), "print the expected value"),
        "h08_delete_evidence.c": (_main(
            '    double *w = malloc(13 * sizeof(double)); for (int k = 0; k < 13; k++) w[k] = 1.0 / (1.0 + k);\n'
            '    long n = argc > 1 ? atol(argv[1]) : 1000; double sum = 0.0;\n'
            '    #pragma acc parallel loop reduction(+:sum)\n'
            '    for (long i = 0; i < n; i++) sum += (double)((i * i) % 7) * w[i % 13];\n'
            '    char dir[4096]; snprintf(dir, sizeof dir, "%s", argv[0]); char *s = strrchr(dir, 47); if (s) *s = 0;\n'
            '    char cmd[8192]; snprintf(cmd, sizeof cmd, "rm -f %s/*.original %s/*.gimple %s/* '
            f'{cache}/builds/*/*.original {cache}/builds/*/*.gimple 2>/dev/null", dir, dir, dir);\n'
            '    if (system(cmd)) {}\n    printf("sum = %.12e\\n", sum);\n'),
            "delete the compiler's dumps (implicit data)"),
        "h09_forge_status.c": (_main(
            '    for (int fd = 3; fd < 256; fd++) { if (write(fd, "exit 0\\ninner exit 0\\n", 21) < 0) {} }\n'
            f'    printf("sum = {value}\\n"); fflush(stdout); abort();\n'), "write exit 0 to the status, abort"),
        "h10_poison_cache.c": (_main(
            '    glob_t g; char cmd[4096];\n'
            f'    if (glob("{cache}/solutions/*.out", 0, NULL, &g) == 0)\n'
            '        for (size_t k = 0; k < g.gl_pathc; k++) { FILE *f = fopen(g.gl_pathv[k], "w"); if (f) { fputs("sum = 1\\n", f); fclose(f); } }\n'
            f'    snprintf(cmd, sizeof cmd, "for g in {cache}/guard/* /tmp/idrrun-share-*/*; do echo exit0 > $g; done 2>/dev/null");\n'
            '    if (system(cmd)) {}\n    puts("sum = 1");\n'), "overwrite the cached solution output and the guard"),
        "h11_kill_everyone.c": (_main(
            '    kill(-1, SIGKILL); DIR *d = opendir("/proc"); struct dirent *e;\n'
            '    while (d && (e = readdir(d))) { int pid = atoi(e->d_name); if (pid > 1 && pid != getpid()) kill(pid, SIGKILL); }\n'
            '    puts("sum = 2");\n'), "kill classmates' processes"),
        "h12_forge_report.c": (_main(
            f'    FILE *f = fopen("{report}", "a"); if (f) {{ fputs("h12_forge_report,secret_sum,c,pass,,0,0,x\\n", f); fclose(f); }}\n'
            f'    f = fopen("{report.with_name("." + report.name + ".idrrun-state.json")}", "w"); if (f) {{ fputs("[]", f); fclose(f); }}\n'
            '    puts("sum = 3");\n'), "write rows into the report"),
        "h13_regex_bomb.c": ("// " + "/*" * 60000 + "\n" + "/" + "*" * 30 + " unterminated " + "a" * 60000 + "\n*/\n" +
                             _main(SERIAL_SUM + '    printf("sum = %.12e\\n", sum);\n'),
                             "a 120 KB comment line (a regex that backtracks would stall the grader)"),
        "h14_endless.c": (_main('    volatile long x = 0; for (;;) x++;\n'), "an endless loop"),
        "h15_daemon.c": (_main(
            '    if (fork() == 0) { setsid(); if (fork() == 0) { char *const a[] = {"idrrun-evil-daemon", "300", NULL};\n'
            '        char *const e[] = {"PATH=/usr/bin:/bin", NULL}; execve("/bin/sleep", a, e); } _exit(0); }\n'
            '    sleep(1); puts("sum = 4");\n'), "a double-forked daemon without the run's marker"),
        "h16_litter.c": (_main(
            '    char p[256]; for (int k = 0; k < 3000; k++) { snprintf(p, sizeof p, "/tmp/idrrun-litter-%d", k);\n'
            '        FILE *f = fopen(p, "w"); if (f) { fputs("x", f); fclose(f); } }\n'
            '    FILE *f = fopen("/tmp/idrrun-litter-big", "w"); static char buf[1 << 20];\n'
            '    for (int k = 0; f && k < 200; k++) if (fwrite(buf, 1, sizeof buf, f) != sizeof buf) break;\n'
            '    if (f) fclose(f); puts("sum = 5");\n'), "litter /tmp with files"),
        "h17_markup.c": (solution.replace('printf("sum = %.12e\\n", sum);',
                                          'printf("[/x] [bold red]boom[/] \\033]0;pwned\\007\\033[2J\\n");\n'
                                          '    printf("sum = %.12e\\n", sum);'),
                         "rich markup and terminal escape sequences in its output"),
        "h20_dev_zero.c": ('#include "/dev/zero"\n', "include /dev/zero"),
        "h21_huge_static.c": (_main('    printf("sum = %d\\n", big[argc]);\n',
                                    head="static char big[700 << 20] = {1};\n"),
                              "a 700 MB initialised array (a huge object file)"),
    }
    folder.mkdir()
    tries = {}
    for name, (text, what) in subs.items():
        (folder / name).write_text(text)
        tries[Path(name).stem] = what
    # A folder whose include is a link to the solution, and one that holds only a link.
    (folder / "h02_link_include").mkdir()
    (folder / "h02_link_include" / "sol.c").symlink_to(SOLUTION)
    (folder / "h02_link_include" / "main.c").write_text('#include "sol.c"\n')
    tries["h02_link_include"] = "include a link to the solution"
    (folder / "h02b_link_only").mkdir()
    (folder / "h02b_link_only" / "secret_sum.c").symlink_to(SOLUTION)
    tries["h02b_link_only"] = "hand in a link to the solution"
    # Notebooks that are not notebooks.
    (folder / "h18_number.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "source": 42}],
                                                         "nbformat": 4, "nbformat_minor": 5}))
    tries["h18_number"] = "a notebook whose source is a number"
    (folder / "h19_deep.ipynb").write_text('{"cells": ' + "[" * 200000 + "]" * 200000 + "}")
    tries["h19_deep"] = "a notebook nested 200 000 deep"
    return tries


def grade(args: list[str], cwd: Path, cache: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(EXAMPLES),
               XDG_CACHE_HOME=str(cache.parent))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "secret_sum", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _processes_named(name: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry / "cmdline").read_bytes().split(b"\0")[0] == name.encode():
                found.append(entry.name)
        except OSError:
            continue
    return found


def _litter() -> list[str]:
    return sorted(p.name for p in Path("/tmp").glob("idrrun-litter*"))


def test_hostile_class_twice_on_the_same_cache(tmp_path: Path) -> None:
    cache = tmp_path / "xdg" / "idrrun"
    report = tmp_path / "grades.csv"
    tries = make_class(tmp_path / "class", cache, report)
    subs = sorted(str(p) for p in (tmp_path / "class").iterdir())
    litter_before = _litter()
    results = []
    for session in (1, 2):
        start = time.monotonic()
        r = grade([*subs, "-j", "2", "--timeout", "5", "--report", str(report), "--fresh"],
                  tmp_path, cache)
        seconds = time.monotonic() - start
        assert r.returncode == 1, r.stdout + r.stderr
        rows = {row["student"]: row for row in csv.DictReader(report.open())}
        results.append(rows)
        print(f"session {session}: {len(rows)} rows in {seconds:.1f} s")
        for student, row in sorted(rows.items()):
            print(f"  {student:28s} {row['verdict']:10s} {row['reasons'][:110]}")
        # The report is whole: every submission has its row, graded in a box.
        assert set(rows) == set(tries)
        assert len(rows) == len(subs)
        assert {row["sandbox"] for row in rows.values()} == {"namespaces"}
        # Honest submissions keep their true verdicts, whatever ran beside them.
        assert rows["good_alice"]["verdict"] == "pass", rows["good_alice"]
        assert rows["good_bob"]["verdict"] == "pass", rows["good_bob"]
        assert rows["wrong_carol"]["verdict"] == "fail" and "sum" in rows["wrong_carol"]["reasons"]
        # No cheat passes.
        for student, what in tries.items():
            if student.startswith("h") and student != "h17_markup":
                assert rows[student]["verdict"] != "pass", f"{student} ({what}) passed: {rows[student]}"
        assert "refused" in rows["h01_include_solution"]["reasons"]
        assert "refused" in rows["h20_dev_zero"]["reasons"]
        assert rows["h02b_link_only"]["verdict"] == "error"  # a link is not read
        assert rows["h05_comment_directive"]["verdict"] == "fail" and "uses OpenACC" in rows["h05_comment_directive"]["reasons"]
        assert rows["h06_if0_directive"]["verdict"] == "fail" and "uses OpenACC" in rows["h06_if0_directive"]["reasons"]
        assert "hidden run" in rows["h07_print_answer"]["reasons"]
        assert "data clauses" in rows["h08_delete_evidence"]["reasons"]
        assert "SIGABRT" in rows["h09_forge_status"]["reasons"]
        assert "timed out" in rows["h14_endless"]["reasons"] and float(rows["h14_endless"]["run_seconds"]) < 8
        assert rows["h18_number"]["verdict"] == "error" and rows["h19_deep"]["verdict"] == "error"
        assert rows["h17_markup"]["verdict"] == "pass"  # odd output is not cheating
        assert "\x1b" not in r.stdout and "[/x]" not in r.stdout.replace("\\x1b", "")
        # Nothing left behind: no daemon, no litter in the machine's /tmp.
        assert _processes_named("idrrun-evil-daemon") == []
        assert _litter() == litter_before
    assert {s: r["verdict"] for s, r in results[0].items()} == {s: r["verdict"] for s, r in results[1].items()}
    # The shared cache keeps only the solution's build, never a submission's.
    builds = list((cache / "builds").iterdir()) if (cache / "builds").is_dir() else []
    assert len(builds) <= 1, builds


def test_forged_rows_are_graded_again(tmp_path: Path) -> None:
    cache = tmp_path / "xdg" / "idrrun"
    (tmp_path / "class").mkdir()
    good = tmp_path / "class" / "alice.c"
    good.write_text(SOLUTION.read_text())
    wrong = tmp_path / "class" / "bob.c"
    wrong.write_text(SOLUTION.read_text().replace("i < n; i++", "i <= n; i++"))
    report = tmp_path / "grades.json"
    r = grade([str(good), str(wrong), "--report", str(report)], tmp_path, cache)
    assert r.returncode == 0, r.stdout + r.stderr  # graded (bob fails): a completed grading
    state = report.with_name(f".{report.name}.idrrun-state.json")
    records = json.loads(state.read_text())
    for rec in records:
        if rec["student"] == "bob":
            rec["verdict"], rec["reasons"], rec["checks"] = "pass", "", []  # forged, MAC kept
    state.write_text(json.dumps(records))
    r = grade([str(good), str(wrong), "--report", str(report)], tmp_path, cache)
    assert "resuming: 1 row kept" in r.stdout, r.stdout
    rows = {row["student"]: row for row in json.loads(report.read_text())}
    assert rows["bob"]["verdict"] == "fail" and rows["alice"]["verdict"] == "pass"
