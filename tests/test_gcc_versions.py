"""GCC 12, 13 and 14 as one family, by version (toolchains/gccversions.py): each release's nvptx
targets, OpenACC 2.7, the refusal of OpenACC and OpenMP in one program, its runtime, and what
idrrun says of each; the feedback of GCC 14 read as GCC 12's.

The unit tests build the version by hand. The others run real compilers: GCC 12 here, and GCC 14
from a Debian 13 root file system (IDRRUN_GCC14_ROOT: an unpacked one, entered with bubblewrap;
`bash benchmarks/gcc14_root.sh DIR` makes one, .ci/run mounts its Debian 13 image's), skipped
with the reason when there is none.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from idrrun.errors import UsageError
from idrrun.model import AccReport, CompilerInfo, DoctorLine, GpuInfo, Probe, RunRequest, Settings
from idrrun.request.source import from_cell, from_file
from idrrun.toolchains import explain, gcc, gccdumps, gccversions, toolchain_for
from idrrun.toolchains.diagnostics import parse
from idrrun.toolchains.family import INFO, WARN
from idrrun.toolchains.machine import probe_compiler

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
H200 = GpuInfo("NVIDIA H200", "9.0", "580.1")


def gcc_info(version: str) -> CompilerInfo:
    return CompilerInfo("gcc", "/usr/bin/gcc", version)


GCC12 = gcc_info("gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
GCC13 = gcc_info("gcc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0")
GCC14 = gcc_info("gcc (Debian 14.2.0-19) 14.2.0")
GCC15 = gcc_info("gcc (GCC) 15.1.0")


def probe_of(compiler: CompilerInfo, gpus: tuple[GpuInfo, ...] = (H200,), offload: bool = True) -> Probe:
    return Probe(family="gcc", compilers=(compiler,), gpus=gpus, offload=offload)


def acc_request(accopts: tuple[str, ...] = (), *, acc: bool = True, openmp: bool = False,
                language: str = "c", text: str = "int main(void){return 0;}\n",
                check: str | None = None) -> RunRequest:
    src = from_cell(text, "cell[1]", language, None, Path("/tmp"))  # type: ignore[arg-type]
    return RunRequest(source=src, workdir=Path("/tmp"), acc=acc, openmp=openmp, accopts=accopts,
                      check=check)


def device_options(flags: Sequence[str]) -> str:
    prefix = "-foffload-options=nvptx-none="
    return next(f[len(prefix):] for f in flags if f.startswith(prefix))


# --- the releases, by version: unit tests ------------------------------------------------------


@pytest.mark.parametrize("version, major", [
    (GCC12.version, 12), (GCC13.version, 13), (GCC14.version, 14),
    ("gcc-14 (Debian 14.2.0-19) 14.2.0", 14), ("GNU Fortran (Debian 14.2.0-19) 14.2.0", 14),
    ("gcc (GCC) 11.4.1 20230605 (Red Hat 11.4.1-2)", 11)])
def test_each_known_release_is_read_from_its_version_line_without_a_warning(version: str, major: int) -> None:
    found, warning = gccversions.release(version)
    assert (found.major, warning) == (major, "")


@pytest.mark.parametrize("version, taken, said", [
    (GCC15.version, 14, "GCC 15 is newer than the releases idrrun knows (GCC 11 to 14): its nvptx "
                        "targets and limits are taken as GCC 14's"),
    ("gcc-9 (Ubuntu 9.4.0-1ubuntu1) 9.4.0", 11, "GCC 9 is older than the releases idrrun knows"),
    ("gcc, a build of our own", 12, "gcc's version could not be read (gcc, a build of our own): "
                                    "taken as GCC 12's")])
def test_an_unknown_release_is_taken_as_the_nearest_with_a_warning(version: str, taken: int, said: str) -> None:
    found, warning = gccversions.release(version)
    assert found.major == taken and warning.startswith(said)


def test_gcc_12_to_14_build_sm_80_at_most_for_a_hopper_gpu() -> None:
    # The three releases list the same -misa values (measured: their nvptx lto1 --help=target).
    for compiler in (GCC12, GCC13, GCC14):
        tc = toolchain_for(acc_request(), Probe(family="gcc", compilers=(compiler,), gpus=(H200,),
                                                offload=True), Settings())
        major = gcc.gcc_major(compiler.version)
        assert device_options(tc.flags) == "-misa=sm_80 -lm -latomic", major
        assert any(f"sm_90 asked, GCC {major} can build for sm_80 at best" in n for n in tc.machine_notes)
        assert not any("idrrun knows" in n for n in tc.machine_notes)


def test_gcc_11_builds_sm_35_without_libatomic() -> None:
    tc = toolchain_for(acc_request(("cc70",)), probe_of(gcc_info("gcc (Ubuntu 11.4.0) 11.4.0")), Settings())
    assert device_options(tc.flags) == "-misa=sm_35 -lm"


def test_a_newer_gcc_than_idrrun_knows_builds_as_gcc_14_and_says_so() -> None:
    tc = toolchain_for(acc_request(), probe_of(GCC15), Settings())
    assert device_options(tc.flags) == "-misa=sm_80 -lm -latomic"
    assert any(n.startswith("GCC 15 is newer than the releases idrrun knows") for n in tc.machine_notes)


def test_the_offload_package_named_is_the_gcc_s_own() -> None:
    for compiler, package in ((GCC12, "gcc-12-offload-nvptx"), (GCC14, "gcc-14-offload-nvptx")):
        tc = toolchain_for(acc_request(), probe_of(compiler, offload=False), Settings())
        assert any(f"To offload: apt-get install {package} libgomp-plugin-nvptx1" in n
                   for n in tc.machine_notes)


@pytest.mark.parametrize("compiler", [GCC12, GCC13, GCC14], ids=["12", "13", "14"])
def test_openacc_and_openmp_offloaded_together_are_refused_naming_the_release(compiler: CompilerInfo) -> None:
    major = gcc.gcc_major(compiler.version)
    with pytest.raises(UsageError, match=f"^GCC {major} cannot offload OpenACC and OpenMP in one program"):
        toolchain_for(acc_request(openmp=True), probe_of(compiler), Settings())
    # On the host both run: nothing to refuse.
    tc = toolchain_for(acc_request(openmp=True), probe_of(compiler, gpus=()), Settings())
    assert "-fopenacc" in tc.flags and "-fopenmp" in tc.flags and tc.target == "host"


def test_what_each_release_reads_of_openacc_2_7_is_said() -> None:
    assert not gccversions.RELEASES[12].openacc27 and not gccversions.RELEASES[13].openacc27
    assert gccversions.RELEASES[14].openacc27
    assert "none of 2.7" in gccversions.summary(gccversions.RELEASES[12])
    assert "of 2.7, the readonly modifier" in gccversions.summary(gccversions.RELEASES[14])


def test_doctor_names_the_release_and_warns_for_an_unknown_one() -> None:
    line = gcc.version_line(GCC14)
    assert (line.topic, line.status) == ("gcc version", INFO)
    assert line.detail.startswith("GCC 14.2.0: OpenACC 2.6 and, of 2.7, the readonly modifier")
    assert "sm_80 at most" in line.detail and "refused" in line.detail
    unknown = gcc.version_line(GCC15)
    assert unknown.status == WARN and unknown.detail.startswith("GCC 15 is newer")
    assert "GCC 14: OpenACC 2.6 and, of 2.7" in unknown.detail


def _library(*tags: str) -> bytes:
    """Bytes as a libgomp's dynamic string table holds its symbol versions."""
    return b"\x7fELF..." + b"".join(b"\x00" + t.encode() for t in tags) + b"\x00GOMP_parallel\x00"


@pytest.mark.parametrize("tags, major, per_launch", [
    (("GOMP_1.0", "GOMP_5.0", "GOMP_5.0.1", "GOMP_5.1"), 12, True),
    (("GOMP_5.1", "GOMP_5.1.1"), 13, None),
    (("GOMP_5.1", "GOMP_5.1.1", "GOMP_5.1.2"), 14, False)])
def test_the_runtime_is_named_by_the_newest_symbol_version_of_its_libgomp(
        tags: tuple[str, ...], major: int, per_launch: bool | None) -> None:
    found = gccversions.runtime_from(_library(*tags), "libgomp.so.1")
    assert found.runtime == gccversions.Runtime(major, per_launch) and found.tag == tags[-1]
    assert not found.warning


def test_a_runtime_newer_than_gcc_14_s_is_a_warning() -> None:
    found = gccversions.runtime_from(_library("GOMP_5.1.2", "GOMP_6.0"), "/x/libgomp.so.1")
    assert found.runtime is None and "is newer than the libgomp of GCC 14" in found.warning
    assert "no GOMP_ symbol version" in gccversions.runtime_from(b"\x7fELF", "f").warning


def test_what_the_runtimes_do_at_each_launch_is_said() -> None:
    assert "allocates its argument table on the device" in gccversions.runtime_said(gccversions.RUNTIMES[12])
    assert "no allocation or copy of its own" in gccversions.runtime_said(gccversions.RUNTIMES[14])
    assert "still allocates, copies and frees one block a launch" in gccversions.runtime_said(gccversions.RUNTIMES[14])
    assert "not measured" in gccversions.runtime_said(gccversions.RUNTIMES[13])


# --- what the runtimes and compilers print, explained -------------------------------------------

PRESENT_C = """#include <stdio.h>
int main(void)
{
    int n = 10000; static int a[10000];
    #pragma acc parallel loop present(a[0:n])
    for (int i = 0; i < n; i++) a[i] = i;
    printf("%d\\n", a[n - 1]);
    return 0;
}
"""
# GCC 14's libgomp (format "present clause: not present on the device (addr: %p, size: %lu
# (0x%lx), dev: %d)", read from Debian 13's libgomp.so.1); GCC 12's is in test_explain.py.
PRESENT_GCC14 = ("libgomp: present clause: not present on the device (addr: 0x7ffc1d2e3a40, "
                 "size: 40000 (0x9c40), dev: 0)\n")


def test_gcc_14_s_present_failure_names_the_array_and_its_size() -> None:
    hint = explain.run_hint(PRESENT_GCC14, from_cell(PRESENT_C, "cell[1]", "c", None, Path("/w")))
    assert hint is not None and hint.startswith(
        "the runtime found no device copy of a (40000 bytes at 0x7ffc1d2e3a40), which a `present` "
        "clause says is on the device: present(a[0:n]) at line 6.")


def _format_strings(library: Path) -> list[str]:
    data = library.read_bytes()
    return [m.decode() for m in re.findall(rb"present clause: [^\x00]*", data)]


def _rendered(fmt: str) -> str:
    """A libgomp format string as the runtime prints it (an address, a size of 40000 bytes)."""
    values = iter(("0x7ffc1d2e3a40", "40000", "9c40", "0"))
    return "libgomp: " + re.sub(r"%(?:l?[ud]|lx|p|\"PRI[ux]64\")", lambda m: next(values), fmt) + "\n"


def test_the_present_message_of_this_machine_s_libgomp_is_read() -> None:
    """The format the runtime here really prints (GCC 12's on Debian 12) gives the hint."""
    library = Path(gcc.proc.capture(["gcc", "-print-file-name=libgomp.so.1"], what="probe").output.strip())
    if not library.is_absolute():
        pytest.skip("gcc finds no libgomp.so.1 here")
    formats = [f for f in _format_strings(library) if "acc_is_present" in f or "not present" in f]
    assert formats, f"no present-clause message in {library}"
    source = from_cell(PRESENT_C, "cell[1]", "c", None, Path("/w"))
    for fmt in formats:
        hint = explain.run_hint(_rendered(fmt), source)
        assert hint is not None and "(40000 bytes at 0x7ffc1d2e3a40)" in hint, fmt


OPENACC27_C = """#include <stdio.h>
int main(void)
{
    double a[100], s = 0; int on = 1;
    for (int i = 0; i < 100; i++) a[i] = i;
    #pragma acc data copyin(readonly: a[0:100]) default(present)
    {
    #pragma acc parallel loop reduction(+:s) self(!on)
    for (int i = 0; i < 100; i++) s += a[i];
    }
    printf("%g\\n", s);
    return 0;
}
"""
OPENACC27_F90 = """program p
  implicit none
  real(8) :: a(100), s
  integer :: i
  logical :: on = .true.
  a = [(real(i, 8), i = 1, 100)]
  s = 0
  !$acc data copyin(readonly: a) default(present)
  !$acc parallel loop reduction(+:s) self(.not. on)
  do i = 1, 100
    s = s + a(i)
  end do
  !$acc end data
  print *, s
end program p
"""


@pytest.mark.parametrize("text, suffix, lines", [(OPENACC27_C, ".c", (6, 8)), (OPENACC27_F90, ".f90", (8, 9))],
                         ids=["c", "fortran"])
def test_gcc_12_stops_at_openacc_2_7_and_the_hint_names_each_clause(
        tmp_path: Path, text: str, suffix: str, lines: tuple[int, int]) -> None:
    source = tmp_path / f"acc27{suffix}"
    source.write_text(text)
    compiler = "gfortran" if suffix == ".f90" else "gcc"
    major = gcc.gcc_major(probe_compiler(compiler).version)
    if shutil.which(compiler) is None or gccversions.release(f"{major}.0")[0].openacc27:
        pytest.skip(f"needs a {compiler} before GCC 14 (this one reads OpenACC 2.7)")
    r = subprocess.run([compiler, "-fopenacc", "-foffload=disable", "-c", source.name, "-o", "a.o"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0
    hint = explain.compile_hint(r.stderr, from_file(source, None, source.name))  # type: ignore[arg-type]
    assert hint is not None and hint.startswith("OpenACC 2.7, which GCC 14 reads and this gcc does not")
    data, compute = lines
    assert f"line {data}: the readonly modifier" in hint and f"line {data}: the default clause of a data" in hint
    assert f"line {compute}: the self clause of a compute construct, write if(!(condition))" in hint


def test_the_mkoffload_refusal_of_both_models_is_explained() -> None:
    for said in ("mkoffload: fatal error: either '-fopenacc' or '-fopenmp' must be set",
                 "nvptx mkoffload: fatal error: either ‘-fopenacc’ or ‘-fopenmp’ must be set"):
        hint = explain.compile_hint(said + "\ncompilation terminated.\n",
                                    from_cell("int main(void){return 0;}\n", "c[1]", "c", None, Path("/w")))
        assert hint is not None and hint.startswith("gcc's nvptx offload compiler builds OpenACC or "
                                                    "OpenMP offloading, never both")


# --- real GCC 12 here ---------------------------------------------------------------------------


def _nvptx_isas(lto1: list[str]) -> tuple[int, ...]:
    """The -misa values an nvptx lto1 lists ("Known PTX ISA target architectures ... sm_30 ...")."""
    r = subprocess.run([*lto1, "-march=sm_30", "--help=target"], capture_output=True, text=True,
                       timeout=60, check=False)
    listed = r.stdout.split("Known PTX ISA target architectures", 1)[-1].split("\n\n", 1)[0]
    return tuple(sorted(int(x) for x in re.findall(r"\bsm_(\d+)\b", listed)))


def test_gcc_12_s_nvptx_compiler_lists_the_targets_idrrun_knows() -> None:
    lto1 = Path("/usr/lib/gcc/x86_64-linux-gnu/12/accel/nvptx-none/lto1")
    if not lto1.exists():
        pytest.skip("GCC 12's nvptx offload compiler is not installed (gcc-12-offload-nvptx)")
    assert _nvptx_isas([str(lto1)]) == gccversions.RELEASES[12].isas


def test_doctor_names_gcc_12_and_its_runtime_here() -> None:
    info = probe_compiler("gcc")
    if info.path is None or gcc.gcc_major(info.version) != 12:
        pytest.skip("the gcc here is not GCC 12")
    assert gcc.version_line(info).detail.startswith("GCC 12.")
    runtime = gcc.runtime_line(info.path, 12)
    assert runtime.status == INFO and runtime.detail.startswith("libgomp of GCC 12 (")
    assert "each synchronous launch allocates its argument table on the device" in runtime.detail


# --- GCC 14 from a Debian 13 root file system -----------------------------------------------------


def gcc14_root() -> Path:
    """The Debian 13 root of IDRRUN_GCC14_ROOT, or the test is skipped saying why."""
    given = os.environ.get("IDRRUN_GCC14_ROOT", "")
    if not given:
        pytest.skip("no Debian 13 root with gcc-14: IDRRUN_GCC14_ROOT names an unpacked one "
                    "(bash benchmarks/gcc14_root.sh DIR makes it; .ci/run mounts its Debian 13 image's)")
    root = Path(given)
    if not (root / "usr" / "bin" / "gcc-14").exists():
        pytest.skip(f"IDRRUN_GCC14_ROOT={given} holds no usr/bin/gcc-14")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: it enters the Debian 13 root")
    return root


def in_root(root: Path, argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """argv run with the Debian 13 root as /, this test's folder at its own path."""
    return subprocess.run(["bwrap", "--ro-bind", str(root), "/", "--dev", "/dev", "--proc", "/proc",
                           "--tmpfs", "/tmp", "--bind", str(cwd), str(cwd), "--chdir", str(cwd),
                           "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG",
                           "C.UTF-8", *argv], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def root14() -> Path:
    root = gcc14_root()
    probe = subprocess.run(["bwrap", "--ro-bind", str(root), "/", "--dev", "/dev", "--proc", "/proc",
                            "/usr/bin/gcc-14", "--version"], capture_output=True, text=True, timeout=60,
                           check=False)
    if probe.returncode != 0:
        pytest.skip(f"bwrap cannot enter {root} here: {(probe.stderr or probe.stdout).strip()[:200]}")
    return root


def _version_in(root: Path, command: str, cwd: Path) -> str:
    return in_root(root, [command, "--version"], cwd).stdout.splitlines()[0]


def test_gcc_14_s_nvptx_compiler_lists_the_targets_idrrun_knows(root14: Path, tmp_path: Path) -> None:
    r = in_root(root14, ["/usr/libexec/gcc/x86_64-linux-gnu/14/accel/nvptx-none/lto1", "-march=sm_30",
                         "--help=target"], tmp_path)
    listed = r.stdout.split("Known PTX ISA target architectures", 1)[-1].split("\n\n", 1)[0]
    assert tuple(sorted(int(x) for x in re.findall(r"\bsm_(\d+)\b", listed))) == gccversions.RELEASES[14].isas
    # sm_89 and sm_90 are mapped to sm_80: no GCC emits Hopper-specific code.
    assert re.search(r"-march-map=sm_90\s+-misa=sm_80", r.stdout)


def test_gcc_14_s_release_and_runtime_as_doctor_says_them(root14: Path, tmp_path: Path) -> None:
    version = _version_in(root14, "gcc", tmp_path)
    assert gccversions.release(version) == (gccversions.RELEASES[14], "")
    found = gccversions.runtime_of(root14 / "usr" / "lib" / "x86_64-linux-gnu" / "libgomp.so.1")
    assert found.runtime == gccversions.RUNTIMES[14] and found.tag == "GOMP_5.1.2"
    library = root14 / "usr" / "lib" / "x86_64-linux-gnu" / "libgomp.so.1"
    source = from_cell(PRESENT_C, "cell[1]", "c", None, Path("/w"))
    for fmt in _format_strings(library):
        if "not present on the device" in fmt:
            hint = explain.run_hint(_rendered(fmt), source)
            assert hint is not None and "(40000 bytes at 0x7ffc1d2e3a40)" in hint


def test_gcc_14_reads_openacc_2_7_and_refuses_both_models(root14: Path, tmp_path: Path) -> None:
    for name, text in (("acc27.c", OPENACC27_C), ("acc27.f90", OPENACC27_F90)):
        (tmp_path / name).write_text(text)
        compiler = "gfortran" if name.endswith(".f90") else "gcc"
        r = in_root(root14, [compiler, "-fopenacc", "-foffload=disable", "-o", "prog", name], tmp_path)
        assert r.returncode == 0, r.stderr
        assert float(in_root(root14, ["./prog"], tmp_path).stdout.split()[0]) in (4950.0, 5050.0)
    (tmp_path / "both.c").write_text("int main(void){ int x = 0;\n#pragma acc parallel copy(x)\nx = 1;\n"
                                     "#pragma omp target map(tofrom: x)\nx += 1;\nreturn x != 2; }\n")
    r = in_root(root14, ["gcc", "-fopenacc", "-fopenmp", "-foffload=nvptx-none", "-o", "both", "both.c"],
                tmp_path)
    assert r.returncode != 0
    hint = explain.compile_hint(r.stderr, from_file(tmp_path / "both.c", "c", "both.c"))
    assert hint is not None and "never both in one program" in hint


# The course's sources whose feedback GCC 14 must give as GCC 12 does: the regions, the implicit
# data, the OpenMP targets, the unreachable regions and every remark (the whole course's 76
# sources were compared once: docs/compilers.md).
COMPARED = ("intro_saxpy", "data_laplace", "deepcopy_csr", "routines_pendulum", "openmp_heat",
            "variables_median")


def _report(folder: Path) -> tuple[AccReport, tuple[object, ...]]:
    def dump(kind: str) -> str:
        found = sorted(folder.glob(f"*.{kind}"))
        return found[0].read_text(errors="replace") if found else ""
    report = gccdumps.from_gcc_dumps(dump("original"), dump("gimple"), dump("cgraph"))
    return report, report.remarks


def _build(run: object, compiler: CompilerInfo, source: Path, folder: Path, openmp: bool,
           gpu: bool) -> tuple[tuple[AccReport, tuple[object, ...]], list[tuple[int, str]]]:
    """`source` built in `folder` as idrrun's checked build does for this GCC, and read."""
    language = "fortran" if source.suffix == ".f90" else "c"
    request = acc_request(("cc80",) if gpu else (), acc=not openmp, openmp=openmp, language=language,
                          text=source.read_text(), check="x")
    tc = toolchain_for(request, probe_of(compiler, gpus=()), Settings())
    folder.mkdir()
    shutil.copy(source, folder / source.name)
    cpp = ("-cpp",) if language == "fortran" else ()
    argv = [compiler.command, *tc.flags, *cpp, "-o", "prog", source.name, *tc.link_flags, "-lm"]
    done = run(argv, folder)  # type: ignore[operator]
    assert done.returncode == 0, (argv, done.stderr[-2000:])
    remarks = [(d.line, d.message) for d in parse(done.stderr) if d.severity == "optimized"]
    return _report(folder), remarks


def _host(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("gpu", [False, True], ids=["host", "nvptx"])
def test_gcc_14_s_feedback_on_the_course_reads_as_gcc_12_s(root14: Path, tmp_path: Path, gpu: bool) -> None:
    host_gcc = probe_compiler("gcc")
    if host_gcc.path is None or gcc.gcc_major(host_gcc.version) != 12:
        pytest.skip("the gcc here is not GCC 12")
    if gpu and not gcc.has_offload(host_gcc.path):
        pytest.skip("GCC 12's nvptx offloading is not installed here")
    gcc14 = CompilerInfo("gcc", "/usr/bin/gcc", _version_in(root14, "gcc", tmp_path))
    gfortran14 = CompilerInfo("gfortran", "/usr/bin/gfortran", _version_in(root14, "gfortran", tmp_path))
    differ = []
    for name in COMPARED:
        for sub, suffix in (("C", ".c"), ("Fortran", ".f90")):
            for kind in ("solution", "exercise"):
                source = EXAMPLES / sub / f"{name}_{kind}{suffix}"
                openmp = name == "openmp_heat"
                twelve = CompilerInfo("gfortran" if suffix == ".f90" else "gcc", "", host_gcc.version)
                fourteen = gfortran14 if suffix == ".f90" else gcc14
                a = _build(_host, twelve, source, tmp_path / f"12-{source.name}", openmp, gpu)
                b = _build(lambda argv, cwd: in_root(root14, argv, cwd), fourteen, source,
                           tmp_path / f"14-{source.name}", openmp, gpu)
                assert a[0][0].regions > 0 or a[0][0].omp_targets > 0 or kind == "exercise", source
                if a != b:
                    differ.append(f"{source.name}: GCC 12 {a}\nGCC 14 {b}")
    assert not differ, "\n".join(differ)
