"""What a student sees of a verdict: in a notebook's --check, and in a feedback file. Pure.

A check is `shown` (everything), `summary` (its name and result) or `hidden` (graded and
counted in the score, never shown), as its spec or its exercise says (examples/README.md,
"What students see"). A check on a hidden argument set never shows its arguments nor its values,
only its result and its kind, unless the grader asks for everything (`full`, after the
deadline). The instructor's report always has everything: nothing here is applied to it.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from typing import Literal

from ..model import CheckResult, Verdict
from . import words
from .spec_values import Visibility
from .specs import Exercise

# `idrrun grade --visibility`: the spec's own (default); at most a summary of every check
# (before the deadline); every check shown, but hidden cases' values; everything, hidden
# cases' arguments and values too (after the deadline).
Override = Literal["spec", "summary", "shown", "full"]
OVERRIDES: tuple[Override, ...] = ("spec", "summary", "shown", "full")
# What a student reads instead of a check's details.
SUMMARY_ONLY = "result only: the details of this check are not shown"
HIDDEN_CASE = "a check on a hidden case ({kind}): its arguments and values are not shown"
NOT_SHOWN = "{count} more check(s) were graded and are not shown here."
MORE_AT_GRADING = ("Grading runs more checks than these (hidden cases, checks not shown here): "
                   "a program that is right in general passes them.")


def level(result: CheckResult, exercise: Exercise, override: Override = "spec") -> Visibility:
    """What a student sees of this check, the grader's override applied."""
    spec = exercise.check_at(result.check)
    own: Visibility = exercise.shown(spec) if spec is not None else "shown"
    if override == "summary":
        return "hidden" if own == "hidden" else "summary"
    if override in ("shown", "full"):
        return "shown"
    return own


def comparison_seen(exercise: Exercise, override: Override = "spec") -> bool:
    """Whether a student sees their run beside the solution's (its figures, and with nvhpc the
    solution's data clauses): only where they may see every check in full."""
    if override in ("shown", "full"):
        return True
    return override == "spec" and all(exercise.shown(c) == "shown" for c in exercise.checks)


def seen(result: CheckResult, exercise: Exercise, override: Override = "spec",
         hidden_args: Sequence[Sequence[str]] = ()) -> CheckResult | None:
    """The check as a student sees it, or None when it is hidden from students. hidden_args:
    the row's hidden argument sets, named only with `full`."""
    shown = level(result, exercise, override)
    if shown == "hidden":
        return None
    if result.hidden and override == "full":
        args = hidden_args[result.hidden - 1] if result.hidden <= len(hidden_args) else ()
        return dataclasses.replace(result, name=f"{result.name} (arguments: {shlex.join(args)})")
    # What would say more than the result: the values, the output read, the line, the pattern.
    if result.hidden:
        return dataclasses.replace(result, expected="", got="", excerpt="", line=None, pattern="",
                                   reason=HIDDEN_CASE.format(kind=words.kind_label(result.kind)))
    if shown == "summary":
        return dataclasses.replace(result, expected="", got="", excerpt="", line=None, pattern="",
                                   reason=SUMMARY_ONLY)
    return result


def student_checks(verdict: Verdict, exercise: Exercise) -> tuple[CheckResult, ...]:
    """The verdict's checks its student may see, as the spec shows them."""
    return tuple(c for c in (seen(r, exercise) for r in verdict.checks) if c is not None)


def student_verdict(verdict: Verdict, exercise: Exercise) -> Verdict:
    """A notebook's verdict as its student sees it: summarised checks without their details,
    hidden ones left out (a notebook does not run them: Exercise.without_grading_only), and
    whether grading runs more than these."""
    kept = student_checks(verdict, exercise)
    return dataclasses.replace(verdict, checks=kept,
                               comparison=verdict.comparison if comparison_seen(exercise) else None,
                               more_at_grading=exercise.more_at_grading or
                               len(kept) < len(verdict.checks))
