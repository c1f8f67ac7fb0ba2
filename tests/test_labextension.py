"""idrrun's JupyterLab extension in real JupyterLab 4 and Notebook 7, in Debian's headless chromium.

A notebook with a `%%idrrun` C cell, a `%%idrrun -l fortran` cell, a `%%idrrun` cell whose body
is Fortran and a Python cell is opened in `jupyter lab` and in `jupyter notebook`; the test reads
each editor's syntax tokens and language (JupyterLab's own editor API, reached through
`window.jupyterapp`) and the colours chromium drew, then deletes the magic line with the keyboard
and types it back.

Needs: chromium and chromium-driver (apt), selenium and notebook (the `test` extra), jupyterlab
(the `lab` extra), and idrrun installed with its extension (`pip install -e .` with npm on PATH).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_lab import C_CELL, LabServer, idrrun_notebook, labextensions, running_lab

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EXTENSION = "idrrun-highlight"
PLUGIN = "idrrun-highlight:plugin"
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
CELLS_JS = """
const app = window.jupyterapp;
const panel = app && app.shell.currentWidget;
if (!panel || !panel.content || !panel.content.widgets) { return null; }
return panel.content.widgets.map(cell => {
  const editor = cell.editor;
  if (!editor) { return null; }
  const state = editor.editor.state;
  return {
    source: state.doc.toString(),
    mimeType: cell.model.mimeType,
    tokens: editor.getTokens().map(t => [t.value, t.type]),
    comment: state.languageDataAt('commentTokens', state.doc.length)[0] || null,
    spans: Array.from(editor.host.querySelectorAll('.cm-line span'))
      .filter(span => span.children.length === 0)
      .map(span => [span.textContent, getComputedStyle(span).color])
  };
});
"""


def _quiet_lab_settings(home: Path) -> None:
    """No news or update pop-up over the screenshots (and no request to the internet)."""
    settings = home / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))


@pytest.fixture(params=["lab", "notebook"])
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LabServer]:
    home = tmp_path / "home"
    home.mkdir()
    listing = labextensions(home)
    ours = [line for line in listing.splitlines() if EXTENSION in line]
    assert ours and "enabled" in ours[0] and "OK" in ours[0], (
        f"{EXTENSION} is not installed in this environment: `pip install -e .` with npm on PATH "
        f"builds and installs it.\njupyter labextension list:\n{listing}")
    _quiet_lab_settings(home)
    root = tmp_path / "root"
    root.mkdir()
    idrrun_notebook(root / "idrrun.ipynb")
    with running_lab(root, home, frontend=request.param) as server:
        yield server


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromedriver = shutil.which("chromedriver")
    assert chromedriver, "chromium is installed, chromedriver is not: apt-get install chromium-driver"
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1280,1100"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver: selenium does not look for (or download) one of its own.
    service = Service(executable_path=chromedriver, log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
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

    def cells(self) -> list[dict[str, Any]] | None:
        cells = self.driver.execute_script(CELLS_JS)
        if cells is not None and all(cells):
            self.last = cells
            return list(cells)
        return None

    def wait(self, what: str, ok: Callable[[list[dict[str, Any]]], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cells = self.cells()
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


def _colour(cell: dict[str, Any], text: str) -> str:
    colours = [colour for span, colour in cell["spans"] if span.strip() == text]
    assert colours, f"no span {text!r} drawn in {cell['source'][:40]!r}: {cell['spans']}"
    return str(colours[0])


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
    page.wait("the kernel idle", lambda cells: browser.execute_script(
        "const s = window.jupyterapp.shell.currentWidget.sessionContext.session;"
        "return !!(s && s.kernel && s.kernel.status === 'idle');"), LOAD_TIMEOUT)
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
    # `#include` not (in a Python cell it would be a comment).
    comment_colour = _colour(python, "# a Python cell")
    assert _colour(c, "// the sum of 1..n") == comment_colour
    assert _colour(fortran_flag, "! the language comes from -l") == comment_colour
    assert _colour(fortran_body, "!$acc kernels") == comment_colour
    assert _colour(c, "#include") != comment_colour

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
