"""idrrun's JupyterLab extension in real JupyterLab 4 and Notebook 7, in Debian's headless chromium.

A notebook with a `%%idrrun` C cell, a `%%idrrun -l fortran` cell, a `%%idrrun` cell whose body
is Fortran and a Python cell is opened in `jupyter lab` and in `jupyter notebook`; the test reads
each editor's syntax tokens and language (JupyterLab's own editor API, reached through
`window.jupyterapp`) and the colours chromium drew, then deletes the magic line with the keyboard
and types it back.

A course notebook of a students' copy (`idrrun course init --students`) opens unmodified once its
kernel has started (a copy saved by another Python opens modified: what the form avoids), shows
its `!$acc` directives as directives, and takes new `%%idrrun` cells typed with the keyboard
without Python's indentation and with C's and Fortran's: a loop typed line by line, without a
blank, comes out indented (after `{`, `do`, `if … then`; back at `}` and `end …`).

Needs: chromium and chromium-driver (apt; docker/install.sh dev), selenium and notebook (the `test`
extra), jupyterlab (the `lab` extra), and idrrun's extension built (`pip install -e .` with npm on
PATH): this checkout's labextension/dist when it has one (tests/jupyter_lab.py), else the one
installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from idrrun.authoring import copies
from idrrun.request import notebook
from jupyter_lab import (C_CELL, CHROMIUM, LabServer, changed_since_built, chromium,
                         idrrun_notebook, labextensions, running_lab)

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = "idrrun-highlight"
PLUGIN = "idrrun-highlight:plugin"
DIRECTIVE_CLASS = "cm-idrrun-directive"
# Where the screenshots are copied for CI to keep: $IDRRUN_TEST_ARTIFACTS, else build/ (ignored).
ARTIFACTS = Path(os.environ.get("IDRRUN_TEST_ARTIFACTS") or ROOT / "build" / "test-artifacts")
LOAD_TIMEOUT = 120.0  # seconds for JupyterLab to open the notebook (about 10 here)
CHANGE_TIMEOUT = 20.0  # seconds for an edit to change a cell's highlighting (well under 1 here)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (apt-get install chromium chromium-driver)"),
]

# Each code cell: its source, its syntax tokens as [text, node name], the comment syntax of its
# language (CodeMirror's language data), and the leaf spans chromium drew with their colour.
# arguments[0]: the index of the one cell to describe, or null for all of them.
CELLS_JS = """
const app = window.jupyterapp;
const panel = app && app.shell.currentWidget;
if (!panel || !panel.content || !panel.content.widgets) { return null; }
const index = arguments[0];
const cells = index === null ? panel.content.widgets : [panel.content.widgets[index]];
return cells.map(cell => {
  const editor = cell && cell.editor;
  if (!editor) { return null; }
  const state = editor.editor.state;
  return {
    source: state.doc.toString(),
    mimeType: cell.model.mimeType,
    tokens: editor.getTokens().map(t => [t.value, t.type]),
    comment: state.languageDataAt('commentTokens', state.doc.length)[0] || null,
    spans: Array.from(editor.host.querySelectorAll('.cm-line span'))
      .filter(span => span.children.length === 0)
      .map(span => [span.textContent, getComputedStyle(span).color,
                    getComputedStyle(span).fontStyle, !!span.closest('.DIRECTIVE')])
  };
});
""".replace("DIRECTIVE", DIRECTIVE_CLASS)
# The notebook's state once its kernel has answered (kernel_info and its spec: what JupyterLab
# copies into the notebook's metadata), and a moment more for the metadata to be set.
SETTLED_JS = """
const done = arguments[arguments.length - 1];
const panel = window.jupyterapp.shell.currentWidget;
const session = panel && panel.sessionContext && panel.sessionContext.session;
if (!session || !session.kernel || panel.context.path !== arguments[0]) {
  done({error: 'not the notebook ' + arguments[0] + ' with its kernel'}); return;
}
const kernel = session.kernel;
Promise.all([kernel.info, kernel.spec]).then(() => setTimeout(() => done({
  dirty: panel.context.model.dirty,
  marked: document.querySelectorAll('.jp-mod-dirty').length,
  language_info: panel.context.model.getMetadata('language_info'),
  kernelspec: panel.context.model.getMetadata('kernelspec')
}), 1000));
"""


def _kernel_idle(driver: Any, path: str | None = None) -> bool:
    """The current notebook's kernel is idle (and the current notebook is `path`, if given)."""
    return bool(driver.execute_script(
        "const w = window.jupyterapp.shell.currentWidget;"
        "const s = w && w.sessionContext && w.sessionContext.session;"
        "return !!(s && s.kernel && s.kernel.status === 'idle'"
        " && (arguments[0] === null || w.context.path === arguments[0]));", path))


def _quiet_lab_settings(home: Path) -> None:
    """No news or update pop-up over the screenshots (and no request to the internet)."""
    settings = home / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))


def _home(tmp_path: Path) -> Path:
    """The Jupyter folders of a test's server, with idrrun's extension in them."""
    changed = changed_since_built()
    assert not changed, (f"labextension/src/{', '.join(changed)} changed after labextension/dist "
                         "was built: `pip install -e .` (or `npm run build:prod` in labextension/) "
                         "builds it again")
    home = tmp_path / "home"
    home.mkdir()
    listing = labextensions(home)
    ours = [line for line in listing.splitlines() if EXTENSION in line]
    assert ours and "enabled" in ours[0] and "OK" in ours[0], (
        f"{EXTENSION} is not installed in this environment: `pip install -e .` with npm on PATH "
        f"builds and installs it.\njupyter labextension list:\n{listing}")
    _quiet_lab_settings(home)
    return home


# The course notebook the student opens, in a students' copy, and one of its cells with a
# comment and a directive.
COURSE_NOTEBOOK = "course/notebooks/Fortran/01_intro.ipynb"
# Saved by a kernel of another Python: JupyterLab writes its own version in at once.
OTHER_PYTHON = "course/notebooks/Fortran/01_intro_other_python.ipynb"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], LabServer]]:
    """One server per front end for the tests of this file (a start is 10-20 s of the CI's
    time), started when a test first asks for it and kept until the file's last test. Its
    root: a notebook of idrrun cells (idrrun.ipynb), and a students' copy of the course, as
    `idrrun course init --students` writes it, with one of its notebooks saved by another
    Python."""
    with contextlib.ExitStack() as stack:
        started: dict[str, LabServer] = {}

        def server(frontend: str) -> LabServer:
            if frontend not in started:
                base = tmp_path_factory.mktemp(f"lab-{frontend}")
                home = _home(base)
                root = base / "root"
                root.mkdir()
                idrrun_notebook(root / "idrrun.ipynb")
                copies.init_course(ROOT, root / "course", students=True)
                other = notebook.read(root / COURSE_NOTEBOOK)
                notebook.write(other, root / OTHER_PYTHON, version="3.0.0")
                started[frontend] = stack.enter_context(running_lab(root, home, frontend=frontend))
            return started[frontend]

        yield server


@pytest.fixture(params=["lab", "notebook"])
def lab(request: pytest.FixtureRequest, servers: Callable[[str], LabServer]) -> LabServer:
    """The server of the front end the test is for (JupyterLab, or Notebook 7)."""
    return servers(request.param)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    driver = chromium(tmp_path / "chromium-profile", log=tmp_path / "chromedriver.log",
                                  console=True)
    try:
        yield driver
    finally:
        driver.quit()


class Page:
    """The notebook in the browser, and what the test keeps of it (screenshots, last state)."""

    def __init__(self, driver: Any, server: LabServer, shots: Path,
                 capsys: pytest.CaptureFixture[str]) -> None:
        self.driver = driver
        self.server = server
        self.shots = shots
        self.capsys = capsys
        self.last: list[dict[str, Any]] | None = None

    def cells(self, index: int | None = None) -> list[dict[str, Any]] | None:
        """Every cell, or the one at `index`; None until each has its editor."""
        cells = self.driver.execute_script(CELLS_JS, index)
        if cells is not None and all(cells):
            self.last = cells
            return list(cells)
        return None

    def wait(self, what: str, ok: Callable[[list[dict[str, Any]]], bool], timeout: float,
             index: int | None = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cells = self.cells(index)
            if cells is not None and ok(cells):
                return
            time.sleep(0.2)
        self.screenshot("failed")
        pytest.fail(f"after {timeout:.0f} s, {what} is still not so.\n{self.report()}")

    def report(self) -> str:
        console = [entry["message"] for entry in self.driver.get_log("browser")][-20:]
        state = json.dumps([{k: v for k, v in cell.items() if k != "spans"} for cell in self.last]
                           if self.last else None, indent=1)
        return (f"cells: {state}\nbrowser console: {console}\n"
                f"server log:\n{self.server.log_tail(20)}")

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"labextension-{self.server.frontend.module}-{name}.png"
        self.driver.save_screenshot(str(path))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        copy = ARTIFACTS / path.name
        shutil.copyfile(path, copy)
        with self.capsys.disabled():  # the CI log shows where the pictures are, pass or fail
            print(f"\nscreenshot: {copy} (also {path})")
        return copy


def _tokens(cell: dict[str, Any]) -> set[tuple[str, str]]:
    return {(text, kind) for text, kind in cell["tokens"]}


def _span(cell: dict[str, Any], text: str) -> list[Any]:
    """[text, colour, font style, inside a directive] of the span drawn for `text`."""
    spans = [span for span in cell["spans"] if span[0].strip() == text]
    assert spans, f"no span {text!r} drawn in {cell['source'][:40]!r}: {cell['spans']}"
    return list(spans[0])


def _colour(cell: dict[str, Any], text: str) -> str:
    return str(_span(cell, text)[1])


def _drawn_as_directive(cell: dict[str, Any], text: str, comment_colour: str) -> None:
    _, colour, style, directive = _span(cell, text)
    assert directive and colour != comment_colour and style == "normal", \
        (text, colour, style, directive, comment_colour)


def _is_c(cell: dict[str, Any]) -> bool:
    return {("int", "PrimitiveType"), ("#include", "#include")} <= _tokens(cell)


def _is_python(cell: dict[str, Any]) -> bool:
    return (cell["comment"] == {"line": "#"}
            and ("#include <stdio.h>", "Comment") in _tokens(cell))


def test_idrrun_cells_are_highlighted_as_c_and_fortran_live(
        lab: LabServer, browser: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    page = Page(browser, lab, tmp_path, capsys)
    started = time.monotonic()
    browser.get(lab.notebook_url("idrrun.ipynb"))
    page.wait("the notebook open with 4 cells, the first one highlighted as C",
              lambda cells: len(cells) == 4 and _is_c(cells[0]), LOAD_TIMEOUT)
    loaded = time.monotonic() - started
    assert browser.execute_script(f"return window.jupyterapp.isPluginActivated('{PLUGIN}')")
    # The kernel's language_info, when it comes, sets every cell's MIME type again: the
    # highlighting must hold after that too.
    page.wait("the kernel idle", lambda cells: _kernel_idle(browser), LOAD_TIMEOUT)
    c, fortran_flag, fortran_body, python = page.cells() or []
    page.screenshot("cells")

    # The editor still belongs to the notebook's language: only the display changes.
    cells = (c, fortran_flag, fortran_body, python)
    assert {cell["mimeType"] for cell in cells} == {"text/x-ipython"}
    # C: C's syntax tree (lang-cpp) and C's comment syntax.
    assert {("int", "PrimitiveType"), ("#include", "#include"), ("<stdio.h>", "SystemLibString"),
            ("// the sum of 1..n", "LineComment"), ("return", "return")} <= _tokens(c), c["tokens"]
    assert c["comment"] == {"line": "//", "block": {"open": "/*", "close": "*/"}}
    # Fortran, from the flag and from the body: JupyterLab's Fortran mode and its token names.
    for cell, comment in ((fortran_flag, "! the language comes from -l"),
                          (fortran_body, "! y = a*x + y on the GPU")):
        assert {("integer", "variableName.standard"), (comment, "comment")} <= _tokens(cell), \
            cell["tokens"]
    assert {("program", "keyword"), ("implicit", "keyword"), ("!$acc kernels", "comment"),
            ("do", "keyword")} <= _tokens(fortran_body), fortran_body["tokens"]
    # Python stays Python.
    assert python["comment"] == {"line": "#"}
    assert {("# a Python cell", "Comment"), ("for", "for"), ("print", "VariableName")} \
        <= _tokens(python), python["tokens"]
    # What the user sees: comments of all three languages in the theme's comment colour, and
    # `#include` not (in a Python cell it would be a comment); `!$acc`, a comment to Fortran's
    # mode, drawn as a directive.
    comment_colour = _colour(python, "# a Python cell")
    assert _colour(c, "// the sum of 1..n") == comment_colour
    assert _colour(fortran_flag, "! the language comes from -l") == comment_colour
    assert _colour(fortran_body, "! y = a*x + y on the GPU") == comment_colour
    assert _colour(c, "#include") != comment_colour
    _drawn_as_directive(fortran_body, "!$acc kernels", comment_colour)
    _drawn_as_directive(fortran_body, "!$acc end kernels", comment_colour)
    # The magic line as IPython shows it, not as C or Fortran code.
    assert {("%%", "MagicMark"), ("idrrun", "MagicName")} <= _tokens(c) & _tokens(fortran_body)

    # Delete the magic line with the keyboard: the cell is Python again, at once.
    first_line = browser.execute_script(
        "return window.jupyterapp.shell.currentWidget.content.widgets[0]"
        ".editor.host.querySelector('.cm-line');")
    ActionChains(browser).click(first_line).send_keys(Keys.END) \
        .key_down(Keys.SHIFT).send_keys(Keys.HOME).key_up(Keys.SHIFT) \
        .send_keys(Keys.BACKSPACE).perform()
    page.wait("the first cell, without its magic line, highlighted as Python",
              lambda cells: cells[0]["source"].startswith("\n#include") and _is_python(cells[0]),
              CHANGE_TIMEOUT)
    c_removed = page.cells() or []
    assert _colour(c_removed[0], "#include <stdio.h>") == comment_colour
    assert not _is_c(c_removed[0])
    page.screenshot("magic-line-removed")

    # Type it back: C again.
    ActionChains(browser).send_keys("%%idrrun -a").perform()
    page.wait("the first cell, with its magic line typed back, highlighted as C",
              lambda cells: cells[0]["source"] == C_CELL and _is_c(cells[0]), CHANGE_TIMEOUT)
    with capsys.disabled():
        print(f"\n{lab.frontend.module} opened the notebook in {loaded:.1f} s; "
              f"the whole browser test took {time.monotonic() - started:.1f} s")


# Typed key by key into new cells: every line starts where the language puts it. The lines of C's
# block are indented by C's rule; nothing else is indented (Python's rules would indent the line
# after the magic line, and C's, given the magic line as code, the line after `#include`).
# Typed without indentation: each line is indented as JupyterLab's own C editor does (Lezer's C++)
# and as a Fortran editor should (JupyterLab's legacy Fortran mode indents nothing): after `{`,
# `do`, `if … then`, `program`, and one unit back at `}` and `end …` once typed.
TYPED_C = ('%%idrrun -a\n#include <stdio.h>\nint main(void)\n{\nfor (int i = 0; i < 3; i++) {\n'
           'printf("%d\\n", i);\n}\nreturn 0;\n}')
SHOWN_C = ('%%idrrun -a\n#include <stdio.h>\nint main(void)\n{\n    for (int i = 0; i < 3; i++) {\n'
           '        printf("%d\\n", i);\n    }\n    return 0;\n}')
TYPED_FORTRAN = ("%%idrrun -a\nprogram typed\ninteger :: i\n!$acc parallel loop\ndo i = 1, 3\n"
                 "if (i > 1) then\nprint *, i\nend if\nend do\nend program typed")
SHOWN_FORTRAN = ("%%idrrun -a\nprogram typed\n    integer :: i\n    !$acc parallel loop\n"
                 "    do i = 1, 3\n        if (i > 1) then\n            print *, i\n        end if\n"
                 "    end do\nend program typed")


def _settled(browser: Any, page: Page, path: str) -> dict[str, Any]:
    """Open the notebook, alone (JupyterLab's `reset`: no tab of an earlier page comes back),
    and its state once its kernel has answered."""
    url = page.server.notebook_url(path)
    browser.get(url + ("&reset" if page.server.frontend.module == "jupyterlab" else ""))
    page.wait(f"{path} open, its kernel idle", lambda cells: _kernel_idle(browser, path),
              LOAD_TIMEOUT, index=0)
    state = dict(browser.execute_async_script(SETTLED_JS, path))
    assert "error" not in state, state
    return state


def _type_new_cell(browser: Any, text: str) -> None:
    """A new cell above the first one, typed into with the keyboard."""
    from selenium.webdriver.common.action_chains import ActionChains

    browser.execute_script(
        "const app = window.jupyterapp, panel = app.shell.currentWidget;"
        "panel.content.activeCellIndex = 0;"
        "return app.commands.execute('notebook:insert-cell-above');")
    line = browser.execute_script(
        "return window.jupyterapp.shell.currentWidget.content.widgets[0]"
        ".editor.host.querySelector('.cm-line');")
    ActionChains(browser).click(line).send_keys(text).perform()


def test_course_notebook_opens_unmodified_and_takes_typed_idrrun_cells(
        lab: LabServer, browser: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    page = Page(browser, lab, tmp_path, capsys)
    started = time.monotonic()

    # What the form avoids: a copy saved by another Python's kernel opens modified.
    other = _settled(browser, page, OTHER_PYTHON)
    assert other["dirty"], other
    assert other["language_info"] == notebook.language_info(notebook.python_version()), other
    browser.execute_script("return window.jupyterapp.commands.execute('docmanager:save')")
    page.wait("the other Python's copy saved", lambda cells: not browser.execute_script(
        "return window.jupyterapp.shell.currentWidget.context.model.dirty"), CHANGE_TIMEOUT, 0)

    # The students' copy opens unmodified: its metadata is what the kernel would write.
    opened = _settled(browser, page, COURSE_NOTEBOOK)
    page.screenshot("course-notebook")
    assert not opened["dirty"] and opened["marked"] == 0, opened
    assert opened["kernelspec"] == notebook.KERNELSPEC, opened

    # Its directives are drawn as directives, its comments as comments.
    browser.execute_script(
        "window.jupyterapp.shell.currentWidget.content.widgets[4].node.scrollIntoView();")
    page.wait("the cell with `!$acc serial` drawn",
              lambda cells: any(span[0].strip() == "!$acc end serial" for span in cells[0]["spans"]),
              CHANGE_TIMEOUT, index=4)
    [hello] = page.cells(4) or [{}]
    comment_colour = _colour(hello, "! serial: a compute construct run by a single gang, worker "
                                    "and vector lane")
    _drawn_as_directive(hello, "!$acc serial copyout(on_device)", comment_colour)
    _drawn_as_directive(hello, "!$acc end serial", comment_colour)
    assert ("!$acc serial copyout(on_device)", "comment") in _tokens(hello)  # Fortran's own mode

    # New cells typed with the keyboard: no indentation but the language's own, as its editor's.
    _type_new_cell(browser, TYPED_FORTRAN)
    _type_new_cell(browser, TYPED_C)
    page.wait("the typed cells", lambda cells: [cell["source"] for cell in cells[:2]] == [
        SHOWN_C, SHOWN_FORTRAN], CHANGE_TIMEOUT)
    typed_c, typed_fortran = (page.cells() or [])[:2]
    page.screenshot("typed-cells")
    assert _is_c(typed_c), typed_c["tokens"]
    _drawn_as_directive(typed_fortran, "!$acc parallel loop", comment_colour)
    with capsys.disabled():
        print(f"\n{lab.frontend.module}: the course notebook test took "
              f"{time.monotonic() - started:.1f} s")
