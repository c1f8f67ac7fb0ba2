"""A folder with headers of its own (issue 44.6): `saxpy.c` that includes `impl.h`, or a Fortran
program that includes `saxpy.inc`, holding the OpenACC loop, is judged as the same code in one
file: its loops, regions, directives and lines are found in the header too. Real gcc and
gfortran, the course's intro_saxpy, through `idrrun grade` as a teacher runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("gfortran") is None,
                                reason="gcc and gfortran are needed")

EXAMPLES = ROOT / "examples"
SOLUTION_C = (EXAMPLES / "C" / "intro_saxpy_solution.c").read_text()
SOLUTION_F = (EXAMPLES / "Fortran" / "intro_saxpy_solution.f90").read_text()


def _cut(text: str, start: str, end: str) -> tuple[str, str]:
    """`text` without the part from `start` up to `end` (excluded), and that part."""
    assert start in text and end in text, "the solution changed: update the test"
    first, last = text.index(start), text.index(end)
    return text[:first] + text[last:], text[first:last]


# Where the part put in the header starts: the saxpy function (or subroutine) alone, or both
# (then the source itself holds no directive at all).
SAXPY_ONLY = {"c": "/* y = a*x + y: x is only read", "fortran": "  ! y = a*x + y: x is only read"}
BOTH = {"c": "/* Fill x with n points", "fortran": "  ! Fill x with n points"}


def _split_c(folder: Path, start: str) -> None:
    """The C solution as saxpy.c and impl.h: from `start` to main (functions, their compute
    regions and loops) in the header."""
    main, header = _cut(SOLUTION_C, start, "int main(")
    folder.mkdir()
    (folder / "intro_saxpy.c").write_text(main.replace("int main(", '#include "impl.h"\n\nint main(', 1))
    (folder / "impl.h").write_text(header)


def _split_fortran(folder: Path, start: str) -> None:
    """The Fortran solution as saxpy.f90 and saxpy.inc: from `start` to the end of the program
    (subroutines, their directives and loops) in the include file, included where it stood."""
    main, inc = _cut(SOLUTION_F, start, "end program saxpy_demo")
    folder.mkdir()
    (folder / "intro_saxpy.f90").write_text(
        main.replace("end program saxpy_demo", "  include 'saxpy.inc'\n\nend program saxpy_demo", 1))
    (folder / "saxpy.inc").write_text(inc)


def _grade(tmp_path: Path, *subs: Path) -> dict[str, dict[str, object]]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(EXAMPLES),
               IDRRUN_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "intro_saxpy", "--report",
                        str(tmp_path / "r.json"), "--", *map(str, subs)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert "Traceback" not in r.stderr, r.stderr
    return {str(row["student"]): row for row in json.loads((tmp_path / "r.json").read_text())}


def _check(row: dict[str, object], name: str) -> dict[str, object]:
    checks = row["checks"]
    assert isinstance(checks, list)
    return next(c for c in checks if c["name"] == name)


def test_a_folder_with_the_loop_in_its_header_gets_the_verdict_of_the_single_file(
        tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "ann.c").write_text(SOLUTION_C)
    _split_c(klass / "bob", SAXPY_ONLY["c"])
    _split_c(klass / "bea", BOTH["c"])
    (klass / "cy.f90").write_text(SOLUTION_F)
    _split_fortran(klass / "dee", SAXPY_ONLY["fortran"])
    _split_fortran(klass / "dot", BOTH["fortran"])
    rows = _grade(tmp_path, *(klass / name for name in ("ann.c", "bob", "bea", "cy.f90", "dee", "dot")))
    for one, split, header in (("ann", "bob", "impl.h"), ("ann", "bea", "impl.h"),
                               ("cy", "dee", "saxpy.inc"), ("cy", "dot", "saxpy.inc")):
        assert rows[one]["verdict"] in ("pass", "incomplete"), rows[one]["reasons"]
        assert (rows[split]["verdict"], rows[split]["score"], rows[split]["points"]) == \
            (rows[one]["verdict"], rows[one]["score"], rows[one]["points"]), \
            (rows[split]["reasons"], rows[one]["reasons"])
        # Her loop, and the region it ran in, named in her header by its own lines (not
        # placed on the source's line of that number: the annotated listing is the source's).
        loop = _check(rows[split], "the saxpy loop")
        assert loop["status"] == "pass" and f"({header}, line " in str(loop["reason"]), loop
        assert f"compute region at {header}, line " in str(loop["reason"]), loop
        assert loop["line"] is None and _check(rows[one], "the saxpy loop")["line"] is not None
        ran = _check(rows[split], "compute regions run")
        assert ran["status"] == "pass" and f"{header}, line " in str(ran["reason"]), ran
        assert "(saxpy)" in str(ran["reason"]) and "(main)" not in str(ran["reason"]), ran


def test_a_header_that_includes_files_from_elsewhere_is_refused_as_the_source_would_be(
        tmp_path: Path) -> None:
    """Only what was handed in is compiled: a header of hers is her code, what it includes too."""
    klass = tmp_path / "class"
    klass.mkdir()
    for name, start, outside in (("eli", "c", '#include "/etc/hostname"\n'),
                                 ("fox", "fortran", "  include '../../x.inc'\n")):
        (_split_c if start == "c" else _split_fortran)(klass / name, SAXPY_ONLY[start])
        header = klass / name / ("impl.h" if start == "c" else "saxpy.inc")
        header.write_text(outside + header.read_text())
    # In a sub-folder, a header's `../` that names one of the folder's own files stays inside.
    _split_c(klass / "gus", SAXPY_ONLY["c"])
    (klass / "gus" / "inc").mkdir()
    (klass / "gus" / "impl.h").rename(klass / "gus" / "inc" / "impl.h")
    (klass / "gus" / "consts.h").write_text("#define SCALE 2.0\n")
    (klass / "gus" / "inc" / "impl.h").write_text(
        '#include "../consts.h"\n' + (klass / "gus" / "inc" / "impl.h").read_text())
    main = klass / "gus" / "intro_saxpy.c"
    main.write_text(main.read_text().replace('#include "impl.h"', '#include "inc/impl.h"'))
    rows = _grade(tmp_path, klass / "eli", klass / "fox", klass / "gus")
    for name, shown in (("eli", "/etc/hostname"), ("fox", "../../x.inc")):
        assert rows[name]["verdict"] == "error", rows[name]
        assert "refused: the source includes files from outside the submission" in \
            str(rows[name]["reasons"]) and shown in str(rows[name]["reasons"]), rows[name]
    assert rows["gus"]["verdict"] == "pass", rows["gus"]["reasons"]
