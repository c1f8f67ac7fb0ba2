"""Every loop_on_device pattern of the course names its hot loop by what the statement computes,
not by names a student may change: in the four course files (C and Fortran start file and
solution) its first match is the hot statement, inside a compute construct of the solution, and
rewrites a student could write (renamed accumulator or index, swapped operands, `a = a + b`,
another literal's spelling) still match that line first. Found as idrrun finds it: code_text,
then loops.statement_line and loops.enclosing_loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from idrrun.checks import loops, specs
from idrrun.checks.directives import code_text

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
LANGUAGES = {"c": "c", "fortran": "fortran"}

# (exercise, label) -> language -> the hot statement as the four course files write it (the
# start file and the solution alike), the line its loop_on_device check must find first.
HOT: dict[tuple[str, str], dict[str, str]] = {
    ("async_matmul", "the product loop"): {
        "c": "sum += A[(size_t)i * dim + k] * B[(size_t)k * dim + j];",
        "fortran": "total = total + A(i, k) * B(k, j)"},
    ("atomic_histogram", "the histogram loop"): {
        "c": "hist[b] += 1;",
        "fortran": "hist(b) = hist(b) + 1"},
    ("blur_passes", "the blur pass"): {
        "c": "tmp[y][x] = (4.0f * img[y][x]",
        "fortran": "tmp(x, y) = (4.0 * img(x, y) &"},
    ("compute_scan", "the block sums"): {
        "c": "partial += s[i];",
        "fortran": "partial = partial + s(i)"},
    ("data_laplace", "the stencil loop"): {
        "c": "Anew[j][i] = 0.25 * (A[j][i + 1] + A[j][i - 1]",
        "fortran": "anew(i,j) = 0.25_dp * (a(i+1,j) + a(i-1,j) + a(i,j-1) + a(i,j+1))"},
    ("deepcopy_csr", "the product loop"): {
        "c": "sum += A->val[k] * x[A->col[k]];",
        "fortran": "total = total + a%val(k) * x(a%col(k))"},
    ("intro_pi", "the pi loop"): {
        "c": "sum += 4.0 / (1.0 + x * x);",
        "fortran": "total = total + 4.0_dp / (1.0_dp + x * x)"},
    ("intro_saxpy", "the init loop"): {
        "c": "x[i] = (double)i / (double)(n - 1);",
        "fortran": "x(i) = real(i - 1, dp) / real(n - 1, dp)"},
    ("intro_saxpy", "the saxpy loop"): {
        "c": "y[i] = a * x[i] + y[i];",
        "fortran": "y(i) = a * x(i) + y(i)"},
    ("life_swap", "the generation loop"): {
        "c": "int s = cur[c - stride - 1] + cur[c - stride] + cur[c - stride + 1]",
        "fortran": "s = grid(x-1, y-1, cur) + grid(x, y-1, cur) + grid(x+1, y-1, cur) &"},
    ("loops_matvec", "the product loop"): {
        "c": "sum += A[(size_t)i * n + j] * x[j];",
        "fortran": "s = s + a(j,i) * x(j)"},
    ("mandelbrot_rows", "the pixel loop"): {
        "c": "double cx = x0 + (i + 0.5) * dx, cy = y0 + (j + 0.5) * dy;",
        "fortran": "cx = x0 + (i - 0.5_dp) * dx"},
    ("md_forces", "the force loop"): {
        "c": "double f = 24.0 * inv2 * inv6 * (2.0 * inv6 - 1.0);",
        "fortran": "f = 24.0_dp * inv2 * inv6 * (2.0_dp * inv6 - 1.0_dp)"},
    ("multigpu_integral", "the integrand loop"): {
        "c": "f[i] = 1.0 / (1.0 + x);",
        "fortran": "f(i) = 1.0_dp / (1.0_dp + x)"},
    ("profile_cg", "the stencil loop"): {
        "c": "q[k] = 4.0 * p[k] - p[k - 1] - p[k + 1] - p[k - w] - p[k + w];",
        "fortran": "q(i, j) = 4.0_dp * p(i, j) - p(i-1, j) - p(i+1, j) - p(i, j-1) - p(i, j+1)"},
    ("routines_pendulum", "the pendulum loop"): {
        "c": "numeric[i] = period_numeric(theta0, i % NLEN, dt);",
        "fortran": "numeric(i) = period_numeric(theta0, mod(i - 1, nlen) + 1, dt)"},
    ("tiling_laplace", "the stencil loop"): {
        "c": "Tnew[j * nx + i] = 0.25 * (T[j * nx + i + 1] + T[j * nx + i - 1]",
        "fortran": "Tnew(i, j) = 0.25d0 * (T(i + 1, j) + T(i - 1, j) &"},
}

# (exercise, label) -> language -> statements a student could write in place of the hot one.
REWRITES: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {
    ("async_matmul", "the product loop"): {
        "c": ("acc += B[(size_t)p * dim + j] * A[(size_t)i * dim + p];",
              "c_ij = c_ij + A[i * dim + k] * B[k * dim + j];",
              "t+=A[i*dim+p]*B[p*dim+j];"),
        "fortran": ("acc = acc + B(p, j) * A(i, p)", "t = a(i,p)*b(p,j) + t")},
    ("atomic_histogram", "the histogram loop"): {
        "c": ("hist[bin]++;", "++hist[(int)(x[i] * nbins)];", "hist[k] = hist[k] + 1;",
              "hist[bin] += 1;"),
        "fortran": ("hist(bin) = 1 + hist(bin)",
                    "hist(int(x(i) * nbins)) = hist(int(x(i) * nbins)) + 1")},
    ("blur_passes", "the blur pass"): {
        "c": ("tmp[y][x] = 0.25f * img[y][x] + 0.125f * (img[y - 1][x] + img[y + 1][x]",
              "tmp[j][i]=(img[j-1][i]+img[j+1][i]+img[j][i-1]+img[j][i+1])/4;"),
        "fortran": ("tmp(i, j) = 0.25 * img(i, j) + 0.125 * (img(i-1, j) + img(i+1, j) &",
                    "tmp(x,y)=(img(x-1,y)+img(x+1,y))/2")},
    ("compute_scan", "the block sums"): {
        "c": ("acc += s[k];", "run = run + s[j];", "total = s[i] + total;",
              "p[i] = p[i - 1] + s[i];"),
        "fortran": ("acc = acc + s(k)", "run = s(j) + run", "p(i) = p(i - 1) + s(i)")},
    ("data_laplace", "the stencil loop"): {
        "c": ("Anew[j][i] = (A[j][i+1] + A[j][i-1] + A[j-1][i] + A[j+1][i]) / 4.0;",
              "Anew[row][col] = .25 * (A[row][col+1] + A[row][col-1]"),
        "fortran": ("anew(ii, jj) = (a(ii+1, jj) + a(ii-1, jj) + a(ii, jj-1) + a(ii, jj+1)) / 4",
                    "anew(i,j)=0.25d0*(a(i+1,j)+a(i-1,j)+a(i,j-1)+a(i,j+1))")},
    ("deepcopy_csr", "the product loop"): {
        "c": ("acc += x[A->col[j]] * A->val[j];", "s = s + A->val[p] * x[A->col[p]];"),
        "fortran": ("acc = acc + x(a%col(j)) * a%val(j)", "s=s+a%val(p)*x(a%col(p))")},
    ("intro_pi", "the pi loop"): {
        "c": ("total += 4.0/(1.0+t*t);", "s = s + 4.0 / (t * t + 1.0);",
              "sum += 4. / (1. + x*x);", "acc += 4.0 / (1.0 + ((i + 0.5) * h) * ((i + 0.5) * h));",
              "acc += 1.0 / (1.0 + t * t);"),
        "fortran": ("s = s + 4.0d0 / (1.0d0 + t**2)", "acc = acc + 4.0_dp/(t*t + 1.0_dp)",
                    "acc = 4.0_dp / (1.0_dp + t * t) + acc")},
    ("intro_saxpy", "the init loop"): {
        "c": ("x[j] = j / (n - 1.0);", "x[k] = (double)k * h;"),
        "fortran": ("x(j) = (j - 1) / real(n - 1, dp)", "x(k) = h * (k - 1)")},
    ("intro_saxpy", "the saxpy loop"): {
        "c": ("y[j] += a * x[j];", "y[k] = y[k] + x[k] * a;", "y[i]=a*x[i]+y[i];"),
        "fortran": ("y(j) = y(j) + a * x(j)", "y(k) = x(k)*a + y(k)")},
    ("life_swap", "the generation loop"): {
        "c": ("int alive = cur[c - 1] + cur[c + 1] + cur[c - stride]",
              "int count = (int)cur[c - stride - 1] + (int)cur[c - stride]"),
        "fortran": ("neighbours = grid(x+1, y, cur) + grid(x-1, y, cur) &",
                    "alive = grid(i-1, j-1, cur) + grid(i, j-1, cur) &")},
    ("loops_matvec", "the product loop"): {
        "c": ("total += x[col] * A[(size_t)row * n + col];", "acc = acc + A[i * n + k] * x[k];",
              "t += x[j]*A[i*n+j];"),
        "fortran": ("total = total + x(col) * a(col, row)", "acc = a(k,i)*x(k) + acc",
                    "t = t + A(j, i) * x(j)")},
    ("mandelbrot_rows", "the pixel loop"): {
        "c": ("double re = x0 + dx * (i + 0.5), im = y0 + dy * (j + 0.5);",
              "double px = (col + 0.5) * dx + x0;"),
        "fortran": ("re = x0 + dx * (col - 0.5_dp)", "px = (i - 0.5d0) * dx + x0")},
    ("md_forces", "the force loop"): {
        "c": ("double force = 24.0 * inv2 * inv6 * (2.0 * inv6 - 1.0);",
              "double g = (48.0 * s6 - 24.0) * s6 * s2;",
              "double ff = s2 * s6 * 24 * (2 * s6 - 1);"),
        "fortran": ("ff = 24.0d0 * s2 * s6 * (2.0d0 * s6 - 1.0d0)",
                    "g = (48.0_dp * s6 - 24.0_dp) * s6 * s2")},
    ("multigpu_integral", "the integrand loop"): {
        "c": ("f[k] = 1.0 / (1.0 + t);", "f[i] = 1.0/(xi + 1.0);",
              "f[i] = 1.0 / (1.0 + (first + i + 0.5) * h);"),
        "fortran": ("f(k) = 1.0d0 / (t + 1.0d0)", "f(i) = 1 / (1.0_dp + t)")},
    ("profile_cg", "the stencil loop"): {
        "c": ("q[idx] = 4.0 * p[idx] - p[idx - 1] - p[idx + 1] - p[idx - w] - p[idx + w];",
              "q[k] = -p[k - 1] - p[k + 1] + 4 * p[k] - p[k - w] - p[k + w];",
              "q[i * w + j] = 4.0*p[i*w+j] - (p[i*w+j-1] + p[i*w+j+1] + p[(i-1)*w+j]);"),
        "fortran": ("q(ii, jj) = 4.0d0 * p(ii, jj) - p(ii-1, jj) - p(ii+1, jj) - p(ii, jj-1)",
                    "q(i,j) = -p(i-1,j) + 4*p(i,j) - p(i+1,j) - p(i,j-1) - p(i,j+1)")},
    ("routines_pendulum", "the pendulum loop"): {
        "c": ("numeric[k] = period_numeric(theta0, k % NLEN, dt);",
              "numeric[i] = period_numeric(0.1 + 2.9 * (double)i / (n - 1.0), i % NLEN, dt);"),
        "fortran": ("numeric(k) = period_numeric(theta0, mod(k - 1, nlen) + 1, dt)",
                    "numeric(i)=period_numeric(t0, 1 + mod(i - 1, nlen), dt)")},
    ("tiling_laplace", "the stencil loop"): {
        "c": ("Tnew[idx] = (T[idx + 1] + T[idx - 1] + T[idx + nx] + T[idx - nx]) / 4.0;",
              "Tnew[j*nx+i] = .25*(T[j*nx+i+1]+T[j*nx+i-1]"),
        "fortran": ("Tnew(ii, jj) = (T(ii+1, jj) + T(ii-1, jj) &",
                    "Tnew(i,j) = 0.25_dp*(T(i+1,j)+T(i-1,j) &")},
}


def _loop_checks() -> list[tuple[specs.Exercise, specs.CheckSpec]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.toml")):
        exercise = specs.load(path)
        found += [(exercise, c) for c in exercise.checks if c.kind == "loop_on_device"]
    return found


CHECKS = _loop_checks()
IDS = [f"{e.name}:{c.label}" for e, c in CHECKS]


def _code(path: Path, language: str) -> str:
    return code_text(path.read_text(), language)


def _hot(exercise: specs.Exercise, check: specs.CheckSpec, language: str,
         role: str) -> tuple[str, int, int]:
    """The code of one course file, the line of its hot statement (found by its text, not by the
    pattern) and the line the check's pattern matches first."""
    pair = exercise.sources[language]
    path = pair.exercise if role == "exercise" else pair.solution
    assert path is not None
    code = _code(path if path.is_absolute() else EXAMPLES / path, language)
    hot = HOT[exercise.name, check.label][language]
    lines = [n for n, text in enumerate(code.split("\n"), 1) if text.strip() == hot]
    assert len(lines) == 1, f"{hot!r} is not one line of {path}"
    assert check.pattern is not None
    return code, lines[0], loops.statement_line(code, check.pattern) or 0


def test_every_loop_check_has_its_hot_statement_and_rewrites() -> None:
    assert CHECKS, "no loop_on_device check in the course"
    assert {(e.name, c.label) for e, c in CHECKS} == set(HOT) == set(REWRITES)


@pytest.mark.parametrize("role", ["exercise", "solution"])
@pytest.mark.parametrize("language", sorted(LANGUAGES))
@pytest.mark.parametrize(("exercise", "check"), CHECKS, ids=IDS)
def test_the_first_match_is_the_hot_statement(exercise: specs.Exercise, check: specs.CheckSpec,
                                              language: str, role: str) -> None:
    """In the start file and in the solution the pattern matches the hot statement first, and
    the loop around it is the hot loop: in the solution, inside a compute construct."""
    code, hot, found = _hot(exercise, check, language, role)
    assert found == hot, f"{check.label!r} first matches line {found}, not the hot line {hot}"
    loop = loops.enclosing_loop(code, hot, language)
    assert loop is not None, f"line {hot} is in no loop"
    if role == "solution":
        extents = [loops.construct_extent(code, d, language)
                   for d in loops.compute_constructs(code, language)]
        assert any(e is not None and e[0] <= loop < hot <= e[1] for e in extents), \
            f"the hot loop (line {loop}) is in no compute construct of the solution"


@pytest.mark.parametrize("language", sorted(LANGUAGES))
@pytest.mark.parametrize(("exercise", "check"), CHECKS, ids=IDS)
def test_a_students_rewrite_of_the_hot_statement_still_matches_it_first(
        exercise: specs.Exercise, check: specs.CheckSpec, language: str) -> None:
    code, hot, _ = _hot(exercise, check, language, "solution")
    lines = code.split("\n")
    assert check.pattern is not None
    missed = []
    for rewrite in REWRITES[exercise.name, check.label][language]:
        rewritten = "\n".join([*lines[:hot - 1], "    " + rewrite, *lines[hot:]])
        if loops.statement_line(rewritten, check.pattern) != hot:
            missed.append(rewrite)
    assert not missed, f"{check.label!r} of {exercise.name} ({language}) misses {missed}"
