"""%%idrrun and %idrrunfile in a real Jupyter kernel, with real gcc and gfortran."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from conftest import CellResult, Kernel, has_gpu

HELLO_C = """%%idrrun
#include <stdio.h>
int main(void) {
    printf("hello from C\\n");
    return 0;
}
"""

HELLO_F = """%%idrrun
program hello
  implicit none
  print '(a)', 'hello from Fortran'
end program hello
"""


def test_hello_c(kernel: Kernel) -> None:
    r = kernel.run(HELLO_C)
    assert r.status == "ok", r.error_text
    assert "hello from C" in r.stdout
    assert "[gcc] · c, guessed from the code" in r.stdout
    assert "exit 0" in r.stdout
    assert r.stderr == ""  # graders that treat stderr as failure must not misfire


def test_hello_fortran_guessed(kernel: Kernel) -> None:
    r = kernel.run(HELLO_F)
    assert r.status == "ok", r.error_text
    assert "hello from Fortran" in r.stdout
    assert "fortran, guessed from the code" in r.stdout


def test_compile_error_line_is_the_cell_line(kernel: Kernel) -> None:
    cell = "%%idrrun -l c\n#include <stdio.h>\nint main(void) {\n    int x = 1\n    return x;\n}\n"
    # the missing ';' is on cell line 4; gcc reports it where 'return' starts, line 5
    r = kernel.run(cell)
    assert r.status == "error"
    m = re.search(r"^(cell\[\d+\]):(\d+):\d+: error", r.stdout, re.MULTILINE)
    assert m, r.stdout
    assert m.group(2) == "5"
    assert "source.c" not in r.stdout.split("$ ")[-1].split("\n", 1)[1]
    assert "compile failed: exit code 1" in r.error_text
    assert "hint:" in r.error_text
    assert r.error["ename"] == "IdrrunFailure"


def test_segfault_fails_the_cell_with_signal_name(kernel: Kernel) -> None:
    cell = ("%%idrrun\n#include <stdio.h>\nint main(void) {\n  printf(\"before crash\\n\");\n"
            "  volatile int *p = 0; *p = 1;\n  return 0;\n}\n")
    r = kernel.run(cell)
    assert r.status == "error"
    assert "before crash" in r.stdout  # partial output kept: line-buffered through the pty
    assert "killed by SIGSEGV" in r.error_text
    assert kernel.alive()


def test_nonzero_exit_fails_and_no_raise_does_not(kernel: Kernel) -> None:
    body = "#include <stdlib.h>\nint main(void) { exit(3); }\n"
    r = kernel.run("%%idrrun\n" + body)
    assert r.status == "error" and "exit code 3" in r.error_text
    r = kernel.run("%%idrrun --no-raise\n" + body)
    assert r.status == "ok"
    assert "run failed: exit code 3" in r.stdout


def test_endless_loop_killed_at_timeout_kernel_survives(kernel: Kernel) -> None:
    cell = ("%%idrrun --timeout 2\n#include <stdio.h>\nint main(void) {\n"
            "  printf(\"looping\\n\");\n  while (1);\n}\n")
    prebuilt = kernel.run(cell.replace("--timeout 2", "--timeout 2 -n"))
    assert prebuilt.status == "ok", prebuilt.error_text
    r = kernel.run(cell)
    assert r.status == "error"
    assert "looping" in r.stdout
    assert "timed out after 2 s" in r.error_text
    assert r.seconds < 3.0, f"cell took {r.seconds:.2f} s"
    assert kernel.alive()


def test_output_streams_while_the_program_runs(kernel: Kernel) -> None:
    cell = ("%%idrrun\n#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n"
            "  printf(\"first\\n\");\n  sleep(2);\n  printf(\"second\\n\");\n  return 0;\n}\n")
    r = kernel.run(cell)
    assert r.status == "ok", r.error_text
    first = next(c for c in r.chunks if "first" in c.text)
    second = next(c for c in r.chunks if "second" in c.text)
    assert first is not second
    assert second.at - first.at > 1.5, "the first line must arrive before the program ends"


def test_cliopts_quoted_arguments(kernel: Kernel) -> None:
    cell = ("%%idrrun --cliopts \"one 'two words' three\"\n#include <stdio.h>\n"
            "int main(int argc, char **argv) {\n  for (int i = 1; i < argc; i++) printf(\"[%s]\\n\", argv[i]);\n"
            "  return 0;\n}\n")
    r = kernel.run(cell)
    assert r.status == "ok", r.error_text
    assert "[one]\n[two words]\n[three]" in r.stdout


def test_keep_noexec_and_object(kernel: Kernel) -> None:
    body = '#include <stdio.h>\nint main(void) { printf("kept ran\\n"); return 0; }\n'
    r = kernel.run("%%idrrun -n -k kept.c\n" + body)
    assert r.status == "ok", r.error_text
    assert (kernel.cwd / "kept.c").read_text() == body
    assert "kept ran" not in r.stdout  # -n: built, not run
    lib = "double twice(double x) { return 2 * x; }\n"
    r = kernel.run("%%idrrun --object -l c -k twice.c\n" + lib)
    assert r.status == "ok", r.error_text
    obj = kernel.cwd / "twice.c.o"  # IDRIS's name: NAME.o with NAME whole
    assert obj.is_file() and obj.read_bytes()[:4] == b"\x7fELF"


def test_cache_hit_and_force(kernel: Kernel) -> None:
    cell = '%%idrrun\n#include <stdio.h>\nint main(void) { printf("cache test 7\\n"); return 0; }\n'
    first = kernel.run(cell)
    again = kernel.run(cell)
    forced = kernel.run(cell.replace("%%idrrun", "%%idrrun --force"))
    assert "built in" in first.stdout
    assert "build cached" in again.stdout and "cache test 7" in again.stdout
    assert "built in" in forced.stdout and "build cached" not in forced.stdout


def test_failed_build_never_runs_a_stale_executable(kernel: Kernel) -> None:
    good = '%%idrrun -k stale.c\n#include <stdio.h>\nint main(void) { printf("OLD VERSION\\n"); return 0; }\n'
    assert kernel.run(good).status == "ok"
    broken = good.replace('printf("OLD VERSION\\n");', 'printf("NEW" oops);')
    r = kernel.run(broken)
    assert r.status == "error"
    assert "OLD VERSION" not in r.stdout


def test_openmp_threads(kernel: Kernel) -> None:
    cell = ("%%idrrun -t --threads 3\n#include <stdio.h>\n#include <omp.h>\nint main(void) {\n"
            "  #pragma omp parallel\n  {\n    #pragma omp single\n    printf(\"threads = %d\\n\", omp_get_num_threads());\n  }\n"
            "  return 0;\n}\n")
    r = kernel.run(cell)
    assert r.status == "ok", r.error_text
    assert "threads = 3" in r.stdout
    assert kernel.run("import os; assert 'OMP_NUM_THREADS' not in os.environ").status == "ok"


@pytest.mark.mpi
@pytest.mark.skipif(not shutil.which("mpicc"), reason="Open MPI not installed")
def test_mpi_two_ranks(kernel: Kernel) -> None:
    cell = ("%%idrrun -m 2\n#include <stdio.h>\n#include <mpi.h>\nint main(int argc, char **argv) {\n"
            "  int rank, size;\n  MPI_Init(&argc, &argv);\n  MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n"
            "  MPI_Comm_size(MPI_COMM_WORLD, &size);\n  printf(\"rank %d of %d\\n\", rank, size);\n"
            "  MPI_Finalize();\n  return 0;\n}\n")
    r = kernel.run(cell)
    assert r.status == "ok", r.error_text + r.stdout
    assert "rank 0 of 2" in r.stdout and "rank 1 of 2" in r.stdout
    assert "mpicc" in r.stdout and "mpirun" not in r.stdout.split("exit 0")[0].split("$ ")[0]


def usage_error(r: CellResult) -> str:
    """IPython shows a UsageError as one line on stderr, without a traceback."""
    assert r.status == "error"
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("UsageError: "), r.stderr
    return lines[0]


def test_usage_error_is_one_line(kernel: Kernel) -> None:
    line = usage_error(kernel.run("%%idrrun --bogus\nint main(void){return 0;}\n"))
    assert "unrecognized arguments: --bogus" in line
    line = usage_error(kernel.run("%%idrrun --timeout soon\nint main(void){return 0;}\n"))
    assert "expected a number of seconds" in line
    line = usage_error(kernel.run('%%idrrun --clipots "1"\nint main(void){return 0;}\n'))
    assert line.endswith("unrecognized arguments: --clipots 1 (did you mean --cliopts?)")
    line = usage_error(kernel.run("%%idrrun -check intro_pi\nint main(void){return 0;}\n"))
    assert line.endswith("-check is not an option (it reads as -c heck): did you mean --check?")


def test_missing_compiler_names_it(kernel: Kernel) -> None:
    if shutil.which("nvc"):
        pytest.skip("nvc is installed here")
    line = usage_error(kernel.run("%%idrrun -c nvhpc\n#include <stdio.h>\nint main(void){return 0;}\n"))
    assert "'nvc'" in line and "-c gcc" in line


def test_idrrunfile(kernel: Kernel) -> None:
    (kernel.cwd / "prog.f90").write_text(
        "program p\n  implicit none\n  print '(a)', 'from a file'\nend program p\n")
    r = kernel.run("%idrrunfile prog.f90")
    assert r.status == "ok", r.error_text
    assert "from a file" in r.stdout and "fortran" in r.stdout
    assert "no such file: nothere.c" in usage_error(kernel.run("%idrrunfile nothere.c"))


def test_interrupt_kills_the_program_and_keeps_output(kernel: Kernel) -> None:
    cell = ("%%idrrun --timeout 60\n#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n"
            "  printf(\"started\\n\");\n  sleep(100);\n  return 0;\n}\n")
    running = kernel.start(cell)
    running.wait_for("started")
    t0 = time.monotonic()
    kernel.km.interrupt_kernel()
    r = running.finish(timeout=30)
    assert time.monotonic() - t0 < 3
    assert r.error is not None and "interrupted" in r.error_text
    assert kernel.alive()


def test_acc_cell_reports_where_it_ran(kernel: Kernel) -> None:
    cell = ("%%idrrun -a\n#include <stdio.h>\n#include <openacc.h>\nint main(void) {\n  int on_gpu = 0;\n"
            "  #pragma acc parallel copyout(on_gpu)\n  on_gpu = !acc_on_device(acc_device_host);\n"
            "  printf(\"compute region ran on the %s\\n\", on_gpu ? \"GPU\" : \"host\");\n  return 0;\n}\n")
    r = kernel.run(cell)
    assert r.status == "ok", r.error_text + r.stdout
    print(r.stdout)
    if has_gpu():
        assert "compute region ran on the GPU" in r.stdout
    else:
        assert "compute region ran on the host" in r.stdout
        # (its note, about the machine, is said by the kernel's first OpenACC cell only:
        # test_notebook_polish.py)
        assert "OpenACC on the host (no GPU offload)" in r.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no GPU on this machine")
def test_acc_cell_runs_on_the_gpu(kernel: Kernel) -> None:
    cell = ("%%idrrun -a\n#include <stdio.h>\n#include <openacc.h>\nint main(void) {\n  int on_gpu = 0;\n"
            "  #pragma acc parallel copyout(on_gpu)\n  on_gpu = !acc_on_device(acc_device_host);\n"
            "  printf(\"devices = %d\\n\", acc_get_num_devices(acc_device_nvidia));\n"
            "  printf(\"compute region ran on the %s\\n\", on_gpu ? \"GPU\" : \"host\");\n  return 0;\n}\n")
    r = kernel.run(cell)
    print(r.stdout)
    assert r.status == "ok", r.error_text + r.stdout
    assert "OpenACC on the GPU" in r.stdout
    assert "compute region ran on the GPU" in r.stdout


ASYNC_SOLUTION = (Path(__file__).resolve().parent.parent / "examples" / "C" / "async_matmul_solution.c").read_text()


def test_profile_in_a_kernel_host_run_says_no_gpu_activity(kernel: Kernel) -> None:
    r = kernel.run("%%idrrun -a --profile --cliopts 100\n" + ASYNC_SOLUTION)
    assert r.status == "ok", r.error_text
    html = "".join(d.get("text/html", "") for d in r.displays)
    text = html + r.stdout
    if has_gpu():
        assert "<img" in html
    else:
        assert "no GPU activity: the OpenACC regions ran on the host" in text
    assert list((kernel.cwd / "idrrun-profile").glob("cell*"))  # the run folder is kept
    # under nsys (on PATH: CI installs Debian's), its progress bars are one short line
    assert "[1/1] [" not in r.stdout and "\r" not in r.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no GPU on this machine")
def test_profile_async_solution_on_the_gpu_shows_three_queues(kernel: Kernel) -> None:
    examples = Path(__file__).resolve().parent.parent / "examples"
    (kernel.cwd / "idrrun.toml").write_text(f'examples_dir = "{examples}"\n')
    try:
        r = kernel.run("%%idrrun -a --profile --check async_matmul\n" + ASYNC_SOLUTION)
    finally:
        (kernel.cwd / "idrrun.toml").unlink()
    print(r.stdout[-3000:])
    assert r.status == "ok", r.error_text + r.stdout
    html = "".join(d.get("text/html", "") for d in r.displays)
    assert "<img" in html and "data:image/png;base64," in html
    verdict = next(d["text/html"] for d in r.displays if "idrrun-verdict" in d.get("text/html", ""))
    # The words only: the timelines beside the solution's are pictures in base64, where "INCOMPLETE"
    # may well appear.
    words = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", verdict)
    assert "async_matmul: PASS" in words
    assert "runs on the GPU" in words and "async queues" in words and "INCOMPLETE" not in words


def test_a_checked_cell_shows_its_source_annotated_after_the_verdict(kernel: Kernel) -> None:
    # The start file of data_laplace moves A and Anew implicitly at each construct: the cell
    # shows, after the verdict, its source with gcc's remark and the implicit copies on the
    # line of the directive (the cell's own line numbers: the magic line is 1).
    examples = Path(__file__).resolve().parent.parent / "examples"
    start = (examples / "C" / "data_laplace_exercise.c").read_text()
    (kernel.cwd / "idrrun.toml").write_text(f'examples_dir = "{examples}"\n')
    try:
        r = kernel.run("%%idrrun -a --check data_laplace\n" + start)
    finally:
        (kernel.cwd / "idrrun.toml").unlink()
    assert r.status == "error" and "check failed" in r.error_text, r.stdout
    html = [d["text/html"] for d in r.displays if "text/html" in d]
    verdict = next(i for i, h in enumerate(html) if "idrrun-verdict" in h)
    shown = next(i for i, h in enumerate(html) if "idrrun-annotated" in h)
    assert shown == verdict + 1, html
    directive = 1 + next(i + 1 for i, line in enumerate(start.splitlines())
                         if "#pragma acc parallel loop" in line)
    notes = re.findall(r"<tr class='idrrun-note idrrun-note-(\w+)' data-line='(\d+)'>(.*?)</tr>",
                       html[shown])
    here = [(kind, body) for kind, line, body in notes if int(line) == directive]
    assert any(kind == "loop" and "assigned OpenACC gang vector loop parallelism" in body and
               "spread over gangs and vectors" in body for kind, body in here), here
    assert any(kind == "implicit" and "copy(A) added by the compiler" in body for kind, body in here)
    assert any(kind == "check" and "data clauses" in body for kind, body in here)
    # The note follows its line, and the listing opens by itself: something is wrong there.
    row = re.search(rf"<td[^>]*>{directive}</td><td[^>]*>([^<]*)</td></tr>(<tr class='idrrun-note)",
                    html[shown])
    assert row is not None and "#pragma acc parallel loop" in row.group(1)
    assert "<details class='idrrun-annotated' open>" in html[shown]
    plain = next(d["text/plain"] for d in r.displays if "idrrun-annotated" in d.get("text/html", ""))
    assert re.search(rf"^{directive}\s+#pragma acc parallel loop.*\n\s+// \^ check failed: data "
                     "clauses", plain, re.MULTILINE), plain


WHICH_X = '#include <stdio.h>\nint main(void) { printf("x=%d\\n", X); return 0; }\n'
WRAPPER = '#!/bin/sh\n[ "$1" = --version ] && {{ echo "gcc (wrapper {n}) 12.2.0"; exit 0; }}\nexec {gcc} -DX={n} "$@"\n'


def test_each_input_changed_between_two_cells_is_seen(kernel: Kernel, tmp_path: Path) -> None:
    """What a kernel keeps between cells (PATH's lookups, the probe's answers, the builds, the
    guard's name) never hides a change: the source, an option, the project's config file, a
    compiler put first on PATH, and that compiler changed in place each give the next cell's
    program its own build."""
    def x(code: str) -> str:
        r = kernel.run(code)
        assert r.status == "ok", r.stdout + r.error_text
        return re.findall(r"^x=(\S+)$", r.stdout, re.MULTILINE)[-1]

    cwd = Path(kernel.run("import os; print(os.getcwd())").stdout.strip())
    gcc = shutil.which("gcc")
    assert gcc is not None
    assert x("%%idrrun --options -DX=1\n" + WHICH_X) == "1"
    assert x("%%idrrun --options -DX=1\n" + WHICH_X.replace("x=%d", "x=%d!")) == "1!"  # source
    assert x("%%idrrun --options -DX=2\n" + WHICH_X) == "2"  # option
    try:
        (cwd / "idrrun.toml").write_text('[compilers.gcc]\nflags = ["-DX=3"]\n')
        assert x("%%idrrun\n" + WHICH_X) == "3"  # config file
    finally:
        (cwd / "idrrun.toml").unlink()
    folder = tmp_path / "bin"
    folder.mkdir()
    wrapper = folder / "gcc"
    saved = kernel.run("import os; _path = os.environ['PATH']; print(_path)").stdout.strip()
    try:
        wrapper.write_text(WRAPPER.format(n=4, gcc=gcc))
        wrapper.chmod(0o755)
        time.sleep(1.1)  # PATH's folder is no longer "racily clean" (onpath.py): it is kept
        kernel.run(f"os.environ['PATH'] = {str(folder)!r} + os.pathsep + _path")
        assert x("%%idrrun\n" + WHICH_X) == "4"  # PATH
        wrapper.write_text(WRAPPER.format(n=5, gcc=gcc))  # the compiler changed in place
        assert x("%%idrrun\n" + WHICH_X) == "5"
    finally:
        kernel.run("os.environ['PATH'] = _path")
    assert saved and x("%%idrrun --options -DX=6\n" + WHICH_X) == "6"
