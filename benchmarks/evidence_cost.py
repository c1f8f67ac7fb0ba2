"""What a box's evidence costs the grader: its peak memory grading one hostile row (issue 33).

    python3 benchmarks/evidence_cost.py [--trace-mib 48] [--regions 1024] [--only NAME...]

Each submission is graded alone (`idrrun grade EXERCISE -j 1`, its exercise's solution run
too) by a grader process that prints its own peak resident memory (VmHWM of /proc/self/status, the
grader itself, not its children) when it ends. The course is tests/data/integrity's:
- honest: secret_sum's solution, as it is (the baseline: what grading one row costs);
- trace: the same, on a line that keeps `--profiler builtin`, writing a forged trace of
  TRACE_MIB MiB of kernel records at $IDRRUN_TRACE_FILE;
- regions: the same, with REGIONS sparse files of 1 MiB named $IDRRUN_ACC_REGIONS.N;
- honest_picture: secret_image's solution, as it is;
- picture: secret_image's solution, whose picture.pgm becomes a regular sparse P5 of
  16000x16000 pixels (256 MB, under the output cap);
- picture_7k: the same at 7000x7000 (49 MB: within the row's allowance, so judged by its
  header against the solution's 16x12).
Printed per row: its verdict, the grader's peak RSS (MiB) and the seconds the grading took.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench

ROOT = bench.ROOT
COURSE = ROOT / "tests" / "data" / "integrity"

# The grader, run so that it reports its own peak memory when it ends (however it ends): the
# high-water mark of its own memory (VmHWM, kB), not getrusage's ru_maxrss, which Linux carries
# over a fork and an exec from the parent (a pytest process of 405 MiB made every grader "take"
# 405 MiB).
GRADER = """import re, runpy, sys
sys.argv = ["idrrun", *sys.argv[1:]]
try:
    runpy.run_module("idrrun.cli", run_name="__main__")
finally:
    with open("/proc/self/status") as status:
        peak = re.search(r"^VmHWM:\\s*(\\d+)", status.read(), re.M)
    print("PEAK_KIB", peak.group(1) if peak else 0, file=sys.stderr)
"""

HEAD = "#include <fcntl.h>\n#include <unistd.h>\n#include <string.h>\n"

FORGE_TRACE = r"""
static void forge_trace(long bytes)
{
    const char *path = getenv("IDRRUN_TRACE_FILE");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) return;
    fprintf(f, "{\"type\":\"header\",\"format\":\"idrrun-trace\",\"version\":2,\"pid\":1,\"start\":1000}\n");
    for (long i = 0, written = 0; written < bytes; i++)
        written += fprintf(f, "{\"type\":\"kernel\",\"start\":%ld,\"end\":%ld,\"device\":0,\"context\":1,"
                           "\"stream\":%ld,\"correlation\":%ld,\"grid\":[8448,1,1],\"block\":[32,1,1],"
                           "\"name\":\"kernel_%ld\"}\n", 2000 + i * 10, 2005 + i * 10, 13 + i % 4, i, i % 5000);
    fprintf(f, "{\"type\":\"end\"}\n");
    fclose(f);
}
"""

FORGE_REGIONS = r"""
static void forge_regions(int files)
{
    const char *prefix = getenv("IDRRUN_ACC_REGIONS");
    char name[4096];
    if (!prefix) return;
    for (int k = 0; k < files; k++) {
        snprintf(name, sizeof name, "%s.%d", prefix, 100000 + k);
        int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return;
        if (ftruncate(fd, 1 << 20)) {}
        close(fd);
    }
}
"""

FORGE_PICTURE = r"""
static void forge_picture(long side)
{
    FILE *g = fopen("picture.pgm", "w");
    if (!g) return;
    long header = fprintf(g, "P5\n%ld %ld\n255\n", side, side);
    fseek(g, header + side * side - 1, SEEK_SET);
    fputc(7, g);
    fclose(g);
}
"""


def _with(solution: str, helper: str, call: str, before: str) -> str:
    """The solution, with `helper` defined and `call` made just before the line `before`."""
    head, sep, tail = solution.partition(before)
    assert sep, before
    first = head.find("int main")
    return HEAD + head[:first] + helper + head[first:] + f"    {call};\n" + sep + tail


def _notebook(code: str, line: str) -> str:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": f"{line}\n{code}"}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def submissions(folder: Path, trace_mib: int, regions: int) -> dict[str, tuple[str, Path]]:
    """name -> (exercise, submission file), each in a folder of its own, named as its row."""
    sum_sol = (COURSE / "C" / "secret_sum_solution.c").read_text()
    image_sol = (COURSE / "C" / "secret_image_solution.c").read_text()
    made: dict[str, tuple[str, str, str]] = {
        "honest": ("secret_sum", "honest.c", sum_sol),
        "trace": ("secret_sum", "trace.ipynb", _notebook(
            _with(sum_sol, FORGE_TRACE, f"forge_trace({trace_mib}L << 20)", "    free(w);"),
            "%%idrrun --profiler builtin --check secret_sum")),
        "regions": ("secret_sum", "regions.c",
                    _with(sum_sol, FORGE_REGIONS, f"forge_regions({regions})", "    free(w);")),
        "honest_picture": ("secret_image", "honest_picture.c", image_sol),
        "picture": ("secret_image", "picture.c",
                    _with(image_sol, FORGE_PICTURE, "forge_picture(16000)",
                          '    printf("picture written')),
        "picture_7k": ("secret_image", "picture_7k.c",
                       _with(image_sol, FORGE_PICTURE, "forge_picture(7000)",
                             '    printf("picture written')),
    }
    out = {}
    for name, (exercise, file, text) in made.items():
        sub = folder / "class" / name
        sub.mkdir(parents=True)
        (sub / file).write_text(text)
        out[name] = (exercise, sub / file)
    return out


def grade(exercise: str, subs: list[Path], work: Path, course: Path,
          path: str | None = None) -> tuple[dict[str, tuple[str, str]], float, float]:
    """({row: (verdict, reasons)}, the grader's peak RSS in MiB, seconds): `subs` graded
    together by one grader, one row at a time (`path`: the grader's PATH, when not ours)."""
    report = work / f"{subs[0].parent.name}.csv"
    env = dict(os.environ, PYTHONPATH=str(ROOT), IDRRUN_EXAMPLES=str(course),
               XDG_CACHE_HOME=str(work / "cache"), IDRRUN_RESIDENT="0")
    if path is not None:
        env["PATH"] = path
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", GRADER, "grade", exercise, "-j", "1",
                           "--timeout", "60", "--report", str(report), "--fresh", "--",
                           *map(str, subs)],
                          cwd=work, env=env, capture_output=True, text=True, timeout=1200)
    seconds = time.monotonic() - started
    peak = next((int(line.split()[1]) for line in done.stderr.splitlines()
                 if line.startswith("PEAK_KIB ")), 0)
    rows = {row["student"]: (row["verdict"], row["reasons"])
            for row in csv.DictReader(report.open())} if report.is_file() else {}
    if not rows:
        rows = {"?": ("no report", done.stderr.strip()[-300:])}
    return rows, peak / 1024, seconds


def main() -> int:
    parser = bench.parser(__doc__)
    parser.add_argument("--trace-mib", type=int, default=48)
    parser.add_argument("--regions", type=int, default=1024)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-evidence-"))
    lines = [f"{'row':14} {'peak RSS':>10} {'seconds':>8}  verdict"]
    try:
        course = work / "course"
        shutil.copytree(COURSE, course)
        subs = submissions(work, args.trace_mib, args.regions)
        for name, (exercise, sub) in subs.items():
            if args.only and name not in args.only:
                continue
            rows, peak, seconds = grade(exercise, [sub], work, course)
            verdict = "; ".join(f"{v}: {r}"[:120] for v, r in rows.values())
            lines.append(f"{name:14} {peak:6.0f} MiB {seconds:8.1f}  {verdict}")
            print(lines[-1], flush=True)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)
    bench.report(f"the grader's peak memory per row (trace {args.trace_mib} MiB, "
                 f"{args.regions} regions files, a 16000x16000 sparse picture)", lines,
                 record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
