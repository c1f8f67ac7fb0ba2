"""A toy kind of run, as docs/architecture.md's "Add a kind of run" says one is added: one rung
in pipeline.LADDER, after the compile: it ends the request before the program runs when its
executable is larger than the Job's limit (a course that keeps programs small, say), and
otherwise says the executable's size in a note."""

from __future__ import annotations

import dataclasses

from idrrun import pipeline
from idrrun.model import Failure, FailureKind

LIMIT = 1 << 30  # what the toy allows; a test lowers it


def sized(job: pipeline.Job, run: pipeline.Run) -> pipeline.Run | pipeline.Outcome:
    built = run.built
    if built is None or built.executable is None:
        return run
    size = built.executable.stat().st_size
    if size > LIMIT:
        failure = Failure(kind=FailureKind.LIMIT, what=f"executable of {size} bytes",
                          hint=f"the toy rung allows {LIMIT} bytes")
        return pipeline.Outcome(job.request, job.toolchain, built, None, failure)
    return dataclasses.replace(run, notes=(*run.notes, f"executable: {size} bytes"))


def ladder_with_it() -> tuple[pipeline.Rung | pipeline.Holding, ...]:
    at = [r.name for r in pipeline.LADDER].index("object file") + 1
    return (*pipeline.LADDER[:at], pipeline.Rung("size", sized), *pipeline.LADDER[at:])
