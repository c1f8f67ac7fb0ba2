"""The class day in the students' browsers (issue 45): on the hub of tests/test_hub.py (the
3-node SLURM cluster, JupyterHub, its exchange receiver), two students in headless chromium,
through JupyterLab's own UI only: each finds the assignment in the Assignments panel, fetches
it, edits and runs its check cell, submits without saving (the panel saves first) and reads
what was received; the teacher collects, grades and returns; each opens her feedback from the
panel, rendered, with her points and her pseudonym on the times board. Screenshots of each
step are written to IDRRUN_SHOTS (default: the test's own folder) for a person to look at.

Needs what tests/test_hub.py needs, and chromium with chromedriver.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import PYTHONPATH
from answer_course import PROGRAM, SPEC
from idrrun.grading import exchange as exchange_mod
from jupyter_lab import chromium
from test_hub import CHROMIUM, Hub, hub, nodes, wait  # noqa: F401 (the fixtures)

pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None or shutil.which("chromedriver") is None,
                                 reason="chromium is not installed (apt-get install chromium chromium-driver)")]

# The grader's course: the students' answer exercise with a timed check too (it has a times
# board, so each feedback names her pseudonym; on a host the timed check is not evaluated).
TIMED = SPEC + """
[[check]]
label = "GPU busy"
kind = "gpu_busy"
min = 0.25
"""


class Student:
    """One student's browser on her JupyterLab, as she uses it."""

    def __init__(self, hub: Hub, login: str, shots: Path) -> None:
        self.hub, self.login, self.shots = hub, login, shots
        self.driver = chromium(shots / f"{login}-profile", window="1400,1000")
        self.driver.set_page_load_timeout(120)

    def shot(self, step: str) -> Path:
        path = self.shots / f"{self.login}-{step}.png"
        self.driver.save_screenshot(str(path))
        return path

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def log_in(self) -> None:
        from selenium.webdriver.common.by import By

        self.driver.get(self.hub.url + "/hub/login")
        self.driver.find_element(By.ID, "username_input").send_keys(self.login)
        self.driver.find_element(By.ID, "password_input").send_keys(self.hub.password)
        self.driver.find_element(By.ID, "login_submit").click()
        self.driver.get(f"{self.hub.url}/user/{self.login}/lab?reset")
        wait(lambda: self.js("return !!(window.jupyterapp && document.querySelector("
                             "'[data-id=\"idrrun-assignments\"]'))"), 120, self.page)

    def page(self) -> str:
        return str(self.js("return document.body.innerText"))[-3000:]

    def panel(self) -> str:
        return str(self.js("const p = document.getElementById('idrrun-assignments');"
                           "return p ? p.innerText : ''"))

    def open_panel(self) -> None:
        """A click on the Assignments tab of the left sidebar; the panel shown."""
        from selenium.webdriver.common.by import By

        wait(lambda: not self.js("return !!document.getElementById('jupyterlab-splash')"), 60, self.page)
        shown = "const p = document.getElementById('idrrun-assignments'); return !!(p && p.offsetParent !== null)"
        if not self.js(shown):  # (a click on the tab of a panel shown hides it)
            self.driver.find_element(By.CSS_SELECTOR, 'li[data-id="idrrun-assignments"]').click()
        wait(lambda: self.js("const p = document.getElementById('idrrun-assignments');"
                             "return !!(p && p.offsetParent !== null && p.innerText.includes('answer'))"),
             60, self.panel)

    def click(self, button: str) -> None:
        """A click on one of the panel's buttons for the assignment, as her mouse does."""
        from selenium.webdriver.common.by import By

        self.driver.find_element(
            By.CSS_SELECTOR, f'#idrrun-assignments [data-exercise="answer"] .idrrun-{button}').click()

    def notebook_ready(self, path: str) -> bool:
        return bool(self.js(
            "const w = window.jupyterapp.shell.currentWidget;"
            "const s = w && w.sessionContext && w.sessionContext.session;"
            "return !!(s && s.kernel && s.kernel.status === 'idle' && w.context.path === arguments[0]);",
            path))

    def retype_cell(self, index: int, text: str) -> None:
        """Her cell INDEX emptied and typed anew, with the keyboard."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        line = self.js("const p = window.jupyterapp.shell.currentWidget.content;"
                       "p.activeCellIndex = arguments[0];"
                       "return p.widgets[arguments[0]].editor.host.querySelector('.cm-line');", index)
        ActionChains(self.driver).click(line).key_down(Keys.CONTROL).send_keys("a") \
            .key_up(Keys.CONTROL).send_keys(Keys.DELETE).send_keys(text).perform()

    def run_from_the_top(self, cells: int) -> None:
        """The first CELLS cells run with Shift+Enter, from the first one (its %load_ext)."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        prompt = self.js("const p = window.jupyterapp.shell.currentWidget.content;"
                         "return p.widgets[0].node.querySelector('.jp-InputPrompt');")
        chain = ActionChains(self.driver).click(prompt)
        for _ in range(cells):
            chain = chain.key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).pause(1)
        chain.perform()

    def outputs(self) -> str:
        return str(self.js("return Array.from(document.querySelectorAll('.jp-OutputArea'))"
                           ".map(e => e.innerText).join('\\n');"))

    def terminal(self, line: str) -> str:
        """A terminal opened from JupyterLab's menu (File, New, Terminal), LINE typed in it;
        what the terminal shows once the line has answered."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By

        def item(label: str, where: str) -> Any:
            return self.driver.find_element(
                By.XPATH, f"//{where}[normalize-space(text())='{label}']")

        item("File", "div[contains(@class,'lm-MenuBar-itemLabel')]").click()
        ActionChains(self.driver).move_to_element(item("New", "div[contains(@class,'lm-Menu-itemLabel')]")).perform()
        wait(lambda: self.driver.find_elements(
            By.XPATH, "//div[contains(@class,'lm-Menu-itemLabel')][normalize-space(text())='Terminal']"), 30, self.page)
        item("Terminal", "div[contains(@class,'lm-Menu-itemLabel')]").click()
        shown = ("const w = window.jupyterapp.shell.currentWidget, t = w && w.content && w.content._term;"
                 "if (!t) return '';"
                 "const b = t.buffer.active; let s = '';"
                 "for (let i = 0; i < b.length; i++) s += b.getLine(i).translateToString(true) + '\\n';"
                 "return s;")
        wait(lambda: "$" in str(self.js(shown)), 60, lambda: self.js(shown))
        ActionChains(self.driver).send_keys(line + "\n").perform()
        wait(lambda: str(self.js(shown)).count("$") >= 2, 60, lambda: self.js(shown))
        return str(self.js(shown))

    def close(self) -> None:
        self.driver.quit()


@pytest.fixture
def students(hub: Hub, nodes: dict[str, str], tmp_path: Path) -> Iterator[list[Student]]:
    shots = Path(os.environ.get("IDRRUN_SHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    made = [Student(hub, login, shots) for login in hub.students[:2]]
    try:
        yield made
    finally:
        for s in made:
            s.close()


def test_the_class_day_in_the_students_browsers(hub: Hub, students: list[Student], tmp_path: Path) -> None:
    values = {s.login: 42 if i == 0 else 41 for i, s in enumerate(students)}
    for s in students:
        s.log_in()
        s.open_panel()
        s.shot("1-assignments")
        assert "deadline" in s.panel() and "not submitted" in s.panel(), s.panel()
        s.click("fetch")
        wait(lambda: s.notebook_ready("answer/answer.ipynb"), 120, s.page)
        s.shot("2-fetched")
        s.retype_cell(1, "%%idrrun --check answer\n" + PROGRAM.format(value=values[s.login]))
        s.run_from_the_top(2)
        wait(lambda: "answer: " in s.outputs(), 180, s.outputs)
        s.shot("3-checked")
        assert ("C[0] is 41, expected 42" in s.outputs()) == (values[s.login] == 41), s.outputs()
        # Not saved (no Ctrl+S): the panel saves her notebook before it hands it in.
        assert s.js("return window.jupyterapp.shell.currentWidget.context.model.dirty")
        # Her terminal, from the menu: a login shell, where idrrun is on PATH too.
        version = s.terminal("idrrun --version")
        s.shot("3b-terminal")
        assert "idrrun 0." in version and "command not found" not in version, version
        s.click("submit")
        wait(lambda: "received answer (submission 1)" in s.panel(), 60, s.panel)
        s.shot("4-submitted")
        assert "saved 1 open document first" in s.panel() and "unchanged" not in s.panel(), s.panel()
        [receipt] = exchange_mod.receipts(hub.exchange, s.login, "answer")
        assert receipt.files[0][0] == "answer.ipynb", receipt

    # The teacher, as root: collect, grade with the grader's course, return.
    examples = tmp_path / "teacher" / "examples"
    (examples / "C").mkdir(parents=True)
    (examples / "answer.toml").write_text(TIMED)
    (examples / "C" / "answer_exercise.c").write_text(PROGRAM.format(value=0))
    (examples / "C" / "answer_solution.c").write_text(PROGRAM.format(value=42))
    env = dict(hub.cluster.env, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples),
               XDG_CACHE_HOME=str(hub.cluster.shared / "cache"))
    out = tmp_path / "collected"

    def idrrun(*args: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "idrrun.cli", *args], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    idrrun("classroom", "collect", "answer", "--exchange", str(hub.exchange), "--roster",
           str(hub.roster), "--to", str(out))
    for s in students:
        saved = (out / "submissions" / s.login / "answer.ipynb").read_text()
        assert f"C[0] = {values[s.login]}" in saved  # her edited work, as it was received
    idrrun("grade", "answer", *sorted(str(p) for p in (out / "submissions").iterdir()),
           "--feedback", str(tmp_path / "feedback"), "--report", str(tmp_path / "r.csv"),
           "--board", "--board-page", str(hub.top / "boards"))
    verdicts = {row["student"]: row["verdict"] for row in csv.DictReader((tmp_path / "r.csv").open())}
    assert {s.login: verdicts[s.login] for s in students} == {
        s.login: "fail" if values[s.login] == 41 else "incomplete" for s in students}, verdicts
    idrrun("classroom", "return", "answer", "--exchange", str(hub.exchange), "--roster",
           str(hub.roster), "--feedback", str(tmp_path / "feedback"))

    for s in students:
        s.open_panel()  # (the feedback tab took the main area; the panel is still there)
        s.driver.find_element("css selector", "#idrrun-assignments .idrrun-refresh").click()
        wait(lambda: s.js("const b = document.querySelector('#idrrun-assignments "
                          "[data-exercise=\"answer\"] .idrrun-feedback'); return b && !b.disabled"),
             60, s.panel)
        s.click("feedback")
        rendered = "return Array.from(document.querySelectorAll('.jp-RenderedMarkdown')).map(e => e.innerText).join('\\n')"
        wait(lambda: "Score" in str(s.js(rendered)), 60, s.page)
        s.shot("5-feedback")
        text = str(s.js(rendered))
        assert "points" in text and "On the class's times board:" in text, text
        assert s.login in text and all(o.login not in text for o in students if o is not s), text
        # The rendered table, not Markdown's pipes: the preview drew it.
        assert s.js("return document.querySelectorAll('.jp-RenderedMarkdown table').length") >= 1
        pseudonym = text.split("On the class's times board:", 1)[1].split("(", 1)[0].strip()
        # From the hub's home page to the boards, to this exercise's, where she finds herself.
        from selenium.webdriver.common.by import By

        s.driver.get(f"{hub.url}/hub/home")
        s.driver.find_element(By.ID, "idrrun-boards").click()
        wait(lambda: "Times boards" in s.page(), 60, s.page)
        s.driver.find_element(By.LINK_TEXT, "answer").click()
        wait(lambda: "Times board: answer" in s.page(), 60, s.page)
        s.shot("6-board")
        assert pseudonym in s.page(), (pseudonym, s.page())
        s.driver.find_element(By.LINK_TEXT, "the hub's home").click()
        wait(lambda: s.driver.current_url.rstrip("/").endswith("/hub/home"), 60, lambda: s.driver.current_url)
