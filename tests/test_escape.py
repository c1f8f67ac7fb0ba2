"""Students' words are data (idrrun/escape.py): a file or folder name, a program's output and a
line of source land in the teacher's terminal, the feedback's and the similarity report's
Markdown and the CSV report as text, never as HTML, a link, a formula or a line of their own.

The Markdown is read by markdown-it (CommonMark, tables, raw HTML allowed) with its own link
check turned off: a `javascript:` link written by us would come out as one, so the tests see
what a permissive renderer (a wiki, an LMS, a teacher's editor) would make of the files."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from conftest import PYTHONPATH, ROOT
from idrrun import escape
from idrrun.grading import names
from idrrun.grading import gradebook
from idrrun.run import isolation

DATA = ROOT / "tests" / "data" / "integrity"
EXAMPLES = ROOT / "examples"
SOLUTION = (DATA / "C" / "secret_sum_solution.c").read_text()

IMG = "<img src=x onerror=alert(1)>"
LINK = "[click](javascript:alert(1))"
SPOOF = "eve: pass\n\rmallory"  # a file name: "eve: pass", a line feed, a carriage return
HOSTILE = [IMG, LINK, SPOOF, "=1+2 <b>x", "a_b *c* `d` | e ~~f~~ $g$ # h", "\x1b]0;owned\x07x",
           "\u202eevil", "-j", "1. item", "&lt;img src=y&gt;", "[x]: javascript:y", "a [b][c]",
           "![i](javascript:y)", "<javascript:alert(1)>", "C[0]", "- x", "---", "1) x", "1234.5"]


def permissive() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable("table")
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


def rendered(markdown: str) -> str:
    return permissive().render(markdown)


def assert_inert_html(html: str) -> None:
    assert "<img" not in html and "<b>" not in html, html
    assert not re.search(r"href=\"\s*javascript", html), html
    assert "<del>" not in html and "<s>" not in html


def visible_text(markdown: str) -> str:
    """The text a reader sees of one inline Markdown line."""
    [_, inline, _] = permissive().parse(markdown)
    assert inline.children is not None
    kinds = {c.type for c in inline.children}
    assert kinds <= {"text", "text_special"}, kinds  # no link, image, HTML, code, emphasis
    return "".join(c.content for c in inline.children)


@pytest.mark.parametrize("word", HOSTILE)
def test_markdown_text_shows_the_words_as_they_are_and_nothing_else(word: str) -> None:
    assert visible_text(escape.markdown_text(word)) == escape.terminal_line(word)
    html = rendered(f"| a | b |\n|---|---|\n| {escape.markdown_text(word)} | after |\n")
    assert_inert_html(html)
    assert html.count("<td>") == 2, html  # the cell ended where ours does
    assert "after" in html


def test_terminal_line_keeps_one_line_and_code_blocks_are_never_closed() -> None:
    assert escape.terminal_line(SPOOF) == "eve: pass\\x0a\\x0dmallory"
    assert escape.terminal_line("\udcff\u202e") == "\\xff\\u202e"  # a byte not UTF-8, a bidi control
    assert escape.terminal("a\n\tb\x1b[2J") == "a\n\tb\\x1b[2J"
    block = escape.fenced("x\r```\n```` \ny", "c")
    html = rendered(block + "\n\n" + escape.markdown_text(IMG))
    assert html.count("<pre>") == 1 and "&lt;img" in html and "\\x0d" in html, html
    [_, inline, _] = permissive().parse(escape.markdown_code("a `b` " + LINK))
    assert inline.children is not None
    assert [(c.type, c.content) for c in inline.children] == [("code_inline", "a `b` " + LINK)]


def test_html_text_and_csv_cells() -> None:
    assert escape.html_text(IMG + '"\'') == "&lt;img src=x onerror=alert(1)&gt;&quot;&#x27;"
    for value in ["=1+2", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\r=1", " =1+2", "'=1", "'x", "x"]:
        cell = escape.csv_cell(value)
        assert isinstance(cell, str) and not cell.lstrip(" ").startswith(escape.FORMULA_START)
        assert escape.csv_uncell(cell) == value
    assert escape.csv_cell("-2.5") == "-2.5" and escape.csv_cell(3) == 3
    # The gradebook's spreadsheet for the teacher: a submission named like a formula.
    book = gradebook.gradebook([gradebook.Student("=1+2", line=2)],
                               [gradebook.Marked("=1+2", "x", "pass", 3.0, 3.0, 0.0, "r.csv")],
                               gradebook.Policy())
    cells = [row for row in csv.reader(io.StringIO(gradebook.plain_csv(book)))][1]
    assert cells[0] == "'=1+2" and cells[4:6] == ["3", "3"], cells
    # A Markdown table's cell is pasted into spreadsheets too: no formula, one quote only.
    assert escape.markdown_cell("=1+2\n<b>") == "'=1+2\\\\x0a&lt;b&gt;"
    assert escape.markdown_cell("'dot = 42'") == "'dot = 42'"


# --- the real commands, on a class with hostile names and outputs ---------------------------

needs_sandbox = pytest.mark.skipif(isolation.sandbox_support().level == "none",
                                   reason="no sandbox on this machine: idrrun grade refuses")


def idrrun(*args: str, cwd: Path, examples: Path = DATA) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples))
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def hostile_class(tmp_path: Path, solution: str = SOLUTION, exercise: str = "secret_sum",
                  printed: str = 'printf("sum = %.12e\\n", sum);') -> list[str]:
    """A folder named IMG whose program prints LINK as its result; a file named SPOOF that
    fails (a wrong result); a folder named like a formula with HTML; an honest classmate."""
    klass = tmp_path / "class"
    klass.mkdir()
    name = printed.split('"')[1].split(" ")[0]
    printing = solution.replace(printed, f'printf("{name} = {LINK}\\n");')
    assert printing != solution
    (klass / IMG).mkdir()
    (klass / IMG / f"{exercise}.c").write_text(printing)
    (klass / f"{SPOOF}.c").write_text(solution.replace(" += ", " -= "))
    (klass / "=1+2 <b>x").mkdir()
    (klass / "=1+2 <b>x" / f"{exercise}.c").write_text(solution.replace("1.0", "2.0"))
    (klass / "honest.c").write_text(solution)
    return [str(p) for p in sorted(klass.iterdir())]


@needs_sandbox
def test_hostile_names_and_outputs_through_grade_are_text_everywhere(tmp_path: Path) -> None:
    subs = hostile_class(tmp_path)
    report, feedback = tmp_path / "r.csv", tmp_path / "fb"
    r = idrrun("grade", "secret_sum", "--report", str(report), "--feedback", str(feedback), "--",
               *subs, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    # The piped progress and the summary: one line per row, the spoof's controls shown.
    assert "eve: pass\\x0a\\x0dmallory: fail" in r.stdout, r.stdout
    assert not any(re.match(r"\s*(│\s*)?eve: pass\s*(│|$)", line) for line in r.stdout.splitlines()), \
        r.stdout
    assert "\r" not in r.stdout and "\x1b" not in r.stdout
    # The CSV: every row parses, no cell is a formula, the names come back as they were.
    with report.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    verdicts = {escape.csv_uncell(row["student"]): row["verdict"] for row in rows}
    # A name as every report writes it (grading/names.py: its controls escaped, reversibly).
    assert verdicts == {IMG: "fail", names.student_name(SPOOF): "fail", "=1+2 <b>x": "fail",
                        "honest": "pass"}
    for row in rows:
        assert all(not c.lstrip(" ").startswith(escape.FORMULA_START) for c in row.values()), row
    # The feedback: no raw HTML, no javascript: link, the name and the output shown as text.
    files = sorted(feedback.iterdir())
    assert len(files) == 4
    for path in files:
        text = path.read_text()
        assert "<img" not in text and "<b>" not in text, text
        html = rendered(text)
        assert_inert_html(html)
        student = next(line for line in text.splitlines() if line.startswith("Student: "))
        assert visible_text(student.rstrip()) in {
            f"Student: {escape.terminal_line(name)}" for name in verdicts}, student
    [img] = [p for p in files if "Student: &lt;img" in p.read_text()]
    html = rendered(img.read_text())
    assert LINK in html, html  # the output, as text where the check shows what it got
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_hostile_names_and_passages_in_the_similarity_report_are_text(tmp_path: Path) -> None:
    # loops_matvec's solution adds 40 lines to its start file: the copies are listed.
    subs = hostile_class(tmp_path, (EXAMPLES / "C" / "loops_matvec_solution.c").read_text(),
                         "loops_matvec", 'printf("lambda = %.10E\\n", lambda);')
    r = idrrun("similarity", "loops_matvec", "--report", str(tmp_path / "s.md"), *subs,
               cwd=tmp_path, examples=EXAMPLES)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (tmp_path / "s.md").read_text()
    assert "<img" not in text and "<b>" not in text, text
    html = rendered(text)
    assert_inert_html(html)
    # The copies are listed (their names in the table and the headings) and read as they are.
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "eve: pass\\x0a\\x0dmallory" in html
    assert html.count("<h2>") >= 2, html
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert all(len(re.split(r"(?<!\\)\|", line)) == 7 for line in table), table  # 5 cells each
    assert not any(line.startswith("eve: pass") for line in r.stdout.splitlines()), r.stdout
    assert "\r" not in r.stdout
    json_report = tmp_path / "s.json"
    idrrun("similarity", "loops_matvec", "--report", str(json_report), *subs, cwd=tmp_path,
           examples=EXAMPLES)
    compared = {d["name"] for d in json.loads(json_report.read_text())["compared"]}
    # The JSON keeps the names as every report writes them (grading/names.py, reversible).
    assert {IMG, names.student_name(SPOOF), "=1+2 <b>x"} <= compared
