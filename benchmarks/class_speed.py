"""Issue 49 on the GPU machine: a class graded at the speed of its GPU.

    python3 benchmarks/class_speed.py [--students 6 30 120] [--exercise profile_cg]...
                                      [-j 8] [--compare-j1] [--distinct] [--host] [--budget S]

A class of N submissions per exercise (default profile_cg and data_laplace, N = 30), made from
the course's own files in six kinds: the solution in C and in Fortran, the start file in C and
in Fortran, the solution made slow (the ladder's `slow` rung, grading/ladder.py: an array moved
at every iteration), and a near-miss (profile_cg: the host kept busy ~0.4 ms at every
iteration, ladder_gpu.py's spinner; elsewhere the ladder's half port). Each kind is copied
N / 6 times under the students' own names (renamed copies: identical work, which grading
measures once); --distinct makes each copy differ by a comment (no two alike: the class
measured row by row). The class is graded with `idrrun grade --json -j J` (the seed fixed);
the figures: the wall time, the seconds the timed runs held each GPU alone (the grading's
own account, its JSON's `lanes`), their share of the wall time, the verdicts, and whether
every copy of a kind got one mark. --compare-j1 grades the same class at -j 1 too and
compares every row's mark and check statuses. Exit 1 when marks differ.

Target (issue 49): 30 profile_cg submissions at -j 8 in at most 60 s on an H200, their marks
identical to a -j 1 grading's.
Every grading's JSON is kept in $OUT (the GPU machine's result folder; in $OUT/logs under run.sh).
--host: without a GPU, a check of the driver (host builds, a fake nvidia-smi that lists one GPU:
the lanes made and accounted for, their timed runs on the host; the GPU checks incomplete).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import bench

ROOT = bench.ROOT
EXAMPLES = bench.EXAMPLES
SEED = "class-speed"
EXERCISES = ("profile_cg", "data_laplace")
# ladder_gpu.py's spinner: after the iteration's swap the host spins ~0.4 ms (C).
SPIN_AFTER = "            rr = rr_new;\n"
SPIN = "            { volatile double spin = 0.0; for (long k = 0; k < 3 * m; k++) spin += 1.0; }\n"


def _course_file(ex: str, language: str, role: str) -> str:
    folder, suffix = ("C", "c") if language == "c" else ("Fortran", "f90")
    return (EXAMPLES / folder / f"{ex}_{role}.{suffix}").read_text()


def _rung(ex: str, language: str, name: str) -> str:
    """A near-miss of the exercise's ladder (grading/ladder.py), made from its solution."""
    sys.path.insert(0, str(ROOT))
    from idrrun.checks import specs
    from idrrun.grading import ladder

    exercise = specs.load(EXAMPLES / f"{ex}.toml")
    [rung] = [r for r in ladder.rungs(exercise, language) if r.name == name]
    if rung.text is None:
        sys.exit(f"class_speed: {ex}'s {name} rung cannot be made ({rung.how}): choose another kind")
    return rung.text


def kinds(ex: str) -> dict[str, tuple[str, str]]:
    """Kind -> (its text, its suffix): six kinds of work, from the course's files."""
    sol_c = _course_file(ex, "c", "solution")
    out = {
        "sol_c": (sol_c, "c"),
        "sol_f": (_course_file(ex, "fortran", "solution"), "f90"),
        "start_c": (_course_file(ex, "c", "exercise"), "c"),
        "start_f": (_course_file(ex, "fortran", "exercise"), "f90"),
        "slow_c": (_rung(ex, "c", "slow"), "c"),
    }
    if ex == "profile_cg":
        if SPIN_AFTER not in sol_c:
            sys.exit("class_speed: profile_cg's C solution no longer has `rr = rr_new;`: update SPIN_AFTER")
        out["spin_c"] = (sol_c.replace(SPIN_AFTER, SPIN_AFTER + SPIN, 1), "c")
    else:
        out["half_c"] = (_rung(ex, "c", "half"), "c")
    return out


def make(dest: Path, ex: str, students: int, distinct: bool) -> dict[str, str]:
    """The class in dest/: `students` files, the kinds in turn; returns student -> kind."""
    dest.mkdir(parents=True, exist_ok=True)
    made = kinds(ex)
    names = list(made)
    who: dict[str, str] = {}
    for i in range(students):
        kind = names[i % len(names)]
        text, suffix = made[kind]
        student = f"s{i + 1:03d}_{kind}"
        if distinct:
            mark = f"/* {student} */\n" if suffix == "c" else f"! {student}\n"
            text = mark + text
        (dest / f"{student}.{suffix}").write_text(text)
        who[student] = kind
    return who


# --host: an nvidia-smi that lists one GPU (there is none), so that the grading makes its
# lanes and accounts for them as on the GPU machine; the builds stay on the host.
FAKE_SMI = '#!/bin/sh\necho "a fake GPU (class_speed --host), 0.0, 0"\n'


def environment(args: argparse.Namespace, work: Path) -> dict[str, str]:
    env = bench.idrrun_env(None, IDRRUN_EXAMPLES=str(EXAMPLES), COLUMNS="200",
                           IDRRUN_GRADING_SEED=SEED)
    if args.host:
        env["IDRRUN_OFFLOAD"] = "host"
        fake = work / "bin" / "nvidia-smi"
        fake.parent.mkdir()
        fake.write_text(FAKE_SMI)
        fake.chmod(0o755)
        env["PATH"] = f"{fake.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def keep(name: str, text: str) -> None:
    """A grading's output, kept in $OUT when set (in its logs/ under run.sh)."""
    out = os.environ.get("OUT")
    if out:
        folder = Path(out, "logs") if Path(out, "logs").is_dir() else Path(out)
        (folder / name).write_text(text)


def grade(env: dict[str, str], work: Path, ex: str, folder: Path, jobs: int,
          tag: str) -> tuple[dict[str, Any], float]:
    files = sorted(str(p) for p in folder.iterdir())
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "idrrun", "grade", ex, *files, "-j", str(jobs),
                        "--json"], env=env, cwd=work, capture_output=True, text=True, check=False,
                       timeout=3600)
    took = time.monotonic() - start
    keep(f"class-speed-{tag}.json", r.stdout)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        sys.exit(f"class_speed: grading {ex} -j {jobs} failed (exit {r.returncode}):\n"
                 + "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:]))
    data: dict[str, Any] = json.loads(r.stdout)
    return data, took


def mark(row: dict[str, Any]) -> tuple[object, ...]:
    """What must be the same for the same work: the verdict, the score, each check's status."""
    return (row["verdict"], row["score"], tuple((c["name"], c["status"]) for c in row["checks"]))


def runs_of(row: dict[str, Any]) -> int:
    """The runs of her build its timed checks read: "over 5 runs" in a check's figure, else 1
    (a build that ran), 0 (none)."""
    found = [int(n) for c in row["checks"] for n in re.findall(r"over (\d+) runs", c.get("got", ""))]
    return max(found, default=1 if row.get("run_seconds") else 0)


def held_text(lanes: dict[str, Any] | None, wall: float) -> tuple[str, float]:
    """"GPU 0 24.1 s (40 %)", and the seconds held in all; "-" without lanes (no GPU)."""
    if not lanes:
        return "- (no GPU lanes)", 0.0
    held = lanes["held_alone_seconds"]
    return ", ".join(f"GPU {gpu} {s:.1f} s ({100 * s / max(wall, 1e-9):.0f} %)"
                     for gpu, s in held.items()), sum(held.values())


def spent(args: argparse.Namespace, started: float) -> bool:
    """--budget's seconds are gone: no grading starts."""
    return bool(args.budget) and time.monotonic() - started > args.budget


def one(args: argparse.Namespace, env: dict[str, str], work: Path, ex: str,
        students: int, started: float) -> tuple[list[str], bool]:
    """One class of `students` of `ex`: graded at -j J (and -j 1), its lines and whether its
    marks agree."""
    folder = work / f"{ex}-{students}"
    who = make(folder, ex, students, args.distinct)
    data, took = grade(env, work, ex, folder, args.j, f"{ex}-{students}-j{args.j}")
    rows = {r["student"]: r for r in data["rows"]}
    shown, held = held_text(data.get("lanes"), took)
    counts = Counter(r["verdict"] for r in rows.values())
    lines = [f"{ex}, {students} students ({'distinct' if args.distinct else 'renamed copies'}), "
             f"-j {args.j}: {took:.1f} s; GPUs held alone by the timed runs: {shown}; "
             + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))]
    same = True
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for student, kind in who.items():
        by_kind.setdefault(kind, []).append(rows[student])
    for kind, graded in by_kind.items():
        marks = {mark(r) for r in graded}
        same &= len(marks) == 1 or args.distinct
        first = graded[0]
        lines.append(f"  {kind:8} x{len(graded):<3} {first['verdict']:10} {first['score']}/"
                     f"{first['points']}  runs {'/'.join(str(runs_of(r)) for r in graded[:6])}"
                     f"{'...' if len(graded) > 6 else ''}  lane {first.get('lane') or '-'}  "
                     + ("one mark" if len(marks) == 1 else f"{len(marks)} MARKS"))
    # Shown at once: a device call's limit that stops the -j 1 grading keeps this one's figures.
    print("\n".join(lines), flush=True)
    shown_already = len(lines)
    if args.compare_j1 and spent(args, started):
        lines.append(f"  -j 1: not graded, the budget ({args.budget:.0f} s) is spent")
    elif args.compare_j1:
        again, took1 = grade(env, work, ex, folder, 1, f"{ex}-{students}-j1")
        rows1 = {r["student"]: r for r in again["rows"]}
        differ = sorted(s for s in rows if mark(rows[s]) != mark(rows1.get(s, {"verdict": None,
                                                                             "score": None,
                                                                             "checks": []})))
        shown1, _ = held_text(again.get("lanes"), took1)
        lines.append(f"  -j 1: {took1:.1f} s; GPUs held alone: {shown1}; marks identical to "
                     f"-j {args.j}'s: " + ("yes" if not differ else f"NO ({', '.join(differ[:8])})"))
        for s in differ[:8]:
            lines.append(f"    {s}: -j {args.j} {mark(rows[s])}; -j 1 {mark(rows1[s]) if s in rows1 else 'missing'}")
        same &= not differ
    if held:
        lines.append(f"  held / wall: {100 * held / took:.0f} % (the rest: compiles, untimed runs and "
                     "the grader's own work beside the timed runs, or a GPU left idle)")
    print("\n".join(lines[shown_already:]), flush=True)
    return lines, same


def main() -> int:
    p = bench.parser(__doc__)
    p.add_argument("--students", type=int, nargs="+", default=[30], metavar="N",
                   help="class sizes (default 30; the issue's: 6 30 120)")
    p.add_argument("--exercise", action="append", metavar="NAME",
                   help=f"only this exercise (repeat for several; default: {', '.join(EXERCISES)})")
    p.add_argument("-j", type=int, default=8, help="jobs (default 8)")
    p.add_argument("--compare-j1", action="store_true",
                   help="grade each class at -j 1 too: the same marks?")
    p.add_argument("--distinct", action="store_true",
                   help="every copy differs by a comment (no identical work to share)")
    p.add_argument("--host", action="store_true",
                   help="without a GPU: a check of the driver (host builds), no figures")
    p.add_argument("--budget", type=float, default=0.0, metavar="S",
                   help="start no grading once S seconds have gone (a device call's limit)")
    args = p.parse_args()
    gpu = bench.gpu_name() if args.host else bench.require_gpu("class_speed")
    work = Path(tempfile.mkdtemp(prefix="idrrun-class-speed-"))
    atexit.register(shutil.rmtree, work, True)
    env = environment(args, work)
    started = time.monotonic()
    lines = [f"{gpu or 'no GPU'}{' (--host: host builds)' if args.host else ''}; seed {SEED!r}"]
    ok = True
    for ex in args.exercise or EXERCISES:
        for students in args.students:
            if spent(args, started):
                lines.append(f"{ex}, {students} students: not graded, the budget ({args.budget:.0f} s) is spent")
                continue
            found, same = one(args, env, work, ex, students, started)
            lines += found
            ok &= same
    bench.report("a class graded at the speed of its GPU", lines, record=args.record)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
