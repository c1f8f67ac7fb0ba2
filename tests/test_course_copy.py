"""`idrrun course init DIR [--students]` and `course strip`: working copies of the course, all or
nothing; the students' copy keeps working for `%%idrrun --check NAME` (a check that needs the
solution says so, never passes falsely); grading-only checks stay with the teacher."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, Kernel, started
from idrrun.authoring import copies, references
from idrrun.checks import specs
from idrrun.commands.course import LOAD_EVERYWHERE
from idrrun.errors import SpecError, UsageError
from idrrun.checking import NO_SOLUTION
from idrrun.request import notebook
from test_notebook_form import form_problems

# Solution sources the notebooks run in untagged cells (a worked example, a picture to compare):
# the students' copy would keep them. The course runs every solution in cells tagged solution.
SHOWN: set[str] = set()


def cli(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
    return subprocess.run([sys.executable, "-m", "idrrun", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def students(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("copies") / "students"
    r = cli("course", "init", str(dest), "--students", "--from", str(ROOT), cwd=dest.parent)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "solution cells removed" in r.stdout and "38 solution sources left out" in r.stdout
    assert LOAD_EVERYWHERE in r.stdout  # how to have %%idrrun without `%load_ext idrrun`
    return dest


def test_teacher_copy_is_the_course(tmp_path: Path) -> None:
    r = cli("course", "init", str(tmp_path / "mine"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    tracked = subprocess.run(["git", "ls-files", "examples", "notebooks"], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    if tracked:  # a checkout (an sdist has no git)
        assert _files(tmp_path / "mine") == set(tracked)
    assert (tmp_path / "mine" / "examples" / "intro_saxpy.toml").read_bytes() == \
        (ROOT / "examples" / "intro_saxpy.toml").read_bytes()
    # Each notebook as JupyterLab saves it for this Python's kernel: it opens unmodified.
    for path in (tmp_path / "mine" / "notebooks").rglob("*.ipynb"):
        assert form_problems(path, notebook.python_version()) == [], path


def test_students_copy_has_no_solutions(students: Path) -> None:
    solutions = {p.relative_to(ROOT / "examples").as_posix()
                 for p in (ROOT / "examples").rglob("*_solution.*")}
    copied = _files(students / "examples")
    assert solutions & copied == SHOWN
    assert _files(ROOT / "examples") - solutions <= copied  # specs, start files, data
    for path in (students / "notebooks").rglob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert not any("solution" in _tags(c) for c in nb.cells), path
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
        assert form_problems(path, notebook.python_version()) == [], path
    exercises = specs.all_exercises(students / "examples")
    assert len(exercises) == len(list((ROOT / "examples").glob("*.toml")))
    for ex in exercises:
        assert ex.students and not ex.hidden_args and ex.draw is None and not any(c.grading_only for c in ex.checks)
    referenced = {pair.solution.relative_to(students / "examples").as_posix()
                  for ex in exercises for pair in ex.sources.values() if pair.solution is not None}
    assert referenced == SHOWN
    # the teacher's comments stay in the students' specs
    assert "# y = 1 + x with x spread evenly" in (students / "examples" / "intro_saxpy.toml").read_text()


# A Markdown link or image, and an HTML src: what a notebook or README points at.
_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|\bsrc=[\"']([^\"']+)[\"']")
# Folders of the repository that no copy of the course has (pip users have none of them).
_REPOSITORY_ONLY = re.compile(r"(?<![\w./])(docs|tests|benchmarks|scripts|docker|labextension)/"
                              r"|root of the project")


def _markdown(path: Path) -> str:
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    cells = nbformat.read(path, as_version=4).cells
    return "\n".join(c.source for c in cells if c.cell_type == "markdown")


def test_what_the_students_copy_refers_to_it_has(students: Path) -> None:
    """Docs that travel: every link and picture of the students' notebooks and README is in
    their copy (10_profiling's timelines included), and their text names no folder of the
    repository; `idrrun --help` sends to `--help`, not to a README."""
    pictures = set()
    documents = [*sorted((students / "notebooks").rglob("*.ipynb")), *sorted(students.rglob("*.md"))]
    assert students / "examples" / "README.md" in documents
    for path in documents:
        text = _markdown(path)
        assert not _REPOSITORY_ONLY.search(text), (path, _REPOSITORY_ONLY.search(text))
        for found in _LINK.finditer(text):
            target = (found.group(1) or found.group(2)).split("#")[0]
            if not target or re.match(r"[a-z]+:", target):
                continue
            resolved = (path.parent / target).resolve()
            assert resolved.is_file() and resolved.is_relative_to(students), (path, target)
            pictures |= {resolved.name} if resolved.suffix == ".png" else set()
    assert {"laplace_exercise_timeline_h200.png", "laplace_solution_timeline_h200.png"} <= pictures
    r = cli("--help", cwd=students)
    said = " ".join(r.stdout.split())
    assert r.returncode == 0 and "'idrrun COMMAND --help' for its flags" in said
    assert ".md" not in said, said


def test_students_spec_drops_grading_only_data(tmp_path: Path) -> None:
    teacher = ('name = "demo"\n[sources.c]\nexercise = "ex.c"\nsolution = "sol.c"\n'
               '[args]\nhost = ["10"]  # the size\n'
               '# Grading only: 11 and 12 are\n# sizes nobody expects\n'
               'hidden = [["11"], ["12"]]  # other sizes, grading only\n'
               '\n# Drawn when grading: sizes from 13 to 19\n'
               '[args.draw]  # the seed of the term\nsets = 2\nranges = [[13, 19]]\n'
               '\n[[check]]\nkind = "exit_ok"\n'
               '# It would give the answer away: 42\n'
               '[[check]]  # would give the answer away\nkind = "line"\nexact = "42"\ngrading_only = true\n')
    text = copies.students_spec(teacher, solutions_kept=())
    data = tomllib.loads(text)
    assert data["students"] is True and data["args"] == {"host": ["10"]}
    assert "solution" not in data["sources"]["c"] and data["check"] == [{"kind": "exit_ok"}]
    # The comments right above what is left out go with it; the others stay.
    for gone in ("11", "12", "13", "19", "42", "seed", "term", "Grading only", "sizes nobody expects"):
        assert gone not in text, gone
    assert "# the size" in text
    # A students' spec made again (the wheel carries students' specs) stays the same.
    assert copies.students_spec(text, solutions_kept=()) == text
    (tmp_path / "ex.c").write_text("int main(void){return 0;}\n")
    (tmp_path / "sol.c").write_text("int main(void){return 0;}\n")
    (tmp_path / "demo.toml").write_text(teacher)
    ex = specs.load(tmp_path / "demo.toml")
    assert [c.grading_only for c in ex.checks] == [False, True] and len(ex.hidden_args) == 2
    assert ex.draw is not None
    shown = ex.without_grading_only()
    assert [c.kind for c in shown.checks] == ["exit_ok"] and shown.hidden_args == ()
    assert shown.draw is None
    (tmp_path / "demo.toml").write_text(text)
    loaded = specs.load(tmp_path / "demo.toml")
    assert loaded.students and loaded.sources["c"].solution is None
    # only a students' spec may lack its solution
    (tmp_path / "demo.toml").write_text(text.replace("students = true", ""))
    with pytest.raises(SpecError, match="field 'sources.c.solution'"):
        specs.load(tmp_path / "demo.toml")


def test_init_is_all_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("my work")
    r = cli("course", "init", str(tmp_path / "taken"), cwd=tmp_path)
    assert r.returncode == 2 and "exists and is not empty" in r.stderr
    assert _files(tmp_path / "taken") == {"mine.txt"}
    # A course whose spec is broken: nothing is left behind, not even the temporary folder.
    broken = tmp_path / "broken"
    (broken / "examples").mkdir(parents=True)
    (broken / "notebooks").mkdir()
    (broken / "notebooks" / "a.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    (broken / "examples" / "bad.toml").write_text('name = "bad"\n')
    with pytest.raises(SpecError):
        copies.init_course(broken, tmp_path / "out", students=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken", "taken"]
    with pytest.raises(UsageError, match="not a course"):
        copies.init_course(tmp_path / "taken", tmp_path / "out2", students=False)


def test_strip_writes_a_whole_folder_or_nothing(tmp_path: Path) -> None:
    src = tmp_path / "nbs"
    src.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1", metadata={"tags": ["solution"]}),
                                         nbformat.v4.new_code_cell("2")])
    nbformat.write(nb, src / "a.ipynb")
    (src / "z.ipynb").write_text("{ not json")
    r = cli("course", "strip", str(src), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2 and "z.ipynb: not a readable notebook" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nbs"]  # no partial copy, no temp
    (src / "z.ipynb").unlink()
    r = cli("course", "strip", str(src), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{tmp_path / 'out' / 'a.ipynb'}: 1 solution cells removed\n"
    assert [c.source for c in nbformat.read(tmp_path / "out" / "a.ipynb", as_version=4).cells] == ["2"]
    r = cli("course", "strip", str(src), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2 and "exists and is not empty" in r.stderr


@pytest.fixture(scope="module")
def students_kernel(students: Path) -> Iterator[Kernel]:
    """A kernel in the students' notebooks/C folder, as a student opens it."""
    cwd = students / "notebooks" / "C"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("IDRRUN_EXAMPLES", None)
    with started(cwd, env) as k:
        yield k


def _cell(notebook: Path, tag: str, check: str) -> str:
    nb = nbformat.read(notebook, as_version=4)
    return next(c.source for c in nb.cells if tag in _tags(c) and f"--check {check}" in c.source)


def test_students_copy_checks_in_a_kernel(students: Path, students_kernel: Kernel) -> None:
    # The exercise cell as the student gets it: checked against the students' spec.
    start = _cell(students / "notebooks" / "C" / "03_loops.ipynb", "exercise", "loops_matvec")
    r = students_kernel.run(start)
    verdict = "".join(d.get("text/plain", "") for d in r.displays)
    assert "loops_matvec: FAIL" in verdict, verdict + r.stdout + r.error_text
    assert str(students / "examples") in students_kernel.run(
        "from idrrun.checks import specs; from pathlib import Path; from idrrun.request import config;"
        "print(specs.examples_dir(config.load(Path.cwd()), Path.cwd()))").stdout
    # A right answer, once solved: the check that compares with the solution reads the
    # solution's output the course carries for these arguments (examples/reference): PASS.
    solved = _cell(ROOT / "notebooks" / "C" / "03_loops.ipynb", "solution", "loops_matvec")
    r = students_kernel.run(solved)
    assert r.status == "ok", r.error_text
    verdict = "".join(d.get("text/plain", "") for d in r.displays)
    assert "loops_matvec: PASS" in verdict and NO_SOLUTION not in verdict, verdict
    # Other arguments than the exercise's: no reference for them, incomplete, saying why.
    r = students_kernel.run(solved.replace("--check loops_matvec", "--check loops_matvec --cliopts '300 20'", 1))
    verdict = "".join(d.get("text/plain", "") for d in r.displays)
    assert "loops_matvec: INCOMPLETE" in verdict and "no reference for your arguments (300 20)" in verdict, verdict
    # The worked example of 00_how_to_use checks the start file: FAIL, as in the teacher's.
    nb = nbformat.read(students / "notebooks" / "C" / "00_how_to_use.ipynb", as_version=4)
    example = next(c.source for c in nb.cells if c.source.startswith("%idrrunfile -a --check tiling_laplace"))
    r = students_kernel.run(example)
    verdict = "".join(d.get("text/plain", "") for d in r.displays)
    assert r.status == "error" and "tiling_laplace: FAIL" in verdict, verdict + r.error_text


def test_grading_refuses_a_students_course(students: Path, tmp_path: Path) -> None:
    (tmp_path / "a.c").write_text("int main(void){return 0;}\n")
    env_cwd = students / "notebooks" / "C"
    r = cli("grade", "intro_saxpy", str(tmp_path / "a.c"), cwd=tmp_path,
            IDRRUN_EXAMPLES=str(students / "examples"))
    assert r.returncode == 2 and "students' copy of the course" in r.stderr
    # A grader reads no course from its working folder (it may be where the submissions are):
    # the one found there is said, not used.
    r = cli("grade", "intro_saxpy", str(tmp_path / "a.c"), "--json", cwd=env_cwd)
    assert f"{students / 'examples'} was not read" in r.stdout, r.stdout + r.stderr
    # From idrrun's own checkout the course found there is the one graded: nothing to say.
    own = cli("grade", "intro_saxpy", str(tmp_path / "a.c"), "--json", cwd=ROOT / "notebooks" / "C")
    assert json.loads(own.stdout)["rows"][0]["exercise"] == "intro_saxpy", own.stdout + own.stderr
    assert "was not read" not in own.stdout + own.stderr
    r = cli("course", "check", "--exercise", "intro_saxpy", cwd=env_cwd)
    assert r.returncode == 2 and "has no solutions to check" in r.stderr


def test_a_large_reference_picture_is_kept_compressed_and_compared(students: Path,
                                                                     tmp_path: Path) -> None:
    """mandelbrot_rows' picture at the GPU size (13.4 MB, over the 4 MiB a reference keeps) is
    in the students' copy gzip-compressed (0.6 MB): its image check is evaluated on a GPU, a
    right picture passes and a wrong one fails, where it used to be incomplete."""
    import gzip

    from idrrun.checks import reference
    from idrrun.checks.evidence import Evidence
    from idrrun.checks.verdict import evaluate_one
    from idrrun.model import BuildResult, ProcResult, RunResult

    exercise = specs.load(students / "examples" / "mandelbrot_rows.toml")
    ref = reference.lookup(exercise, "c", exercise.gpu_args)
    assert ref is not None and ref.output is not None and ref.folder is not None
    assert ref.left_out == () and not (ref.folder / "mandelbrot.pgm").exists()
    packed = ref.folder / "mandelbrot.pgm.gz"
    assert packed.is_file() and packed.stat().st_size < 4 << 20
    image, = (c for c in exercise.checks if c.kind == "image")
    built = BuildResult(ok=True, command=(), proc=None, output="", cached=True, key="", build_dir=None)
    ran = RunResult(("prog",), ProcResult(("prog",), 0, output=ref.output))

    def checked(picture: bytes) -> object:
        (tmp_path / "mandelbrot.pgm").write_bytes(picture)
        evidence = Evidence(source_text="", language="c", build=built, run=ran, acc=None,
                            solution_output=ref.output, from_reference=True,
                            run_dir=tmp_path, solution_dir=ref.folder,
                            solution_left_out=ref.left_out)
        return evaluate_one(image, evidence)

    right = gzip.decompress(packed.read_bytes())
    assert len(right) > 13_000_000
    result = checked(right)
    assert result.status == "pass" and result.got.startswith("identical"), result
    result = checked(b"P5\n2 2\n255\n\0\0\0\0")
    assert result.status == "fail", result
    # Where the reference has the picture as it is (the host's arguments), it is compared too.
    host = reference.lookup(exercise, "c", exercise.host_args)
    assert host is not None and host.left_out == () and host.folder is not None
    assert (host.folder / "mandelbrot.pgm").is_file()


def test_references_keep_large_pictures_compressed_or_say_why_not(tmp_path: Path) -> None:
    """write_references: a picture over 4 MiB is kept as NAME.gz (the same bytes each time);
    one still over 4 MiB compressed (noise) is left out with its sizes, and its image check
    says so instead of comparing."""
    import gzip

    from idrrun.checking import SolutionRun
    from idrrun.checks import reference
    from idrrun.authoring import references  # noqa: F811

    (tmp_path / "mandelbrot_rows.toml").write_text((ROOT / "examples" / "mandelbrot_rows.toml").read_text())
    for folder, suffix in (("C", "c"), ("Fortran", "f90")):
        (tmp_path / folder).mkdir()
        for role in ("exercise", "solution"):
            name = f"mandelbrot_rows_{role}.{suffix}"
            (tmp_path / folder / name).write_text((ROOT / "examples" / folder / name).read_text())
    exercise = specs.load(tmp_path / "mandelbrot_rows.toml")
    header = b"P5\n4096 1100\n255\n"
    smooth = header + bytes(range(256)) * (4096 * 1100 // 256)
    noise = header + os.urandom(4096 * 1100)
    made = []
    for language, picture in (("c", smooth), ("fortran", noise)):
        files = tmp_path / f"run-{language}"
        files.mkdir()
        (files / "mandelbrot.pgm").write_bytes(picture)
        row = references.ReferenceRow(exercise.name, language, "gpu", exercise.gpu_args, made="gcc")
        made.append((row, SolutionRun("iterations = 1\n", files)))
    references.write_references(exercise, made)
    c = reference.lookup(exercise, "c", exercise.gpu_args)
    assert c is not None and c.folder is not None and c.left_out == ()
    packed = (c.folder / "mandelbrot.pgm.gz").read_bytes()
    assert gzip.decompress(packed) == smooth and len(packed) < 4 << 20
    references.write_references(exercise, made[:1])
    assert (c.folder / "mandelbrot.pgm.gz").read_bytes() == packed  # reproducible
    f = reference.lookup(exercise, "fortran", exercise.gpu_args)
    assert f is not None and f.folder is not None and not list(f.folder.glob("mandelbrot.pgm*"))
    assert f.left_out == ("mandelbrot.pgm (4.5 MB, 4.5 MB compressed: larger than the 4 MiB "
                          "a reference keeps)",), f.left_out
