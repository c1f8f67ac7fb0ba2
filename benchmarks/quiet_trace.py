"""Issue 34.1 on the GPU machine: every course cell, exactly as its notebook writes it, with the
exercise's solution, and what the checks' own (quiet) GPU trace costs.

    python3 benchmarks/quiet_trace.py cells [--lang C|Fortran] [--only NAME ...]
    python3 benchmarks/quiet_trace.py cost  [--rounds 5] [--only NAME ...]

- cells: each `%%idrrun ... --check NAME` line of notebooks/C and notebooks/Fortran, parsed as
  the magic parses it, run in this process on the exercise's solution (the teacher's course:
  examples/), with the verdict and the checks that did not pass. On a GPU every cell must end
  PASS with every check evaluated (none INCOMPLETE): the trace checks collect their trace
  themselves, without --profile. Exits 1 when one does not.
- cost: for each exercise whose checks read the trace (specs.TRACE_KINDS), the solution's
  request as the notebook's line resolves it (with its quiet trace: RunRequest.show_profile
  False) against the same request without a profile, through pipeline.execute (build cached,
  rounds interleaved, medians): the seconds the quiet trace adds to a student's cell, and the
  same with --profile shown (timeline and Perfetto export drawn) for comparison.
Both need a GPU (--host: a check of the driver without one, where nothing is traced).

What is known without a GPU (issue 34.1): the quiet trace is the built-in tracer as --profile runs
it, whose cost in the program is CUPTI's (3.7-13.7 % of the program's run over six measurements,
profile_cost.py in RESULTS.md); after the run it is read and summed up only: no timeline, no
Perfetto export, no rates or hints. collect() on the course's recorded traces (tests/data, 12 and
25 lines), 2 shared CPUs, medians of 6: drawn 197-231 ms, quiet 0.7-0.9 ms.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import bench

sys.path.insert(0, str(bench.ROOT))

from idrrun import pipeline, toolchains  # noqa: E402
from idrrun.checking import copy_data_files, run_with_options  # noqa: E402
from idrrun.checks import specs  # noqa: E402
from idrrun.display import TextReporter  # noqa: E402
from idrrun.request import config, options, resolve, source  # noqa: E402

NOTEBOOKS = bench.ROOT / "notebooks"
SUFFIX = {"C": ".c", "Fortran": ".f90"}
LINE = re.compile(r"^%%idrrun\b(.*--check\s+([a-z_]+).*)$")


def cells(lang: str) -> list[tuple[str, str, str]]:
    """(notebook, line, exercise) for each checked cell of the language's notebooks."""
    found = []
    for nb in sorted((NOTEBOOKS / lang).glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            first = "".join(cell.get("source", [])).split("\n", 1)[0]
            m = LINE.match(first) if cell.get("cell_type") == "code" else None
            if m:
                found.append((nb.name, m.group(1).strip(), m.group(2)))
    return found


def solution(exercise: str, lang: str) -> Path:
    return bench.EXAMPLES / lang / f"{exercise}_solution{SUFFIX[lang]}"


def check_cell(line: str, exercise: str, lang: str, work: Path) -> tuple[str, list[str], float]:
    """The verdict's first word, the checks that did not pass, and the cell's wall time."""
    opts = options.parse_line(line)
    assert opts is not None
    settings = config.load(work)
    probe = toolchains.probe(settings, opts.family)
    src = source.from_file(solution(exercise, lang), None, solution(exercise, lang).name)
    out = io.StringIO()
    start = time.perf_counter()
    outcome = run_with_options(opts, src, settings, work, probe, TextReporter(out, color=False))
    seconds = time.perf_counter() - start
    verdict = outcome.verdict
    if verdict is None:
        what = outcome.failure.what if outcome.failure is not None else "no verdict"
        return f"NO VERDICT ({what})", out.getvalue().strip().splitlines()[-8:], seconds
    word = "PASS" if verdict.passed else ("INCOMPLETE" if verdict.incomplete else "FAIL")
    left = [f"{c.name}: {c.status}: {c.reason}" for c in verdict.checks if c.status != "pass"]
    return word, left, seconds


def run_cells(langs: list[str], only: list[str]) -> tuple[list[str], bool]:
    lines, ok = [], True
    for lang in langs:
        for nb, line, exercise in cells(lang):
            if only and exercise not in only:
                continue
            work = Path(tempfile.mkdtemp(prefix="idrrun-cells-"))
            try:
                word, left, seconds = check_cell(line, exercise, lang, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            ok = ok and word == "PASS"
            lines.append(f"  {lang:7} {nb:26} %%idrrun {line:40} {word:10} {seconds:6.1f} s")
            lines += [f"      {x}" for x in left]
    return lines, ok


def cost(only: list[str], rounds: int) -> list[str]:
    lines = ["  exercise            lang     bare s   quiet s  (+%)     shown s  (+%)"]
    for lang in ("C", "Fortran"):
        seen: set[str] = set()  # one cell per exercise and language
        for nb, line, exercise in cells(lang):
            ex = specs.find(exercise, config.load(bench.ROOT), None)
            if (only and exercise not in only) or not ex.needs_trace or "--profile" in line \
                    or exercise in seen:
                continue
            seen.add(exercise)
            work = Path(tempfile.mkdtemp(prefix="idrrun-cost-"))
            try:
                opts = options.parse_line(line)
                assert opts is not None
                settings = config.load(work)
                probe = toolchains.probe(settings, opts.family)
                src = source.from_file(solution(exercise, lang), None, solution(exercise, lang).name)
                copy_data_files(ex, work)
                quiet, toolchain = resolve.resolve(opts, src, work, settings, probe, ex)
                variants = {"bare": dataclasses.replace(quiet, profile=None, show_profile=True),
                            "quiet": quiet,
                            "shown": dataclasses.replace(quiet, profile=quiet.profile or "builtin",
                                                         show_profile=True)}
                times: dict[str, list[float]] = {k: [] for k in variants}
                for _ in range(rounds + 1):  # the first round builds: not counted
                    for name, request in variants.items():
                        start = time.perf_counter()
                        pipeline.execute(pipeline.prepare(request, toolchain, probe, settings))
                        times[name].append(time.perf_counter() - start)
                med = {k: bench.median(v[1:]) for k, v in times.items()}
                pct = {k: 100 * (med[k] / med["bare"] - 1) for k in med}
                lines.append(f"  {exercise:19} {lang:7} {med['bare']:7.2f}  {med['quiet']:7.2f} "
                             f"({pct['quiet']:+4.1f} %)  {med['shown']:7.2f} ({pct['shown']:+4.1f} %)"
                             f"   traced: {quiet.profile}")
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return lines


def main() -> int:
    ap = bench.parser(__doc__, record=False)
    add = bench.subcommands(ap)
    for name, doc in (("cells", "Every course cell as its notebook writes it, on the solution."),
                      ("cost", "What the checks' quiet trace adds to a cell, against no trace.")):
        sub = add(name, doc)
        sub.add_argument("--only", action="append", default=[], help="this exercise only")
        sub.add_argument("--host", action="store_true",
                         help="run without a GPU: a check of the driver")
        if name == "cells":
            sub.add_argument("--lang", choices=("C", "Fortran"), action="append")
        else:
            sub.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    args = ap.parse_args()
    gpu = (bench.gpu_name() or "no GPU") if args.host else bench.require_gpu("quiet_trace")
    if args.command == "cells":
        lines, ok = run_cells(args.lang or ["C", "Fortran"], args.only)
        bench.report(f"every course cell as its notebook writes it, on the solution ({gpu})",
                     lines, record=args.record)
        return 0 if ok else 1
    bench.report(f"the checks' quiet trace: its cost ({gpu})", cost(args.only, args.rounds),
                 record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
