"""`%%idrrun` cells outside the kernel: the language each is shown in, the Pygments lexer, HTML
exports by the `jupyter nbconvert` command and by a running Jupyter server, and the JupyterLab
extension's copy of the language choice and of the directives (labextension/src/language.ts) run
by node."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment

from idrrun.highlight import IdrrunLexer, cell_language
from jupyter_lab import CELLS, idrrun_notebook, jupyter_env, running_lab

ROOT = Path(__file__).resolve().parent.parent
LABEXTENSION = ROOT / "labextension"

# (cell, the language it is shown in). Both sides, Python and the JupyterLab extension, must agree.
CASES: list[tuple[str, str | None]] = [
    ("%%idrrun\n#include <stdio.h>\nint main(void) { return 0; }", "c"),
    ("%%idrrun -a --accopts cc80\nint x;", "c"),
    ("%%idrrun", "c"),
    ("%%idrrun -l fortran\nx = 1", "fortran"),
    ("%%idrrun --language=Fortran\n", "fortran"),
    ("%%idrrun -lfortran\n", "fortran"),
    ("%%idrrun -l 'fortran'\nint main(void) { return 0; }", "fortran"),
    ("%%idrrun -l fortran -l c\nprogram p\nend program p", "c"),  # the last one wins
    ("%%idrrun\nprogram p\nend program p", "fortran"),
    ("%%idrrun -a\n  !$acc kernels\n", "fortran"),
    ("  \n%%idrrun\nsubroutine s\nend subroutine s", "fortran"),
    ("%%idrrun --cliopts '-l fortran'\nint x;", "c"),  # a program argument, not the flag
    ('%%idrrun --options "-lm" -l c\nprogram p', "c"),
    ("%%idrrun -l cobol\nprogram p", "fortran"),  # not a language idrrun knows: the body decides
    ("%%idrrun --help -l fortran\n", "fortran"),
    ("%%idrrun -l cuda\n", "cuda"),
    ("%%idrrun\n__global__ void k(void) {}", "cuda"),
    ("%%idrrun\n#include <iostream>\nint main() { std::cout << 1; }", "c++"),
    ("%%idrrunfile saxpy.c", None),
    ("%%idrrun?", None),
    ("%%timeit\n%%idrrun\nint x;", None),
    ("x = 1\n%%idrrun\nint x;", None),
    ("# %%idrrun\nprint(1)", None),
]


# (language, line, whether it is an OpenACC or OpenMP directive). The extension marks exactly
# these; the Pygments lexer gives each directive Comment.Preproc (in C it gives it to every
# preprocessor line, #pragma once included).
DIRECTIVES: list[tuple[str, str, bool]] = [
    ("c", "#pragma acc parallel loop copyin(x[0:n])", True),
    ("c", "  #  pragma omp target teams", True),
    ("c++", "#pragma acc kernels", True),
    ("c", "#pragma once", False),
    ("c", "// #pragma acc kernels", False),
    ("c", "#pragma accel", False),
    ("fortran", "  !$acc kernels", True),
    ("fortran", "!$ACC END KERNELS", True),
    ("fortran", "!$omp parallel do", True),
    ("fortran", "!$acc& async(1)", True),
    ("fortran", "! $acc kernels", False),
    ("fortran", "x = 1 !$acc kernels", False),
    ("fortran", "!$ x = omp_get_thread_num()", False),
    ("fortran", "!$accx", False),
    ("fortran", "! a comment", False),
]


@pytest.mark.parametrize(("cell", "language"), CASES)
def test_cell_language(cell: str, language: str | None) -> None:
    assert cell_language(cell) == language


@pytest.mark.parametrize(("language", "line", "directive"), DIRECTIVES)
def test_directives_are_preprocessor_tokens(language: str, line: str, directive: bool) -> None:
    cell = f"%%idrrun -l {language}\nint x;\n{line}\n"
    tokens = [(token, value) for _, token, value in IdrrunLexer().get_tokens_unprocessed(cell)]
    marked = "".join(value for token, value in tokens if token in Comment.Preproc)
    if directive:
        assert marked.strip() == line.strip(), tokens
    elif language == "fortran":
        assert not marked, tokens


def _spans(html: str) -> set[tuple[str, str]]:
    """(Pygments token class, text) of every highlighted token."""
    return set(re.findall(r'<span class="([\w-]+)">([^<]*)</span>', html))


def test_lexer_is_found_by_name_and_highlights_c_and_fortran() -> None:
    assert isinstance(get_lexer_by_name("idrrun"), IdrrunLexer)  # the pygments.lexers entry point
    c = _spans(highlight(CELLS[0], IdrrunLexer(), HtmlFormatter()))
    assert {("o", "%%"), ("k", "idrrun"), ("cp", "#include"), ("cpf", "&lt;stdio.h&gt;"),
            ("kt", "int"), ("c1", "// the sum of 1..n"), ("k", "return")} <= c
    fortran = _spans(highlight(CELLS[2], IdrrunLexer(), HtmlFormatter()))
    assert {("k", "idrrun"), ("k", "program "), ("kt", "integer"), ("cp", "!$acc kernels"),
            ("c", "! y = a*x + y on the GPU")} <= fortran


# What each cell of jupyter_lab.CELLS must show in an HTML export, as Pygments token classes.
C_TOKENS = {("cp", "#include"), ("kt", "int"), ("c1", "// the sum of 1..n"), ("k", "return")}
FORTRAN_FLAG_TOKENS = {("kt", "integer"), ("c", "! the language comes from -l"), ("k", "print")}
FORTRAN_BODY_TOKENS = {("k", "program "), ("kt", "integer"), ("cp", "!$acc kernels"),
                       ("k", "implicit none")}
PYTHON_TOKENS = {("c1", "# a Python cell"), ("k", "for"), ("nb", "print")}


def _exported_cells(html: str) -> list[set[tuple[str, str]]]:
    """The highlighted tokens of each code cell's input, in order."""
    blocks = re.findall(r'<div class="highlight[^"]*"><pre>(.*?)</pre></div>', html, re.DOTALL)
    assert len(blocks) == len(CELLS), f"{len(blocks)} highlighted blocks for {len(CELLS)} cells"
    return [_spans(block) for block in blocks]


def _assert_idrrun_cells_highlighted(html: str) -> None:
    c, fortran_flag, fortran_body, python = _exported_cells(html)
    assert C_TOKENS <= c, sorted(c)
    assert FORTRAN_FLAG_TOKENS <= fortran_flag, sorted(fortran_flag)
    assert FORTRAN_BODY_TOKENS <= fortran_body, sorted(fortran_body)
    assert PYTHON_TOKENS <= python, sorted(python)


def _nbconvert(tmp_path: Path, *flags: str) -> str:
    home = tmp_path / "home"
    notebook = tmp_path / "idrrun.ipynb"
    idrrun_notebook(notebook)
    out = tmp_path / "html"
    done = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", *flags,
                           f"--output-dir={out}", str(notebook)],
                          env=jupyter_env(home), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return (out / "idrrun.html").read_text()


@pytest.mark.slow
def test_nbconvert_command_highlights_idrrun_cells_when_told(tmp_path: Path) -> None:
    html = _nbconvert(tmp_path, "--HighlightMagicsPreprocessor.languages=%%idrrun=idrrun")
    _assert_idrrun_cells_highlighted(html)


@pytest.mark.slow
def test_nbconvert_command_alone_shows_idrrun_cells_as_python(tmp_path: Path) -> None:
    """What the setting changes: without it, IPython's lexer leaves a cell magic's body plain."""
    c, fortran_flag, fortran_body, python = _exported_cells(_nbconvert(tmp_path))
    for cell in (c, fortran_flag, fortran_body):
        assert cell == {("o", "%%"), ("k", "idrrun")}
    assert PYTHON_TOKENS <= python


@pytest.mark.slow
def test_jupyter_server_export_highlights_idrrun_cells(tmp_path: Path) -> None:
    """JupyterLab's "Save and Export Notebook As… HTML": the server extension needs no setting."""
    home = tmp_path / "home"
    root = tmp_path / "root"
    root.mkdir()
    idrrun_notebook(root / "idrrun.ipynb")
    with running_lab(root, home) as server:
        html = server.get("/nbconvert/html/idrrun.ipynb?download=false").decode()
        log = server.log_tail(200)
    assert "idrrun: nbconvert highlights %%idrrun cells" in log
    _assert_idrrun_cells_highlighted(html)


def test_labextension_chooses_the_same_language_and_directives(tmp_path: Path) -> None:
    """labextension/src/language.ts, compiled by the extension's own TypeScript, run by node."""
    node = shutil.which("node")
    typescript = LABEXTENSION / "node_modules" / "typescript"
    if node is None or not typescript.is_dir():
        pytest.skip("node or labextension/node_modules missing: `pip install -e .` with npm "
                    "installs them while building the extension")
    script = tmp_path / "cases.js"
    script.write_text("""
const [typescript, source] = process.argv.slice(2);
const ts = require(typescript);
const fs = require('fs');
const js = ts.transpileModule(fs.readFileSync(source, 'utf8'), {
  compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2018 }
}).outputText;
const mod = { exports: {} };
new Function('module', 'exports', js)(mod, mod.exports);
const calls = JSON.parse(fs.readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(calls.map(([name, args]) => mod.exports[name](...args))));
""")
    source = LABEXTENSION / "src" / "language.ts"
    calls = [("idrrunLanguage", [cell]) for cell, _ in CASES]
    calls += [("directiveStart", [line, language]) for language, line, _ in DIRECTIVES]
    done = subprocess.run([node, str(script), str(typescript), str(source)],
                          input=json.dumps(calls), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    languages, starts = answers[:len(CASES)], answers[len(CASES):]
    assert list(zip([cell for cell, _ in CASES], languages)) == \
        [(cell, language) for cell, language in CASES]
    # Where a directive starts: after the white space before it; null on other lines.
    assert [(line, start) for (_, line, _), start in zip(DIRECTIVES, starts)] == \
        [(line, len(line) - len(line.lstrip()) if directive else None)
         for _, line, directive in DIRECTIVES]
