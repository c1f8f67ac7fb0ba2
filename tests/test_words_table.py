"""One word per verdict: the table (model.VERDICT_WORDS) is what the output, the exit codes'
help, and the course's notebooks say, each word with what it means."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from idrrun.commands.run import EXIT_HELP
from idrrun.display import VerdictView
from idrrun.model import VERDICT_MEANINGS, VERDICT_WORDS, CheckResult, Verdict

ROOT = Path(__file__).resolve().parent.parent


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("language", ["C", "Fortran"])
def test_the_course_says_what_each_verdict_word_means(language: str) -> None:
    nb = json.loads((ROOT / "notebooks" / language / "00_how_to_use.ipynb").read_text())
    text = _words(" ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"))
    readme = _words((ROOT / "notebooks" / "README.md").read_text())
    for status, word in VERDICT_WORDS.items():
        meaning = _words(VERDICT_MEANINGS[status])
        for where, said in (("00_how_to_use", text), ("README", readme)):
            assert f"**{word}**: {meaning}" in said, (where, word)
    for gone in ("not yet", "n/a", "PASS here", "`incomplete`"):
        assert gone not in text, gone


def test_the_output_and_the_exit_codes_use_the_table() -> None:
    checks = (CheckResult("a", "pass"), CheckResult("b", "fail"), CheckResult("c", "incomplete"))
    table = str(VerdictView(Verdict("demo", checks)))
    for c in checks:
        row = next(line for line in table.splitlines() if line.strip().startswith(c.name + " "))
        assert VERDICT_WORDS[c.status] in row.split(), row
    assert str(VerdictView(Verdict("demo", checks[:1]))).startswith("demo: PASS, ")
    assert str(VerdictView(Verdict("demo", checks))).startswith("demo: FAIL, ")
    assert str(VerdictView(Verdict("demo", (checks[0], checks[2])))).startswith("demo: INCOMPLETE, ")
    gpu = CheckResult("runs on the GPU", "incomplete", gpu_only=True)
    assert str(VerdictView(Verdict("demo", (checks[0], gpu)))).startswith(
        "demo: INCOMPLETE, every check this machine can evaluate passed; a GPU also evaluates: "
        "runs on the GPU\n")
    for word in VERDICT_WORDS.values():
        assert word in EXIT_HELP
