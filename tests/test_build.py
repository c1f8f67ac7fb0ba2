"""build: the compile command, the content-addressed cache, no stale executable after a failure."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from idrrun import build
from idrrun.model import CompilerInfo, Language, RunRequest, Toolchain
from idrrun.request.source import from_cell
from idrrun.toolchains.gcc import GCC
from idrrun.toolchains.machine import probe_compiler

GOOD = "#include <stdio.h>\nint main(void){ puts(\"hi\"); return 0; }\n"


def setup(tmp_path: Path, text: str = GOOD, name: str = "cell[4]",
          language: Language = "c") -> tuple[RunRequest, Toolchain]:
    src = from_cell(text, name, language, None, tmp_path)
    gcc = probe_compiler("g++" if language == "c++" else "gcc")
    assert gcc.path is not None
    toolchain = Toolchain(family="gcc", language=language, compiler=gcc, flags=("-O2",),
                          link_flags=("-lm",), target="none")
    return RunRequest(source=src, workdir=tmp_path), toolchain


def test_builds_then_hits_the_cache(tmp_path: Path) -> None:
    request, toolchain = setup(tmp_path)
    first = build.build(request, toolchain, tmp_path / "cache")
    assert first.ok and not first.cached and first.executable is not None and first.executable.is_file()
    second = build.build(request, toolchain, tmp_path / "cache")
    assert second.ok and second.cached and second.key == first.key
    forced = build.build(dataclasses.replace(request, force=True), toolchain, tmp_path / "cache")
    assert forced.ok and not forced.cached


def test_key_follows_source_flags_and_compiler(tmp_path: Path) -> None:
    request, toolchain = setup(tmp_path)
    key = build.build_key(request, toolchain)
    assert build.build_key(request, dataclasses.replace(toolchain, flags=("-O3",))) != key
    other = dataclasses.replace(toolchain, compiler=CompilerInfo("gcc", toolchain.compiler.path, "gcc 99"))
    assert build.build_key(request, other) != key
    changed, _ = setup(tmp_path, GOOD.replace("hi", "ho"))
    assert build.build_key(changed, toolchain) != key
    (tmp_path / "h.h").write_text("#define X 1\n")
    with_header, _ = setup(tmp_path, '#include "h.h"\n' + GOOD)
    k1 = build.build_key(with_header, toolchain)
    (tmp_path / "h.h").write_text("#define X 2\n")
    assert build.build_key(with_header, toolchain) != k1  # a local header is part of the key


def test_a_header_found_through_the_include_folder_is_part_of_the_key(tmp_path: Path) -> None:
    """`#include <impl.h>` finds the source's own folder too (-I), and so does a header that
    impl.h includes beside itself: both are the student's code, and key the build."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "impl.h").write_text('#include "inc/deep.h"\n')
    (tmp_path / "inc" / "deep.h").write_text('#include "more.h"\n')
    (tmp_path / "inc" / "more.h").write_text("#define X 1\n")
    request, toolchain = setup(tmp_path, "#include <impl.h>\n" + GOOD)
    assert build.local_headers(request.source) == [tmp_path / "impl.h", tmp_path / "inc" / "deep.h",
                                                   tmp_path / "inc" / "more.h"]
    key = build.build_key(request, toolchain)
    (tmp_path / "inc" / "more.h").write_text("#define X 2\n")
    assert build.build_key(request, toolchain) != key
    # Fortran's include line, in any case; a name leading out of the folder is never read.
    (tmp_path / "consts.inc").write_text("integer, parameter :: k = 3\n")
    fortran = from_cell("program p\n  INCLUDE 'consts.inc'\n  include '../x.inc'\nend program\n",
                        "cell[5]", "fortran", None, tmp_path)
    assert build.local_headers(fortran) == [tmp_path / "consts.inc"]


def test_failed_build_leaves_nothing_runnable(tmp_path: Path) -> None:
    request, toolchain = setup(tmp_path, "int main(void) { return 0 }\n")
    result = build.build(request, toolchain, tmp_path / "cache")
    assert not result.ok and result.executable is None and result.build_dir is None
    assert "cell[4]:2:26: error" in result.output  # the cell's line numbers (magic line = 1)
    assert not any((tmp_path / "cache" / "builds").glob("*/prog"))
    saved = list((tmp_path / "cache" / "sources").glob("cell_4_-*.c"))
    assert len(saved) == 1  # the source is kept even though the build failed


def test_object_name() -> None:
    src = from_cell(GOOD, "cell[2]", "c", None, Path("/w"))
    assert build.object_name(RunRequest(source=src, workdir=Path("/w"))) == "cell.o"
    assert build.object_name(RunRequest(source=src, workdir=Path("/w"), keep="lib.c")) == "lib.c.o"


def test_a_checked_gcc_build_keeps_what_its_compiler_read_and_no_other_temporary(tmp_path: Path) -> None:
    # gcc keeps its own preprocessor output (-save-temps=obj) instead of a second `gcc -E -P`:
    # the source checks get the code without comments, disabled blocks and line markers, the
    # build folder neither the assembly nor the objects that -save-temps also keeps.
    text = ("#include <stdio.h>\n/* #pragma acc data copy(a) */\n#if 0\nint hidden_block;\n#endif\n"
            "int main(void) {\n  int a[4] = {0};\n  #pragma acc parallel loop\n"
            "  for (int i = 0; i < 4; i++) a[i] = i; // acc kernels\n  printf(\"%d\\n\", a[3]);\n}\n")
    cases = [(object_only, "c") for object_only in (False, True)] + [(False, "c++")]
    for object_only, language in cases:
        folder = tmp_path / f"{object_only}-{language}"
        request, toolchain = setup(folder, text, language=language)
        request = dataclasses.replace(request, object_only=object_only)
        toolchain = dataclasses.replace(toolchain, flags=("-O2", "-fopenacc", "-foffload=disable",
                                                          "-fdump-tree-original"))
        preprocess = GCC.preprocess(toolchain, build.source_file_name(request.source), build.product_name(request))
        result = build.build(request, toolchain, tmp_path / "cache", preprocess=preprocess)
        assert result.ok and result.build_dir is not None, result.output
        assert "-save-temps" not in " ".join(result.command)  # not in what the student is shown
        seen = (result.build_dir / build.PREPROCESSED).read_text()
        assert "#pragma acc parallel loop" in seen and "printf" in seen
        assert "copy(a)" not in seen and "hidden_block" not in seen and "acc kernels" not in seen
        assert not re.search(r'^# \d+ "', seen, re.MULTILINE)
        left = {p.name for p in result.build_dir.iterdir()}
        product = build.OBJECT if object_only else build.EXECUTABLE
        assert {product, build.PREPROCESSED} <= left
        assert not [n for n in left if n.endswith((".i", ".ii", ".s")) or (n.endswith(".o") and n != product)], left
        assert any(n.endswith(".original") for n in left), left  # the feedback's dumps stay
        again = build.build(request, toolchain, tmp_path / "cache", preprocess=preprocess)
        assert again.cached


def test_a_checked_offloaded_build_leaves_nothing_in_tmpdir(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With -save-temps (the checks' preprocessed source) gcc keeps its temporaries, and those
    of the offload link went to TMPDIR: two ccXXXXXX.ofldlist files per checked build, 3150 of
    them in this machine's /tmp after a day of tests."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    text = ("#include <stdio.h>\nint main(void) {\n  double s = 0;\n"
            "  #pragma acc parallel loop reduction(+:s)\n  for (int i = 0; i < 100; i++) s += i;\n"
            "  printf(\"%g\\n\", s);\n  return 0;\n}\n")
    request, toolchain = setup(tmp_path / "cell", text)
    toolchain = dataclasses.replace(toolchain, flags=(
        "-O2", "-fopenacc", "-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80 -lm"))
    preprocess = GCC.preprocess(toolchain, build.source_file_name(request.source), build.product_name(request))
    result = build.build(request, toolchain, tmp_path / "cache", preprocess=preprocess)
    assert result.ok and result.build_dir is not None, result.output
    assert (result.build_dir / build.PREPROCESSED).is_file()
    assert sorted(p.name for p in tmpdir.iterdir()) == []
    assert not [p.name for p in result.build_dir.iterdir() if p.name.endswith(".ofldlist")]


def test_a_graded_build_is_judged_by_the_files_its_compiler_read(tmp_path: Path) -> None:
    text = ("prog: source.c /usr/include/stdio.h \\\n /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h \\\n"
            " src/my\\ header.h /opt/course/examples/C/x_solution.c \\\n /home/teacher/secret.h\n")
    files = build.parse_dependencies(text)
    assert files == ["source.c", "/usr/include/stdio.h", "/usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h",
                     "src/my header.h", "/opt/course/examples/C/x_solution.c", "/home/teacher/secret.h"]
    work = tmp_path / "cache" / "scratch" / "room" / "build-1"  # with srun, rooms are in the cache
    roots = (Path("/usr"), Path("/opt/nvidia/hpc_sdk/Linux_x86_64/24.1"))
    hidden = (tmp_path / "cache", Path("/usr/local/lib/python3.11/dist-packages/idrrun"))
    said = build.judge_dependencies(files, work, roots, hidden)
    assert "x_solution.c" in said and "secret.h" in said and "stdio.h" not in said
    assert "source.c" not in said and "my header.h" not in said
    assert build.judge_dependencies(files[:4], work, roots, hidden) == ""
    # idrrun's own course, installed under /usr with pip: hidden, so refused though under /usr
    course = "/usr/local/lib/python3.11/dist-packages/idrrun/course/examples/C/x_solution.c"
    assert "x_solution.c" in build.judge_dependencies([course], work, roots, hidden)
    assert "and 1 more" in build.judge_dependencies(["/a", "/b", "/c", "/d"], work, roots, hidden)


# Real gcc and gfortran output, every form in which they (and ld, and the programs' runtimes)
# name the source: none may show the build's temporary name.
C_WARNINGS = ('#include <stdio.h>\n#include "inc.h"\nint f(int x) { return x; }\n'
              'int main(void) {\n  int n = 10; float a[10];\n  printf("%d\\n", f("x"));\n'
              "  return unused_thing;\n}\n")
F_ERROR = ("program main\n  implicit none\n  real :: a(100)\n"
           "  print *, a(1) + undefined_var\nend program\n")
C_LINK = "void foo(void);\nint main(void) { foo(); return 0; }\n"
F_LINK = "program p\n  call foo()\nend program\n"
F_BOUNDS = ("program main\n  implicit none\n  integer :: i, n\n  real :: a(100)\n  n = 101\n"
            "  do i = 1, n\n    a(i) = i * 2.0\n  end do\n  print *, a(1)\nend program\n")
C_ASSERT = "#include <assert.h>\nint main(void) { int x = 0; assert(x == 1); return 0; }\n"
TEMPORARY = re.compile(r"\bsource\.(?:c|f90)\b|\.tmp-|/cc\w{6}\.o")


def run_cell(tmp_path: Path, text: str, language: Language, flags: tuple[str, ...] = ()
             ) -> tuple[str, str, str]:
    """(the build's output, the output shown while the program ran, the failure's output)."""
    from idrrun import pipeline
    from idrrun.model import Probe, Settings
    import io

    request, toolchain = setup(tmp_path, text, name="cell[7]", language=language)
    if language == "fortran":
        gfortran = probe_compiler("gfortran")
        toolchain = dataclasses.replace(toolchain, compiler=gfortran, link_flags=())
    toolchain = dataclasses.replace(toolchain, flags=("-O0", "-Wall", *flags))
    shown = io.StringIO()

    class Shown(pipeline.NullReporter):
        def output(self, text: str) -> None:
            shown.write(text)

    outcome = pipeline.execute(pipeline.prepare(
        request, toolchain, Probe("gcc", (toolchain.compiler,), (), False),
        Settings(cache_dir=tmp_path / "cache"), Shown()))
    assert outcome.build is not None
    failure = outcome.failure.output if outcome.failure is not None else ""
    return outcome.build.output, shown.getvalue(), failure


def test_the_build_s_temporary_names_never_show(tmp_path: Path) -> None:
    from idrrun.toolchains import diagnostics

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "inc.h").write_text("static int hdr(void) { int y; return y; }\n")
    said, _, _ = run_cell(tmp_path / "c", C_WARNINGS, "c")
    for form in ("cell[7]: In function ‘main’:", "cell[7]:8:10: error: ‘unused_thing’ undeclared",
                 "cell[7]:7:20: warning: passing argument 1 of ‘f’", "cell[7]:4:11: note: expected",
                 "In file included from cell[7]:3:"):
        assert form in said, said
    found = [(d.file, d.line, d.severity) for d in diagnostics.parse(said)]
    assert ("cell[7]", 8, "error") in found and ("cell[7]", 4, "note") in found
    said, _, _ = run_cell(tmp_path / "f", F_ERROR, "fortran")
    assert "cell[7]:5:31:" in said and "Error: Symbol ‘undefined_var’" in said
    assert [(d.file, d.line, d.severity) for d in diagnostics.parse(said)] == [("cell[7]", 5, "error")]
    linked = [run_cell(tmp_path / f"link-{lang}", text, lang, ("-g1",))[0]
              for text, lang in ((C_LINK, "c"), (F_LINK, "fortran"))]
    assert "ld: cell[7]: in function" in linked[0] and "cell[7]:3: undefined reference to `foo'" in linked[0]
    assert "cell[7]:3: undefined reference to `foo_'" in linked[1]
    assert ("cell[7]", 3, "error") in [(d.file, d.line, d.severity) for d in diagnostics.parse(linked[0])]
    _, shown, failure = run_cell(tmp_path / "bounds", F_BOUNDS, "fortran", ("-fcheck=bounds", "-g"))
    assert "At line 8 of file cell[7]" in shown and "At line 8 of file cell[7]" in failure
    assert re.search(r"at cell\[7\]:8\b", shown), shown
    _, shown, failure = run_cell(tmp_path / "assert", C_ASSERT, "c")
    assert "prog: cell[7]:3: main: Assertion" in shown
    for text in (said, *linked, shown, failure):
        assert not TEMPORARY.search(text), text


def test_the_program_s_output_is_renamed_as_it_comes_even_cut_in_the_name() -> None:
    from idrrun.build import Renamed

    src = from_cell(GOOD, "cell[7]", "fortran", None, Path("/w"))
    shown: list[str] = []
    renamed = Renamed(shown.append, src)
    for piece in ("At line 7 of file sour", "ce.f90\nFortran runtime error\n", "at /b/.k.tmp-x/",
                  "source.f90:7\n", "ends in s"):
        renamed(piece)
    assert "".join(shown) == "At line 7 of file cell[7]\nFortran runtime error\nat cell[7]:7\nends in "
    renamed.finish()
    assert "".join(shown).endswith("ends in s")


BIG_FRAME = ("int work(int n)\n{\n    volatile char big[300000];\n    big[n] = 1;\n    return big[n];\n}\n"
             "int main(void) { return work(3) - 1; }\n")


def test_a_cached_build_has_the_frames_its_compile_measured(tmp_path: Path) -> None:
    """The largest stack frames of a build (-fstack-usage) are kept in its marker: a cached
    build has the ones its compile measured, without reading its FRAMES files again; a marker
    written before it kept them still gives them, read from those files."""
    request, toolchain = setup(tmp_path, BIG_FRAME)
    first = build.build(request, toolchain, tmp_path / "cache", stack_usage=("-fstack-usage",))
    assert first.ok and [(f.function, f.line) for f in first.frames[:1]] == [("work", 2)]
    assert first.frames[0].size > 250000  # (the cell's line 1 is its %%idrrun line)
    assert first.build_dir is not None
    for su in first.build_dir.glob(build.FRAMES):
        su.unlink()  # what a cached build shows now is its marker's
    second = build.build(request, toolchain, tmp_path / "cache", stack_usage=("-fstack-usage",))
    assert second.cached and second.frames == first.frames
    older = build.build(dataclasses.replace(request, force=True), toolchain, tmp_path / "cache",
                        stack_usage=("-fstack-usage",))
    assert older.build_dir is not None
    marker = older.build_dir / "build.json"
    marker.write_text(re.sub(r', "frames": \[.*\]\}$', "}", marker.read_text()))
    assert "frames" not in marker.read_text()
    third = build.build(request, toolchain, tmp_path / "cache", stack_usage=("-fstack-usage",))
    assert third.cached and third.frames == first.frames
