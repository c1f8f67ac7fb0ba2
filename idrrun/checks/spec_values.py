"""The values of a spec's checks, below everything that reads them: `CheckSpec`, one [[check]]
table as read, and `Visibility`, what a student sees of it. The kinds' records (registry.py)
name them; the spec's fields are read into them by spec_fields.py, assembled by specs.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# What a student sees of a check (its feedback, a notebook's --check): everything, its name and
# result only, or nothing (graded, counted in the score, never shown; not run in a notebook).
Visibility = Literal["shown", "summary", "hidden"]


@dataclass(frozen=True)
class CheckSpec:
    kind: str
    label: str
    pattern: str | None = None
    expected: float | None = None
    abs_tol: float = 0.0
    rel_tol: float = 1e-9
    regex: str | None = None
    exact: str | None = None
    minimum: int | None = None
    max_bytes: float | None = None
    # data_moved: a regex whose group 1 is the iteration count the program prints; max_bytes is
    # then a bound per iteration.
    per_iteration: str | None = None
    reason: str = ""
    # What the check looks for, in words a student reads ("a line 'rank 0 -> device N'"),
    # when its pattern is not a plain one (checks/words.py derives the words otherwise).
    expect: str = ""
    min_share: float | None = None  # gpu_busy: the least fraction of the run the GPU is busy
    # gpu_busy: the least share as a ratio to the solution's, measured the same way on the same
    # GPU (min_ratio); speed: the scale of its points, (all at or below, none at or above), as
    # ratios of the run's time to the solution's (checks/ratio.py).
    min_ratio: float | None = None
    scale: tuple[float, float] | None = None
    # speed: what is timed: "run" (the run's wall time) or "gpu" (its GPU work, from its first
    # GPU operation to its last: where the CUDA start and the host's set-up dwarf the work).
    measure: str = "run"
    # image: a picture the program writes, compared with the solution's (images.image_check)
    file: str | None = None
    min_psnr: float | None = None
    max_diff: float | None = None
    raw: tuple[int, int, str] | None = None  # width, height, dtype of a raw file
    # Evaluated by `idrrun grade` (and `idrrun course check`) only: a notebook's --check and the
    # students' copy of the course do not carry it (e.g. a check that would give the answer away).
    grading_only: bool = False
    # What passing it is worth in a grading's score: on the main run, and on each hidden run
    # (output kinds only; None: as on the main run). The verdict does not depend on them.
    points: float = 1.0
    hidden_points: float | None = None
    # The checks (their [[check]] indices) that must pass on the main run for this one's points
    # to count (spec: counts_when = [labels]): the values of a serial program are right, and
    # they are worth something only once the work runs where the exercise asks. The verdict
    # does not depend on them (checks/score.py).
    counts_when: tuple[int, ...] = ()
    # The checks whose each an equal part of this one's points waits for (spec:
    # counts_in_part = [labels]): the values of a half port count half (checks/score.py).
    counts_in_part: tuple[int, ...] = ()
    visibility: Visibility | None = None  # None: the exercise's
    index: int = -1  # its place among the spec's [[check]] tables (check[index])

    @property
    def points_hidden(self) -> float:
        """What passing it is worth on each hidden run."""
        return self.points if self.hidden_points is None else self.hidden_points
