"""The class day (issue 45), on the hub of tests/test_hub.py (the 3-node SLURM cluster,
JupyterHub, its exchange receiver), one hub for both tests of the module.

In the students' browsers: two students in headless chromium, through JupyterLab's own UI
only: each finds the assignment in the Assignments panel, fetches it, edits and runs its check
cell, submits without saving (the panel saves first) and reads what was received; the teacher
collects, grades and returns; each opens her feedback from the panel, rendered, with her
points and her pseudonym on the times board. Screenshots of each step are written to
IDRRUN_SHOTS (default: the test's own folder) for a person to look at.

As the teacher's page says: docs/teachers-day.md's commands, in its order, as written (the
rules and substitutions of tests/test_teachers_day_run.py), the teacher's as root through the
cluster, the students' (list, fetch, submit, feedback) as each of them with her own hub token.

Needs what tests/test_hub.py needs; the browsers' test, chromium with chromedriver.
"""

from __future__ import annotations

import csv
import datetime as dt
import http.cookiejar
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import PYTHONPATH, ROOT
from answer_course import PROGRAM, SPEC
from idrrun.grading import exchange as exchange_mod
from jupyter_lab import chromium
from test_hub import CHROMIUM, VENV, Hub, hub, nodes, wait  # noqa: F401 (the fixtures)
from test_teachers_day_run import PAGE, Day

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
in_chromium = pytest.mark.skipif(CHROMIUM is None or shutil.which("chromedriver") is None,
                                 reason="chromium is not installed (apt-get install chromium chromium-driver)")

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


@in_chromium
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


# --- The teacher's day as docs/teachers-day.md says it, word for word -----------------------

# A student's work between fetch and submit (the page: "work, save"): her notebook's exercise
# cell (the one that checks the exercise) holds the solution's source; run as her.
WORK = """\
import json, sys
path, source = sys.argv[1], open(sys.argv[2]).read()
nb = json.load(open(path))
[cell] = [c for c in nb["cells"] if "exercise" in c.get("metadata", {}).get("tags", [])
          and "--check profile_cg" in "".join(c["source"])]
line = "".join(cell["source"]).splitlines()[0]
cell["source"] = line + "\\n" + source
json.dump(nb, open(path, "w"), indent=1)
"""


def hub_token(hub: Hub, login: str) -> str:
    """Her own hub token, asked of the hub with her login and password (a server's token, which
    her kernels and terminals have, without a server)."""
    assert hub.api("POST", f"/hub/api/users/{login}")[0] in (201, 409)
    request = urllib.request.Request(
        f"{hub.url}/hub/api/users/{login}/tokens", method="POST",
        data=json.dumps({"auth": {"username": login, "password": hub.password},
                         "note": "the teacher's day"}).encode())
    with urllib.request.urlopen(request, timeout=60) as r:
        return str(json.load(r)["token"])


def logged_in(hub: Hub, login: str) -> Callable[[str], str]:
    """A page of the hub as she reads it once logged in through its login form (its XSRF
    token, then the hub's cookie)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    with opener.open(f"{hub.url}/hub/login", timeout=30) as r:
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', r.read().decode())
    assert xsrf is not None
    body = urllib.parse.urlencode({"username": login, "password": hub.password,
                                   "_xsrf": xsrf.group(1)}).encode()
    opener.open(urllib.request.Request(f"{hub.url}/hub/login", data=body), timeout=30).close()

    def get(path: str) -> str:
        with opener.open(hub.url + path, timeout=30) as r:
            return str(r.read().decode())
    return get


def test_the_teachers_day_as_the_page_says(hub: Hub) -> None:
    """docs/teachers-day.md's commands in the page's order, as written (tests/
    test_teachers_day_run.py: its rules, what it skips and why, its substitutions): the
    teacher's as root with the page's PATH, in a folder of root's standing for /root, through
    the 3-node cluster (grade --launcher srun -j 8) and this module's hub (its receiver, its
    boards); the students' (list, fetch, submit, feedback) as each of them, with her own hub
    token. One student ports the exercise, the other hands in the release unchanged. The grade
    is tried first without IDRRUN_CACHE_DIR: refused, the folder named. At the end nothing was
    written in root's configuration (~/.config, ~/.ipython, ~/.jupyter)."""
    top = hub.top / "day"
    top.mkdir(mode=0o755)
    home = top / "root"
    home.mkdir(mode=0o700)
    students = hub.students[:2]
    homes = {login: hub.top / "home" / login for login in students}
    solution = top / "profile_cg_solution.c"
    solution.write_text((ROOT / "examples" / "C" / "profile_cg_solution.c").read_text())
    solution.chmod(0o644)
    teacher_env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("XDG_", "IDRRUN_", "JUPYTER", "IPYTHON", "PYTEST"))}
    teacher_env.update(SLURM_CONF=str(hub.cluster.conf), HOME=str(home), USER="root",
                       LOGNAME="root", PYTHONPATH=PYTHONPATH)
    student_env = {login: {"HOME": str(homes[login]), "USER": login, "LOGNAME": login,
                           "PATH": f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                           "IDRRUN_EXCHANGE_URL": hub.exchange_url,
                           "JUPYTERHUB_API_TOKEN": hub_token(hub, login)} for login in students}
    deadline = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).replace(microsecond=0)
    # The page's grade with the cache where the nodes' steps cannot reach it, before the
    # page's own: (the refusal, whether a report was written after it).
    refused: dict[str, tuple[subprocess.CompletedProcess[str], bool]] = {}
    login_tmp = Path(tempfile.mkdtemp(prefix="idrrun-day-cache-", dir="/tmp"))  # (the nodes' are their own)
    login_tmp.chmod(0o755)

    def work(who: str, line: str) -> None:
        if who != students[0]:
            return  # (the other hands in the release as it was)
        [notebook] = shlex.split(line)[-1:]
        subprocess.run(["runuser", "-u", who, "--", f"{VENV}/bin/python", "-c", WORK,
                        str(homes[who] / notebook), str(solution)], check=True, cwd=homes[who])

    def elsewhere(who: str, line: str) -> None:
        if refused:
            return
        # IDRRUN_CACHE_DIR left out (~/.cache, in root's 0700 home), then in the login node's /tmp.
        for name, cache in (("home", ""), ("tmp", f"IDRRUN_CACHE_DIR={login_tmp / 'cache'} ")):
            if name == "tmp" and not hub.cluster.private_tmp:
                continue  # (the nodes see this machine's /tmp)
            r = day.shell(re.sub(r"IDRRUN_CACHE_DIR=\S+ ", cache, line))
            refused[name] = (r, (home / "profile_cg" / "report.csv").exists())

    day = Day(top=top, home=home, venv=VENV, shared=hub.cluster.shared, exchange=hub.exchange,
              boards=hub.top / "boards", deadline=deadline.isoformat(), students=students,
              student_env=student_env, teacher_env=teacher_env,
              before={"classroom submit": work, "grade": elsewhere})
    started = time.monotonic()
    try:
        day.run(PAGE.read_text())
    finally:
        shutil.rmtree(login_tmp)
    took = time.monotonic() - started
    print(f"\nthe teacher's day, {len(day.ran)} commands run, {len(day.skipped)} skipped, in {took:.0f} s")
    for command, why in day.skipped:
        print(f"  skipped: {command.line[:70]}: {why[:80]}")

    # Without IDRRUN_CACHE_DIR, or with the login node's /tmp: refused before grading, the
    # folder (root's home) or the node named, with the fix, on one line.
    said = {"home": re.escape(f"{home} (mode 700) lets no other user pass: set IDRRUN_CACHE_DIR"),
            "tmp": r"a job step on node n\d does not see " + re.escape(f"{login_tmp}/cache/scratch/")}
    assert set(refused) == ({"home", "tmp"} if hub.cluster.private_tmp else {"home"}), refused
    for name, (r, graded) in refused.items():
        assert r.returncode == 2 and not graded and re.search(said[name], r.stderr), r.stdout + r.stderr
        assert "set IDRRUN_CACHE_DIR" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # What each step said, as the teacher and the students read it.
    [ann, ben] = students
    assert "solution cell(s) left out" in day.output(r"classroom release"), day.output(r"classroom release")
    assert "profile_cg" in day.output(r"classroom list", ann)
    assert (homes[ann] / "profile_cg" / "C_10_profiling.ipynb").is_file()
    assert "received profile_cg (submission 1)" in day.output(r"classroom submit", ann)
    assert "unchanged from the release (byte for byte" in day.output(r"classroom submit", ben)
    assert "byte for byte" not in day.output(r"classroom submit", ann)
    status = day.output(r"classroom status")
    assert "2 of 2 submitted" in status and "byte for byte" in status, status
    assert "resuming: 2 rows kept" in day.output(r"--board ")
    collected = {r["student"]: r for r in csv.DictReader((home / "profile_cg" / "collected.csv").open())}
    assert {r["status"] for r in collected.values()} == {"collected"}, collected
    report = {r["student"]: r for r in csv.DictReader((home / "profile_cg" / "report.csv").open())}
    assert set(report) == {ann, ben}, report
    # (Her port is "incomplete" on a machine without a GPU: the GPU's checks are not evaluated.)
    assert report[ben]["verdict"] == "fail" and report[ann]["verdict"] in ("pass", "incomplete"), report
    assert {report[s]["node"] for s in students} <= set(hub.cluster.nodes), report
    assert (home / "profile_cg" / "report.board.md").is_file()
    assert (hub.top / "boards" / "profile_cg.html").is_file()
    feedback = (homes[ann] / "profile_cg" / "feedback" / "profile_cg.md").read_text()
    assert "points" in feedback and "On the class's times board:" in feedback, feedback
    marks = list(csv.DictReader((home / "marks-moodle.csv").open()))
    assert any("Ann" in r.values() and "Smith" in r.values() for r in marks), marks
    # The board's page, as the hub serves it to a student logged in (its login form).
    assert "Times board: profile_cg" in logged_in(hub, ann)("/hub/boards/profile_cg")
    # Nothing of root's own configuration written: only the day's files in root's home.
    assert {p.name for p in home.iterdir()} <= {"class.csv", "course", "profile_cg",
                                                "marks-moodle.csv", ".cache"}, sorted(home.iterdir())
