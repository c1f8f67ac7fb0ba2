"""hub/install.sh refuses to build a hub its students cannot use, before its long steps (pip,
npm): a Python, or a PREFIX, in a folder other users cannot enter (a pyenv under root's 0700
home: every student's server job died at once, "Permission denied" in a log in her home),
naming the fix; not root, it says what it could not check. Nothing is installed here.
It writes nothing in root's own configuration. And the hub's scripts pass shellcheck, the
profile script as sh."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ROOT

HUB = ROOT / "hub"
as_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None,
                             reason="checks as another user (runuser): root")


@pytest.fixture
def top() -> Iterator[Path]:
    """A folder every user can enter (pytest's tmp_path is root's 0700 one)."""
    folder = Path(tempfile.mkdtemp(prefix="idrrun-hub-install-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def install(prefix: Path, python: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = ["bash", str(HUB / "install.sh"), str(prefix)]
    if user:
        argv = ["runuser", "-u", user, "--", *argv]
    # (In its own session: a script that did not refuse is stopped with its pip, at once.)
    with subprocess.Popen(argv, env=dict(os.environ, PYTHON=python), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd="/", start_new_session=True) as p:
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            err += "\n(still running after 30 s: stopped)"
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def private_python(folder: Path) -> Path:
    """A Python (a venv of /usr/bin/python3's, no pip: fast) in a folder only root may enter."""
    folder.mkdir(mode=0o700)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(folder / "py")],
                   check=True)
    return folder / "py" / "bin" / "python3"


@as_root
def test_a_python_students_cannot_run_is_refused_naming_the_fix(top: Path) -> None:
    python = private_python(top / "root-home")
    started = time.monotonic()
    r = install(top / "hub", str(python))
    assert r.returncode != 0, r.stdout + r.stderr
    assert f"{python} cannot be run by other users" in r.stderr, r.stderr
    assert "Permission denied" in r.stderr, r.stderr
    assert f"PYTHON=/usr/bin/python3 bash hub/install.sh {top / 'hub'}" in r.stderr, r.stderr
    assert not (top / "hub").exists() and time.monotonic() - started < 30


@as_root
def test_a_prefix_students_cannot_enter_is_refused_naming_the_folder(top: Path) -> None:
    (top / "root-home").mkdir(mode=0o700)
    r = install(top / "root-home" / "hub", "/usr/bin/python3")
    assert r.returncode != 0, r.stdout + r.stderr
    assert f"other users cannot enter {top / 'root-home'}" in r.stderr, r.stderr
    assert not (top / "root-home" / "hub").exists()


@as_root
def test_not_root_it_says_what_it_could_not_check(top: Path) -> None:
    """As nobody, in a folder nobody may write: the warning, then the first step's failure."""
    r = install(top / "hub", "/usr/bin/python3", user="nobody")
    assert r.returncode != 0, r.stdout + r.stderr
    assert "not root: could not check that other users can run /usr/bin/python3" in r.stderr, (
        r.stderr)
    assert "/etc/profile.d/idrrun-hub.sh" in r.stderr, r.stderr


def test_the_hub_scripts_pass_shellcheck() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (docker/install.sh dev installs it)")
    r = subprocess.run(["shellcheck", str(HUB / "install.sh"), str(HUB / "idrrun-hub.sh")],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")


def home_config_writes(script: str) -> list[str]:
    """What a hub recipe would write in the installing user's own configuration: a part of
    docker/install.sh other than `python` (its `config` part writes ~/.ipython and
    ~/.config/idrrun for the current user), or a line naming a home or its config folders."""
    found = [f"docker/install.sh {m}" for m in re.findall(
        r'^[^#\n]*\bbash "\$here/\.\./docker/install\.sh" (\w+)', script, re.M) if m != "python"]
    found += [line.strip() for line in script.splitlines() if not line.lstrip().startswith("#")
              and re.search(r"\$HOME|~/|XDG_CONFIG_HOME|IPYTHONDIR|\.ipython|\.jupyter|\.config/", line)]
    return found


def test_the_recipe_writes_nothing_in_roots_own_configuration() -> None:
    """The course's settings live in the course's environment (PREFIX) and on the commands'
    lines (docs/teachers-day.md), never in root's ~/.config/idrrun or ~/.ipython: hub/install.sh
    takes only docker/install.sh's python part (PREFIX's venv; the config part is for an
    image's own user). Seen failing on a scratch copy that calls the config part."""
    script = (HUB / "install.sh").read_text()
    assert re.search(r'docker/install\.sh" python "\$prefix"', script), script
    assert home_config_writes(script) == []
    scratch = script.replace('bash "$here/../docker/install.sh" python "$prefix"',
                             'bash "$here/../docker/install.sh" python "$prefix"\n'
                             'bash "$here/../docker/install.sh" config "$prefix"')
    assert home_config_writes(scratch) == ["docker/install.sh config"]
