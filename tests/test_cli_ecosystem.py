"""The CLI among other tools: whole lines when piped, --json, a quiet broken pipe, NO_COLOR,
help on every argument, grading's exit codes (nbgrader's and otter's)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pexpect

from conftest import PYTHONPATH, ROOT
from idrrun import cli
from idrrun.commands import course, doctor, grade
from idrrun.request import options

SOLUTION_C = (ROOT / "examples" / "C" / "intro_saxpy_solution.c").read_text()


def idrrun(*args: str, cwd: Path, env: dict[str, str] | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=PYTHONPATH, **(env or {}))
    return subprocess.run([sys.executable, "-m", "idrrun", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout)


def _actions(parser: argparse.ArgumentParser, where: str) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _actions(sub, f"{where} {name}")
            for choice in action._choices_actions:
                found.append((f"{where} {choice.dest}", choice))
        else:
            found.append((f"{where} {'/'.join(action.option_strings) or action.dest}", action))
    return found


def test_every_argument_has_help() -> None:
    parsers = {"idrrun": cli.parser(), "idrrun course": course.parser(),
               "idrrun grade": grade.parser(), "idrrun doctor": doctor.parser(),
               "idrrun run": options.make_parser("idrrun run", with_file=True)}
    missing = [name for where, p in parsers.items() for name, action in _actions(p, where)
               if not (action.help or "").strip()]
    assert not missing, missing


def test_piped_tables_keep_whole_lines(tmp_path: Path) -> None:
    # A reason far wider than 80 columns: rich would cut it ("…") or wrap it at 80 in a pipe.
    reason = "the exercise asks for " + "a very specific construct " * 8 + "END"
    ex = tmp_path / "examples"
    (ex / "C").mkdir(parents=True)
    (ex / "C" / "wide_exercise.c").write_text("int main(void){return 0;}\n")
    (ex / "C" / "wide_solution.c").write_text("int main(void){return 0; /* needle */}\n")
    (ex / "wide.toml").write_text(
        'name = "wide"\n[sources.c]\nexercise = "C/wide_exercise.c"\nsolution = "C/wide_solution.c"\n'
        f'[[check]]\nkind = "source"\nregex = "needle"\nreason = "{reason}"\n')
    (tmp_path / "bob.c").write_text("int main(void){return 0;}\n")
    r = idrrun("grade", "wide", "bob.c", cwd=tmp_path, env={"IDRRUN_EXAMPLES": str(ex)})
    assert r.returncode == 0, r.stdout + r.stderr  # graded: bob fails, the grading is complete
    row = [ln for ln in r.stdout.splitlines() if "bob" in ln and "END" in ln]
    assert len(row) == 1 and reason in row[0] and "…" not in r.stdout, r.stdout
    assert "\x1b[" not in r.stdout


def test_json_outputs(tmp_path: Path) -> None:
    r = idrrun("doctor", "--json", cwd=tmp_path)
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["can_compile"] is True
    topics = {line["topic"]: line for line in report["lines"]}
    assert topics["compiler gcc c"]["status"] == "OK"
    assert "the checkout idrrun runs from" in topics["exercises"]["detail"]
    r = idrrun("course", "check", "--exercise", "intro_saxpy", "-l", "c", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    checked = json.loads(r.stdout)  # the JSON only: no progress lines, no table
    assert checked["failed"] == 0 and checked["passed"] == 1
    [row] = checked["rows"]
    assert row["exercise"] == "intro_saxpy" and row["ok"] is True
    assert row["start"]["verdict"] == "fail" and row["solution"]["verdict"] == "pass"
    assert {c["name"] for c in row["solution"]["checks"]} >= {"ends normally", "y_last", "mean"}


def test_grade_exit_codes_follow_nbgrader_and_otter(tmp_path: Path) -> None:
    """A completed grading exits 0 whatever the verdicts; a submission that could not be graded
    at all makes it 1 (nbgrader autograde exits 1 when a submission fails to process)."""
    (tmp_path / "ann.c").write_text(SOLUTION_C)
    wrong = SOLUTION_C.replace("1.0 - x[i]", "1.5 - x[i]")  # y starts wrong
    assert wrong != SOLUTION_C
    (tmp_path / "ben.c").write_text(wrong)
    env = {"IDRRUN_EXAMPLES": str(ROOT / "examples")}
    r = idrrun("grade", "intro_saxpy", "ann.c", "ben.c", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads(r.stdout)
    verdicts = {row["student"]: row["verdict"] for row in summary["rows"]}
    assert verdicts == {"ann": "pass", "ben": "fail"}, summary
    assert summary["counts"] == {"pass": 1, "fail": 1, "incomplete": 0, "error": 0}
    (tmp_path / "cid.ipynb").write_text("{ not a notebook")
    r = idrrun("grade", "intro_saxpy", "ann.c", "cid.ipynb", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 1
    assert json.loads(r.stdout)["counts"]["error"] == 1


def test_broken_pipe_is_quiet(tmp_path: Path) -> None:
    """`idrrun doctor | head`: the reader is gone before idrrun writes; no traceback."""
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    for args in (["doctor"], ["doctor", "--json"], ["--help"], ["course", "--help"]):
        p = subprocess.Popen([sys.executable, "-m", "idrrun", *args], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()
        err = p.stderr.read().decode()
        # argparse's --help swallows the error itself (and exits 0)
        wanted = (0, cli.EXIT_BROKEN_PIPE) if "--help" in args else (cli.EXIT_BROKEN_PIPE,)
        assert p.wait(timeout=120) in wanted, err
        assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err


def test_no_color_is_honoured_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "p.c").write_text('#include <stdio.h>\nint main(void){ puts("hi"); return 0; }\n')
    for no_color, colored in (("", True), ("1", False)):
        env = dict(os.environ, PYTHONPATH=PYTHONPATH, TERM="xterm", NO_COLOR=no_color)
        out = pexpect.run(f"{sys.executable} -m idrrun run p.c", cwd=str(tmp_path), env=env,
                          timeout=120, encoding="utf-8")
        assert "hi" in out
        assert ("\x1b[" in out) is colored, repr(out[:300])
        r = subprocess.run([sys.executable, "-c", "from idrrun.commands.common import console; "
                            "c = console(); print(c.is_terminal, c.no_color)"], env=env,
                           capture_output=True, text=True)
        assert r.stdout.split() == ["False", "True"]  # piped: no colour, whatever NO_COLOR


def test_help_says_the_exit_codes(tmp_path: Path) -> None:
    assert "Exit codes (as nbgrader autograde and otter grade): 0 every submission was graded" in \
        " ".join(idrrun("grade", "--help", cwd=tmp_path).stdout.split())
    assert "Exit codes" in idrrun("--help", cwd=tmp_path).stdout
    assert "141" in (cli.__doc__ or "")


def test_strip_still_reads_real_notebooks(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("é")])
    nbformat.write(nb, tmp_path / "n.ipynb")
    r = idrrun("course", "strip", str(tmp_path / "n.ipynb"), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0 and nbformat.read(tmp_path / "o" / "n.ipynb", as_version=4).cells[0].source == "é"
