"""Why a run is slow, as a teacher would say it: the cause, on the line of the directive or loop
responsible, with what shows it and what the fix would gain.

    of_run(source, build, acc, run, report, solution) -> tuple[Cause, ...]   (checking.py)
    diagnose(seen) -> tuple[Cause, ...]                                     (pure)

What is joined (`Seen`): the run's GPU trace (every kernel with its launch configuration, every
copy with its size and direction, the waits, the device allocations where the tracer recorded
them), the solution's run on the same GPU (its RunShape, when the check ran it), the compiler's
remarks on the student's lines (which loops it spread over gangs and vector lanes, the data it
moved implicitly), the compute constructs that ran and how often (the regions library), and the
source itself (program.py: loops, constructs, clauses, subscripts; C row-major, Fortran
column-major), joined by seen.py (each kernel placed on its construct's line).

The rules are in causes.py, one function each. A cause is named only where the source shows the
pattern (a directive, a loop order, an atomic update) and the trace, when there is one, shows
what it costs; its gain is a range of the run's GPU span, from the measurement: the copies
that would go, the kernel's time at the solution's launch configuration, the GPU's idle time
while the host works. Nothing here raises.
"""

from __future__ import annotations

import dataclasses

from ..model import AccReport, BuildResult, RunResult, Source
from .causes import MATTERS, RULES
from .model import Cause, ProfileReport, RunShape
from .seen import Seen, seen_of


def diagnose(seen: Seen) -> tuple[Cause, ...]:
    """The causes the rules find, the one that would gain most first (those whose gain is not
    measured last), one per rule and line."""
    found: dict[tuple[str, int], Cause] = {}
    for rule in RULES:
        for cause in rule(seen):
            found.setdefault((cause.rule, cause.line),
                             dataclasses.replace(cause, matters=MATTERS.get(cause.rule, "")))
    return tuple(sorted(found.values(), key=lambda c: (c.gain is None,
                                                        -(c.gain.mid_ns if c.gain else 0), c.line)))


def of_run(source: Source, build: BuildResult | None, acc: AccReport | None,
           run: RunResult | None, report: ProfileReport | None,
           solution: RunShape | None = None) -> tuple[Cause, ...]:
    """Why a checked run was slow, for the student: only a run on a GPU is diagnosed (a host
    run is not slow in the sense of the course: nothing was measured), also one stopped before
    its first kernel ended (an empty trace cut short: 200 million atomic updates of intro_pi
    past 120 s on the H200), from what its source and its build show."""
    trace = report.trace if report is not None else None
    if trace is None or (trace.empty and trace.complete) or build is None or not build.ok:
        return ()
    return diagnose(seen_of(source, trace, build, acc, run.regions if run is not None else None,
                            solution))


# The trace's hints (hints.py) a cause shows to be wrong: the copies at every iteration come
# from an update, or from the host's work on the GPU's data, in a program that has its data
# region; "open a data region" would send the student the wrong way.
CONTRADICTED: dict[str, tuple[str, ...]] = {
    "host_work": ("data_region", "copies_dominate"),
    "update_in_loop": ("data_region", "copies_dominate"),
    "alloc_in_loop": ("data_region",),
}


def explained(report: ProfileReport, causes: tuple[Cause, ...]) -> ProfileReport:
    """The run's profile with its causes, less the hints they contradict."""
    dropped = {rule for c in causes for rule in CONTRADICTED.get(c.rule, ())}
    return dataclasses.replace(report, causes=causes,
                               hints=tuple(h for h in report.hints if h.rule not in dropped))
