"""A toy kind of run added from a test folder (tests/toys/size_rung.py) runs for real: one rung
inserted in pipeline.LADDER, a real gcc build and run through pipeline.execute, its note kept in
the Outcome, and its Outcome ending the request before the run when it says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from idrrun import pipeline
from toys import size_rung
from test_pipeline import run


def test_a_toy_rung_runs_in_the_ladder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "LADDER", size_rung.ladder_with_it())
    reporter, outcome = run(tmp_path, 'printf("hello\\n"); return 0;')
    assert outcome.ok and reporter.text == "hello\n"
    said = [n for n in outcome.notes if n.startswith("executable: ")]
    assert len(said) == 1 and int(said[0].split()[1]) > 1000, outcome.notes


def test_a_toy_rung_ends_the_request_before_the_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "LADDER", size_rung.ladder_with_it())
    monkeypatch.setattr(size_rung, "LIMIT", 100)
    reporter, outcome = run(tmp_path, 'printf("hello\\n"); return 0;')
    assert outcome.run is None and reporter.text == ""
    assert outcome.failure is not None and outcome.failure.what.startswith("executable of ")
