"""A `--check` cell's annotated source as JupyterLab 4 draws it, in Debian's headless chromium:
the remark under the line it is about, and a screenshot kept under build/test-artifacts/.

Needs chromium and chromium-driver (apt), selenium (the `test` extra) and jupyterlab (the `lab`
extra); the extension is not needed (the listing is plain HTML output).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_lab import running_lab
from test_labextension import (ARTIFACTS, CHROMIUM, LOAD_TIMEOUT, _quiet_lab_settings,  # noqa: F401
                               browser)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RUN_TIMEOUT = 180.0  # seconds for the cell to build, run, check its solution and show the listing

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (apt-get install chromium chromium-driver)"),
]

# Where a note sits against its line, as chromium laid them out: the code's row and the note's.
GEOMETRY_JS = """
const listing = document.querySelector('.idrrun-annotated');
if (!listing) { return null; }
const line = arguments[0];
const note = listing.querySelector(`tr.idrrun-note[data-line='${line}']`);
const code = Array.from(listing.querySelectorAll('tr')).find(
    tr => tr.cells.length === 2 && tr.cells[0].textContent.trim() === String(line));
if (!note || !code) { return {found: false}; }
const n = note.getBoundingClientRect(), c = code.getBoundingClientRect();
return {found: true, code: code.cells[1].textContent, noteText: note.textContent,
        codeBottom: c.bottom, noteTop: n.top, noteLeft: n.left, open: listing.open,
        kinds: Array.from(listing.querySelectorAll(`tr.idrrun-note[data-line='${line}']`))
                    .map(tr => tr.className)};
"""


def _wait(what: str, check: Any, timeout: float, driver: Any, shot: Path) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    driver.save_screenshot(str(shot))
    pytest.fail(f"after {timeout:.0f} s, {what} is still not so (screenshot: {shot})")


def test_the_annotated_source_of_a_checked_cell_in_jupyterlab(
        tmp_path: Path, browser: Any, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from selenium.webdriver.common.by import By

    home, root = tmp_path / "home", tmp_path / "root"
    home.mkdir()
    root.mkdir()
    _quiet_lab_settings(home)
    start = (EXAMPLES / "C" / "data_laplace_exercise.c").read_text()
    directive = 1 + next(i + 1 for i, line in enumerate(start.splitlines())
                         if "#pragma acc parallel loop" in line)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext idrrun"),
                nbformat.v4.new_code_cell("%%idrrun -a --check data_laplace\n" + start)]
    nbformat.write(nb, root / "annotated.ipynb")
    (root / "idrrun.toml").write_text(f'examples_dir = "{EXAMPLES}"\n')
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    with running_lab(root, home, "lab") as lab:
        browser.get(lab.notebook_url("annotated.ipynb"))
        shot = tmp_path / "failed.png"
        _wait("the kernel idle", lambda: browser.execute_script(
            "const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            "const s = w && w.sessionContext && w.sessionContext.session;"
            "return !!(s && s.kernel && s.kernel.status === 'idle');"), LOAD_TIMEOUT, browser, shot)
        browser.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")
        geometry = _wait("the annotated source shown", lambda: (
            browser.execute_script(GEOMETRY_JS, directive) or {}).get("found") and
            browser.execute_script(GEOMETRY_JS, directive), RUN_TIMEOUT, browser, shot)
        listing = browser.find_element(By.CSS_SELECTOR, ".idrrun-annotated")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", listing)
        time.sleep(0.5)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        element_shot, page_shot = ARTIFACTS / "annotated-source.png", ARTIFACTS / "annotated-page.png"
        listing.screenshot(str(element_shot))
        browser.save_screenshot(str(page_shot))
        with capsys.disabled():
            print(f"\nscreenshots: {element_shot}, {page_shot}")
        geometry = browser.execute_script(GEOMETRY_JS, directive)
    assert "#pragma acc parallel loop" in geometry["code"], geometry
    assert geometry["open"] is True  # a check failed there: the listing opens by itself
    # The note is drawn right under its line, indented like the code.
    assert 0 <= geometry["noteTop"] - geometry["codeBottom"] < 8, geometry
    kinds = " ".join(geometry["kinds"])
    assert all(f"idrrun-note-{kind}" in kinds for kind in ("check", "implicit", "loop")), kinds
    assert geometry["noteText"].startswith("check failed: data clauses: A is used"), geometry
    assert element_shot.stat().st_size > 5000
