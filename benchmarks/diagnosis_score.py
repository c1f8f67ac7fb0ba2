"""The diagnosis scored on the slow ports (benchmarks/slowports/manifest.json): is the cause a
teacher names found, on the right line, is its gain within a factor of two of what the fix (the
exercise's solution) measures, and is no cause claimed for the published solutions?

    python3 benchmarks/diagnosis_score.py [--out DIR] [--only ID ...] [--budget SECONDS]
        [--solutions cases|all|none] [--timeout SECONDS] [--host] [--again] [--record]

On the GPU machine (source .gpu/activate.sh first), each case runs as
`idrrun run -a --profile builtin --check EXERCISE --timeout T [--cliopts ARGS] FILE` does (the
same API, in this process, its output as the student sees it in OUT/cases/ID/run.txt), then the
exercise's solution the same way, with the same arguments: the fixed run (its GPU span is what
the fix measures) and a published solution that must get no cause. `--solutions all` also runs
every other solution of the course with its GPU arguments.

What each run leaves in OUT/cases/ID/ (the recorded traces the trace-fed tests read,
tests/test_diagnose.py `recorded`): trace.jsonl (the built-in tracer's file, as written),
inputs.json (what the diagnosis read besides: the source's path in the repository, its name and
language, the compiler's remarks by line, the arrays moved implicitly, the constructs that ran
and how often, each kernel's line, the solution's run in figures, the GPU), causes.json (what
it found), run.txt. OUT/results.jsonl gets one line per run, appended (a later call skips what
is there unless --again, so that a budget spent in one device call goes on in the next);
OUT/summary.md the table and the totals, rewritten from all the lines each time.

Scoring: a case is named when a cause of its rule is found, placed when one is on one of its
lines; its gain is judged when the solution's run and the slow one both ended: the fix
measures (slow GPU span - solution's GPU span), less what both runs do alike but took longer
in one (`alike_ns`); the estimate passes when its range's geometric middle is within a factor
of two of that. Where the fix measures less than the noise (3 % of the solution's span, at
least 1 ms), the case costs little here, and the estimate passes when it said so too (its low
end within twice the noise).

What both runs do alike: the copies of one size and direction that both make (each of the
fixed run's paired with the slow run's nearest in time), and the host's waits for the same
kernel (how long after the kernel's end the wait returned). Their difference is not the fix's:
pageable copies take what the host's memory gives them that time (two runs of intro_saxpy's
solution on the H200: spans of 162 and 198 ms, 32 ms of it in the same four copies; the slow
port's init copies to pages never touched took 286 ms in one run, 140 ms in another), and the
wait for async_matmul's product returned 2.7 ms after the kernel's end in both sync ports in one
session, 15-20 µs after it in the next. What the fix removes (a copy, a wait) has no pair and
stays measured.

--host: a machine without a GPU. The runs fall back to the host; what the source, the compiler's
remarks and the regions that ran show is diagnosed (the causes that need no trace), no gain.
"""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import io
import json
import math
import os
import shutil
import signal
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402

from idrrun import toolchains  # noqa: E402
from idrrun import pipeline  # noqa: E402
from idrrun.checking import run_with_options, solution_output  # noqa: E402
from idrrun.checks import compare, specs  # noqa: E402
from idrrun.display import TextReporter  # noqa: E402
from idrrun.pipeline import Outcome  # noqa: E402
from idrrun.profile import diagnose, seen  # noqa: E402
from idrrun.profile.model import DTOH, HTOD, Cause, Kernel, RunShape, Trace  # noqa: E402
from idrrun.request import config, options, source  # noqa: E402

PORTS = bench.ROOT / "benchmarks" / "slowports"
NOISE_SHARE = 0.03
NOISE_NS = 1_000_000
EXTENSION = {"c": "c", "fortran": "f90"}
FOLDER = {"c": "C", "fortran": "Fortran"}


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    exercise: str
    language: str
    source: Path
    cause: str
    line: int
    lines: tuple[int, ...]
    args: tuple[str, ...] = ()
    solution: bool = False  # a published solution: no cause expected


def cases(manifest: Path) -> list[Case]:
    data = json.loads(manifest.read_text())
    return [Case(c["id"], c["exercise"], c["language"], manifest.parent / c["source"], c["cause"],
                 int(c["line"]), tuple(int(n) for n in c["lines"]), tuple(c.get("args", ())))
            for c in data["cases"]]


def solution_case(exercise: str, language: str, args: Sequence[str]) -> Case:
    name = f"solution_{language[0]}_{exercise}" + ("_" + "_".join(args) if args else "")
    return Case(name, exercise, language,
                bench.EXAMPLES / FOLDER[language] / f"{exercise}_solution.{EXTENSION[language]}",
                "", 0, (), tuple(args), solution=True)


# ---------------------------------------------------------------------------------------------
# One run


@dataclasses.dataclass
class Run:
    case: Case
    outcome: Outcome
    causes: tuple[Cause, ...]
    seconds: float
    span_ns: int
    complete: bool
    shape: RunShape | None


def _tokens(case: Case, host: bool, timeout: float) -> list[str]:
    tokens = ["-a", "--check", case.exercise, "--timeout", f"{timeout:g}"]
    if not host:
        tokens += ["--profiler", "builtin"]
    if case.args and not host:  # (the host runs the exercise's host arguments: small)
        tokens += ["--cliopts", " ".join(case.args)]
    return [*tokens, str(case.source)]


def run_case(case: Case, work: Path, host: bool, timeout: float) -> tuple[Run, str]:
    """The case as `idrrun run` checks it, in a folder of its own; (its run, what it printed)."""
    folder = work / case.id
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    parsed = options.parse_files(_tokens(case, host, timeout), prog="idrrun run")
    assert parsed is not None
    opts, _ = parsed
    settings = config.load(folder)
    probe = toolchains.probe(settings, opts.family)
    src = source.from_file(case.source, opts.language, case.source.name)
    printed = io.StringIO()
    reporter = TextReporter(printed, color=False, sanitize=True, live=False)
    started = time.monotonic()
    outcome = run_with_options(opts, src, settings, folder, probe, reporter)
    seconds = time.monotonic() - started
    profile = outcome.profile
    trace = profile.trace if profile is not None else None
    causes = profile.causes if profile is not None else ()
    if host and outcome.build is not None and outcome.build.ok:
        # No trace on the host: what the source, the remarks and the regions show, unmeasured.
        causes = diagnose.diagnose(_seen(outcome, None))
    span = trace.finish - trace.origin if trace is not None and not trace.empty else 0
    complete = outcome.failure is None or outcome.failure.step != "run"
    return Run(case, outcome, causes, seconds, span, complete and (trace is None or trace.complete),
               seen.run_shape(trace)), printed.getvalue()


def _solution_shape(outcome: Outcome, settings: Any, probe: Any) -> RunShape | None:
    """The solution's run the check compared with, as checking.py ran it (its cache: no run
    again); None where the check ran no solution (checking.execute_checked's solution_for)."""
    if outcome.toolchain is None or not outcome.request.check:
        return None
    exercise = specs.find(outcome.request.check, settings, outcome.request.workdir)
    if not (exercise.needs_solution or compare.wanted(exercise)):
        return None
    job = pipeline.prepare(outcome.request, outcome.toolchain, probe, settings,
                           pipeline.NullReporter())
    found = solution_output(job, exercise.without_grading_only())
    return found.figures.shape if found.figures is not None else None


def _seen(outcome: Outcome, shape: RunShape | None) -> seen.Seen:
    src = outcome.request.source
    acc = toolchains.family_of(outcome.toolchain).feedback(outcome.build) \
        if outcome.toolchain is not None and outcome.build is not None and outcome.build.ok else None
    trace = outcome.profile.trace if outcome.profile is not None else None
    return seen.seen_of(src, trace, outcome.build, acc,
                        outcome.run.regions if outcome.run is not None else None, shape)


def record(run: Run, printed: str, out: Path, settings: Any, probe: Any) -> None:
    """What the run leaves for trace-fed tests: its trace, what the diagnosis read, its causes."""
    folder = out / "cases" / run.case.id
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "run.txt").write_text(printed)
    profile = run.outcome.profile
    for f in (profile.trace.files if profile is not None and profile.trace is not None else ()):
        shutil.copyfile(f, folder / f.name)
    shape = _solution_shape(run.outcome, settings, probe)
    s = _seen(run.outcome, shape)
    try:
        where = str(run.case.source.resolve().relative_to(bench.ROOT))
    except ValueError:
        where = str(run.case.source)
    inputs = {
        "source": where, "name": run.outcome.request.source.name,
        "language": run.outcome.request.source.language,
        "first_line": run.outcome.request.source.first_line,
        "remarks": {str(line): list(texts) for line, texts in s.remarks.items()},
        "implicit": [dataclasses.asdict(i) for i in s.implicit],
        "counts": {str(line): n for line, n in s.counts.items()},
        "kernel_lines": dict(s.kernel_lines),
        "solution": shape.as_dict() if shape is not None else None,
        "gpu": dataclasses.asdict(s.device) if s.device is not None else None,
    }
    (folder / "inputs.json").write_text(json.dumps(inputs, indent=1) + "\n")
    (folder / "causes.json").write_text(json.dumps([dataclasses.asdict(c) for c in run.causes],
                                                   indent=1) + "\n")


# ---------------------------------------------------------------------------------------------
# Scoring


def _matching(case: Case, causes: Sequence[Cause]) -> tuple[Cause | None, Cause | None]:
    """(a cause of the case's rule, one of them on the case's lines)."""
    named = [c for c in causes if c.rule == case.cause]
    placed = [c for c in named if c.line in case.lines]
    return (named[0] if named else None), (placed[0] if placed else None)


def alike(trace: Trace | None) -> dict[str, dict[str, list[int]]]:
    """What another run of the same work would pair with (module docstring): the array copies'
    durations by direction and size, the waits' lateness by the kernel waited for."""
    if trace is None:
        return {"copies": {}, "waits": {}}
    copies: dict[str, list[int]] = {}
    for c in trace.copies:
        if c.direction in (HTOD, DTOH) and c.bytes >= seen.ARRAY_BYTES:
            copies.setdefault(f"{c.direction} {c.bytes}", []).append(c.ns)
    by_stream: dict[int, list[Kernel]] = {}
    for k in sorted(trace.kernels, key=lambda k: k.start):
        by_stream.setdefault(k.stream, []).append(k)
    every = sorted(trace.kernels, key=lambda k: k.start)
    waits: dict[str, list[int]] = {}
    for w in trace.syncs:
        ks = by_stream.get(w.stream, []) if w.stream >= 0 else every
        i = bisect.bisect_right([k.start for k in ks], w.end) - 1
        if i >= 0:
            waited = max(ks[: i + 1], key=lambda k: k.end)
            waits.setdefault(waited.name, []).append(max(0, w.end - max(waited.end, w.start)))
    return {"copies": copies, "waits": waits}


def alike_ns(slow: dict[str, dict[str, list[int]]], fixed: dict[str, dict[str, list[int]]]) -> int:
    """How much longer the slow run took over what both runs do alike: each of the fixed run's
    copies (waits) paired with the slow run's nearest of the same size and direction (kernel),
    the pairs' differences summed."""
    total = 0
    for kind in ("copies", "waits"):
        mine, theirs = slow.get(kind, {}), fixed.get(kind, {})
        for key in mine.keys() & theirs.keys():
            left = sorted(mine[key])
            for ns in sorted(theirs[key]):
                if not left:
                    break
                i = min(range(len(left)), key=lambda j: abs(left[j] - ns))
                total += left.pop(i) - ns
    return total


def gain_verdict(found: Sequence[Cause], span_ns: int, complete: bool, fixed_ns: int | None,
                 alike: int = 0) -> tuple[str, float | None]:
    """("within 2x", "off (3.1x)", "costs little, said so", ..., what the fix measures in ns).
    The estimate is the sum of the causes of the case's rule (one defect on two loop nests is
    two causes; the fix, the solution, mends both). `alike`: how much longer the slow run took
    over what both do alike (alike_ns)."""
    if not complete:
        return "slow run stopped", None
    if not fixed_ns or not span_ns:
        return "no fixed run", None
    measured = span_ns - fixed_ns - alike
    noise = max(NOISE_SHARE * fixed_ns, NOISE_NS)
    estimate = _estimate(found)
    if estimate is None:
        return ("costs little, unmeasured" if measured <= noise else "no estimate"), measured
    if measured <= noise:
        return ("costs little, said so" if estimate[0] <= 2 * noise
                else "costs little, said more"), measured
    ratio = math.sqrt(max(estimate[0], 1) * max(estimate[1], 1)) / measured
    return ("within 2x" if 0.5 <= ratio <= 2 else f"off ({ratio:.2f}x)"), measured


def _estimate(found: Sequence[Cause]) -> tuple[int, int] | None:
    gains = [c.gain for c in found if c.gain is not None]
    if not gains:
        return None
    return sum(g.low_ns for g in gains), sum(g.high_ns for g in gains)


def score(case: Case, slow: Run, fixed: dict[str, Any] | None) -> dict[str, Any]:
    """The case's row; `fixed`: the solution's row (its span, what it did alike)."""
    named, placed = _matching(case, slow.causes)
    same = [c for c in slow.causes if c.rule == case.cause]
    fixed_ns = fixed.get("span_ns") if fixed is not None else None
    paired = alike_ns(alike(_trace(slow)), fixed["alike"]) \
        if fixed is not None and fixed.get("alike") else 0
    verdict, measured = gain_verdict(same, slow.span_ns, slow.complete, fixed_ns, paired)
    estimate = _estimate(same)
    return {
        "id": case.id, "exercise": case.exercise, "language": case.language, "cause": case.cause,
        "line": case.line, "named": named is not None, "placed": placed is not None,
        "found": [[c.rule, c.line] for c in slow.causes],
        "gain": verdict, "measured_ns": measured, "alike_ns": paired,
        "estimate_ns": list(estimate) if estimate is not None else None,
        "span_ns": slow.span_ns, "solution_span_ns": fixed_ns,
        "slowdown": round(slow.span_ns / fixed_ns, 2) if fixed_ns else None,
        "seconds": round(slow.seconds, 2), "complete": slow.complete,
        "verdict": slow.outcome.verdict.status if slow.outcome.verdict else None,
        "failure": slow.outcome.failure.what if slow.outcome.failure else "",
    }


def _trace(run: Run) -> Trace | None:
    profile = run.outcome.profile
    return profile.trace if profile is not None else None


def solution_score(run: Run) -> dict[str, Any]:
    return {"id": run.case.id, "exercise": run.case.exercise, "language": run.case.language,
            "solution": True, "found": [[c.rule, c.line] for c in run.causes],
            "span_ns": run.span_ns, "seconds": round(run.seconds, 2),
            "verdict": run.outcome.verdict.status if run.outcome.verdict else None,
            "alike": alike(_trace(run))}


def _ms(ns: float | None) -> str:
    return "" if ns is None else f"{ns / 1e6:.1f}"


def summary(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The table and the totals, from every line of results.jsonl."""
    ports = [r for r in rows if not r.get("solution")]
    solutions = [r for r in rows if r.get("solution")]
    lines = ["| case | cause | line | named | placed | found | slowdown | fix measures (ms) | "
             "alike, slower (ms) | estimate (ms) | gain |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in ports:
        estimate = "–".join(_ms(x) for x in r["estimate_ns"]) if r["estimate_ns"] else ""
        found = ", ".join(f"{rule}@{line}" for rule, line in r["found"]) or "none"
        lines.append(f"| {r['id']} | {r['cause']} | {r['line']} | {'yes' if r['named'] else 'no'} | "
                     f"{'yes' if r['placed'] else 'no'} | {found} | {r['slowdown'] or ''} | "
                     f"{_ms(r['measured_ns'])} | {_ms(r.get('alike_ns'))} | {estimate} | "
                     f"{r['gain']} |")
    judged = [r for r in ports if r["gain"] not in ("no fixed run", "slow run stopped")]
    good = [r for r in judged if r["gain"] in ("within 2x", "costs little, said so",
                                               "costs little, unmeasured")]
    clean = [r for r in solutions if not r["found"]]
    n = len(ports)
    lines += ["", f"named {sum(r['named'] for r in ports)}/{n}, placed on the right line "
              f"{sum(r['placed'] for r in ports)}/{n}"
              + (f" ({100 * sum(r['placed'] for r in ports) / n:.0f} %)" if n else "")
              + f"; gain within 2x of the fix {len(good)}/{len(judged)} judged; published "
              f"solutions without a cause {len(clean)}/{len(solutions)}"]
    lines += [f"  solution {r['id']}: {', '.join(f'{a}@{b}' for a, b in r['found'])}"
              for r in solutions if r["found"]]
    return lines


# ---------------------------------------------------------------------------------------------


def _done(results: Path) -> dict[str, dict[str, Any]]:
    if not results.is_file():
        return {}
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return {r["id"]: r for r in rows}


def main(argv: Sequence[str] | None = None) -> int:
    p = bench.parser(__doc__)
    p.add_argument("--manifest", type=Path, default=PORTS / "manifest.json")
    p.add_argument("--out", type=Path, default=None, help="default: $OUT/diagnosis, else /tmp/...")
    p.add_argument("--only", nargs="+", default=None, metavar="ID",
                   help="these cases only (shell patterns: 'c_*')")
    p.add_argument("--budget", type=float, default=0.0, help="stop starting cases after it")
    p.add_argument("--solutions", choices=("cases", "all", "none"), default="cases")
    p.add_argument("--timeout", type=float, default=120.0, help="each run's limit (seconds)")
    p.add_argument("--host", action="store_true", help="no GPU: the static diagnosis only")
    p.add_argument("--again", action="store_true", help="run what results.jsonl already has")
    p.add_argument("--pack", action="store_true",
                   help="end with OUT/diagnosis packed as OUT/diagnosis.tgz.part-* (15 MiB each), "
                        "results.jsonl and summary.md beside: what a device call brings back")
    p.add_argument("--summarize", nargs="+", type=Path, metavar="RESULTS",
                   help="no run: the summary of these results.jsonl files together")
    args = p.parse_args(argv)
    if args.summarize:
        together = [r for f in args.summarize for r in _done(f).values()]
        merged = list({r["id"]: r for r in together}.values())
        bench.report(f"the diagnosis on {sum(not r.get('solution') for r in merged)} slow ports",
                     summary(merged), record=args.record)
        return 0
    if not args.host:
        bench.require_gpu("diagnosis_score.py")
    # A cache of its own: a solution's figures cached by another version of idrrun (without its
    # run's shape) would take the comparison away from the diagnosis.
    os.environ["IDRRUN_CACHE_DIR"] = tempfile.mkdtemp(prefix="idrrun-diagnosis-cache-")
    top = args.out or Path(os.environ.get("OUT") or "/tmp/idrrun-diagnosis")
    out = top / "diagnosis"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="idrrun-diagnosis-work-"))  # builds, outputs: not kept
    results = out / "results.jsonl"
    done = {} if args.again else _done(results)
    todo = [c for c in cases(args.manifest)
            if args.only is None or any(fnmatch.fnmatch(c.id, pattern) for pattern in args.only)]
    if args.solutions == "all":
        todo += [solution_case(e.name, language, ()) for e in sorted(
            specs.all_exercises(bench.EXAMPLES), key=lambda e: e.name) for language in e.sources]
    started = time.monotonic()
    fixed_runs: dict[str, dict[str, Any] | None] = {r["id"]: r for r in done.values()
                                                    if r.get("solution")}

    def run(case: Case) -> Run | None:
        print(f"== {case.id}", file=sys.stderr, flush=True)
        try:
            found, printed = run_case(case, work, args.host, args.timeout)
            settings = config.load(work / case.id)
            record(found, printed, out, settings, toolchains.probe(settings, None))
        except Exception as exc:  # noqa: BLE001  (a case that breaks the scorer is said, and skipped)
            print(f"{case.id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        return found

    def fixed(case: Case) -> dict[str, Any] | None:
        """The row of the exercise's solution with the case's arguments (its GPU span, what it
        did alike): run once for all its cases (and kept in results.jsonl for the next call)."""
        sol = solution_case(case.exercise, case.language, case.args)
        if sol.id not in fixed_runs:
            found = run(sol)
            row = solution_score(found) if found is not None else None
            fixed_runs[sol.id] = row
            if row is not None:
                _append(results, row)
        return fixed_runs[sol.id]

    # Stopped by run.sh's timeout (SIGTERM): what was measured is still summed up and packed.
    signal.signal(signal.SIGTERM, _stopped)
    try:
        for case in todo:
            if case.id in done:
                continue
            if _STOP[0]:
                break
            if args.budget and time.monotonic() - started > args.budget:
                print(f"budget spent: {case.id} and after not run (run again to go on)", file=sys.stderr)
                break
            slow = run(case)
            if slow is None:
                continue
            if case.solution:
                row = solution_score(slow)
                fixed_runs[case.id] = row
                _append(results, row)
                continue
            _append(results, score(case, slow, None if args.solutions == "none" else fixed(case)))
    except KeyboardInterrupt:
        print("stopped: the cases run so far are summed up", file=sys.stderr)
    kept = list(_done(results).values())
    (out / "summary.md").write_text("\n".join(summary(kept)) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    if args.pack:
        pack(top, out)
    bench.report(f"the diagnosis on {sum(not r.get('solution') for r in kept)} slow ports"
                 f"{' (host: no trace)' if args.host else ''}", summary(kept), record=args.record)
    return 0


def pack(top: Path, out: Path) -> None:
    """OUT/diagnosis as OUT/diagnosis.tgz.part-aa, -ab... (15 MiB each: a device call brings back
    8 files of 16 MiB at most), its results.jsonl and summary.md beside; the folder removed.
    Unpack with `cat diagnosis.tgz.part-* | tar -xz`."""
    for name in ("results.jsonl", "summary.md"):
        if (out / name).is_file():  # (none when no case ran)
            shutil.copyfile(out / name, top / name)
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        tar.add(out, arcname=out.name)
    data = packed.getvalue()
    part = 15 << 20
    for i in range(0, len(data), part):
        suffix = chr(ord("a") + i // part // 26) + chr(ord("a") + i // part % 26)
        (top / f"diagnosis.tgz.part-{suffix}").write_bytes(data[i:i + part])
    shutil.rmtree(out)


_STOP = [False]  # set by SIGTERM: no case starts after it (a run it cut short may return)


def _stopped(signum: int, frame: object) -> None:
    _STOP[0] = True
    raise KeyboardInterrupt


def _append(results: Path, row: dict[str, Any]) -> None:
    with results.open("a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main())
