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


def test_a_long_value_wraps_inside_its_column() -> None:
    """The terminal table's columns stay put whatever a cell's length: a long value wraps in its
    column, whole, and the why column starts at the same place on every row."""
    long = "a line 'mean T = <number>' printed once at the very end of the run"
    checks = (CheckResult("mean", "fail", long, "not printed", "the program did not print it"),
              CheckResult("exit", "pass", "exit 0", "exit 0", "the program ended normally"))
    lines = str(VerdictView(Verdict("demo", checks))).splitlines()
    whys = [line.index(c.reason) for c in checks for line in lines if c.reason in line]
    assert len(set(whys)) == 1, lines
    header = lines[1]
    start, end = header.index("expected"), header.index("got")
    mean = [line for line in lines[2:] if not line.strip().startswith("exit")]
    assert len(mean) > 1  # wrapped
    shown = " ".join(line[start:end].strip() for line in mean)
    assert shown == long, (shown, lines)
    assert all(len(line[start:end].rstrip()) <= end - start for line in mean)


def test_a_list_cut_short_says_so() -> None:
    from idrrun.checks.evidence import Evidence
    from idrrun.checks.verdict import evaluate_one
    from idrrun.checks.specs import CheckSpec
    from idrrun.checks.words import listed
    from idrrun.model import BuildResult, ProcResult, RunResult

    assert listed(["1", "2", "3", "4"]) == "1, 2, 3, 4"
    assert listed(["1", "2", "3", "4", "5"]) == "1, 2, 3, 4, …"
    spec = CheckSpec("matches_solution", "values", pattern=r"v = (\d+)")
    run = RunResult(("p",), ProcResult(("p",), 0, output="".join(f"v = {i}\n" for i in range(6))))
    built = BuildResult(ok=True, command=("gcc",), proc=None, output="", cached=False, key="k",
                        build_dir=None)
    ev = Evidence("", "c", built, run, None, "".join(f"v = {i}\n" for i in range(7)))
    r = evaluate_one(spec, ev)
    assert (r.expected, r.got) == ("0, 1, 2, 3, …", "0, 1, 2, 3, …"), r
