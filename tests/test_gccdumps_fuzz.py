"""gccdumps' pairing of functions across gcc's dumps, fuzzed: generated declarations, real gcc.

Each generated function holds OpenACC regions over an array of its own name (`p3` in `fn3`),
with or without a data clause; whatever its declarator (return types, pointer and
function-pointer declarators, attributes, storage classes, K&R or prototype parameters, line
breaks; in Fortran external, module and internal procedures, functions with result variables,
continued lines, one name in several hosts), every region must be counted and every region
without a clause reported, at its own line, with its own array.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from idrrun.toolchains.gccdumps import GCC_DUMP_FLAGS, from_gcc_dumps

SEED = 20250611
PROGRAMS = 24  # per language
PER_PROGRAM = 8


@dataclass(frozen=True)
class Region:
    line: int
    array: str
    explicit: bool  # a data clause names the array


@dataclass
class Program:
    lines: list[str]
    regions: list[Region]

    def add(self, text: str) -> int:
        """Append lines; the 1-based number of the first."""
        first = len(self.lines) + 1
        self.lines.extend(text.split("\n"))
        return first


# ---------------------------------------------------------------------------------------------
# C

C_RETURNS = [
    ("void", ""), ("int", "return 0;"), ("double", "return 0.0;"), ("float *", "return 0;"),
    ("const char *const *", "return 0;"), ("struct pt", "struct pt r = {0}; return r;"),
    ("struct pt *", "return 0;"), ("unsigned long long", "return 0;"), ("_Bool", "return 0;"),
    ("long double", "return 0;"), ("fp_t", "return 0;"),
]
# Declarators whose name sits inside: (template with NAME and PARAMS, return statement).
C_NESTED = [
    ("void (*NAME(PARAMS))(float *, int)", "return 0;"),
    ("double (*NAME(PARAMS))[4]", "return 0;"),
    ("int (*(*NAME(PARAMS))(void))[3]", "return 0;"),
    ("struct pt *(*NAME(PARAMS))(struct pt *, ...)", "return 0;"),
]
C_STORAGE = ["", "static ", "static inline ", "extern ", "inline static ", "static __inline__ "]
C_ATTRIBUTES = ["", "__attribute__((noinline)) ", "__attribute__((noinline, cold)) ",
                "__attribute__ ((used)) ", "__attribute__((hot, noclone))\n",
                "__attribute__((aligned(16), noinline)) "]
C_KINDS = [("parallel loop", ""), ("kernels", ""), ("serial loop", ""), ("parallel", "loop")]


def _c_params(rng: random.Random, p: str) -> tuple[str, str, str]:
    """(inside the parentheses, K&R declarations or "", call arguments)."""
    choice = rng.randrange(7)
    if choice == 0:
        return f"float *{p}, int n", "", "a, N"
    if choice == 1:
        return f"float *restrict {p}, const int n", "", "a, N"
    if choice == 2:
        return f"int n, float {p}[n]", "", "N, a"
    if choice == 3:
        return f"float {p}[], int n", "", "a, N"
    if choice == 4:
        return f"float *const {p},\n    int n", "", "a, N"
    if choice == 5:
        return f"{p}, n", f"float *{p}; int n;", "a, N"
    return f"n, {p}", f"int n;\n    float *{p};", "N, a"


def _c_region(rng: random.Random, prog: Program, p: str) -> None:
    kind, inner = rng.choice(C_KINDS)
    explicit = rng.random() < 0.4
    clause = f" copy({p}[0:n])" if explicit else ""
    line = prog.add(f"  #pragma acc {kind}{clause}")
    if inner:
        prog.add("  {\n  #pragma acc loop\n"
                 f"  for (int i = 0; i < n; i++) {p}[i] = {p}[i] * 2.0f + 1.0f;\n  }}")
    else:
        prog.add(f"  for (int i = 0; i < n; i++) {p}[i] = {p}[i] * 2.0f + 1.0f;")
    prog.regions.append(Region(line, p, explicit))


def _breaks(rng: random.Random, text: str) -> str:
    """Line breaks where C allows them: after some spaces and commas."""
    out = []
    for ch in text:
        out.append(ch)
        if ch in " ," and rng.random() < 0.25:
            out.append("\n  ")
    return "".join(out)


def c_program(rng: random.Random) -> Program:
    prog = Program(["#include <stdio.h>", "struct pt { double x, y; };",
                    "typedef void (*fp_t)(float *, int);", "#define N 64"], [])
    calls = []
    for k in range(PER_PROGRAM):
        name, p = f"fn{k}", f"p{k}"
        inside, knr, args = _c_params(rng, p)
        if rng.random() < 0.3:
            template, ret = rng.choice(C_NESTED)
            declarator = template.replace("NAME", name).replace("PARAMS", inside)
        else:
            rtype, ret = rng.choice(C_RETURNS)
            declarator = f"{rtype}{'' if rtype.endswith('*') else ' '}{name}({inside})"
        head = rng.choice(C_ATTRIBUTES) + rng.choice(C_STORAGE) + declarator
        prog.add(_breaks(rng, head) + ("\n    " + knr if knr else ""))
        prog.add("{" if rng.random() < 0.5 else "  {")
        for _ in range(rng.choice((1, 1, 2))):
            _c_region(rng, prog, p)
        if ret:
            prog.add(f"  {ret}")
        prog.add("}")
        calls.append(f"  {name}({args});")
    prog.add("int main(void)\n{\n  float a[N];\n  for (int i = 0; i < N; i++) a[i] = i;")
    prog.add("\n".join(calls))
    prog.add('  printf("%f\\n", a[1]);\n  return 0;\n}')
    return prog


# ---------------------------------------------------------------------------------------------
# Fortran

def _f_region(rng: random.Random, prog: Program, array: str, indent: str) -> None:
    explicit = rng.random() < 0.4
    clause = f" copy({array})" if explicit else ""
    if rng.random() < 0.5:
        line = prog.add(f"{indent}!$acc parallel loop{clause}")
        prog.add(f"{indent}do i = 1, n\n{indent}  {array}(i) = {array}(i) * 2 + 1\n{indent}end do")
    else:
        line = prog.add(f"{indent}!$acc kernels{clause}")
        prog.add(f"{indent}do i = 1, n\n{indent}  {array}(i) = {array}(i) * 2 + 1\n{indent}end do\n"
                 f"{indent}!$acc end kernels")
    prog.regions.append(Region(line, array, explicit))


def _f_dummy(rng: random.Random, array: str) -> str:
    return rng.choice([f"real, intent(inout) :: {array}(n)", f"real(8), intent(inout) :: {array}(:)",
                       f"double precision, dimension(n) :: {array}"])


def _f_procedure(rng: random.Random, prog: Program, name: str, array: str, indent: str,
                 is_function: bool, internal_of: str | None = None) -> None:
    """A subroutine or function; internal_of: its host's array, used by host association."""
    prefix = rng.choice(["", "recursive ", "impure "]) if is_function else rng.choice(["", "recursive "])
    if internal_of is not None:
        args, used = "()", internal_of
    else:
        args, used = f"({array}, n)", array
        if rng.random() < 0.3:
            args = f"({array}, &\n{indent}    n)"
    if is_function:
        result = rng.choice(["", " result(r)"])
        rvar = "r" if result else name
        typed = rng.choice(["", "real "])
        prog.add(f"{indent}{prefix}{typed}function {name}{args}{result}")
        if not typed:
            prog.add(f"{indent}  real :: {rvar}")
    else:
        rvar = ""
        bind = rng.choice(["", f" bind(c, name=\"c_{name}\")"]) if internal_of is None else ""
        prog.add(f"{indent}{prefix}subroutine {name}{args}{bind}")
    if internal_of is None:
        prog.add(f"{indent}  integer, intent(in) :: n\n{indent}  {_f_dummy(rng, array)}")
    prog.add(f"{indent}  integer :: i")
    for _ in range(rng.choice((1, 1, 2))):
        _f_region(rng, prog, used, indent + "  ")
    if rvar:
        prog.add(f"{indent}  {rvar} = 0")
    prog.add(f"{indent}end {'function' if is_function else 'subroutine'} {name}")


def f_program(rng: random.Random) -> Program:
    prog = Program([], [])
    # Two modules that both hold a procedure named `work`, and module procedures of their own.
    for m in (1, 2):
        prog.add(f"module mod{m}\n  implicit none\ncontains")
        for name in ("work", f"mp{m}"):
            array = f"q{m}{name[0]}"
            _f_procedure(rng, prog, name, array, "  ", rng.random() < 0.4)
        prog.add(f"end module mod{m}")
    # External procedures, some hosting an internal procedure named `inner`. Nothing calls
    # them: the test reads the dumps, where every external procedure is.
    for k in range(PER_PROGRAM - 4):
        name, array = f"ext{k}", f"e{k}"
        is_function = rng.random() < 0.4
        if rng.random() < 0.5:
            call = "x = inner()" if is_function else "call inner()"
            prog.add(f"subroutine {name}({array}, n)\n  implicit none\n  integer, intent(in) :: n\n"
                     f"  real, intent(inout) :: {array}(n)\n  real :: x\n  {call}\ncontains")
            _f_procedure(rng, prog, "inner", f"unused{k}", "  ", is_function, internal_of=array)
            prog.add(f"end subroutine {name}")
        else:
            _f_procedure(rng, prog, name, array, "", is_function)
    prog.add("program main\n  use mod1, only: w1 => work\n  use mod2, only: w2 => work\n"
             "  implicit none\n  print *, 'the procedures are compiled, not run'\nend program main")
    return prog


# ---------------------------------------------------------------------------------------------
# The test


def _compile(tmp_path: Path, source: str, suffix: str, index: int) -> tuple[str, str, str]:
    compiler = "gcc" if suffix == ".c" else "gfortran"
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    folder = tmp_path / f"p{index}"
    folder.mkdir()
    (folder / f"prog{suffix}").write_text(source)
    argv = [compiler, "-O2", "-fopenacc", "-foffload=disable", "-w", *GCC_DUMP_FLAGS, "-c",
            f"prog{suffix}", "-o", "prog.o"]
    done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, f"{done.stderr}\n--- source ---\n{source}"
    (original,) = folder.glob("*.original")
    (gimple,) = folder.glob("*.gimple")
    # C's main calls every function: the call graph must find them all reachable. The Fortran
    # programs leave their procedures uncalled (their pairing is what is tested there).
    cgraph = next(folder.glob("*.cgraph")).read_text() if suffix == ".c" else ""
    return original.read_text(), gimple.read_text(), cgraph


@pytest.mark.parametrize("language", ["c", "fortran"])
def test_generated_declarations_are_paired(tmp_path: Path, language: str) -> None:
    rng = random.Random(f"{SEED}-{language}")
    suffix = ".c" if language == "c" else ".f90"
    wrong: list[str] = []
    for index in range(PROGRAMS):
        prog = c_program(rng) if language == "c" else f_program(rng)
        source = "\n".join(prog.lines) + "\n"
        report = from_gcc_dumps(*_compile(tmp_path, source, suffix, index))
        want = sorted((r.array, r.line) for r in prog.regions if not r.explicit)
        got = sorted((f.variable, f.line) for f in report.implicit)
        if report.regions != len(prog.regions) or got != want:
            wrong.append(f"program {index}: {report.regions} regions of {len(prog.regions)}, "
                         f"implicit {got}, expected {want}\n{source}")
    assert not wrong, f"{len(wrong)} of {PROGRAMS} programs mispaired; first:\n{wrong[0]}"
