"""Issues 25 and 26 on the GPU machine: what a student and a teacher get there.

    python3 benchmarks/students_gpu.py [--wheel FILE] [--host] [--record]

- students: the wheel installed alone in a folder of its own (`pip install --no-deps --target`),
  a students' copy of the course made from it (`idrrun course init --students`), and from that
  copy's examples the C solutions of async_matmul, data_laplace and profile_cg checked with
  `idrrun run -a --profile --check` (`-t` for OpenMP target) as a student's notebook checks them: on a GPU each must
  PASS with every check evaluated (the solution's output from the copy's references).
- feedback: data_laplace graded with the teacher's course (`--visibility full`): the solution
  and a port that brings A back to the host at every iteration; the feedback's comparison with
  the solution (figures and both timelines) is printed, the files kept in the log folder.
--wheel: the wheel to install (default: the newest in dist/, else one built with `pip wheel`).
--host: without a GPU, a check of the driver (PASS here, no timelines).
--all: every exercise's C solution checked in the students' copy, not only the three.
--lines: every `%%idrrun ... --check NAME` cell of the students' copy's notebooks, C and Fortran,
  with the notebook's own flags (no --profile added), on the teacher's solution of that language:
  on a GPU each must PASS with every check evaluated (issue 34).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import bench

sys.path.insert(0, str(bench.ROOT))

from idrrun.checks import specs  # noqa: E402
from idrrun.grading.comparison import HEADING  # noqa: E402

EXERCISES = ("async_matmul", "data_laplace", "profile_cg")
LAPLACE_LOOP = "        iter++;\n"


def wheel(given: Path | None, work: Path) -> Path:
    if given is not None:
        return given
    built = sorted((bench.ROOT / "dist").glob("idrrun-*.whl"), key=lambda p: p.stat().st_mtime)
    if built:
        return built[-1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(bench.ROOT), "--no-deps", "-q",
                    "-w", str(work)], check=True)
    return next(work.glob("idrrun-*.whl"))


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def install(whl: Path, work: Path) -> tuple[Path, dict[str, str]] | str:
    """The wheel installed alone and a students' copy made from it: the copy and the
    environment that runs idrrun from the wheel with that copy's examples; or why not."""
    target = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                    "--target", str(target), str(whl)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IDRRUN_EXAMPLES")}
    # The wheel alone, but its dependencies where this machine has them (the GPU machine's
    # /tmp/gpu-site from .gpu/activate.sh): every PYTHONPATH entry but the checkout's root.
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != bench.ROOT.resolve()]
    env["PYTHONPATH"] = os.pathsep.join([str(target), *kept])
    copy = work / "students"
    made = run([sys.executable, "-m", "idrrun.cli", "course", "init", "--students", str(copy)],
               env, work)
    if made.returncode != 0:
        return f"course init --students failed: {made.stderr.strip()}"
    env["IDRRUN_EXAMPLES"] = str(copy / "examples")
    return copy, env


def verdict_lines(name: str, checked: subprocess.CompletedProcess[str]) -> list[str]:
    """The verdict line of one checked run, the rows that did not pass, and the run's last
    lines where it is no PASS."""
    verdict = next((line for line in checked.stdout.splitlines() if line.startswith(f"{name}: ")),
                   f"{name}: no verdict (exit {checked.returncode}): "
                   f"{checked.stderr.strip()[-200:]}")
    lines = [f"  {verdict}  (exit {checked.returncode})"]
    lines += [f"    {line.strip()}" for line in checked.stdout.splitlines()
              if re.match(r"\s+\S.*\s(INCOMPLETE|FAIL)\s", line)]
    if ": PASS" not in verdict or "PASS here" in verdict:
        lines += [f"    | {line}" for line in
                  (checked.stdout + checked.stderr).strip().splitlines()[-12:]]
    return lines


def students(whl: Path, work: Path, exercises: Sequence[str] = EXERCISES) -> list[str]:
    made = install(whl, work)
    if isinstance(made, str):
        return [made]
    copy, env = made
    lines = [f"a students' copy made from {whl.name}, installed alone"]
    for ex in exercises:
        solution = bench.EXAMPLES / "C" / f"{ex}_solution.c"
        # The flag of the exercise's model, as its notebook's cells have it: -t for OpenMP target.
        model = "-t" if specs.load(bench.EXAMPLES / f"{ex}.toml").model == "openmp" else "-a"
        checked = run([sys.executable, "-m", "idrrun.cli", "run", model, "--profile", "--check", ex,
                       str(solution)], env, work)
        lines += verdict_lines(ex, checked)
    return lines


CHECK_CELL = re.compile(r"^%%idrrun\s+(.*--check\s+(\w+).*)$")
SUFFIX = {"C": ".c", "Fortran": ".f90"}


def notebook_lines(copy: Path) -> list[tuple[str, str, list[str], str]]:
    """Every check cell of the copy's notebooks: (language folder, notebook, its flags, the
    exercise), in the notebooks' order."""
    found = []
    for lang in SUFFIX:
        for nb in sorted((copy / "notebooks" / lang).glob("*.ipynb")):
            cells = json.loads(nb.read_text(encoding="utf-8")).get("cells", [])
            for cell in cells:
                if cell.get("cell_type") != "code":
                    continue
                first = "".join(cell.get("source", "")).split("\n", 1)[0].strip()
                m = CHECK_CELL.match(first)
                if m is not None:
                    found.append((lang, nb.name, shlex.split(m.group(1)), m.group(2)))
    return found


def lines_mode(whl: Path, work: Path) -> list[str]:
    """Each check cell's own flags on the teacher's solution of its language, in the copy."""
    made = install(whl, work)
    if isinstance(made, str):
        return [made]
    copy, env = made
    cells = notebook_lines(copy)
    lines = [f"a students' copy made from {whl.name}: {len(cells)} check cells"]
    passed = 0
    for lang, nb, flags, ex in cells:
        solution = bench.EXAMPLES / lang / f"{ex}_solution{SUFFIX[lang]}"
        # Where the notebook runs: the copy's notebooks folder of that language.
        checked = run([sys.executable, "-m", "idrrun.cli", "run", *flags, str(solution)],
                      env, copy / "notebooks" / lang)
        lines.append(f"{lang}/{nb}: %%idrrun {shlex.join(flags)}")
        got = verdict_lines(ex, checked)
        passed += int(": PASS" in got[0] and "PASS here" not in got[0])
        lines += got
    lines.append(f"{passed} of {len(cells)} check cells PASS with every check evaluated")
    return lines


def feedback(work: Path, logs: Path) -> list[str]:
    klass = work / "class"
    klass.mkdir()
    solution = (bench.EXAMPLES / "C" / "data_laplace_solution.c").read_text()
    (klass / "ann.c").write_text(solution)
    if LAPLACE_LOOP not in solution:
        sys.exit("students_gpu: data_laplace's solution changed: update LAPLACE_LOOP")
    (klass / "bob.c").write_text(solution.replace(
        LAPLACE_LOOP, LAPLACE_LOOP + "        #pragma acc update self(A[0:n])\n", 1))
    env = bench.idrrun_env(IDRRUN_EXAMPLES=str(bench.EXAMPLES))
    out = logs / "feedback"
    graded = run([sys.executable, "-m", "idrrun.cli", "grade", "data_laplace", "ann.c", "bob.c",
                  "--feedback", str(out), "--visibility", "full"], env, klass)
    lines = [f"data_laplace graded (exit {graded.returncode}), feedback in {out}"]
    for name in ("ann", "bob"):
        page = out / f"{name}.md"
        text = page.read_text() if page.is_file() else ""
        verdict = re.search(r"Verdict: \*\*(\w+)\*\*", text)
        pictures = len(re.findall(r"!\[[^\]]*\]\(", text))
        lines.append(f"  {name}: {verdict.group(1) if verdict else 'no feedback'}, "
                     f"{pictures} pictures")
        at = text.find(HEADING)
        if at >= 0:
            lines += [f"    {line}" for line in text[at:].splitlines()[:25] if line.strip()]
        elif text:
            lines.append(f"    no comparison with the solution; its sections: "
                         f"{re.findall(r'^## (.+)$', text, re.M)}")
    return lines


def main() -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--wheel", type=Path, help="the wheel to install (default: dist/'s newest)")
    ap.add_argument("--host", action="store_true", help="run without a GPU: a check of the driver")
    ap.add_argument("--all", action="store_true",
                    help="every exercise's C solution in the students' copy, not only the three")
    ap.add_argument("--lines", action="store_true",
                    help="every check cell of the copy's notebooks with its own flags, C and Fortran")
    args = ap.parse_args()
    gpu = (bench.gpu_name() or "no GPU") if args.host else bench.require_gpu("students_gpu")
    work = Path(tempfile.mkdtemp(prefix="idrrun-students-"))
    # The feedback files stay: in run.sh's log folder when there is one, else in a folder of
    # their own that the report names.
    logs = Path(os.environ["OUT"]) / "logs" if "OUT" in os.environ else \
        Path(tempfile.mkdtemp(prefix="idrrun-students-feedback-"))
    logs.mkdir(parents=True, exist_ok=True)
    try:
        exercises = sorted(p.stem for p in bench.EXAMPLES.glob("*.toml")) if args.all else EXERCISES
        if args.lines:
            lines = [gpu, *lines_mode(wheel(args.wheel, work), work)]
        else:
            lines = [gpu, *students(wheel(args.wheel, work), work, exercises), *feedback(work, logs)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bench.report("a students' copy and a feedback on this machine", lines, record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
