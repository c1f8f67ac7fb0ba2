"""docs/teaching.md's commands work: its `sh` blocks, run in order in an empty folder, take a
teacher from `idrrun course new` to the gradebook files."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT

DOC = ROOT / "docs" / "teaching.md"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.M | re.S)


def test_the_doc_has_commands_to_run() -> None:
    blocks = SH_BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 5
    text = "".join(blocks)
    for command in ("idrrun course new", "idrrun course check", "idrrun grade", "idrrun gradebook"):
        assert command in text, command


@pytest.mark.slow
def test_every_command_of_the_teaching_doc_works(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "idrrun"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m idrrun.cli "$@"\n')
    shim.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    script = "set -eu\n" + "\n".join(SH_BLOCK.findall(DOC.read_text()))
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    rows = {row["student"]: row for row in json.loads((work / "grades" / "loops_dot.json").read_text())}
    assert {s: (row["score"], row["points"]) for s, row in rows.items()} == {"ann": (14, 14), "bob": (0, 14)}
    assert "(arguments: " in (work / "feedback" / "loops_dot" / "bob.md").read_text()  # --visibility full
    with (work / "moodle.csv").open(newline="") as fh:
        moodle = list(csv.reader(fh))
    assert moodle == [["First name", "Last name", "ID number", "Email address", "loops_dot"],
                      ["Ann", "Martin", "20250001", "ann@uni.example", "14"],
                      ["Bob", "Durand", "20250002", "bob@uni.example", "0"],
                      ["Cy", "Li", "20250003", "cy@uni.example", ""]]
    assert "cy, loops_dot: no submission" in r.stdout
