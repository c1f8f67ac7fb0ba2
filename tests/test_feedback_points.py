"""A student's feedback says where her points went: the points beside each check, why a passed
check's points do not count yet (what they wait for, in her terms), and her name on the
exercise's times board. Graded for real (gcc, the course's intro_saxpy start file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import PYTHONPATH, ROOT
from idrrun.grading import feedback as feedback_mod, rows as rows_mod
from idrrun.checks import specs
from idrrun.request import config


def test_the_start_files_feedback_gives_each_checks_points_and_what_they_wait_for(tmp_path: Path) -> None:
    start = tmp_path / "ann.c"
    start.write_bytes((ROOT / "examples" / "C" / "intro_saxpy_exercise.c").read_bytes())
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "intro_saxpy", str(start),
                        "--feedback", str(tmp_path / "fb"), "--unsafe"], cwd=tmp_path, text=True,
                       capture_output=True, timeout=300,
                       env={"PYTHONPATH": PYTHONPATH, "PATH": "/usr/bin:/bin",
                            "HOME": str(tmp_path), "IDRRUN_EXAMPLES": str(ROOT / "examples")})
    text = (tmp_path / "fb" / "ann.md").read_text()
    assert "| check | points | result | expected | got | why |" in text, r.stdout + r.stderr + text
    assert feedback_mod.WAITING in text, text
    waiting = text.split(feedback_mod.WAITING, 1)[1].split("\n\n", 2)[1]
    assert " count once " in waiting or " counts once " in waiting, waiting


def test_her_pseudonym_is_in_her_feedback_alone(tmp_path: Path) -> None:
    ex = specs.find("intro_saxpy", config.load(project=False), None)
    rows = [rows_mod.GradeRow(s, ex.name, "c", "fail", 0.1, 0.1, f"/class/{s}.c") for s in ("ann", "ben")]
    feedback_mod.write_feedback(rows, ex, tmp_path, "spec", {"ann": "brisk koala 8d4", "ben": "calm otter 1f2"})
    ann, ben = (tmp_path / "ann.md").read_text(), (tmp_path / "ben.md").read_text()
    assert "On the class's times board: **brisk koala 8d4**" in ann and "calm otter" not in ann
    assert "calm otter 1f2" in ben and "brisk koala" not in ben
