"""Issue 27 on the GPU machine: the same verdicts whatever else runs, and what the GPU lanes cost.

    python3 benchmarks/lanes_class.py make DIR         the class, written to DIR
    python3 benchmarks/lanes_class.py course           course check at -j 1, then -j 8: same rows?
    python3 benchmarks/lanes_class.py verdicts         the class graded at -j 1, then -j 8: same?
    python3 benchmarks/lanes_class.py bench            the class at -j 8 against the same work bare

- make: 12 submissions of profile_cg (its gpu_busy check is timed) and 12 of async_matmul (none
  timed): solutions (C, Fortran, copies), start files, wrong ones (a wrong constant, a compile
  error, a crash) and near-misses (profile_cg: x brought back at every iteration, the host busy
  between kernels; async_matmul: one queue instead of three, no present clause), each with the
  verdict it should get on a GPU.
- course: `idrrun course check --json` at -j 1, then at -j 8, in one call: every row, ok or not,
  the verdicts of its solution and start file and the status of each of their checks, the two
  compared. Exit 1 when a row differs or is not right.
- verdicts: the class graded at -j 1, then at -j 8 (`idrrun grade --json`, the seed fixed): each
  row's verdict and the status of each check, compared, with the lane each run had. Exit 1 when
  they differ.
- bench: the class graded at -j 8 (one grading per exercise, each from an empty build cache)
  against the same work done bare: every submission compiled (the command `idrrun run -a`
  prints) and run with the arguments the grading runs it with (the GPU's, and the hidden sets
  drawn with the same seed) by `xargs -P 8`, but for the runs of the timed exercise's
  submissions, done afterwards one at a time, alone on the GPU, each as many times as grading
  ran it (its measure repeats a timed run until the figure settles or clears the bound; the
  grading's JSON says how often); the figure with each timed run once is shown beside it.
  Target: at most 1.5x.
Every grading's JSON is kept in $OUT (the GPU machine's result folder; in $OUT/logs under run.sh).
--host: without a GPU, a check of the driver (host builds, the GPU checks incomplete).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench

ROOT = bench.ROOT
EXAMPLES = bench.EXAMPLES
SEED = "lanes-class"
EXERCISES = ("profile_cg", "async_matmul")
MAIN = re.compile(r"int main\([^)]*\)\s*\{\n")


def _edit(text: str, old: str, new: str) -> str:
    if old not in text:
        sys.exit(f"lanes_class: {old!r} is no longer in the course's sources: update the class")
    return text.replace(old, new, 1)


def _crash(text: str) -> str:
    found = MAIN.search(text)
    if found is None:
        sys.exit("lanes_class: no main() to make crash")
    return text[:found.end()] + "    volatile int *nowhere = NULL; *nowhere = 1;\n" + text[found.end():]


def _source(ex: str, language: str, role: str) -> str:
    folder, suffix = ("C", "c") if language == "c" else ("Fortran", "f90")
    return (EXAMPLES / folder / f"{ex}_{role}.{suffix}").read_text()


def variants(ex: str) -> dict[str, tuple[str, str]]:
    """File name -> (text, the verdict it should get on a GPU, with the check that decides)."""
    sol_c, sol_f = _source(ex, "c", "solution"), _source(ex, "fortran", "solution")
    common = {
        "sol_c.c": (sol_c, "pass"),
        "sol_f.f90": (sol_f, "pass"),
        "copy_c.c": ("/* a copy of the solution */\n" + sol_c, "pass"),
        "start_c.c": (_source(ex, "c", "exercise"), "fail"),
        "start_f.f90": (_source(ex, "fortran", "exercise"), "fail"),
        "crash_c.c": (_crash(sol_c), "fail (killed by SIGSEGV)"),
    }
    if ex == "profile_cg":
        loop = "            rr = rr_new;\n"
        return {**common,
                "copy_f.f90": ("! a copy of the solution\n" + sol_f, "pass"),
                "wrong_rhs_c.c": (_edit(sol_c, "r[k] = inside ? h * h : 0.0;",
                                        "r[k] = inside ? 2.0 * h * h : 0.0;"), "fail (u(1/2,1/2))"),
                "wrong_rhs_f.f90": (_edit(sol_f, "r(i, j) = h * h", "r(i, j) = 2 * h * h"),
                                    "fail (u(1/2,1/2))"),
                "x_each_iteration_c.c": (_edit(sol_c, loop, loop + "            #pragma acc update "
                                               "self(x[0:m])\n"), "fail (data per iteration)"),
                "host_busy_c.c": (_edit(sol_c, loop, loop + "            { volatile double spin = "
                                        "0.0; for (long k = 0; k < 3 * m; k++) spin += 1.0; }\n"),
                                  "fail (GPU busy)"),
                "compile_error_c.c": (_edit(sol_c, "const long w = n + 2, m = w * w;",
                                            "const long w = n + 2, m = w * w"), "fail (compile)")}
    return {**common,
            "one_queue_c.c": (_edit(sol_c, "init_mat(B, dim, 7.0, 2);\n    init_mat(C, dim, 0.0, 3);",
                                    "init_mat(B, dim, 7.0, 1);\n    init_mat(C, dim, 0.0, 1);"),
                              "fail (queues)"),
            "one_queue_f.f90": (_edit(sol_f, "call init_mat(B, dim, 7.0d0, 2)\n    call init_mat(C, dim, 0.0d0, 3)",
                                      "call init_mat(B, dim, 7.0d0, 1)\n    call init_mat(C, dim, 0.0d0, 1)"),
                                "fail (queues)"),
            "wrong_c.c": (_edit(sol_c, "init_mat(A, dim, 6.0, 1);", "init_mat(A, dim, 5.0, 1);"),
                          "fail (C[0])"),
            "wrong_f.f90": (_edit(sol_f, "call init_mat(A, dim, 6.0d0, 1)", "call init_mat(A, dim, 5.0d0, 1)"),
                            "fail (C[0])"),
            "no_present_c.c": (_edit(sol_c, "present(A[0:n], B[0:n], C[0:n]) wait(1, 2, 3)",
                                     "wait(1, 2, 3)"), "fail (no_implicit_data)"),
            "compile_error_c.c": (_edit(sol_c, "size_t n = (size_t)dim * dim;\n\n",
                                        "size_t n = (size_t)dim * dim\n\n"), "fail (compile)")}


def make(dest: Path) -> dict[str, dict[str, str]]:
    """The class in dest/EXERCISE/; returns exercise -> student -> expected verdict."""
    expected: dict[str, dict[str, str]] = {}
    for ex in EXERCISES:
        folder = dest / ex
        folder.mkdir(parents=True, exist_ok=True)
        expected[ex] = {}
        for name, (text, verdict) in variants(ex).items():
            (folder / name).write_text(text)
            expected[ex][Path(name).stem] = verdict
    return expected


# ---------------------------------------------------------------------------------------------
# Running idrrun


def environment(args: argparse.Namespace, **extra: str) -> dict[str, str]:
    env = bench.idrrun_env(None, IDRRUN_EXAMPLES=str(EXAMPLES), COLUMNS="200",
                           IDRRUN_GRADING_SEED=SEED, **extra)
    if args.host:
        env["IDRRUN_OFFLOAD"] = "host"
    return env


def idrrun(env: dict[str, str], cwd: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "idrrun", *argv], env=env, cwd=cwd,
                       capture_output=True, text=True, check=False, timeout=3600)
    return r, time.monotonic() - start


def keep(name: str, text: str) -> None:
    """A grading's output, kept in $OUT (the GPU machine's result folder) when set: in its
    logs/ under run.sh (packed with the logs: few files come back from that machine)."""
    out = os.environ.get("OUT")
    if out:
        folder = Path(out, "logs") if Path(out, "logs").is_dir() else Path(out)
        (folder / name).write_text(text)


def _statuses(checks: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(c["name"]), str(c["status"])) for c in checks)


def _jobs(args: argparse.Namespace) -> list[int]:
    return [int(j) for j in args.jobs]


def grade(env: dict[str, str], work: Path, ex: str, jobs: int, tag: str,
          unsafe: bool = False) -> tuple[dict[str, Any], float]:
    files = sorted(str(p) for p in (work / "class" / ex).iterdir())
    r, took = idrrun(env, work, "grade", ex, *files, "-j", str(jobs), "--json",
                     *(("--unsafe",) if unsafe else ()))
    keep(f"{tag}-{ex}-j{jobs}.json", r.stdout)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        sys.exit(f"lanes_class: grading {ex} -j {jobs} failed (exit {r.returncode}):\n"
                 + "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:]))
    return json.loads(r.stdout), took


def verdicts(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="idrrun-lanes-"))
    atexit.register(shutil.rmtree, work, True)
    expected = make(work / "class")
    env = environment(args)
    lines, same = [], True
    for ex in args.exercise or EXERCISES:
        results = {j: grade(env, work, ex, j, "verdicts", args.unsafe) for j in _jobs(args)}
        first, last = _jobs(args)[0], _jobs(args)[-1]
        lines.append(f"{ex}: " + ", ".join(f"-j {j} {took:.0f} s" for j, (_, took) in results.items()))
        rows = {j: {r["student"]: r for r in data["rows"]} for j, (data, _) in results.items()}
        for student in sorted(rows[first]):
            a, b = rows[first][student], rows[last].get(student, {})
            agree = (a["verdict"], _statuses(a["checks"])) == \
                (b.get("verdict"), _statuses(b.get("checks", [])))
            same &= agree
            lines.append(f"  {student:20s} expected {expected[ex].get(student, '?'):28s} "
                         f"-j{first} {a['verdict']:10s} -j{last} {b.get('verdict', 'missing'):10s} "
                         f"{'same' if agree else 'DIFFERENT'}  lane {b.get('lane', '') or '-'}")
            if not agree or a["verdict"] != "pass":
                lines.append(f"  {'':20s} {b.get('reasons', '')[:160]}")
    lines.append("verdicts and check statuses " + ("identical" if same else "DIFFER") +
                 f" at -j {first} and -j {last}")
    bench.report(f"the class graded at -j {first} and -j {last}", lines, record=args.record)
    return 0 if same else 1


def course(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="idrrun-lanes-"))
    atexit.register(shutil.rmtree, work, True)
    env = environment(args)
    results: dict[int, tuple[dict[str, Any], float]] = {}
    for jobs in _jobs(args):
        r, took = idrrun(env, work, "course", "check", "-j", str(jobs), "--json",
                         *(a for ex in args.exercise or () for a in ("--exercise", ex)))
        keep(f"course-j{jobs}.json", r.stdout)
        if not r.stdout.strip():
            sys.exit(f"lanes_class: course check -j {jobs} printed nothing (exit {r.returncode}):\n"
                     + r.stderr[-3000:])
        results[jobs] = json.loads(r.stdout), took

    def key(row: dict[str, Any]) -> tuple[object, ...]:
        return (row["ok"], row["solution"]["verdict"], row["start"]["verdict"],
                _statuses(row["solution"]["checks"]), _statuses(row["start"]["checks"]))

    lines = []
    for jobs, (data, took) in results.items():
        rows = data["rows"]
        lines.append(f"-j {jobs}: {sum(r['ok'] for r in rows)} of {len(rows)} rows right "
                     f"({data['incomplete']} incomplete here) in {took:.0f} s; {data['where']}")
    first, last = _jobs(args)[0], _jobs(args)[-1]
    a = {(r["exercise"], r["language"]): r for r in results[first][0]["rows"]}
    b = {(r["exercise"], r["language"]): r for r in results[last][0]["rows"]}
    differ = sorted(k for k in a.keys() | b.keys() if k not in a or k not in b or key(a[k]) != key(b[k]))
    wrong = sorted(k for k, r in b.items() if not r["ok"]) + sorted(k for k, r in a.items() if not r["ok"])
    for k in sorted(set(differ) | set(wrong)):
        for jobs, rows in ((first, a), (last, b)):
            row = rows.get(k)
            if row is not None:
                lines.append(f"  {k[0]} {k[1]} -j {jobs}: ok={row['ok']} solution "
                             f"{row['solution']['verdict']} ({row['solution']['reasons'][:120]}); "
                             f"start {row['start']['verdict']}")
    for k, r in sorted(b.items()):
        if r["solution"].get("lane"):
            lines.append(f"  lane at -j {last}: {k[0]} {k[1]}: solution {r['solution']['lane']}, "
                         f"start {r['start']['lane']}")
    lines.append(f"rows that differ between -j {first} and -j {last}: {len(differ)}; rows not right: "
                 f"{len(set(wrong))}")
    bench.report(f"course check at -j {first} and -j {last}", lines, record=args.record)
    return 0 if not differ and not wrong else 1


# ---------------------------------------------------------------------------------------------
# bench


# A timed run alone, bare: (exercise, submission), its binary, its arguments, the timed checks'
# labels.
Alone = tuple[tuple[str, str], Path, tuple[str, ...], tuple[str, ...]]


def bare_scripts(work: Path, env: dict[str, str], on_gpu: bool) -> tuple[list[Path], list[Alone]]:
    """One shell script per submission (compile, then the runs that are not timed), and the
    timed runs to make alone afterwards."""
    sys.path.insert(0, str(ROOT))
    from idrrun.checks import draw, specs

    scripts, alone = [], []
    bins = work / "bins"
    bins.mkdir()
    for ex_name in EXERCISES:
        ex = specs.load(EXAMPLES / f"{ex_name}.toml")
        ex = draw.drawn(ex, SEED) if ex.draw is not None else ex
        public = ex.gpu_args if on_gpu else ex.host_args
        commands = {suffix: bench.compile_command(EXAMPLES / folder / f"{ex_name}_solution.{suffix}", env)
                    for folder, suffix in (("C", "c"), ("Fortran", "f90"))}
        for sub in sorted((work / "class" / ex_name).iterdir()):
            suffix = sub.suffix[1:]
            exe = bins / f"{ex_name}-{sub.stem}"
            compile_argv = commands[suffix].of(Path(f"s.{suffix}"), exe)
            runs = [] if ex.timed else [public]
            runs += list(ex.hidden_args)
            lines = [f'd=$(mktemp -d) && cd "$d" && cp {shlex.quote(str(sub))} s.{suffix}',
                     f"{shlex.join(compile_argv)} > /dev/null 2>&1",
                     *(f"[ -x {shlex.quote(str(exe))} ] && timeout 300 {shlex.quote(str(exe))} "
                       f"{shlex.join(args)} > /dev/null 2>&1" for args in runs),
                     'cd / && rm -rf "$d"', "exit 0"]
            script = work / "scripts" / f"{ex_name}-{sub.stem}.sh"
            script.parent.mkdir(exist_ok=True)
            script.write_text("\n".join(lines) + "\n")
            scripts.append(script)
            if ex.timed:
                labels = tuple(c.label for c in ex.checks if c.kind in specs.TIMED_KINDS)
                alone.append(((ex_name, sub.stem), exe, tuple(public), labels))
    return scripts, alone


def runs_made(row: dict[str, Any] | None, labels: tuple[str, ...]) -> int:
    """How many timed runs grading made for a submission, from its row's timed checks:
    "61 % (median of 3 runs: …)" is 3, a figure of one run 1, no figure (not built) 0."""
    made = 0
    for check in (row or {}).get("checks", []):
        if check["name"] in labels and check["got"]:
            many = re.search(r"median of (\d+) runs", check["got"])
            made = max(made, int(many.group(1)) if many else 1)
    return made


def bench_class(args: argparse.Namespace) -> int:
    gpu = bench.gpu_name() if args.host else bench.require_gpu("lanes_class bench")
    on_gpu = bool(gpu) and not args.host
    work = Path(tempfile.mkdtemp(prefix="idrrun-lanes-"))
    atexit.register(shutil.rmtree, work, True)
    make(work / "class")
    cache = work / "cache"
    env = environment(args, IDRRUN_CACHE_DIR=str(cache))
    # The guard, the tracer and the probe once, as on a course machine; no build nor solution.
    grade(env, work, "async_matmul", args.j, "warm-up", args.unsafe)
    graded, rows = {}, {}
    for ex in EXERCISES:
        for emptied in ("builds", "solutions", "sources"):
            shutil.rmtree(cache / emptied, ignore_errors=True)
        result, graded[ex] = grade(env, work, ex, args.j, "bench", args.unsafe)
        rows.update({(ex, r["student"]): r for r in result["rows"]})  # names repeat
    scripts, alone = bare_scripts(work, env, on_gpu)
    start = time.monotonic()
    subprocess.run(["xargs", f"-P{args.j}", "-n1", "sh"], input="\n".join(map(str, scripts)),
                   text=True, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parallel = time.monotonic() - start
    # Each timed run alone, as many times as grading made it (its measure repeats it until the
    # figure settles or clears the bound): each run's time, so that "once each" is known too.
    once, same = 0.0, 0.0
    made_in_all = 0
    for key, exe, argv, labels in alone:
        made = runs_made(rows.get(key), labels)
        if not exe.exists() or not made:
            continue  # not built (a compile error), or grading ran no timed run of it
        took = [bench.wall([str(exe), *argv]) for _ in range(max(made, args.timed_runs))]
        print(f"{key[0]}/{key[1]}: grading made {made} timed run(s); bare alone "
              + ", ".join(f"{t:.2f} s" for t in took))
        once += took[0]
        same += sum(took[:made])
        made_in_all += made
    ours = sum(graded.values())
    lines = [f"{gpu or 'no GPU (--host)'}; 12 + 12 submissions, -j {args.j}, seed {SEED!r}",
             "  idrrun grade: " + ", ".join(f"{ex} {t:.1f} s" for ex, t in graded.items()) +
             f"; together {ours:.1f} s",
             f"  bare: xargs -P{args.j} (compiles, untimed runs) {parallel:.1f} s + the timed "
             f"exercise's runs alone, as many as grading made ({made_in_all}), {same:.1f} s",
             f"  idrrun / bare: {ours / (parallel + same):.2f}x (target <= 1.5); with each timed "
             f"run done once bare ({once:.1f} s): {ours / (parallel + once):.2f}x"]
    bench.report("a class of 24 in GPU lanes against bare", lines, record=args.record)
    return 0


def main() -> int:
    p = bench.parser(__doc__, record=False)
    add = bench.subcommands(p)
    mk = add("make", "write the class (12 submissions of profile_cg, 12 of async_matmul) to DIR")
    mk.add_argument("dest", type=Path, metavar="DIR")
    for name, doc in (("course", "course check at -j 1, then -j 8, in one call: the same rows?"),
                      ("verdicts", "the class graded at -j 1, then -j 8: the same verdicts?"),
                      ("bench", "the class graded at -j 8 against the same compiles and runs bare")):
        sub = add(name, doc)
        sub.add_argument("--host", action="store_true",
                         help="without a GPU: a check of the driver (host builds), no figures")
        if name != "course":
            sub.add_argument("--unsafe", action="store_true",
                             help="grade without a sandbox where none can be made (idrrun grade --unsafe)")
        if name == "bench":
            sub.add_argument("-j", type=int, default=8, help="jobs (default 8)")
            sub.add_argument("--timed-runs", type=int, default=1,
                             help="the least times the bare side runs each timed run alone "
                                  "(default 1; it makes as many as grading made)")
        else:
            sub.add_argument("--jobs", nargs="+", default=["1", "8"], metavar="N",
                             help="the -j values compared (default: 1 8)")
        if name in ("course", "verdicts"):
            sub.add_argument("--exercise", action="append", metavar="NAME",
                             help="only this exercise (repeat for several)")
    args = p.parse_args()
    if args.command == "make":
        for ex, rows in make(args.dest).items():
            print(f"{args.dest / ex}: {len(rows)} submissions")
            for student, verdict in rows.items():
                print(f"  {student:22s} {verdict}")
        return 0
    if not args.host:
        bench.require_gpu(f"lanes_class {args.command}")
    return {"course": course, "verdicts": verdicts, "bench": bench_class}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
