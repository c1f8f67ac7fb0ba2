"""Similarity over a class: `idrrun similarity` on a generated class of one exercise (issue 26:
100 submissions in at most 10 s on the 2-core development machine).

    python3 benchmarks/similarity_bench.py [--exercise loops_matvec] [--count 100] [--repeat 3]

The class, made with a fixed seed from the exercise's C start file and solution, as a class
looks: each student takes the start file and applies some of the changes that lead to the
solution (difflib's hunks, each kept with a probability drawn per student: from the start file
handed in as it was to the whole solution), renames some of the variables, adds comments and
blank lines; one in ten copies a classmate's, renamed again. A harsh class: whatever a student
writes comes from the solution, so that nearly half of the 5050 pairs are listed, each with its
passages (an honest class lists few, and the passages are drawn for listed pairs only). The
figure is the wall time of the whole command (Python's start, copydetect's import, reading the
class, the JSON report written), the median of the rounds.
"""

from __future__ import annotations

import atexit
import difflib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench

ROOT = bench.ROOT
SEED = 26
NAMES = ("tmp", "acc_sum", "total", "val", "res", "k2", "idx", "w", "q", "t2")
TARGET_S = 10.0


def _renamed(text: str, rng: random.Random) -> str:
    """Some of the solution's local names replaced (whole words, outside directives)."""
    words = sorted(set(re.findall(r"\b(?:sum|xy|yy|scale|it|lambda|x0|error|change|iter)\b", text)))
    for word in rng.sample(words, k=rng.randint(0, len(words))):
        text = re.sub(rf"(?<![#\"%])\b{word}\b(?! =)", rng.choice(NAMES) + str(rng.randint(0, 9)), text)
    return text


def _decorated(lines: list[str], rng: random.Random) -> list[str]:
    out = []
    for line in lines:
        if rng.random() < 0.05:
            out.append(f"    /* {rng.choice(('TODO', 'check', 'why?', 'ok'))} {rng.randint(0, 999)} */")
        if rng.random() < 0.03:
            out.append("")
        out.append(line)
    return out


def student(start: list[str], solution: list[str], rng: random.Random) -> str:
    """The start file with some of the solution's hunks applied, renamed, decorated."""
    keep = rng.random()
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=start, b=solution, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or rng.random() >= keep:
            out += start[i1:i2]
        else:
            out += solution[j1:j2]
    return _renamed("\n".join(_decorated(out, rng)) + "\n", rng)


def make_class(folder: Path, exercise: str, count: int) -> list[Path]:
    sys.path.insert(0, str(ROOT))
    from idrrun.checks import specs

    pair = specs.load(ROOT / "examples" / f"{exercise}.toml").sources["c"]
    assert pair.solution is not None
    start = pair.exercise.read_text().splitlines()
    solution = pair.solution.read_text().splitlines()
    rng = random.Random(SEED)
    texts: list[str] = []
    for i in range(count):
        if texts and i % 10 == 9:
            texts.append(_renamed(rng.choice(texts), rng))  # a copy of a classmate's
        else:
            texts.append(student(start, solution, rng))
    paths = []
    for i, text in enumerate(texts):
        path = folder / f"student{i:03d}.c"
        path.write_text(text)
        paths.append(path)
    return paths


def main() -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--exercise", default="loops_matvec", help="the exercise (default loops_matvec)")
    ap.add_argument("--count", type=int, default=100, help="submissions in the class (default 100)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-bench-"))
    atexit.register(shutil.rmtree, work, True)
    (work / "class").mkdir()
    files = [str(p) for p in make_class(work / "class", args.exercise, args.count)]
    env = bench.idrrun_env(IDRRUN_EXAMPLES=str(ROOT / "examples"))
    argv = [sys.executable, "-m", "idrrun.cli", "similarity", args.exercise, *files,
            "--report", str(work / "similarity.json")]
    times = []
    for _ in range(max(1, args.repeat)):
        start = time.perf_counter()
        r = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if r.returncode != 0:
            sys.exit(f"similarity_bench: the command failed (exit {r.returncode}):\n"
                     + "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:]))
    found = json.loads((work / "similarity.json").read_text())
    took = bench.median(times)
    lines = [f"{args.count} submissions of {args.exercise} (C) and the published solution, "
             f"{len(found['pairs'])} pairs above {found['threshold']:.0%}, {found['library']}; "
             f"{len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}",
             f"  idrrun similarity  median {took:6.2f} s  rounds {bench.spread(times)}  "
             f"(target <= {TARGET_S:.0f} s)"]
    bench.report("similarity over a class", lines, record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
