"""What pip installs: `python -m build` makes an sdist and a wheel that `twine check` accepts; the
wheel, installed into a fresh venv, runs the course from anywhere (course check, a `--check` cell
in a kernel started from that venv, `course init --students`); the sdist runs its own tests.

Building takes a minute or two (two isolated build environments, npm for the JupyterLab
extension): the dists are kept in the system's temporary folder under a key made of every file
git tracks (content included), so they are built once per change of the sources; or taken from
IDRRUN_TEST_DISTS (.ci/run's, built once for the image recipe too) when they hold this checkout.
With IDRRUN_COURSE_VENV (the recipe's venv, that wheel installed), the wheel's venv is that one
when it holds exactly this wheel (its RECORD), instead of one made here."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from conftest import ROOT, started
from idrrun.checks.words import default_label
from idrrun.checking import NO_SOLUTION
from idrrun.authoring.copies import init_course
from idrrun.version import __version__

pytestmark = pytest.mark.slow
CACHE = Path(tempfile.gettempdir()) / "idrrun-test-dists"
SOLUTION_C = (ROOT / "examples" / "C" / "intro_saxpy_solution.c").read_text()


def _tracked() -> list[str]:
    r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("not a git checkout (an sdist): the packaging tests build from a checkout")
    return sorted(f for f in r.stdout.splitlines() if (ROOT / f).is_file() or (ROOT / f).is_symlink())


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user outside the checkout: no PYTHONPATH to the sources."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IDRRUN_EXAMPLES",
                                                             "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra)
    return env


def _given_dists(files: list[str]) -> Path | None:
    """IDRRUN_TEST_DISTS: a folder where `docker/install.sh wheel DIR --sdist` put the sdist and
    the wheel built from it (.ci/run: its image recipe builds them once). Taken when the sdist
    holds this checkout's files as they are now, else refused."""
    given = os.environ.get("IDRRUN_TEST_DISTS")
    if not given:
        return None
    folder = Path(given)
    wheels, sdists = list(folder.glob("idrrun-*.whl")), list(folder.glob("idrrun-*.tar.gz"))
    assert len(wheels) == len(sdists) == 1, f"IDRRUN_TEST_DISTS={given}: one wheel and one sdist wanted"
    top = f"idrrun-{__version__}/"
    with tarfile.open(sdists[0]) as tar:
        held = {m.name.removeprefix(top): m for m in tar.getmembers() if m.isfile()}
        for name in files:
            member = held.get(name)
            if member is not None:
                data = tar.extractfile(member)
                assert data is not None and data.read() == (ROOT / name).read_bytes(), \
                    f"IDRRUN_TEST_DISTS={given}: its {name} is not this checkout's"
    assert "pyproject.toml" in held and "idrrun/pipeline.py" in held, sorted(held)[:20]
    return folder


@pytest.fixture(scope="module")
def dists() -> Path:
    files = _tracked()
    given = _given_dists(files)
    if given is not None:
        return given
    digest = hashlib.sha256()
    for name in files:
        path = ROOT / name
        digest.update(name.encode() + b"\0")
        digest.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
    folder = CACHE / digest.hexdigest()[:16]
    if (folder / "done").is_file():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=CACHE, prefix=".build-"))
    try:
        src = work / "src"
        for name in files:  # what git tracks, as a fresh clone has it
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name, follow_symlinks=False)
        # The npm part, when the checkout has it built and up to date: hatch-jupyter-builder
        # skips npm when labextension/dist is not older than labextension/src.
        if (ROOT / "labextension" / "dist").is_dir():
            shutil.copytree(ROOT / "labextension" / "dist", src / "labextension" / "dist")
        r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(src)],
                           capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
        (work / "dist" / "done").write_text(r.stdout[-2000:])
        try:
            os.rename(work / "dist", folder)
        except OSError:
            assert (folder / "done").is_file()  # another session built the same sources
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder


def _wheel(dists: Path) -> Path:
    [wheel] = dists.glob("idrrun-*.whl")
    return wheel


def _sdist(dists: Path) -> Path:
    [sdist] = dists.glob("idrrun-*.tar.gz")
    return sdist


def test_twine_accepts_both(dists: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(_wheel(dists)),
                        str(_sdist(dists))], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASSED") == 2


def test_wheel_metadata_and_course(dists: Path) -> None:
    wheel = _wheel(dists)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = Parser().parsestr(zf.read(f"idrrun-{__version__}.dist-info/METADATA").decode())
    assert wheel.name == f"idrrun-{__version__}-py3-none-any.whl"  # version.py is the source
    assert meta["Version"] == __version__ and meta["License-Expression"] == "MIT"
    classifiers = meta.get_all("Classifier")
    for wanted in ("Framework :: Jupyter", "Intended Audience :: Education",
                   "Operating System :: POSIX :: Linux", "Programming Language :: C",
                   "Programming Language :: Fortran"):
        assert wanted in classifiers
    requires = [r.split(";")[0].replace(" ", "") for r in meta.get_all("Requires-Dist")
                if "extra ==" not in r]
    assert not any(r.startswith("jupyter") for r in requires), requires  # unused at run time
    assert any(r.startswith("nbformat") for r in requires)
    assert f"idrrun-{__version__}.dist-info/licenses/LICENSE" in names
    assert "idrrun/py.typed" in names and "idrrun/run/guard.c" in names
    # `idrrun course new` works from the wheel: its template travels with it.
    assert {f"idrrun/authoring/template/{n}" for n in ("spec.toml", "exercise.c", "solution.f90")} <= set(names)
    assert any(n.endswith("labextensions/idrrun-highlight/static/style.js") for n in names)


def test_wheel_holds_the_students_course_only(dists: Path, tmp_path: Path) -> None:
    """Everything a student gets with `pip install idrrun`: no solution (but those the notebooks
    show), no hidden argument set, no draw range, no grading-only check, no solution cell —
    the students' copy that `idrrun course init --students` makes."""
    with zipfile.ZipFile(_wheel(dists)) as zf:
        course = {n.removeprefix("idrrun/course/"): zf.read(n) for n in zf.namelist()
                  if n.startswith("idrrun/course/")}
    students = tmp_path / "students"
    made = init_course(ROOT, students, students=True)
    assert sorted(course) == sorted(p.relative_to(students).as_posix()
                                    for p in students.rglob("*") if p.is_file())
    tracked = [f for f in _tracked() if f.startswith(("examples/", "notebooks/"))]
    solutions = {f for f in tracked if "_solution." in f}
    assert len(solutions) == 38 and set(course) == set(tracked) - solutions | \
        {f"examples/{s}" for s in made.solutions_kept}
    specs_ = {n: tomllib.loads(text.decode()) for n, text in course.items()
              if n.startswith("examples/") and n.count("/") == 1 and n.endswith(".toml")}
    assert len(specs_) == len([f for f in tracked if f.count("/") == 1 and f.endswith(".toml")])
    teacher = {n: tomllib.loads((ROOT / n).read_text()) for n in specs_}
    assert any("draw" in t.get("args", {}) for t in teacher.values())  # there was something to leave out
    for name, spec in specs_.items():
        assert spec["students"] is True, name
        assert not {"hidden", "draw"} & set(spec.get("args", {})), name
        assert not any(c.get("grading_only") for c in spec["check"]), name
        assert all("solution" not in pair or f"examples/{pair['solution']}" in course
                   for pair in spec["sources"].values()), name
    for name, data in course.items():
        if name.endswith(".ipynb"):
            nb = json.loads(data)
            assert not any("solution" in c.get("metadata", {}).get("tags", []) for c in nb["cells"]), name
            assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), name


def test_sdist_runs_its_own_tests(dists: Path, tmp_path: Path) -> None:
    with tarfile.open(_sdist(dists)) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path, filter="tar")
    top = tmp_path / f"idrrun-{__version__}"
    for wanted in ("LICENSE", "tests/conftest.py", "tests/data/integrity/secret_sum.toml",
                   "tests/fakes/nvc", "tests/plugins/toy_family.py", "labextension/dist/package.json",
                   "examples/intro_saxpy.toml", "notebooks/C/01_intro.ipynb"):
        assert f"idrrun-{__version__}/{wanted}" in names, wanted
    assert os.access(top / "tests" / "fakes" / "record_argv", os.X_OK)
    # Tests that need what only the sdist carries beside the package: the course's specs and
    # sources (test_specs), the fake compilers (test_cli's fake nvc and nvfortran), a real build
    # and run (test_cli's exit codes). (All of test_cli and test_options: 61 s of CI's 2 cores.)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_specs.py", "tests/test_cli.py",
                        "-k", "test_specs or fake_nv or exit_codes"],
                       cwd=top, env=_clean_env(PYTHONPATH=str(top)), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout


def _site_packages(venv: Path) -> Path:
    [site] = (venv / "lib").glob("python3.*/site-packages")
    return site


def _holds(venv: Path, wheel: Path) -> bool:
    """Whether `venv` has exactly `wheel` installed: every file of the wheel's package, byte
    for byte, and no file of the package beside them."""
    site = _site_packages(venv)
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.startswith("idrrun/") and not n.endswith("/")]
        if any(not (site / n).is_file() or (site / n).read_bytes() != zf.read(n) for n in names):
            return False
    installed = {str(p.relative_to(site)) for p in (site / "idrrun").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts}
    return installed == set(names)


def _venv_with(wheel: Path, tmp_path: Path) -> Path:
    """A venv with the wheel installed: IDRRUN_COURSE_VENV when it holds exactly this wheel
    (.ci/run's image recipe made it from the same wheel: `install.sh python`), else a fresh one
    made here."""
    given = os.environ.get("IDRRUN_COURSE_VENV")
    if given and (Path(given) / "bin" / "idrrun").is_file() and _holds(Path(given), wheel):
        return Path(given)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=900, env=_clean_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert _holds(venv, wheel)
    return venv


def test_wheel_in_a_fresh_venv_runs_the_course_from_anywhere(dists: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    venv = _venv_with(_wheel(dists), tmp_path)
    python, idrrun = venv / "bin" / "python", venv / "bin" / "idrrun"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(idrrun), *args], cwd=elsewhere, env=env, capture_output=True,
                              text=True, timeout=600)

    assert run("--version").stdout.strip() == f"idrrun {__version__}"
    installed = _site_packages(venv) / "idrrun" / "course"
    r = run("doctor", "--json")
    lines = {line["topic"]: line for line in json.loads(r.stdout)["lines"]}
    count = len([f for f in _tracked() if f.startswith("examples/") and f.count("/") == 1
                 and f.endswith(".toml")])
    assert lines["exercises"]["detail"] == \
        f"{count} in {installed / 'examples'} (the course installed with idrrun, students' copy (no solutions))"
    # The teacher's course comes from the sdist (or the repository), not from the wheel.
    with tarfile.open(_sdist(dists)) as tar:
        tar.extractall(tmp_path / "sdist", filter="tar")
    r = run("course", "init", "teacher", "--from", str(tmp_path / "sdist" / f"idrrun-{__version__}"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (elsewhere / "teacher" / "examples" / "C" / "intro_saxpy_solution.c").is_file()
    r = run("course", "check", "--exercise", "intro_saxpy", "--json")
    assert r.returncode == 2 and "has no solutions to check" in r.stderr  # the installed course
    env["IDRRUN_EXAMPLES"] = str(elsewhere / "teacher" / "examples")
    r = run("course", "check", "--exercise", "intro_saxpy", "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    checked = json.loads(r.stdout)
    assert checked["examples"] == str(elsewhere / "teacher" / "examples")
    assert {(row["exercise"], row["language"], row["ok"]) for row in checked["rows"]} == \
        {("intro_saxpy", "c", True), ("intro_saxpy", "fortran", True)}
    del env["IDRRUN_EXAMPLES"]
    # A --check cell in a kernel of that venv, from a folder outside any course: the installed
    # (students') course has no solution, but its reference values: a right answer passes.
    # The kernel is the venv's own ipykernel (a kernel spec naming its python), driven from here.
    spec = tmp_path / "jupyter" / "kernels" / "wheel-venv"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "the wheel's venv", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    with started(elsewhere, env, kernel_name="wheel-venv", startup_timeout=120) as k:
        where = k.run("import idrrun, sys; print(idrrun.__file__, sys.executable)").stdout
        r = k.run("%%idrrun -a --check intro_saxpy\n" + SOLUTION_C, timeout=300)
    cell = r.stdout + r.stderr + "".join(d.get("text/plain", "") for d in r.displays) + r.error_text
    assert str(venv) in where and str(ROOT) not in where
    assert "intro_saxpy: PASS" in cell and NO_SOLUTION not in cell, cell
    # The students' copy, from the installed course (itself a students' copy).
    r = run("course", "init", "students", "--students")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"of the course in {installed}" in r.stdout
    students = elsewhere / "students"
    assert (students / "examples" / "C" / "intro_saxpy_exercise.c").is_file()
    assert not (students / "examples" / "C" / "intro_saxpy_solution.c").exists()
    nb = json.loads((students / "notebooks" / "C" / "01_intro.ipynb").read_text())
    assert not any("solution" in c.get("metadata", {}).get("tags", []) for c in nb["cells"])


def _wheel_course(dists: Path, dest: Path) -> Path:
    """The students' course the wheel carries (idrrun/course/), written out: its examples/."""
    with zipfile.ZipFile(_wheel(dists)) as zf:
        for name in zf.namelist():
            if name.startswith("idrrun/course/") and not name.endswith("/"):
                target = dest / name.removeprefix("idrrun/course/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    return dest / "examples"


def _check(examples: Path, name: str, path: Path, cwd: Path, model: str) -> str:
    env = dict(_clean_env(PYTHONPATH=str(ROOT)), IDRRUN_EXAMPLES=str(examples))
    flag = "-t" if model == "openmp" else "-a"
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "run", flag, "--check", name, str(path)],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return r.stdout + r.stderr


def test_students_course_from_the_wheel_passes_each_solution_here(dists: Path,
                                                                  tmp_path: Path) -> None:
    """The reference values travel in the wheel: in the students' course it carries (no
    solution), each exercise's solution gets PASS on this host, or, where the host cannot
    evaluate a check that needs a GPU, INCOMPLETE naming exactly those; a wrong value fails."""
    examples = _wheel_course(dists, tmp_path / "course")
    exercises = sorted(examples.glob("*.toml"))
    assert len(exercises) == 19
    gpu = any(shutil.which(tool) for tool in ("nvidia-smi",)) and \
        subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    jobs = []
    for spec in exercises:
        data = tomllib.loads(spec.read_text())
        assert data["students"] is True
        trace = [c.get("label") or default_label(c["kind"], c.get("pattern")) for c in data["check"]
                 if c["kind"] in ("ran_on_gpu", "queues", "data_moved", "gpu_busy", "agrees_with_host",
                                  "speed")]
        for folder, suffix in (("C", "c"), ("Fortran", "f90")):
            solution = ROOT / "examples" / folder / f"{spec.stem}_solution.{suffix}"
            work = tmp_path / "work" / f"{spec.stem}-{suffix}"
            work.mkdir(parents=True)
            jobs.append((spec.stem, solution, work, data.get("model", "openacc"), trace))
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = list(pool.map(lambda j: _check(examples, j[0], j[1], j[2], j[3]), jobs))
    for (name, solution, _, _, trace), out in zip(jobs, outputs):
        if trace and not gpu:
            assert f"{name}: INCOMPLETE, every check this machine can evaluate passed; a GPU also evaluates: {', '.join(trace)}\n" in out, (solution, out)
        else:
            assert f"{name}: PASS, " in out, (solution, out)
        if not gpu:  # every check evaluated here but those named, which say why
            unevaluated = [line for line in out.splitlines() if " INCOMPLETE " in line]
            assert len(unevaluated) == len(trace), out
            assert all("needs a GPU" in line for line in unevaluated), out
    # Wrong values fail, on what the references hold: the tiling_laplace with a
    # coefficient of 0.2 (mean T 0.624 for 6.607), and a saxpy with a = 3.
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    tiling = (ROOT / "examples" / "C" / "tiling_laplace_solution.c").read_text()
    assert "Tnew[j * nx + i] = 0.25 *" in tiling
    (wrong / "tiling.c").write_text(tiling.replace("Tnew[j * nx + i] = 0.25 *", "Tnew[j * nx + i] = 0.2 *"))
    out = _check(examples, "tiling_laplace", wrong / "tiling.c", wrong, "openacc")
    assert "tiling_laplace: FAIL" in out and "mean T is 6.243990E-01 where the solution prints 6.6" in out, out
    saxpy = (ROOT / "examples" / "Fortran" / "intro_saxpy_solution.f90").read_text()
    assert "call saxpy(n, 2.0_dp, x, y)" in saxpy
    (wrong / "saxpy.f90").write_text(saxpy.replace("call saxpy(n, 2.0_dp, x, y)", "call saxpy(n, 3.0_dp, x, y)"))
    out = _check(examples, "intro_saxpy", wrong / "saxpy.f90", wrong, "openacc")
    assert "intro_saxpy: FAIL" in out and "y_last is 3, expected 2" in out, out
