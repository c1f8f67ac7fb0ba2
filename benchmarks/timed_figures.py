"""The figures of the course's timed checks on this GPU, measured as grading measures them: the
numbers the bounds in the specs are written from (issue 27; examples/profile_cg.toml's notes).

    python3 benchmarks/timed_figures.py [--runs 9] [--exercise NAME]... [--record]

For every exercise with a timed check (idrrun.checks.specs.TIMED_KINDS, e.g. gpu_busy), its
solution in each language is built once (GPU arguments, the build grading makes) and run --runs
times, each run in its GPU lane alone and on the lane's own CPUs, profiled as grading profiles
it. Printed per check: every run's figure, their median and spread, and what grading's own
measure (idrrun/checks/measure.py: repeated until the last 3 figures lie within ±10 % of their
median, 7 runs at most) makes of the same runs in their order, against the spec's bound. Write
the bound well below the lower of the solutions' medians, and the figures beside it.
Needs a GPU (a host has no trace to time); --host runs it without one, as a check of the driver
(every figure is then missing).
"""

from __future__ import annotations

import atexit
import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path

import bench

sys.path.insert(0, str(bench.ROOT))

from idrrun import checking, pipeline, toolchains  # noqa: E402
from idrrun.checks import measure, specs, trace_kinds  # noqa: E402
from idrrun.checks.measure import Figure  # noqa: E402
from idrrun.model import Lanes, Probe, Settings  # noqa: E402
from idrrun.request import config, resolve  # noqa: E402
from idrrun.request import source as source_mod  # noqa: E402
from idrrun.request.options import Options  # noqa: E402
from idrrun.run import lanes as lanes_mod  # noqa: E402


def main() -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--runs", type=int, default=9, help="runs of each solution (default 9)")
    ap.add_argument("--exercise", action="append", metavar="NAME",
                    help="only this exercise (repeat for several; default: every timed one)")
    ap.add_argument("--host", action="store_true",
                    help="run without a GPU: a check of the driver, no figures")
    args = ap.parse_args()
    gpu = bench.gpu_name() or "no GPU" if args.host else bench.require_gpu("timed_figures")
    work = Path(tempfile.mkdtemp(prefix="idrrun-timed-"))
    atexit.register(shutil.rmtree, work, True)
    settings = config.load(work, project=False)
    probe = toolchains.probe(settings)
    lanes, notes = lanes_mod.for_machine(len(probe.gpus), settings)
    for note in notes:
        print(note)
    chosen = [ex for ex in specs.all_exercises(bench.EXAMPLES)
              if ex.timed and (not args.exercise or ex.name in args.exercise)]
    if not chosen:
        sys.exit(f"timed_figures: no timed exercise among {args.exercise or 'the course'}")
    lines = [f"{gpu}; {args.runs} runs of each solution, GPU arguments, each alone in its lane "
             f"({probe.family}); grading's measure: {measure.REPEAT.describe()}, "
             f"{measure.REPEAT.most} runs at most"]
    for ex in chosen:
        for language, pair in ex.sources.items():
            assert pair.solution is not None
            lines += figures(ex, language, pair.solution, work, settings, probe, lanes, args.runs)
    bench.report("timed checks' figures, solutions alone", lines, record=args.record)
    return 0


def figures(ex: specs.Exercise, language: str, solution: Path, work: Path,
            settings: Settings, probe: Probe, lanes: Lanes | None, runs: int) -> list[str]:
    """One solution's timed figures over `runs` runs, as lines of the report."""
    folder = work / f"{ex.name}-{language}"
    folder.mkdir()
    checking.copy_data_files(ex, folder)
    src = source_mod.from_file(solution, language, solution.name)  # type: ignore[arg-type]
    options = Options(acc=ex.model == "openacc", openmp=ex.model == "openmp", profile="auto")
    request, toolchain = resolve.resolve(options, src, folder, settings, probe, ex)
    request = dataclasses.replace(request, lanes=lanes, timed=True)
    timed = [c for c in ex.checks if c.kind in specs.TIMED_KINDS]
    samples: dict[str, list[Figure]] = {c.label: [] for c in timed}
    problem = ""
    for _ in range(runs):
        outcome = pipeline.execute(pipeline.prepare(request, toolchain, probe, settings))
        if outcome.failure is not None:
            problem = f"a run failed: {outcome.failure.step} {outcome.failure.what}"
            break
        values = checking.gpu_trace_values(toolchain, outcome)
        for c in timed:
            found = trace_kinds.figure(c, values)
            if found is not None:
                samples[c.label].append(found)
        print(f"{ex.name} {language}: run {len(samples[timed[0].label])}: "
              f"{ {k: round(v[-1].value, 4) for k, v in samples.items() if v} }", flush=True)
    out = []
    for c in timed:
        got = samples[c.label]
        if not got:
            out.append(f"  {ex.name:14s} {language:8s} {c.label}: no figure ({problem or 'no trace'})")
            continue
        every = measure.Measured(tuple(f.value for f in got), exact=got[0].exact)
        replay = iter(got[1:])

        def again() -> dict[str, Figure] | str:
            following = next(replay, None)
            return {c.label: following} if following is not None else "fewer runs than asked"

        graded = trace_kinds.measured_result(c, measure.repeat({c.label: got[0]}, again)[c.label])
        shown = ", ".join(f"{100 * f.value:.1f}" for f in got)
        out.append(f"  {ex.name:14s} {language:8s} {c.label}: median {100 * every.median:.1f} % "
                   f"over {len(got)} runs ({100 * every.low:.1f}–{100 * every.high:.1f} %); "
                   f"runs: {shown}")
        out.append(f"  {'':14s} {'':8s} grading's measure: {graded.status} {graded.got} "
                   f"(bound {graded.expected})" + (f"; {problem}" if problem else ""))
    return out


if __name__ == "__main__":
    sys.exit(main())
