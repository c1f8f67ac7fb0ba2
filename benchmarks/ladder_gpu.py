"""Issue 47 on the GPU machine: marks that mean the port on every GPU.

    python3 benchmarks/ladder_gpu.py ladder [-j 8] [--exercise NAME]... [-l c|fortran] [--budget S]
                                            [--deadline S] [--parallel K]
    python3 benchmarks/ladder_gpu.py copies [-j 8] [--exercise profile_cg] [--copies 5]
    python3 benchmarks/ladder_gpu.py spin   [-j 8]

- ladder: `idrrun course check --ladder --json` (grading/ladder.py: each exercise's near-misses
  made from its own solution: slow, half port, wrong result, a region with no work, directives in
  comments), one table of each rung's share of the points evaluated there, and whether the
  teacher's order holds (on a GPU the slow rung must earn less than the solution: the speed check
  and data_moved see it). Exit 1 when an order breaks or a bound is passed. One `course check`
  per exercise, each shown as it ends; the 19 exercises take several device calls on one H200
  (three of them took more than 446 s at -j 12): give them in parts (--exercise, -l) and
  --budget S (no exercise started after S seconds).
- copies: five identical copies of one submission (the exercise's C solution, renamed) graded
  together at -j 8 (`idrrun grade --json`): one mark for all? Each copy's score and its timed
  checks (speed, GPU busy) with what they measured. Exit 1 when the marks differ.
- spin: profile_cg's solution with the host kept busy ~0.4 ms at every iteration (a loop that
  spins), graded with the solution: its GPU busy (at least 0.7 of the solution's share,
  measured the same way on the same GPU) must fail, the solution's pass. Exit 1 otherwise.
Every grading's JSON is kept in $OUT (the GPU machine's result folder; in $OUT/logs under run.sh).
--host: without a GPU, a check of the driver (host builds; the GPU checks incomplete).
"""

from __future__ import annotations

import argparse
import atexit
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import bench

ROOT = bench.ROOT
EXAMPLES = bench.EXAMPLES
SEED = "ladder-gpu"
RUNGS = ("solution", "slow", "half", "wrong", "trivial", "start", "comment")
# profile_cg's iteration loop (C): after it swaps rr, the host spins ~0.4 ms (3 m additions of
# a volatile at n = 1023: m = 1025², about 3 million; ~0.4 ms on the H200's host).
SPIN_AFTER = "            rr = rr_new;\n"
SPIN = "            { volatile double spin = 0.0; for (long k = 0; k < 3 * m; k++) spin += 1.0; }\n"


def environment(args: argparse.Namespace) -> dict[str, str]:
    env = bench.idrrun_env(None, IDRRUN_EXAMPLES=str(EXAMPLES), COLUMNS="200",
                           IDRRUN_GRADING_SEED=SEED)
    if args.host:
        env["IDRRUN_OFFLOAD"] = "host"
    return env


def idrrun(env: dict[str, str], cwd: Path, *argv: str,
           timeout: float = 3600.0) -> tuple[subprocess.CompletedProcess[str], float]:
    """One idrrun command in its own session: at `timeout` the whole session is killed (its
    builds and runs too, which would otherwise hold the GPU) and TimeoutExpired raised."""
    start = time.monotonic()
    argv = (sys.executable, "-m", "idrrun", *argv)
    with subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), time.monotonic() - start


def keep(name: str, text: str) -> None:
    """A grading's output, kept in $OUT when set (in its logs/ under run.sh)."""
    out = os.environ.get("OUT")
    if out:
        folder = Path(out, "logs") if Path(out, "logs").is_dir() else Path(out)
        (folder / name).write_text(text)


def _json(r: subprocess.CompletedProcess[str], what: str) -> dict[str, Any]:
    if not r.stdout.strip():
        sys.exit(f"ladder_gpu: {what} printed nothing (exit {r.returncode}):\n{r.stderr[-3000:]}")
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def _work() -> Path:
    work = Path(tempfile.mkdtemp(prefix="idrrun-ladder-"))
    atexit.register(shutil.rmtree, work, True)
    return work


def _cell(rung: dict[str, Any]) -> str:
    if not rung["made"] or rung["share"] is None:
        return "-"
    return f"{100 * rung['share']:.0f}%" + ("*" if rung["not_judged"] else "")


def ladder(args: argparse.Namespace) -> int:
    """The ladder of every exercise asked, as course check grades it here: one `course check
    --ladder` per exercise, its rows shown as soon as it ends (a device call's limit keeps what
    finished; one call over several exercises kept nothing when stopped), until --budget.
    --parallel K runs K of them at once (each at -j J): one exercise's builds and untimed runs
    go on the CPUs while another's timed runs hold the GPU (the lanes are locks shared by every
    grading of the machine, so timed runs stay alone). --deadline stops a course check still
    running then: said, and counted as not graded."""
    work = _work()
    names = args.exercise or sorted(p.stem for p in EXAMPLES.glob("*.toml"))
    languages = [a for lang in args.language or () for a in ("-l", lang)]
    started = time.monotonic()
    lines: list[str] = []
    counts = {"rows": 0, "broken": 0}
    left: list[str] = []
    lock = threading.Lock()

    def one(name: str) -> None:
        spent = time.monotonic() - started
        if args.budget and spent > args.budget:
            with lock:
                left.append(name)
            return
        limit = args.deadline - spent if args.deadline else 3600.0
        try:
            r, took = idrrun(environment(args), work, "course", "check", "--ladder", "-j",
                             str(args.j), "--json", "--exercise", name, *languages, timeout=limit)
        except subprocess.TimeoutExpired:
            with lock:
                left.append(f"{name} (stopped at the deadline, {args.deadline:.0f} s)")
                print(f"{name}: stopped at the deadline ({args.deadline:.0f} s)", flush=True)
            return
        keep(f"ladder-{name}.json", r.stdout)
        data = _json(r, f"course check --ladder --exercise {name}")
        shown = [f"{name}: {data['where']}, -j {args.j}: {len(data['rows'])} rows in {took:.0f} s"
                 f" (ended at {time.monotonic() - started:.0f} s)"]
        with lock:
            for row in data["rows"]:
                found, held = _ladder_lines(row)
                shown += found
                counts["rows"] += 1
                counts["broken"] += not held
            print("\n".join(shown), flush=True)
            lines.extend(shown)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        list(pool.map(one, names))
    rows, broken = counts["rows"], counts["broken"]
    header = f"{'exercise':18} {'lang':8} " + " ".join(f"{n:>8}" for n in RUNGS) + "  order"
    lines = [header, *lines, f"{rows - broken} of {rows} ladders held (a share of the points "
             "evaluated here; * not judged: the rung is not what it claims; - not made); "
             f"{time.monotonic() - started:.0f} s, {args.parallel} at once at -j {args.j}"]
    if left:
        lines.append(f"not graded (the budget of {args.budget:.0f} s was spent, or the deadline "
                     f"came): {', '.join(left)}")
    bench.report("the ladder of near-misses on the GPU", lines, record=args.record)
    return 0 if broken == 0 and not left else 1


def _ladder_lines(row: dict[str, Any]) -> tuple[list[str], bool]:
    """One row of the ladder's table (its rungs' shares, held or broken) and what it found."""
    rungs = {x["rung"]: x for x in row.get("ladder", []) if "rung" in x}
    [judged] = [x for x in row.get("ladder", []) if "findings" in x] or [{"findings": ["no ladder"]}]
    held = not judged["findings"]
    lines = [f"{row['exercise']:18} {row['language']:8} " +
             " ".join(f"{_cell(rungs[n]) if n in rungs else '-':>8}" for n in RUNGS) +
             ("  held" if held else "  BROKEN")]
    lines += [f"    {said}" for said in judged["findings"]]
    # What a rung's evaluated share leaves out: its checks not judged, and why.
    lines += [f"    not judged in {name}: {c['check']}: {c['reason'][:200]}"
              for name, x in rungs.items() for c in x.get("unpassed", ())
              if c["status"] == "incomplete" and not held]
    lines += [f"    note: {said}" for said in judged.get("notes", [])]
    return lines, held


def _timed(row: dict[str, Any]) -> str:
    """A row's timed checks as they measured (speed, GPU busy)."""
    return "; ".join(f"{c['name']}: {c['status']} {c.get('got', '')}" for c in row["checks"]
                     if c["name"] in ("run time", "GPU busy") or "solution's" in c.get("got", ""))


def copies(args: argparse.Namespace) -> int:
    """Identical copies of one submission graded together: one mark?"""
    work = _work()
    solution = (EXAMPLES / "C" / f"{args.exercise}_solution.c").read_text()
    files = []
    for i in range(args.copies):
        path = work / f"copy{i + 1}.c"
        path.write_text(solution)
        files.append(str(path))
    r, took = idrrun(environment(args), work, "grade", args.exercise, *files, "-j", str(args.j),
                     "--json")
    keep(f"copies-{args.exercise}.json", r.stdout)
    rows = _json(r, "grade")["rows"]
    marks = {(row["score"], row["verdict"]) for row in rows}
    lines = [f"{args.copies} copies of {args.exercise}'s C solution at -j {args.j}: {took:.0f} s"]
    lines += [f"  {row['student']:8} {row['verdict']:10} {row['score']:g}/{row['points']:g} "
              f"lane {row.get('lane') or '-'}  {_timed(row)}" for row in rows]
    lines.append("one mark for all: " + ("yes" if len(marks) == 1 else f"NO ({sorted(marks)})"))
    bench.report("identical copies graded together", lines, record=args.record)
    return 0 if len(marks) == 1 else 1


def spin(args: argparse.Namespace) -> int:
    """profile_cg with the host spinning at every iteration: its GPU busy fails, the solution's
    passes, each relative to the solution's share measured here."""
    work = _work()
    solution = (EXAMPLES / "C" / "profile_cg_solution.c").read_text()
    if SPIN_AFTER not in solution:
        sys.exit("ladder_gpu: profile_cg's C solution no longer has `rr = rr_new;`: update SPIN_AFTER")
    (work / "solution.c").write_text(solution)
    (work / "spinner.c").write_text(solution.replace(SPIN_AFTER, SPIN_AFTER + SPIN, 1))
    r, took = idrrun(environment(args), work, "grade", "profile_cg", str(work / "solution.c"),
                     str(work / "spinner.c"), "-j", str(args.j), "--json")
    keep("spin-profile_cg.json", r.stdout)
    rows = {row["student"]: row for row in _json(r, "grade")["rows"]}
    busy = {name: next((c for c in row["checks"] if c["name"] == "GPU busy"), {})
            for name, row in rows.items()}
    lines = [f"profile_cg, the solution and the host-spinning port at -j {args.j}: {took:.0f} s"]
    for name, row in rows.items():
        check = busy[name]
        lines.append(f"  {name:9} {row['verdict']:10} {row['score']:g}/{row['points']:g}  GPU busy "
                     f"{check.get('status', '?')}: {check.get('got', '')} ({check.get('reason', '')[:120]})")
    right = busy.get("spinner", {}).get("status") == "fail" and \
        busy.get("solution", {}).get("status") == "pass"
    lines.append("the spinner fails its GPU busy, the solution passes: " + ("yes" if right else "NO"))
    bench.report("profile_cg's host-spinning port against its timed check", lines, record=args.record)
    return 0 if right else 1


def main() -> int:
    p = bench.parser(__doc__, record=False)
    add = bench.subcommands(p)
    for name, doc in (("ladder", "the ladder of every exercise, graded by course check --ladder"),
                      ("copies", "identical copies of a submission graded together at -j 8"),
                      ("spin", "profile_cg with the host spinning at every iteration")):
        sub = add(name, doc)
        sub.add_argument("-j", type=int, default=8, help="jobs (default 8)")
        sub.add_argument("--host", action="store_true",
                         help="without a GPU: a check of the driver (host builds), no figures")
        if name == "ladder":
            sub.add_argument("--exercise", action="append", metavar="NAME",
                             help="only this exercise (repeat for several; default: all)")
            sub.add_argument("-l", "--language", action="append", choices=("c", "fortran"),
                             help="only this language (repeat for both; default: both)")
            sub.add_argument("--budget", type=float, default=0.0, metavar="S",
                             help="start no exercise once S seconds have gone (a device call's limit)")
            sub.add_argument("--deadline", type=float, default=0.0, metavar="S",
                             help="stop a course check still running S seconds after the start")
            sub.add_argument("--parallel", type=int, default=1, metavar="K",
                             help="K course checks at once (default 1)")
        if name == "copies":
            sub.add_argument("--exercise", default="profile_cg", help="(default profile_cg)")
            sub.add_argument("--copies", type=int, default=5, help="how many (default 5)")
    args = p.parse_args()
    if not args.host:
        bench.require_gpu("ladder_gpu")
    return {"ladder": ladder, "copies": copies, "spin": spin}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
