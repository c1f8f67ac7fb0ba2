"""A graded row's run beside the solution's, in the student's feedback: the table "you / the
solution" and the two GPU timelines, one above the other, as PNGs beside the feedback file.

    kept(comparison, settings) -> Comparison   the run's timeline copied out of its room first
    pictures(comparison, folder, stem) -> the PNGs' names beside the feedback file
    markdown(comparison, pictures, cell) -> [lines]
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from ..model import Comparison, Settings
from ..run import boundary, rooms

HEADING = "## Your run beside the solution's"
# The PNGs beside a student's feedback file STEM.md (feedback_names: never two stems alike, and
# no stem + one suffix is another stem + the other).
TIMELINE = "{stem}.timeline.png"
SOLUTION_TIMELINE = "{stem}.solution-timeline.png"
NOT_KEPT = ("(The timelines of a row kept from an earlier grading are not kept: grade it again "
            "with --fresh to see them.)")


def kept(comparison: Comparison | None, settings: Settings) -> Comparison | None:
    """The comparison with its run's timeline copied into the grader's scratch folder, out of
    the room that goes with the run (the grader drew it there itself); the feedback copies it
    on from there."""
    if comparison is None or comparison.timeline is None or not comparison.timeline.is_file():
        return comparison
    folder = boundary.own_dir(rooms.scratch_root(settings) / "timelines", 0o700)
    copy = folder / f"{secrets.token_hex(8)}.png"
    shutil.copyfile(comparison.timeline, copy)
    return dataclasses.replace(comparison, timeline=copy)


def pictures(comparison: Comparison, folder: Path, stem: str) -> tuple[str, str] | None:
    """Both timelines copied beside the feedback file STEM.md, and their names; None unless both
    are there to copy."""
    drawn = (comparison.timeline, comparison.solution_timeline)
    if not all(p is not None and p.is_file() for p in drawn):
        return None
    names = (TIMELINE.format(stem=stem), SOLUTION_TIMELINE.format(stem=stem))
    for source, name in zip(drawn, names):
        assert source is not None
        shutil.copyfile(source, folder / name)
    return names


def markdown(comparison: Comparison, drawn: tuple[str, str] | None,
             cell: Callable[[str], str]) -> list[str]:
    """The section of the feedback: the figures side by side (each cell made safe by `cell`),
    what they can say, the timelines."""
    lines = ["", HEADING, "", "The same arguments and compiler for both runs.", "",
             "| | you | the solution |", "|---|---|---|"]
    lines += [f"| {cell(f.label)} | {cell(f.yours)} | {cell(f.solution)} |"
              for f in comparison.figures]
    lines += [""] + list(comparison.notes)
    if drawn is not None:
        yours, solution = drawn
        lines += ["", "Your run's GPU timeline, then the solution's:", "",
                  f"[![your GPU timeline]({yours})]({yours})", "",
                  f"[![the solution's GPU timeline]({solution})]({solution})"]
    elif comparison.timeline is not None:
        lines += ["", NOT_KEPT]
    return lines
