"""checks/directives: OpenACC directives as the source spells them."""

from __future__ import annotations

import pytest

from idrrun.checks.directives import code_text, has_directives



@pytest.mark.parametrize(("text", "language", "expected"), [
    ("#pragma acc parallel loop\n", "c", True),
    ("  #  pragma   acc kernels\n", "c++", True),
    ('_Pragma("acc parallel")\n', "cuda", True),
    ("// #pragma acc parallel\n", "c", False),
    ("/* a comment\n#pragma acc parallel\n*/ int x;\n", "c", False),
    ('const char *s = "/*";\n#pragma acc parallel\n', "c", True),
    ("#pragma omp parallel for\n", "c", False),
    ("  !$acc parallel loop\n", "fortran", True),
    ("!$ACC KERNELS\n", "fortran", True),
    ("c$acc parallel loop\n", "fortran", True),
    ("*$acc kernels\n", "fortran", True),
    ("  !$acc&  copyin(a)\n", "fortran", True),
    ("  ! !$acc parallel\n", "fortran", False),
    ("  x = 1 ! $acc parallel\n", "fortran", False),
    ("!$omp parallel do\n", "fortran", False),
    ("#pragma acc parallel\n", "fortran", False),
    ("!$acc parallel\n", "c", False),
])
def test_source_has_directives(text: str, language: str, expected: bool) -> None:
    assert has_directives(code_text(text, language), language) is expected
