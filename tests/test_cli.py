"""`idrrun run` in a terminal: exit codes, messages, and the nvhpc command line (fake nvc)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT

FAKES = ROOT / "tests" / "fakes"


def idrrun(*args: str, cwd: Path, env: dict[str, str] | None = None,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "idrrun.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def test_version(tmp_path: Path) -> None:
    r = idrrun("--version", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("idrrun ")


@pytest.mark.parametrize("body, code, message", [
    ('#include <stdio.h>\nint main(void){ puts("fine"); return 0; }\n', 0, ""),
    ("int main(void){ return 0 }\n", 1, "compile failed: exit code 1"),
    ("#include <stdlib.h>\nint main(void){ abort(); }\n", 3, "run failed: killed by SIGABRT"),
    ("#include <stdlib.h>\nint main(void){ exit(5); }\n", 3, "run failed: exit code 5"),
    ("int main(void){ for(;;); }\n", 124, "run failed: timed out after 1 s"),
])
def test_exit_codes(tmp_path: Path, body: str, code: int, message: str) -> None:
    (tmp_path / "p.c").write_text(body)
    r = idrrun("run", "--timeout", "1", "p.c", cwd=tmp_path)
    assert r.returncode == code, r.stdout + r.stderr
    assert message in r.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    r = idrrun("run", "--frobnicate", "x.c", cwd=tmp_path)
    assert r.returncode == 2 and "unrecognized arguments: --frobnicate" in r.stderr
    assert "Traceback" not in r.stderr
    r = idrrun("run", "missing.c", cwd=tmp_path)
    assert r.returncode == 2 and "no such file: missing.c" in r.stderr
    (tmp_path / "idrrun.toml").write_text("timeout = -1\n")
    (tmp_path / "ok.c").write_text("int main(void){return 0;}\n")
    r = idrrun("run", "ok.c", cwd=tmp_path)
    assert r.returncode == 2 and "idrrun.toml: field 'timeout'" in r.stderr


def test_nvhpc_command_line_with_fake_nvc(tmp_path: Path) -> None:
    """nvc cannot be installed here: a fake nvc records its argv (then builds with gcc)."""
    log = tmp_path / "argv.jsonl"
    (tmp_path / "p.c").write_text('#include <stdio.h>\nint main(void){ puts("ran"); return 0; }\n')
    env = {"PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}", "FAKE_NVHPC_LOG": str(log)}
    r = idrrun("run", "-a", "--accopts", "cc70,pinned", "--options", "-O3", "p.c", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[nvhpc]" in r.stdout  # detected: nvc is on PATH
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    build = [c for c in calls if "--version" not in c]
    assert len(build) == 1
    argv = build[0]
    assert Path(argv[0]).name == "nvc"
    assert argv[1:5] == ["-acc", "-gpu=cc70,pinned", "-Minfo=accel", "-O3"]
    assert argv[-1] == "source.c"
    r = idrrun("run", "-c", "pgi", "-a", "--accopts", "cc70", "p.c", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    last = json.loads(log.read_text().splitlines()[-1])
    assert Path(last[0]).name == "pgcc" and "-ta=tesla:cc70" in last


def test_fortran_nvhpc_command_line_with_fake_nvfortran(tmp_path: Path) -> None:
    log = tmp_path / "argv.jsonl"
    (tmp_path / "p.f90").write_text("program p\n  print '(a)', 'ok'\nend program p\n")
    env = {"PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}", "FAKE_NVHPC_LOG": str(log)}
    r = idrrun("run", "-a", "p.f90", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    build = [json.loads(x) for x in log.read_text().splitlines() if "--version" not in x]
    assert Path(build[-1][0]).name == "nvfortran" and "-acc" in build[-1] and "-Minfo=accel" in build[-1]


def _without(folder: Path, name: str, shadow: Path) -> str:
    """`folder` for PATH, or where it holds `name` a copy of it in links that lacks `name`
    (Debian puts nsys in /usr/bin, beside gcc: leaving /usr/bin out would lose the compiler)."""
    if not (folder / name).exists():
        return str(folder)
    shadow.mkdir()
    for entry in folder.iterdir():
        if entry.name != name:
            (shadow / entry.name).symlink_to(entry)
    return str(shadow)


def test_profile_goes_through_the_configured_profiler_fake(tmp_path: Path) -> None:
    """nsys cannot be installed here: a fake profiler records its argv and runs the program."""
    log = tmp_path / "prof.jsonl"
    (tmp_path / "idrrun.toml").write_text(
        f'[profiler]\ncommand = ["{FAKES / "record_profiler"}", "profile", "--trace=openacc,cuda"]\n')
    (tmp_path / "p.c").write_text('#include <stdio.h>\nint main(int c, char **v){ printf("arg %s\\n", v[1]); return 0; }\n')
    r = idrrun("run", "--profile", "--cliopts", "x", "p.c", cwd=tmp_path, env={"FAKE_PROFILER_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "arg x" in r.stdout
    argv = json.loads(log.read_text())
    assert argv[1:3] == ["profile", "--trace=openacc,cuda"] and argv[-1] == "x"
    r = idrrun("run", "p.c", "--cliopts", "y", cwd=tmp_path, env={"FAKE_PROFILER_LOG": str(log)})
    assert len(log.read_text().splitlines()) == 1  # without --profile, no profiler
    (tmp_path / "idrrun.toml").unlink()
    # without nsys (CI installs one: docker/install.sh nsys), --profile takes the built-in tracer
    no_nsys = os.pathsep.join(_without(Path(d), "nsys", tmp_path / f"path{i}")
                              for i, d in enumerate(os.environ["PATH"].split(os.pathsep)) if d)
    r = idrrun("run", "--profile", "--cliopts", "z", "p.c", cwd=tmp_path, env={"PATH": no_nsys})
    assert r.returncode == 0 and "using the built-in CUPTI tracer" in r.stdout
    assert "no GPU activity: the OpenACC regions ran on the host" in r.stdout


def test_every_failure_kind_has_an_exit_code() -> None:
    from idrrun.commands.run import EXIT_CODES
    from idrrun.model import FailureKind

    assert set(EXIT_CODES) == set(FailureKind)


def test_limit_then_timeout_exits_124() -> None:
    # A run that hit its memory limit and then ran out of time is a timeout (124), whatever the
    # words say: exit codes come from the failure's kind, never from its text.
    from idrrun.cli import EXIT_TIMEOUT
    from idrrun.commands.run import exit_code
    from idrrun.model import FailureKind, ProcResult, RunRequest, RunResult
    from idrrun.pipeline import Outcome
    from idrrun.failures import run_failure
    from idrrun.request.source import from_cell

    src = from_cell("int main(void){}\n", "cell[1]", "c", None, Path("/tmp"))
    request = RunRequest(source=src, workdir=Path("/tmp"), timeout=2)
    proc = ProcResult(argv=("prog",), returncode=-9, timed_out=True, limit="memory")
    failure = run_failure(RunResult(command=("prog",), proc=proc), request)
    assert failure is not None and failure.kind is FailureKind.TIMEOUT
    assert failure.what == "memory limit reached, then timed out after 2 s" and failure.limit == "memory"
    assert "more memory than allowed" in failure.hint
    assert exit_code(Outcome(request, None, None, None, failure)) == EXIT_TIMEOUT


def test_graded_notebook_keeps_its_profile_flag(tmp_path: Path) -> None:
    # A notebook's `%%idrrun -a --profile --check NAME` is graded profiled, so its trace checks
    # can be evaluated; the flags a grader decides (time, limits, arguments) are not taken.
    import nbformat

    from idrrun.checks import specs
    from idrrun.grading import discover
    from idrrun.model import Settings
    from idrrun.request.policy import Policy

    source = (ROOT / "examples" / "C" / "intro_saxpy_solution.c").read_text()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        '%%idrrun -a --profile --timeout 999 --memory none --cliopts "1" --check intro_saxpy\n' + source)])
    nbformat.write(nb, tmp_path / "alice.ipynb")
    exercise = specs.load(ROOT / "examples" / "intro_saxpy.toml")
    [sub] = discover.discover([tmp_path / "alice.ipynb"], exercise, None)
    assert sub.source is not None and sub.source.text == source
    policy = Policy(room=tmp_path, timeout=7.0, profile_traces=True)
    graded = policy.options(policy.line(sub.options))
    assert graded.profile == "auto" and graded.acc is True and graded.timeout == 7.0
    assert graded.memory is None and graded.program_args is None
    assert Settings().values == {}


# -- words: what was meant, and the INCOMPLETE verdict's own exit code -------------------------

@pytest.mark.parametrize("args, message", [
    (("run", "--clipots", "1", "p.c"), "idrrun run: unrecognized arguments: --clipots (did you mean --cliopts?)"),
    (("run", "-check", "intro_pi", "p.c"),
     "idrrun run: -check is not an option (it reads as -c heck): did you mean --check?"),
    (("run", "-keep", "saved.c", "p.c"), "-keep is not an option (it reads as -k eep): did you mean --keep?"),
    (("run", "-l", "fortan", "p.c"), "invalid choice: 'fortan' (choose from 'c', 'c++', 'fortran', "
                                     "'cuda') (did you mean fortran?)"),
    (("run", "--check", "intro_saxy", "p.c"), "unknown exercise 'intro_saxy' (did you mean intro_saxpy?) in "),
    (("grde", "intro_pi", "p.c"), "idrrun: unknown command 'grde' (did you mean grade?) (known: classroom, course, doctor, grade, gradebook, run, similarity)"),
    (("course", "chek"), "invalid choice: 'chek' (choose from 'check', 'references', 'new', 'strip', 'init') (did you mean check?)"),
    (("course", "check", "--exercise", "intro_p"), "examples: intro_p (did you mean intro_pi?)"),
    (("grade", "intro_pi", "--frsh", "p.c"), "unrecognized arguments: --frsh (did you mean --fresh?)"),
])
def test_typos_get_what_was_meant(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "p.c").write_text("int main(void){return 0;}\n")
    r = idrrun(*args, cwd=tmp_path, env={"IDRRUN_EXAMPLES": str(ROOT / "examples")})
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_glued_short_options_and_dashed_values_still_work(tmp_path: Path) -> None:
    (tmp_path / "p.c").write_text('#include <stdio.h>\nint main(void){ puts("ran"); return 0; }\n')
    r = idrrun("run", "-cgcc", "-lc", "--options", "-fast", "-at", "p.c", cwd=tmp_path)
    assert r.returncode == 0 and "ran" in r.stdout, r.stdout + r.stderr
    assert "unrecognized" not in r.stderr


TINY_ACC = ('#include <stdio.h>\nint main(void) { double s = 0;\n#pragma acc parallel loop reduction(+:s)\n'
            'for (int i = 0; i < 100; i++) s += i;\nprintf("s = %g\\n", s); return 0; }\n')


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU evaluates the trace check")
def test_an_incomplete_check_has_its_own_exit_code(tmp_path: Path) -> None:
    from idrrun.cli import EXIT_INCOMPLETE, EXIT_RUN

    ex = tmp_path / "ex"
    (ex / "C").mkdir(parents=True)
    for role in ("exercise", "solution"):
        (ex / "C" / f"tiny_{role}.c").write_text(TINY_ACC)
    (ex / "tiny.toml").write_text(
        'name = "tiny"\n[sources.c]\nexercise = "C/tiny_exercise.c"\nsolution = "C/tiny_solution.c"\n'
        '[args]\nhost = []\n[[check]]\nkind = "exit_ok"\n[[check]]\nkind = "ran_on_gpu"\n')
    (tmp_path / "tiny.c").write_text(TINY_ACC)
    r = idrrun("run", "-c", "gcc", "-a", "--check", "tiny", "tiny.c", cwd=tmp_path,
               env={"IDRRUN_EXAMPLES": str(ex)})
    assert r.returncode == EXIT_INCOMPLETE == 4, r.stdout + r.stderr
    # (every check this host can evaluate passed: the verdict says which need a GPU)
    assert "tiny: INCOMPLETE, every check this machine can evaluate passed; a GPU also evaluates: runs on the GPU" in r.stdout, r.stdout
    (tmp_path / "broken.c").write_text(TINY_ACC.replace("return 0", "return 1"))
    r = idrrun("run", "-c", "gcc", "-a", "--check", "tiny", "broken.c", cwd=tmp_path,
               env={"IDRRUN_EXAMPLES": str(ex)})
    assert r.returncode == EXIT_RUN, r.stdout + r.stderr
    # and the help says so
    r = idrrun("run", "--help", cwd=tmp_path)
    assert "4 its check is INCOMPLETE" in " ".join(r.stdout.split())
