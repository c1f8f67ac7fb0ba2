"""The student's lines and names, in a real Jupyter kernel with real gcc and gfortran: a
half-ported intro_saxpy (its saxpy loop left on the host) checked as a notebook cell and as a
file (%idrrunfile), in C and Fortran. Every line number the student reads (the check's message,
the annotated listing) is the line of the cell as shown (the magic line is 1) or of the file;
the regions are named by the function they are written in; the arrays by their own names; the
commands by the cell's or file's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import CellResult, Kernel

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SOLUTIONS = {"c": EXAMPLES / "C" / "intro_saxpy_solution.c",
             "fortran": EXAMPLES / "Fortran" / "intro_saxpy_solution.f90"}
# The saxpy construct's directive, taken out: its loop stays on the host.
SAXPY_DIRECTIVE = {"c": re.compile(r"^\s*#pragma acc parallel loop copyin\(x.*\n", re.M),
                   "fortran": re.compile(r"^\s*!\$acc parallel loop copyin\(x.*\n", re.M)}
LOOP = {"c": "for (int i = 0; i < n; i++)\n        y[i] = a", "fortran": "do i = 1, n\n      y(i) = a"}


def half_ported(language: str) -> str:
    text, n = SAXPY_DIRECTIVE[language].subn("", SOLUTIONS[language].read_text())
    assert n == 1
    return text


def loop_line(text: str, language: str) -> int:
    """The 1-based line, in `text`, of the saxpy loop's header."""
    at = text.index(LOOP[language])
    return text.count("\n", 0, at) + 1


def init_directive(text: str) -> int:
    at = re.search(r"(#pragma acc|!\$acc) parallel loop copyout", text)
    assert at is not None
    return text.count("\n", 0, at.start()) + 1


def check(kernel: Kernel, code: str) -> CellResult:
    (kernel.cwd / "idrrun.toml").write_text(f'examples_dir = "{EXAMPLES}"\n')
    try:
        return kernel.run(code, timeout=300)
    finally:
        (kernel.cwd / "idrrun.toml").unlink()


def annotated_notes(r: CellResult) -> list[tuple[str, int, str]]:
    html = next(d["text/html"] for d in r.displays if "idrrun-annotated" in d.get("text/html", ""))
    return [(kind, int(line), body) for kind, line, body in re.findall(
        r"<tr class='idrrun-note idrrun-note-(\w+)' data-line='(\d+)'>(.*?)</tr>", html)]


@pytest.mark.parametrize("language", ["c", "fortran"])
def test_a_half_ported_saxpy_is_told_on_its_own_lines_and_names(kernel: Kernel,
                                                               language: str) -> None:
    text = half_ported(language)
    suffix = ".c" if language == "c" else ".f90"
    (kernel.cwd / f"saxpy{suffix}").write_text(text)
    for how, code, offset in (("cell", f"%%idrrun -a --check intro_saxpy\n{text}", 1),
                              ("file", f"%idrrunfile -a --check intro_saxpy saxpy{suffix}", 0)):
        r = check(kernel, code)
        assert r.status == "error" and "check failed" in r.error_text, (how, r.stdout)
        loop = loop_line(text, language) + offset  # the magic line is the cell's line 1
        said = r.stdout + "".join(d.get("text/plain", "") for d in r.displays)
        assert f"the saxpy loop (line {loop}) runs on the host" in said, (how, loop, said)
        # The annotated listing: the failure on the loop's own line, not the line above.
        notes = annotated_notes(r)
        assert [line for kind, line, body in notes if kind == "check" and "saxpy loop" in body] \
            == [loop], (how, notes)
        # The regions that ran: the init loop's, named by the function it is written in (gcc
        # inlines init into the main program).
        assert f"line {init_directive(text) + offset} (init) once" in said, (how, said)
        assert "(main)" not in said and "MAIN__" not in said and "main program)" not in said
        # The arrays by their names (gfortran's descriptors are `parm.N`).
        data = [body for kind, line, body in notes if kind == "data"]
        assert data and all("parm" not in body for body in data), (how, data)
        assert any("copyout x, y" in body for body in data), (how, data)
        # The compiler's command with the student's names, no dangling report's name.
        command = next(line for line in r.stdout.splitlines() if line.startswith("$ "))
        assert "source." not in command and " prog" not in command, command
        assert (f"saxpy{suffix}" if how == "file" else "'cell[") in command, command
        assert "original vs gimple" not in said


@pytest.mark.parametrize("language", ["c", "fortran"])
def test_an_untouched_start_file_fails_for_want_of_openacc(kernel: Kernel, language: str) -> None:
    """The start file as given: "uses OpenACC" fails, the region checks fail with it, and
    nothing asks the student about the regions library (ACC_PROFLIB)."""
    folder, suffix = ("C", ".c") if language == "c" else ("Fortran", ".f90")
    start = (EXAMPLES / folder / f"intro_saxpy_exercise{suffix}").read_text()
    r = check(kernel, f"%%idrrun -a --check intro_saxpy\n{start}")
    assert r.status == "error", r.stdout
    said = r.stdout + "".join(d.get("text/plain", "") for d in r.displays)
    assert re.search(r"uses OpenACC\s+FAIL", said), said
    assert re.search(r"compute regions run\s+FAIL", said), said
    assert "ACC_PROFLIB" not in said and "regions library" not in said, said


@pytest.mark.parametrize("language", ["c", "fortran"])
def test_a_source_check_is_found_on_the_directive_s_own_line(kernel: Kernel, language: str) -> None:
    """tiling_laplace's tile check on its solution: the directive's line in the cell, never the
    blank line above it."""
    folder, suffix = ("C", ".c") if language == "c" else ("Fortran", ".f90")
    text = (EXAMPLES / folder / f"tiling_laplace_solution{suffix}").read_text()
    at = re.search(r"^[ \t]*(#pragma acc|!\$acc)[^\n]*\btile\(", text, re.M)
    assert at is not None
    line = text.count("\n", 0, at.start()) + 2  # the magic line is the cell's line 1
    r = check(kernel, f"%%idrrun -a -n --check tiling_laplace\n{text}")
    said = r.stdout + "".join(d.get("text/plain", "") for d in r.displays)
    assert f"found at line {line}: '{at.group(1)}" in said, (line, said)


def test_a_runtime_error_is_told_on_the_line_of_the_cell_or_file(kernel: Kernel) -> None:
    """gfortran's "At line N of file ...": the cell's line (the magic line is 1) and its name, or
    the file's."""
    body = ("program bounds\n  implicit none\n  integer :: a(3), i\n  i = 4\n"
            "  a(i) = 1\n  print *, a(1)\nend program bounds\n")
    (kernel.cwd / "bounds.f90").write_text(body)
    for code, expected in (("%%idrrun --options -fcheck=bounds\n" + body, r"At line 6 of file cell\[\d+\]"),
                           ("%idrrunfile --options -fcheck=bounds bounds.f90", r"At line 5 of file bounds\.f90")):
        r = kernel.run(code)
        assert r.status == "error", r.stdout
        assert re.search(expected, r.stdout), (code, r.stdout)
