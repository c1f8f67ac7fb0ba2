"""checks/directives: OpenACC directives as the source spells them."""

from __future__ import annotations

import pytest

from idrrun.checks import directives
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


def test_a_program_reaches_the_gpu_unless_its_code_has_nothing_that_could() -> None:
    """directives.reaches_gpu: a lane's GPU is held only by programs that may use it; any doubt
    is a yes (a header of its own not read with it, a language not read here)."""
    assert not directives.reaches_gpu('#include <stdio.h>\nint main(void) {\n'
                                      '    /* #pragma acc parallel loop */\n'
                                      '    puts(getenv("CUDA_VISIBLE_DEVICES")); return 0; }\n', "c")
    assert not directives.reaches_gpu("#pragma omp parallel for\nfor (;;) t = omp_get_wtime();", "c")
    for code in ("#pragma acc kernels\n{}", "#pragma omp target teams\n{}", "_Pragma(\"acc parallel\")",
                 "n = acc_get_num_devices(acc_device_nvidia);", "cudaMalloc(&p, n);",
                 "cublasDgemm(h);", "#include <openacc.h>", '#include "mine.h"\n'):
        assert directives.reaches_gpu(code, "c"), code
    assert not directives.reaches_gpu('#include "mine.h"\n', "c", (("mine.h", "int f(void);"),))
    assert directives.reaches_gpu('#include "mine.h"\n', "c", (("mine.h", "#pragma acc routine\n"),))
    assert not directives.reaches_gpu("program p\n! !$acc kernels\nprint *, 'cuda'\nend program\n", "fortran")
    for code in ("  !$acc kernels\n", "use openacc\n", "!$omp target\n", "call CUBLASDGEMM(h)\n"):
        assert directives.reaches_gpu(f"program p\n{code}end program\n", "fortran"), code
    assert directives.reaches_gpu("int main() {}", "c++") is False
    assert directives.reaches_gpu("print('x')", "python")


def test_a_program_that_could_reach_the_driver_unnamed_reaches_the_gpu() -> None:
    """A program with no GPU code holds no GPU and has its GPUs hidden: one that could find them
    again (its environment rewritten, a library loaded by name, libgomp's entry points, another
    program, the kernel called directly, C from Fortran) counts as GPU code."""
    for code in ('unsetenv("CUDA_VISIBLE_DEVICES");', 'void *h = dlopen(name, RTLD_NOW);',
                 "GOACC_parallel_keyed(0);", 'system("./a");', "syscall(16, fd, 0, 0);",
                 '__asm__("syscall");', "extern char **environ;", 'execv(p, argv);'):
        assert directives.reaches_gpu(f"int main(void) {{ {code} return 0; }}", "c"), code
    for code in ("call execute_command_line('x')", "interface\n function f() bind(C)\n end function\nend interface"):
        assert directives.reaches_gpu(f"program p\n{code}\nend program\n", "fortran"), code
    # Words in strings and comments are data.
    assert not directives.reaches_gpu('int main(void) { puts("system: dlopen"); /* setenv */ return 0; }', "c")
    # MPI may bring CUDA with it; Fortran's words are not told by their case ("cur" is no cuInit).
    assert directives.reaches_gpu("#include <mpi.h>\nint main(void) { MPI_Init(0, 0); }", "c")
    assert directives.reaches_gpu("program p\nuse mpi\nend program\n", "fortran")
    assert not directives.reaches_gpu("program p\ninteger :: cur, cube\ncur = 1\nend program\n", "fortran")


def test_a_directive_a_macro_makes_is_found_in_what_the_compiler_read() -> None:
    """`#define PRAGMA(x) _Pragma(#x)` then `PRAGMA(acc parallel loop)`: no directive in the
    text, one in the compile's preprocessed source (build.PREPROCESSED), which decides."""
    text = "#define PRAGMA(x) _Pragma(#x)\nint main(void) {\n    PRAGMA(acc parallel loop)\n    for (;;);\n}\n"
    assert not directives.reaches_gpu(text, "c")
    assert directives.reaches_gpu(text, "c", compiled='int main(void) {\n#pragma acc parallel loop\n for (;;);\n}\n')
    assert not directives.reaches_gpu(text, "c", compiled="int main(void) {\n for (;;);\n}\n")
