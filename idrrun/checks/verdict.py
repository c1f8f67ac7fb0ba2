"""The verdict: an exercise's checks evaluated on what a run produced. Pure: no processes.

Every check yields pass, fail or incomplete (it could not be evaluated: no GPU trace, no
compiler report, the solution did not run...), with expected vs got and a one-line reason. An
incomplete check is never a pass: the verdict is then incomplete, shown and counted apart.
Each kind judges its checks (output_kinds.py, program_kinds.py, trace_kinds.py, or a kind of
one's own: checks/registry.py); here is what no kind decides alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..model import CheckResult, ProcResult, RegionsRan, Verdict
from . import registry
from .evidence import Evidence, how_it_ended
from .specs import BUILD_ROW, Exercise
from .spec_values import CheckSpec
from .trace_kinds import judge_trace


OPENACC_BUILD = "OpenACC build"
# What INCOMPLETE says where the run was built for the host and every other check passed
# (Verdict.passed_here): the verdict, the course check and the grade report say it alike.
PASSED_HERE = "every check this machine can evaluate passed; a GPU also evaluates: {checks}"
GPU_ONLY = "needs a GPU: this run was built for the host"


def passed_here(gpu_checks: Sequence[CheckResult]) -> str:
    return PASSED_HERE.format(checks=", ".join(dict.fromkeys(c.name for c in gpu_checks)))


# Why a GPU-trace check on a GPU build has no trace: the checks collect theirs on a GPU
# (request/resolve.py's checks_trace), so either no GPU was found or the tracer says why.
NO_TRACE = "needs a GPU trace: {why}"
NO_GPU_HERE = "no GPU was found on this machine (nvidia-smi lists none)"


# Why a GPU-trace check does not judge a run that did not end normally.
CUT_SHORT = ("not judged: the run did not end normally ({how}), and the GPU trace of a run that "
             "stops early can miss work still in flight on the GPU; judged once it ends normally")


def evaluate_one(spec: CheckSpec, ev: Evidence) -> CheckResult:
    kind = registry.get(spec.kind)
    assert kind is not None, spec.kind  # specs accept registered kinds only
    if ev.run is not None and ev.run.proc.start_error is not None and \
            (kind.needs_run or kind.needs_trace):
        # The program never ran (its launcher, a profiler or the box failed): nothing of the
        # student's to judge in what a run shows.
        return CheckResult(spec.label, "incomplete", "", "not run",
                           f"not judged: {how_it_ended(ev.run.proc)}, so it did not run")
    if kind.needs_trace:
        return _judged_on_trace(spec, kind, ev)
    if ev.build is None or not ev.build.ok:
        if kind.judged_unbuilt:
            assert kind.evaluate is not None
            return kind.evaluate(spec, ev)
        return CheckResult(spec.label, "fail", "", "not built",
                           "the program did not build (see the compiler's messages)")
    if kind.needs_run and ev.run is None:
        return CheckResult(spec.label, "incomplete", "", "", "the program was not run (-n)")
    assert kind.evaluate is not None
    result = kind.evaluate(spec, ev)
    if result.status == "incomplete" and kind.reads_regions:
        return _regions_so_far(spec, kind, ev) or result
    return result


def _stopped_at_limit(ev: Evidence) -> ProcResult | None:
    """The run's process where its time limit stopped it (not a crash, not the student's
    interrupt): what it did until then stands; None otherwise."""
    proc = ev.run.proc if ev.run is not None else None
    return proc if proc is not None and proc.timed_out and not proc.interrupted else None


# A region check judged on the constructs a run stopped at its time limit saw start.
REGIONS_SO_FAR = "judged on the compute regions seen until the run was stopped at {seconds} s: "


def _regions_so_far(spec: CheckSpec, kind: registry.Kind, ev: Evidence) -> CheckResult | None:
    """A run stopped at its time limit (not a crash, not the student's interrupt) did run
    every construct its record saw start (regions.c writes each as it first starts): a check
    that those already pass stands, said so; None otherwise (what ran later is not known)."""
    ran, proc = ev.regions, _stopped_at_limit(ev)
    if proc is None or ran is None or ran.state != "unfinished" or not ran.constructs:
        return None
    assert kind.evaluate is not None
    seen = kind.evaluate(spec, replace(ev, regions=RegionsRan("counted", ran.constructs)))
    if seen.status != "pass":
        return None
    return replace(seen, reason=REGIONS_SO_FAR.format(seconds=f"{proc.seconds:.1f}") + seen.reason)


def _judged_on_trace(spec: CheckSpec, kind: registry.Kind, ev: Evidence) -> CheckResult:
    """A trace kind's check: not judged without a trace (a host build, no GPU), nor on the
    trace of a run cut short but for what its trace so far decides."""
    if ev.trace_values is None and ev.target not in (None, "gpu"):
        # Built for the host: only a GPU can say; the verdict names it (PASSED_HERE).
        return CheckResult(spec.label, "incomplete", "", "", GPU_ONLY, gpu_only=True)
    if ev.trace_values is None:
        return CheckResult(spec.label, "incomplete", "", "",
                           NO_TRACE.format(why=ev.trace_problem or NO_GPU_HERE))
    if ev.run is not None and not ev.run.proc.ok:
        # A program that dies with kernels queued (libgomp's fatal errors exit at once)
        # leaves a trace with or without them, as the GPU's timing has it: the same program
        # gave 0 kernels graded at -j 1 and 3 at -j 8 (an H100). Its verdict already fails
        # on how it ended; these checks wait for a run that ends, but for what the trace of
        # a run stopped at its time limit already decides.
        return _so_far(spec, kind, ev.trace_values, ev) or CheckResult(
            spec.label, "incomplete", "", "", CUT_SHORT.format(how=ev.run.proc.describe()))
    return judge_trace(spec, ev.trace_values, ev)


# A check judged on the trace of a run stopped at its time limit: what it says first.
SO_FAR = "judged on the GPU trace until the run was stopped at {seconds} s: "


def _so_far(spec: CheckSpec, kind: registry.Kind, values: Mapping[str, float],
            ev: Evidence) -> CheckResult | None:
    """What the trace so far of a run stopped at its time limit (not a crash, not the
    student's interrupt) decides for this check: the tracer writes its records as they come,
    so the trace of a stopped run holds at least what the run did until then, and a result
    that this much already decides stands (the kind's `so_far`); None otherwise."""
    proc = _stopped_at_limit(ev)
    if proc is None or kind.so_far is None:
        return None
    decided = kind.so_far(spec, values, ev)
    if decided is None:
        return None
    return replace(decided, reason=SO_FAR.format(seconds=f"{proc.seconds:.1f}") + decided.reason)


# The verdict of a program that did not build: one row, the compiler's first error and the end
# of what it said; no check judges it (a source check would still match the text: a program
# that does not build earns nothing).
NOT_BUILT = "builds"
NOT_BUILT_LINES = 12


def _not_built(ev: Evidence) -> CheckResult:
    assert ev.build is not None
    said = [line for line in ev.build.output.splitlines() if line.strip()]
    first = next((line.strip() for line in said if "error" in line.lower()),
                 said[0].strip() if said else "")
    reason = "the program did not build" + (f": {first}" if first else
                                            " (the compiler said nothing)")
    if ev.build.refused:
        reason = f"the program did not build: {ev.build.refused}"
    return CheckResult(NOT_BUILT, "fail", "the program builds", "not built", reason,
                       kind=BUILD_ROW, excerpt="\n".join(said[:NOT_BUILT_LINES]))


def evaluate(exercise: Exercise, ev: Evidence) -> Verdict:
    if ev.build is not None and not ev.build.ok:
        return Verdict(exercise=exercise.name, checks=(_not_built(ev),))
    checks = [replace(evaluate_one(spec, ev), check=spec.index) for spec in exercise.checks]
    if not ev.acc_requested and exercise.model == "openacc":
        # Without -a the directives are comments: what the checks say is not about OpenACC.
        checks.insert(0, CheckResult(OPENACC_BUILD, "incomplete", "built with -a", "built without -a",
                                     "add -a to the line: the exercise checks the OpenACC version"))
    return Verdict(exercise=exercise.name, checks=tuple(checks))


def evaluate_hidden(exercise: Exercise, ev: Evidence, index: int) -> tuple[CheckResult, ...]:
    """The output checks again, on a run with the index-th hidden argument set (grading)."""
    return tuple(replace(evaluate_one(spec, ev), name=f"{spec.label} (hidden run {index + 1})",
                         hidden=index + 1, kind=spec.kind, check=spec.index)
                 for spec in exercise.checks if _hidden_runs(spec))


def _hidden_runs(spec: CheckSpec) -> bool:
    kind = registry.get(spec.kind)
    return kind is not None and kind.hidden_runs

