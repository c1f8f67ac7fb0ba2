"""A real JupyterLab server for the tests that need one (a free localhost port, a token, its own
Jupyter folders in a temp dir: nothing of the developer's config, settings or workspaces), and the
notebook of idrrun cells that the highlighting tests open and export."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from ports import free_port

C_CELL = """%%idrrun -a
#include <stdio.h>
// the sum of 1..n
int main(void) {
    int n = 10, sum = 0;
    for (int i = 1; i <= n; i++) sum += i;
    printf("%d\\n", sum);
    return 0;
}"""
# No `program` line: idrrun's guess would say nothing here, only the flag makes it Fortran.
FORTRAN_FLAG_CELL = """%%idrrun -l fortran
integer :: i
! the language comes from -l
i = 42
print *, i
end"""
FORTRAN_BODY_CELL = """%%idrrun -a
program saxpy
  implicit none
  ! y = a*x + y on the GPU
  integer :: i
  real :: x(100), y(100)
  !$acc kernels
  do i = 1, 100
    y(i) = 2.0 * x(i) + y(i)
  end do
  !$acc end kernels
end program saxpy"""
PYTHON_CELL = """# a Python cell
for i in range(3):
    print(i)"""

CELLS = (C_CELL, FORTRAN_FLAG_CELL, FORTRAN_BODY_CELL, PYTHON_CELL)

START_TIMEOUT = 120.0  # seconds; a cold start on a busy 2-core machine takes ~10
ROOT = Path(__file__).resolve().parent.parent
# The JupyterLab extension as this checkout builds it (`pip install -e .`, or `npm run build:prod`
# in labextension/): the servers of the tests load it rather than the one installed with idrrun,
# which may come from another checkout of the same environment.
CHECKOUT_LABEXTENSION = ROOT / "labextension" / "dist"
LABEXTENSION_SOURCES = ROOT / "labextension" / "src"


def idrrun_notebook(path: Path) -> None:
    """A Python notebook: a C cell, two Fortran cells (by flag, by body), a Python cell."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3",
                                    "codemirror_mode": {"name": "ipython", "version": 3}}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nbformat.write(nb, path)


@dataclass(frozen=True)
class Frontend:
    """A Jupyter web application: JupyterLab 4 or Notebook 7 (the same editor, another shell)."""

    module: str  # `python -m MODULE` starts it
    app_class: str  # its traitlets class, for --CLASS.expose_app_in_browser
    notebook_path: str  # the URL path that opens a notebook, before the notebook's path


FRONTENDS = {
    "lab": Frontend("jupyterlab", "LabApp", "/lab/tree/"),
    "notebook": Frontend("notebook", "JupyterNotebookApp", "/notebooks/"),
}


@dataclass(frozen=True)
class LabServer:
    url: str  # http://127.0.0.1:PORT
    token: str
    root: Path
    log: Path
    frontend: Frontend

    def notebook_url(self, name: str) -> str:
        return f"{self.url}{self.frontend.notebook_path}{name}?token={self.token}"

    def get(self, path: str, timeout: float = 60.0) -> bytes:
        request = urllib.request.Request(f"{self.url}{path}",
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bytes(response.read())

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no server log: {exc})"


def checkout_labextension() -> Path | None:
    """This checkout's build of the extension, if it has one."""
    return CHECKOUT_LABEXTENSION if (CHECKOUT_LABEXTENSION / "package.json").is_file() else None


def changed_since_built() -> list[str]:
    """The extension's sources changed after this checkout's build of it (none: no build)."""
    if checkout_labextension() is None:
        return []
    built = (CHECKOUT_LABEXTENSION / "package.json").stat().st_mtime
    return sorted(p.name for p in LABEXTENSION_SOURCES.iterdir() if p.stat().st_mtime > built)


def jupyter_env(home: Path) -> dict[str, str]:
    """The environment of a Jupyter process that reads only what this test gives it, and runs
    this checkout's idrrun: its Python package (for the server extension and the kernels) and
    its JupyterLab extension when it is built (JUPYTER_PATH comes first in Jupyter's search)."""
    dirs = {
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_DATA_DIR": home / "data",
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": home / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / "lab-workspaces",
        "IPYTHONDIR": home / "ipython",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **{name: str(path) for name, path in dirs.items()}}
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    built = checkout_labextension()
    if built is not None:
        extensions = home / "checkout" / "labextensions"
        extensions.mkdir(parents=True, exist_ok=True)
        link = extensions / "idrrun-highlight"
        if not link.is_symlink():
            link.symlink_to(built, target_is_directory=True)
        env["JUPYTER_PATH"] = str(home / "checkout")
    return env


def labextensions(home: Path) -> str:
    """`jupyter labextension list`, as the server of `running_lab` would see the extensions."""
    done = subprocess.run([sys.executable, "-m", "jupyterlab.labextensions", "list"],
                          env=jupyter_env(home), capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


@contextmanager
def running_lab(root: Path, home: Path, frontend: str = "lab") -> Iterator[LabServer]:
    """`jupyter lab` (or `jupyter notebook`) serving `root`, its app exposed to the page as
    `window.jupyterapp`.

    expose_app_in_browser is how JupyterLab's own browser tests (Galata) reach the notebook's
    cells and editors from the page.
    """
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    token = secrets.token_hex(16)
    app = FRONTENDS[frontend]
    log = home / f"jupyter-{frontend}.log"
    argv = [sys.executable, "-m", app.module, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
            "--port-retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            f"--{app.app_class}.expose_app_in_browser=True"]
    if os.geteuid() == 0:  # containers and CI runners: jupyter refuses root unless told
        argv.append("--allow-root")
    with log.open("w") as out:
        # Its own session: the server and the kernels it starts are stopped as one group.
        proc = subprocess.Popen(argv, cwd=root, env=jupyter_env(home), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    server = LabServer(url=f"http://127.0.0.1:{port}", token=token, root=root, log=log,
                       frontend=app)
    try:
        _wait_until_up(server, proc)
        yield server
    finally:
        _stop(proc)


def _wait_until_up(server: LabServer, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{server.frontend.module} exited with {proc.returncode}:\n"
                               f"{server.log_tail()}")
        try:
            status = json.loads(server.get("/api/status", timeout=5))
        except (OSError, urllib.error.URLError, ValueError):
            time.sleep(0.3)
            continue
        if "started" in status:
            return
    raise RuntimeError(f"{server.frontend.module} did not answer in {START_TIMEOUT:.0f} s:\n"
                       f"{server.log_tail()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # SIGTERM lets the server shut its kernels down; then SIGKILL whatever of the group is left.
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=5)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless, and quiet on this machine's closed network (no update, sync or QUIC lookups).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium(profile: Path, window: str = "1280,1100", log: Path | None = None,
             console: bool = False) -> Any:
    """Debian's chromium through its chromedriver (never one selenium would download), with a
    fresh profile folder; `console`: the page's console messages kept for driver.get_log."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromedriver = shutil.which("chromedriver")
    assert chromedriver, "chromium is installed, chromedriver is not: apt-get install chromium-driver"
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={window}"):
        options.add_argument(flag)
    if console:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=chromedriver,
                      log_output=str(log or profile.with_name(profile.name + ".driver.log")))
    return webdriver.Chrome(options=options, service=service)
