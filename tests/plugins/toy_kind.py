"""A check kind added from outside idrrun (tests/test_kind_plugin.py): one record, registered
at run time; specs accept it, grading evaluates it on the main and hidden runs, words and
scores know it, with no change to idrrun."""

from __future__ import annotations

from typing import Any

from idrrun.checks import registry
from idrrun.checks.evidence import Evidence
from idrrun.checks.spec_fields import Table
from idrrun.checks.specs import CheckSpec
from idrrun.model import CheckResult


def _fields(t: Table) -> dict[str, Any]:
    least = t.number("min", 1)
    if least is None or least < 0:
        raise t.err("min", "a line_count check needs min, a number of lines ≥ 0")
    return {"minimum": int(least)}


def _evaluate(spec: CheckSpec, ev: Evidence) -> CheckResult:
    assert ev.run is not None
    lines = len(ev.run.proc.output.splitlines())
    want = spec.minimum or 0
    status = "pass" if lines >= want else "fail"
    return CheckResult(spec.label, status, f"≥ {want} lines", str(lines),
                       f"the program printed {lines} lines")


LINE_COUNT = registry.Kind("line_count", "output", "enough lines", "the program prints {min} lines",
                           _evaluate, fields=_fields, keys=frozenset({"min"}), needs_run=True,
                           hidden_runs=True)


def register() -> None:
    registry.register(LINE_COUNT)
