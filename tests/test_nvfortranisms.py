"""Fortran written for nvfortran, built by gfortran (issue 50): the IDRIS notebooks' indented
preprocessor lines, `.f90` cells that use the preprocessor without -cpp, free-form lines beyond
132 columns. Real gfortran builds through `idrrun run`; the line numbers of the student's
source are kept, and each change is said."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH

from idrrun.toolchains import nvfortranisms

# As IDRIS's multi-GPU notebook writes it: `#ifdef` indented with the code, no -cpp on the line.
INDENTED = """program p
    use iso_fortran_env
    implicit none
    integer :: n
    n = 1
        #ifdef _OPENACC
    n = 2
        #endif
    print *, "n =", n
end program p
"""
LONG = ("program q\n    implicit none\n    real :: x\n    x = 1.0 + 2.0 + 3.0"
        + " + 0.0" * 30 + "\n    print *, 'x =', x\nend program q\n")


def test_indented_preprocessor_lines_move_to_column_1_keeping_the_numbers() -> None:
    fixed = nvfortranisms.fixes(INDENTED, ".f90", (), first_line=2)
    assert fixed.text.split("\n")[5] == "#ifdef _OPENACC"
    assert fixed.text.count("\n") == INDENTED.count("\n")
    assert fixed.flags == ("-cpp",)
    assert fixed.notes[0].startswith("line 7, 9: a preprocessor line indented")


def test_a_source_already_preprocessed_gets_no_second_cpp() -> None:
    at_column_1 = INDENTED.replace("        #", "#")
    assert nvfortranisms.fixes(at_column_1, ".f90", ("-cpp",)).flags == ()
    assert nvfortranisms.fixes(at_column_1, ".F90", ()).flags == ()
    assert nvfortranisms.fixes(at_column_1, ".f90", ()).flags == ("-cpp",)
    assert nvfortranisms.fixes("program r\nend program r\n", ".f90", ()) == \
        nvfortranisms.FortranFixes("program r\nend program r\n")


def test_a_long_free_form_line_is_read_whole_but_not_in_fixed_form() -> None:
    assert nvfortranisms.fixes(LONG, ".f90", ()).flags == ("-ffree-line-length-none",)
    assert nvfortranisms.fixes(LONG, ".f", ()).flags == ()
    assert nvfortranisms.fixes(LONG, ".f90", ("-ffree-line-length-200",)).flags == ()


def _idrrun(tmp_path: Path, name: str, text: str, *flags: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / name
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "idrrun.cli", "run", *flags, str(path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "PYTHONPATH": PYTHONPATH})


@pytest.mark.parametrize("flags", [("-a",), ("-a", "--options", "-cpp")])
def test_an_nvfortran_cell_with_indented_ifdef_builds_and_runs_with_gfortran(
        tmp_path: Path, flags: tuple[str, ...]) -> None:
    done = _idrrun(tmp_path, "multigpu.f90", INDENTED, *flags)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "n =           2" in done.stdout  # the OpenACC branch: the preprocessor ran
    assert "so idrrun moved it there (the line numbers are unchanged)" in done.stderr + done.stdout
    assert (" -cpp " in done.stdout + done.stderr)


def test_a_long_line_cell_builds_and_an_error_keeps_its_line(tmp_path: Path) -> None:
    done = _idrrun(tmp_path, "long.f90", LONG, "-a")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "-ffree-line-length-none" in done.stdout + done.stderr
    broken = INDENTED.replace("    n = 2\n", "    n = = 2\n")
    failed = _idrrun(tmp_path, "broken.f90", broken, "-a")
    assert failed.returncode != 0
    assert "broken.f90:7:" in failed.stdout + failed.stderr  # the student's own line 7
