"""The course's hub (hub/jupyterhub_config.py) on the real 3-node SLURM cluster of
tests/slurmcluster.py: JupyterHub with batchspawner spawns each student's server as a SLURM job
on a node, as the student; her kernel runs a `%%idrrun --check` cell there and submits through
the exchange; the teacher (root) collects, grades and returns; each student reads her own
feedback and nobody else's; driven through the hub's REST API and the servers' kernel
websockets (the browser's own path: the proxy, the server, the kernel). Then a student in
headless chromium logs in, opens the released notebook in her JupyterLab and sees its check's
verdict, computed on her node. A terminal of her JupyterLab (a login shell) runs idrrun; a
student whose server's job dies at once sees why, with her job log's last line, within
seconds. The hub is started as teachers-day.md says: the proxy in the environment's bin, not
on PATH. IDRRUN_HUB_STUDENTS=N: the same with N students, and the times (docs/teachers-day.md,
"Scale").

Needs: root, SLURM and munge, the hub's environment (IDRRUN_HUB_VENV, default
/opt/idrrun-hub: hub/install.sh makes it) and configurable-http-proxy on PATH or in it;
chromium and chromedriver for the browser's test.
"""

from __future__ import annotations

import contextlib
import csv
import http.cookiejar
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from conftest import PYTHONPATH, ROOT
import slurmcluster
from answer_course import PROGRAM, SPEC, write_course
from idrrun.grading import exchange as exchange_mod
from hub_client import HubClient
from ports import free_port

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

VENV = Path(os.environ.get("IDRRUN_HUB_VENV", "/opt/idrrun-hub"))




def proxy() -> str | None:
    return shutil.which("configurable-http-proxy", path=f"{VENV}/bin:{os.environ['PATH']}")


@dataclass
class Hub(HubClient):
    cluster: slurmcluster.Cluster
    top: Path
    students: list[str]
    broken: str  # a student whose JupyterLab configuration stops her server at its start
    exchange: Path
    roster: Path
    password: str
    exchange_url: str


def prerequisites() -> None:
    missing = slurmcluster.missing_tools()
    if missing:
        pytest.skip(f"SLURM is not installed ({', '.join(missing)})")
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("the hub test makes real students with useradd and runs the cluster: root")
    for tool in ("jupyterhub", "batchspawner-singleuser", "jupyterhub-singleuser"):
        if not (VENV / "bin" / tool).exists():
            pytest.skip(f"no hub environment ({VENV}/bin/{tool}): bash hub/install.sh {VENV}")
    if proxy() is None:
        pytest.skip("configurable-http-proxy is not installed (npm install -g configurable-http-proxy)")


def _kill_left(marks: list[str]) -> None:
    """Kill the processes whose command line holds one of `marks` (what a killed hub left)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace") + " "
        except OSError:
            continue
        if any(mark in line for mark in marks):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    prerequisites()
    top = Path(tempfile.mkdtemp(prefix="idrrun-hub-", dir="/var/tmp"))
    top.chmod(0o755)
    cluster = slurmcluster.start(top / "cluster", nodes=3, cpus=2)
    (top / "cluster").chmod(0o755)  # the students' sbatch reads slurm.conf and munge's socket
    tag = secrets.token_hex(2)
    # Two students in the test; IDRRUN_HUB_STUDENTS=N for the scale figures (docs/teachers-day.md).
    students = [f"ihub{tag}{i}" for i in range(int(os.environ.get("IDRRUN_HUB_STUDENTS", "2")))]
    homes = top / "home"
    homes.mkdir(mode=0o755)
    broken = f"ihub{tag}x"
    for login in [*students, broken]:
        subprocess.run(["useradd", "-m", "-d", str(homes / login), "-U", "-s", "/bin/bash", login],
                       check=True)
    # Her own JupyterLab settings name a folder she does not have: her server's job dies at once.
    config = homes / broken / ".jupyter" / "jupyter_server_config.py"
    config.parent.mkdir()
    config.write_text(f"c.ServerApp.root_dir = {str(homes / broken / 'course-2025')!r}\n")
    shutil.chown(config.parent, broken, broken)
    shutil.chown(config, broken, broken)
    roster = top / "roster.csv"
    roster.write_text("submission,login\n" + "".join(f"{s},{s}\n" for s in students))
    examples = top / "examples"  # the students' view of the exercise: its spec and start file
    write_course(examples)
    port, token, password = free_port(), secrets.token_hex(16), secrets.token_hex(8)
    exchange_port = free_port()
    state = top / "hub"
    env = dict(cluster.env, IDRRUN_HUB_VENV=str(VENV), IDRRUN_HUB_STATE=str(state),
               IDRRUN_HUB_PORT=str(port), IDRRUN_HUB_INTERNAL_PORT=str(free_port()),
               IDRRUN_HUB_PROXY_PORT=str(free_port()), IDRRUN_HUB_AUTH="dummy",
               IDRRUN_HUB_PASSWORD=password,
               IDRRUN_HUB_SERVER_ARGS="--LabApp.expose_app_in_browser=True",
               IDRRUN_HUB_USERS=",".join([*students, broken]),
               IDRRUN_HUB_API_TOKEN=token, IDRRUN_EXAMPLES=str(examples),
               IDRRUN_HUB_BOARDS=str(top / "boards"), IDRRUN_HUB_EXCHANGE=str(top / "exchange"),
               IDRRUN_HUB_EXCHANGE_PORT=str(exchange_port),
               IDRRUN_HUB_NODES=",".join(f"{n}=127.0.0.1" for n in cluster.nodes))
    log = (top / "hub.log").open("w")
    process = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f",
                                str(ROOT / "hub" / "jupyterhub_config.py")],
                               cwd=top, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    h = Hub(f"http://127.0.0.1:{port}", token, cluster, top, students, broken, top / "exchange",
            roster, password, f"http://127.0.0.1:{exchange_port}")
    try:
        deadline = time.monotonic() + 60
        while h.api("GET", "/hub/api/")[0] != 200:
            assert process.poll() is None and time.monotonic() < deadline, (top / "hub.log").read_text()
            time.sleep(0.5)
        yield h
    finally:
        with contextlib.suppress(ProcessLookupError):  # (a hub that did not start has exited)
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        # A hub killed before its cleanup leaves its proxy and its exchange (sessions of their
        # own): seen left running after CI's hub tests, two per run.
        _kill_left([f"--port {port} ", f"--exchange {top / 'exchange'}"])
        for login in [*students, broken]:
            cluster.run("scancel", "-u", login)
        left = slurmcluster.stop(cluster)
        for login in [*students, broken]:
            subprocess.run(["pkill", "-KILL", "-u", login], check=False)
            subprocess.run(["userdel", login], check=False)
        if os.environ.get("IDRRUN_HUB_KEEP"):  # (the hub's log and the homes, to look at)
            print(f"\nthe hub's folder, kept: {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)
        assert not left, f"left after the cluster stopped: {left}"


def spawn(hub: Hub, login: str) -> None:
    """Her server asked for through the hub's API (as her "Start my server")."""
    assert hub.api("POST", f"/hub/api/users/{login}")[0] in (201, 409)
    code, body = hub.api("POST", f"/hub/api/users/{login}/server")
    assert code in (201, 202), f"{body}\n{(hub.top / 'hub.log').read_text()[-3000:]}"


def spawned(hub: Hub, login: str) -> str:
    """Her server once ready; returns the node its job runs on."""
    deadline = time.monotonic() + 240
    while True:
        code, user = hub.api("GET", f"/hub/api/users/{login}")
        server = (user.get("servers") or {}).get("", {}) if code == 200 else {}
        if server.get("ready"):
            break
        assert time.monotonic() < deadline, (hub.top / "hub.log").read_text()[-5000:]
        time.sleep(1)
    jobs = hub.cluster.run("squeue", "-h", "-u", login, "-o", "%j %T %N").stdout.split()
    assert jobs[:2] == ["idrrun-hub", "RUNNING"], jobs
    return jobs[2]


@pytest.fixture(scope="module")
def nodes(hub: Hub) -> dict[str, str]:
    """Both students' servers started (through the hub's API): login -> its job's node."""
    started = time.monotonic()
    for login in hub.students:
        spawn(hub, login)
    out = {login: spawned(hub, login) for login in hub.students}
    print(f"\nthe hub started {len(out)} servers as SLURM jobs in {time.monotonic() - started:.1f} s")
    assert set(out.values()) <= set(hub.cluster.nodes)
    # The teacher releases the exercise (as root, on the shared file system): its start file
    # and a notebook whose cell checks it.
    start = hub.top / "answer_exercise.c"
    start.write_text(PROGRAM.format(value=0))
    notebook = hub.top / "answer.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext idrrun"),
        nbformat.v4.new_code_cell("%%idrrun --check answer\n" + PROGRAM.format(value=0))],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}}), notebook)
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "classroom", "release", "answer",
                        str(start), str(notebook), "--exchange", str(hub.exchange),
                        "--roster", str(hub.roster)],
                       env=dict(os.environ, PYTHONPATH=PYTHONPATH), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def kernel_of(hub: Hub, login: str) -> str:
    code, kernels = hub.api("GET", f"/user/{login}/api/kernels")
    assert code == 200, kernels
    if kernels:
        return str(kernels[0]["id"])
    code, kernel = hub.api("POST", f"/user/{login}/api/kernels", {"name": "python3"})
    assert code == 201, kernel
    return str(kernel["id"])


def test_hub_spawns_servers_as_slurm_jobs_and_the_class_goes_round(
        hub: Hub, nodes: dict[str, str]) -> None:
    values = {login: 42 if i % 2 == 0 else 41 for i, login in enumerate(hub.students)}
    times = {"cells and submit, each": time.monotonic()}
    for login in hub.students:
        kernel = kernel_of(hub, login)
        status, out = hub.run_cell(login, kernel,
                               f"import os, socket; print(os.environ['SLURMD_NODENAME'], os.getuid())\n"
                               f"!idrrun classroom fetch answer")
        assert status == "ok", out
        assert out.split()[:2] == [nodes[login], str(subprocess.run(
            ["id", "-u", login], capture_output=True, text=True).stdout.strip())], out
        cell = "%load_ext idrrun\n"
        status, out = hub.run_cell(login, kernel, cell)
        assert status == "ok", out
        body = PROGRAM.format(value=values[login])
        status, out = hub.run_cell(login, kernel, f"%%idrrun --check answer\n{body}")
        # The verdict as she sees it, from the node (the OpenACC build check is INCOMPLETE: the line
        # has no -a; the cell of a failed check raises, as a notebook runner expects).
        if values[login] == 42:
            assert status == "ok" and "answer: INCOMPLETE, 2 checks passed" in out, out
        else:
            assert status == "error" and "answer: FAIL, 1 of 3 checks failed" in out, out
            assert "C[0] is 41, expected 42" in out, out
        status, out = hub.run_cell(login, kernel,
                               f"open('answer/answer.c', 'w').write({body!r})\n"
                               f"!idrrun classroom submit answer answer/answer.c")
        # Received by the hub's receiver, who knew her by her server's hub token.
        assert status == "ok" and "received answer (submission 1)" in out, out
        [receipt] = exchange_mod.receipts(hub.exchange, login, "answer")
        assert receipt.digest == exchange_mod.digest_of({"answer.c": body.encode()})
    times["cells and submit, each"] = (time.monotonic() - times["cells and submit, each"]) / len(values)
    # The teacher collects, grades (sandboxed, as root), returns.
    out = hub.top / "collected"
    # (idrrun's cache on the shared file system: the grading's steps run on the nodes.)
    env = dict(hub.cluster.env, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(hub.top / "examples"),
               XDG_CACHE_HOME=str(hub.cluster.shared / "cache"))

    def idrrun(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], env=env, cwd=hub.top,
                              capture_output=True, text=True, timeout=300)

    times["collect"] = time.monotonic()
    r = idrrun("classroom", "collect", "answer", "--exchange", str(hub.exchange), "--roster",
               str(hub.roster), "--to", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    times["collect"] = time.monotonic() - times["collect"]
    times["grade"] = time.monotonic()
    r = idrrun("grade", "answer", "-j", "4", "--launcher", "srun",
               *sorted(map(str, (out / "submissions").iterdir())),
               "--feedback", str(hub.top / "feedback"), "--report", str(hub.top / "r.csv"))
    assert r.returncode == 0, r.stdout + r.stderr
    verdicts = {row["student"]: row["verdict"] for row in csv.DictReader((hub.top / "r.csv").open())}
    times["grade"] = time.monotonic() - times["grade"]
    assert verdicts == {login: "pass" if v == 42 else "fail" for login, v in values.items()}, verdicts
    times["return"] = time.monotonic()
    r = idrrun("classroom", "return", "answer", "--exchange", str(hub.exchange), "--roster",
               str(hub.roster), "--feedback", str(hub.top / "feedback"))
    assert r.returncode == 0, r.stdout + r.stderr
    # Each student reads her feedback from her server, and neither the other's nor her work.
    times["return"] = time.monotonic() - times["return"]
    print(f"\n{len(values)} students: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))
    for login, other in zip(hub.students, hub.students[1:] + hub.students[:1]):
        status, text = hub.run_cell(login, kernel_of(hub, login),
                                f"!idrrun classroom feedback answer\n"
                                f"!cat {hub.exchange}/feedback/{other}/answer.md "
                                f"{hub.exchange}/received/{other}/answer/000001/answer.c")
        assert status == "ok" and "saved in" in text and "answer" in text, text
        assert text.count("Permission denied") == 2, text
    # A token the hub did not give is nobody's: the receiver refuses it, and keeps nothing.
    forged = urllib.request.Request(
        f"{hub.exchange_url}/api/submissions/answer", method="POST",
        data=b'{"files": {"answer.c": "aW50IHg7Cg=="}}',
        headers={"Authorization": "token " + secrets.token_hex(16)})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged, timeout=30)
    assert refused.value.code == 403
    assert [r.number for r in exchange_mod.receipts(hub.exchange, hub.students[0], "answer")] == [1]


def test_a_terminal_of_her_jupyterlab_runs_idrrun(hub: Hub, nodes: dict[str, str]) -> None:
    """JupyterLab's terminal, as its page opens one (the terminals' API, then the terminal's
    websocket): a login shell, whose /etc/profile replaces the PATH the hub gave her server;
    idrrun is there all the same, the course environment's."""
    version = subprocess.run([str(VENV / "bin" / "idrrun"), "--version"], capture_output=True,
                             text=True, check=True).stdout.strip()
    for login in hub.students:
        shown = hub.type_in_terminal(login, "idrrun --version")
        assert version in shown, (
            f"{shown}\n(hub/install.sh as root writes /etc/profile.d/idrrun-hub.sh)")


def test_a_server_whose_job_dies_fails_at_once_with_its_log(hub: Hub) -> None:
    """A student whose server cannot start (her own JupyterLab settings name a folder she does
    not have): her page says so within seconds, with her job log's last line, and so does the
    hub's log, for the teacher; not batchspawner's "waiting to connect" until the timeout."""
    started = time.monotonic()
    event = hub.spawn_outcome(hub.broken)
    took = time.monotonic() - started
    [log] = (hub.top / "home" / hub.broken).glob(".idrrun-hub-*.log")
    last = log.read_text().strip().splitlines()[-1]
    assert event.get("failed") and last in event["message"], (event, log.read_text())
    assert "No such directory" in event["message"] and log.name in event["message"], event
    assert took < 60, f"the failure came after {took:.0f} s"
    assert last in (hub.top / "hub.log").read_text()
    assert not hub.cluster.run("squeue", "-h", "-u", hub.broken).stdout.strip()


def test_the_hub_serves_the_times_board_to_logged_in_users_only(hub: Hub, tmp_path: Path) -> None:
    """The page `idrrun grade --board-page` writes (tests/test_board.py grades one), as the hub
    serves it: to a logged-in student (the login form, the hub's cookie), with a policy that lets
    it load and run nothing; the login page to anyone else; never a link's target."""
    from idrrun.checks import specs
    from idrrun.grading import board
    from idrrun.grading.report import GradeRow
    from idrrun.model import CheckResult

    spec = tmp_path / "answer.toml"
    shutil.copytree(hub.top / "examples" / "C", tmp_path / "C")
    spec.write_text(SPEC + '[[check]]\nkind = "gpu_busy"\nlabel = "GPU busy"\nmin = 0.5\n')
    rows = [GradeRow("<script>alert(1)</script>", "answer", "c", "pass", 0.1, 0.5, "x",
                     checks=(CheckResult("GPU busy", "pass", got="61 %", kind="gpu_busy"),),
                     lane="GPU 0 alone")]
    made = board.board(rows, specs.load(spec), b"k" * 32, {"c": (0.25,)}, "names")
    # A link in the folder before the board is written: neither listed nor served.
    (hub.top / "boards").mkdir(mode=0o755, exist_ok=True)
    (hub.top / "boards" / "shadow.html").symlink_to("/etc/shadow")
    board.write(made, hub.top / "r.csv", hub.top / "boards")

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)

    def get(path: str, auth: bool) -> tuple[int, str, str]:
        try:
            with (opener if auth else urllib.request.build_opener(NoRedirect)).open(
                    hub.url + path, timeout=30) as r:
                return r.status, r.headers.get("Content-Security-Policy", ""), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Location", ""), ""

    # A student logs in (the login form, its XSRF token, the hub's cookie).
    form = get("/hub/login", auth=True)[2]
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form)
    assert xsrf is not None, form
    body = urllib.parse.urlencode({"username": hub.students[0], "password": hub.password,
                                   "_xsrf": xsrf.group(1)}).encode()
    try:
        opener.open(urllib.request.Request(hub.url + "/hub/login", data=body), timeout=30)
    except urllib.error.HTTPError as e:
        assert e.code == 302, e.read()
    code, policy, page = get("/hub/boards/answer", auth=True)
    assert code == 200 and page == (hub.top / "boards" / "answer.html").read_text(), page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert policy.startswith("default-src 'none'"), policy
    code, location, _ = get("/hub/boards/answer", auth=False)
    assert code == 302 and "/hub/login" in location, (code, location)
    assert get("/hub/boards/shadow", auth=True)[0] == 404
    assert get("/hub/boards/..%2fhub.log", auth=True)[0] == 404
    # The boards' index, whose links (NAME.html) the hub serves too; the link to /etc/shadow
    # is not listed.
    code, _, index = get("/hub/boards/", auth=True)
    boards = [link for link in re.findall(r'href="([^"]+)"', index) if link.endswith(".html")]
    assert code == 200 and boards == ["answer.html"], index
    assert get("/hub/boards/answer.html", auth=True)[2] == page
    assert get("/hub/boards/", auth=False)[0] == 302


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None or shutil.which("chromedriver") is None,
                    reason="chromium is not installed (apt-get install chromium chromium-driver)")
def test_a_student_logs_in_opens_the_exercise_and_sees_its_check_from_her_node(
        hub: Hub, nodes: dict[str, str], tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    login = hub.students[0]
    status, out = hub.run_cell(login, kernel_of(hub, login),
                           f"!idrrun classroom fetch answer")
    assert status == "ok", out
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(
        executable_path=shutil.which("chromedriver"), log_output=str(tmp_path / "driver.log")))
    try:
        driver.set_page_load_timeout(120)
        driver.get(hub.url + "/hub/login")
        driver.find_element(By.ID, "username_input").send_keys(login)
        driver.find_element(By.ID, "password_input").send_keys(hub.password)
        driver.find_element(By.ID, "login_submit").click()
        driver.get(f"{hub.url}/user/{login}/lab/tree/answer/answer.ipynb")
        ready = ("const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                 "const s = w && w.sessionContext && w.sessionContext.session;"
                 "return !!(s && s.kernel && s.kernel.status === 'idle' && w.context.path === 'answer/answer.ipynb');")
        wait(lambda: driver.execute_script(ready), 120, lambda: driver.page_source[-2000:])
        driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        # The verdict of the released start file, computed on her node, drawn in her page.
        text = "return Array.from(document.querySelectorAll('.jp-OutputArea')).map(e => e.innerText).join('\\n');"
        wait(lambda: "C[0] is 0, expected 42" in driver.execute_script(text), 180,
             lambda: driver.execute_script(text))
        assert "answer: FAIL" in driver.execute_script(text)
    finally:
        driver.quit()


def wait(ok: Any, timeout: float, state: Any) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, state()
        time.sleep(0.5)
