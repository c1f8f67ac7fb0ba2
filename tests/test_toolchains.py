"""Compiler families as data: OpenACC flags and accopts translation for nvhpc, pgi and gcc."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from idrrun.model import CompilerInfo, GpuInfo, Probe, RunRequest, Settings, Toolchain
from idrrun.request.source import from_cell
from idrrun.errors import UsageError
from idrrun.toolchains import gcc, toolchain_for
from idrrun.toolchains.family import AccDecision

GCC = CompilerInfo("gcc", "/usr/bin/gcc", "gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
H100 = GpuInfo("NVIDIA H100 80GB HBM3", "9.0", "580.1")
V100 = GpuInfo("Tesla V100", "7.0", "525.1")


def probe(family: str = "gcc", gpus: tuple[GpuInfo, ...] = (), offload: bool = True) -> Probe:
    compilers = (GCC, CompilerInfo("nvc", "/opt/nv/nvc", "nvc 24.3"),
                 CompilerInfo("pgcc", "/opt/pgi/pgcc", "pgcc 20.1"))
    return Probe(family=family, compilers=compilers, gpus=gpus,
                 offload=offload)


def request(accopts: tuple[str, ...] = (), acc: bool = True) -> RunRequest:
    src = from_cell("#include <stdio.h>\nint main(void){return 0;}\n", "cell[1]", "c", None, Path("/tmp"))
    return RunRequest(source=src, workdir=Path("/tmp"), acc=acc, accopts=accopts)


def test_nvhpc_accopts_become_gpu_flag() -> None:
    tc = toolchain_for(request(("cc70", "pinned")), probe("nvhpc", (V100,)), Settings())
    assert tc.flags[:3] == ("-acc", "-gpu=cc70,pinned", "-Minfo=accel")
    assert tc.target == "gpu"


def test_pgi_accopts_become_ta_tesla() -> None:
    tc = toolchain_for(request(("cc70", "pinned")), probe("pgi", (V100,)), Settings())
    assert "-ta=tesla:cc70,pinned" in tc.flags and "-acc" in tc.flags


def device_options(tc: Toolchain) -> str:
    """What gcc passes to the nvptx compiler (-foffload-options=nvptx-none=...)."""
    prefix = "-foffload-options=nvptx-none="
    return next(f[len(prefix):] for f in tc.flags if f.startswith(prefix))


def test_gcc_links_nvptx_libatomic_from_gcc_12_on() -> None:
    # openmp_heat's two reductions of one construct need a 16-byte compare-and-swap (libatomic)
    assert device_options(toolchain_for(request(), probe("gcc", (H100,)), Settings())).endswith("-lm -latomic")
    gcc11 = CompilerInfo("gcc", "/usr/bin/gcc", "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0")
    old = Probe(family="gcc", compilers=(gcc11,), gpus=(H100,), offload=True)
    assert device_options(toolchain_for(request(), old, Settings())).endswith(" -lm")


def test_gcc_on_a_gpu_offloads_with_misa_capped_at_sm80() -> None:
    tc = toolchain_for(request(), probe("gcc", (H100,)), Settings())
    assert "-foffload=nvptx-none" in tc.flags
    assert device_options(tc) == "-misa=sm_80 -lm -latomic"
    assert tc.target == "gpu"
    assert any("sm_90 asked, GCC 12 can build for sm_80 at best" in n for n in tc.machine_notes)
    assert tc.offload and not tc.notes


def test_gcc_ccxy_picks_misa_and_ignores_pinned_once() -> None:
    tc = toolchain_for(request(("cc70", "pinned", "managed")), probe("gcc", (V100,)), Settings())
    assert device_options(tc) == "-misa=sm_70 -lm -latomic"
    ignored = [n for n in tc.notes if "ignores these accopts" in n]
    assert ignored == ["gcc ignores these accopts (nvhpc options without a gcc equivalent): pinned, managed"]
    assert not any("pinned" in f for f in tc.flags)


def test_gcc_without_gpu_builds_for_the_host_and_says_so() -> None:
    tc = toolchain_for(request(), probe("gcc", ()), Settings())
    assert "-foffload=disable" in tc.flags and tc.target == "host" and not tc.offload
    # About the machine, the same for every request: a notebook says it once per kernel.
    assert any("no GPU found" in n for n in tc.machine_notes) and not tc.notes


def test_gcc_without_gpu_offloads_when_asked() -> None:
    tc = toolchain_for(request(("cc80",)), probe("gcc", ()), Settings())
    assert "-foffload=nvptx-none" in tc.flags and tc.target == "host" and tc.offload
    assert any("falls back to the host" in n for n in tc.machine_notes)


def test_gcc_without_offload_compiler_says_how_to_install() -> None:
    tc = toolchain_for(request(), probe("gcc", (H100,), offload=False), Settings())
    assert "-foffload=disable" in tc.flags
    assert any("apt-get install gcc-12-offload-nvptx" in n for n in tc.machine_notes)


@pytest.mark.parametrize("cc, isa", [("cc35", 35), ("cc60", 53), ("cc75", 75), ("cc90", 80), ("sm_86", 80)])
def test_gcc12_isa_table(cc: str, isa: int) -> None:
    tc = toolchain_for(request((cc,)), probe("gcc", (H100,)), Settings())
    assert device_options(tc).startswith(f"-misa=sm_{isa} ")


def test_accopts_without_acc_are_reported() -> None:
    tc = toolchain_for(request(("cc70",), acc=False), probe("nvhpc", (V100,)), Settings())
    assert "-acc" not in tc.flags and not any(f.startswith("-gpu") for f in tc.flags)
    assert "--accopts is ignored without -a/--acc" in tc.notes


# -- GPU targets that follow the toolkit (CUDA 13's ptxas has no sm_70) ----------------------

def probe_targets(gpus: tuple[GpuInfo, ...], targets: tuple[int, ...]) -> Probe:
    return Probe(family="gcc", compilers=(GCC,), gpus=gpus, offload=True,
                 offload_targets=targets)


def test_cc70_on_a_toolkit_without_sm70_builds_for_sm75_and_says_so() -> None:
    tc = toolchain_for(request(("cc70", "pinned")), probe_targets((H100,), (75, 80)), Settings())
    assert device_options(tc).startswith("-misa=sm_75 ") and tc.target == "gpu"
    note = next(n for n in tc.machine_notes if "sm_70 asked" in n)
    assert "no longer accepts it (it takes sm_75, sm_80)" in note and "9.0" not in note
    assert "NVIDIA H100 80GB HBM3 here: yes" in note
    assert gcc.LINK_QUIET in tc.flags  # the two harmless linker warnings are not shown


def test_no_target_fits_the_gpu_is_a_clear_error() -> None:
    old = GpuInfo("Tesla P100", "6.0", "470")
    with pytest.raises(UsageError, match="newer than the GPU here .Tesla P100, sm_60."):
        toolchain_for(request(("cc60",)), probe_targets((old,), (75, 80)), Settings())



GCC12 = GCC.version


def test_offload_host_in_the_config_builds_for_the_host_even_with_a_gpu() -> None:
    for offload in (True, False):
        decision = gcc.offload_flags(("cc80",), probe("gcc", (H100,), offload), GCC12, "host")
        assert decision == AccDecision(("-fopenacc", "-foffload=disable"), "host", (),
                                       ('building for the host (offload = "host" in the config)',))


def test_a_gpu_word_in_accopts_offloads_without_a_gpu() -> None:
    decision = gcc.offload_flags(("NVPTX", "fast"), probe("gcc", ()), GCC12, "auto")
    assert decision.flags == ("-fopenacc", "-foffload=nvptx-none",
                              "-foffload-options=nvptx-none=-misa=sm_80 -lm -latomic", gcc.LINK_QUIET)
    assert decision.target == "host" and decision.offload and decision.notes == (
        "gcc ignores these accopts (nvhpc options without a gcc equivalent): fast",)
    assert decision.machine_notes == (
        "no GPU found: built for a GPU as asked; here the program falls back to the host",)
    assert gcc.offload_flags((), probe("gcc", ()), GCC12, "gpu").flags == decision.flags


def test_openmp_without_a_gpu_names_its_target_regions() -> None:
    decision = gcc.offload_flags((), probe("gcc", ()), GCC12, "auto", model="-fopenmp")
    assert decision.flags == ("-fopenmp", "-foffload=disable") and decision.target == "host"
    assert decision.machine_notes == ("no GPU found: building for the host (-foffload=disable); the OpenMP "
                              "target regions run on the CPU. Add --accopts cc80 to build for a "
                              "GPU anyway.",)


def test_the_target_asked_else_the_gpu_s_own() -> None:
    decision = gcc.offload_flags(("sm_75",), probe_targets((H100,), (70, 75, 80)), GCC12, "auto")
    assert decision.flags[2] == "-foffload-options=nvptx-none=-misa=sm_75 -lm -latomic"
    assert decision.target == "gpu" and decision.notes == decision.machine_notes == ()
    decision = gcc.offload_flags((), probe_targets((V100,), (70, 75, 80)), GCC12, "auto")
    assert decision.flags[2].startswith("-foffload-options=nvptx-none=-misa=sm_70 ")
    assert decision.notes == decision.machine_notes == ()
    gcc11 = "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0"
    decision = gcc.offload_flags((), probe("gcc", (V100,)), gcc11, "auto")
    assert decision.flags[2] == "-foffload-options=nvptx-none=-misa=sm_35 -lm"
    assert decision.machine_notes == ("sm_70 asked, GCC 11 can build for sm_35 at best (sm_30, sm_35): "
                              "building for sm_35; the driver compiles that PTX for the GPU when "
                              "the program starts",)

def test_ptxas_targets_read_from_its_help_with_a_fake_ptxas(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n--gpu-name <gpu name>  (-arch)\n"
                    "        Allowed values for this option:  'compute_75','compute_80','lto_80',\n"
                    "        'sm_100','sm_75','sm_80','sm_90','sm_90a'.\n        Default value:  'sm_75'.\nEOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert gcc.ptxas_isas() == (75, 80, 90, 100)
    assert gcc.targets(12, gcc.ptxas_isas()) == (75, 80)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert gcc.ptxas_isas() is None and gcc.targets(12, None) == (30, 35, 53, 70, 75, 80)


def test_the_probe_is_remembered_until_a_tool_changes(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A fake gcc (it counts its --version calls): the second probe asks nothing, a changed
    # gcc is asked again.
    from idrrun.toolchains import probe

    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    fake = bindir / "gcc"
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'gcc (fake) 12.2.0'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    settings = Settings(cache_dir=tmp_path / "cache")
    first = probe(settings, "gcc")
    asked = len(calls.read_text().splitlines())
    assert asked >= 1 and first.compiler("gcc") is not None
    second = probe(settings, "gcc")
    assert len(calls.read_text().splitlines()) == asked
    assert second.compilers == first.compilers and second.gpus == first.gpus
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'gcc (fake) 13.1.0'\n")  # updated
    third = probe(settings, "gcc")
    info = third.compiler("gcc")
    assert info is not None and "13.1.0" in info.version


def test_a_compiler_installed_after_a_probe_is_found_by_the_next(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The process keeps what it looked up on PATH and what the probe answered (onpath.py,
    # probecache.py): a gcc installed into a PATH folder after a probe (a fake that says its
    # version), or a PATH that changed, is found by the next probe.
    from idrrun.toolchains import probe

    early, later = tmp_path / "early", tmp_path / "later"
    early.mkdir()
    later.mkdir()
    for folder in (early, later):  # changed long ago: a view of them is kept
        os.utime(folder, ns=(time.time_ns() - 10**10,) * 2)
    monkeypatch.setenv("PATH", f"{early}:/usr/bin:/bin")
    settings = Settings(cache_dir=tmp_path / "cache")
    first = probe(settings, "gcc").compiler("gcc")
    assert first is not None and first.path is not None and not first.path.startswith(str(tmp_path))
    assert probe(settings, "gcc").compiler("gcc") == first
    fake = early / "gcc"
    fake.write_text("#!/bin/sh\necho 'gcc (fake) 99.1.0'\n")
    fake.chmod(0o755)
    installed = probe(settings, "gcc").compiler("gcc")
    assert installed is not None and installed.path == str(fake) and "99.1.0" in installed.version
    (later / "gcc").write_text("#!/bin/sh\necho 'gcc (later) 98.1.0'\n")
    (later / "gcc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{later}:/usr/bin:/bin")
    moved = probe(settings, "gcc").compiler("gcc")
    assert moved is not None and moved.path == str(later / "gcc") and "98.1.0" in moved.version
    # A compiler configured by its path, installed after a probe that found none there (PATH's
    # folders unchanged for long: the view is kept).
    os.utime(later, ns=(time.time_ns() - 10**10,) * 2)
    opt = tmp_path / "opt" / "gcc"
    configured = Settings(cache_dir=tmp_path / "cache", compilers={"gcc": {"c": str(opt)}})
    missing = probe(configured, "gcc").compiler(str(opt))
    assert missing is not None and missing.path is None
    opt.parent.mkdir()
    opt.write_text("#!/bin/sh\necho 'gcc (opt) 97.1.0'\n")
    opt.chmod(0o755)
    found = probe(configured, "gcc").compiler(str(opt))
    assert found is not None and found.path == str(opt) and "97.1.0" in found.version


# -- ptxas and the GPU decide the target too ---------------------------------------------------

def test_a_ptxas_that_accepts_none_of_gcc_s_targets_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A ptxas newer than anything GCC 12 emits (fake: it lists sm_100 and sm_120 only): the
    # probe finds no common target, and the build stops with the reason instead of failing
    # inside ptxas; before, the empty list fell back to GCC's own (sm_80 here).
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho \"--gpu-name <gpu name>  Allowed values for this option:  "
                    "'sm_100','sm_120'.\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    targets = gcc.GCC.offload_targets(GCC)
    assert targets == ()
    with pytest.raises(UsageError, match="GCC 12 and this machine's ptxas share no GPU target"):
        toolchain_for(request(("cc80",)), probe_targets((H100,), targets), Settings())
    # Not probed (None) is not "none": GCC's own list then.
    assert device_options(toolchain_for(request(("cc80",)), probe("gcc", (H100,)), Settings())) \
        .startswith("-misa=sm_80 ")


def test_a_target_newer_than_the_gpu_builds_the_newest_it_runs() -> None:
    # sm_75 asked on a V100 (sm_70), sm_70 buildable: sm_70, said; before: "the oldest target
    # this machine can build is sm_75 (sm_70, sm_75, sm_80)".
    tc = toolchain_for(request(("sm_75",)), probe_targets((V100,), (70, 75, 80)), Settings())
    assert device_options(tc).startswith("-misa=sm_70 ") and tc.target == "gpu"
    assert tc.machine_notes == ("sm_75 asked, newer than the GPU here (Tesla V100, sm_70): "
                                "building for sm_70, which it can run",) and tc.notes == ()
    # Nothing the GPU runs: the message names the oldest target there is.
    with pytest.raises(UsageError, match=r"the oldest target this machine can build is sm_75 "
                                         r"\(sm_75, sm_80\), newer than the GPU here \(Tesla V100"):
        toolchain_for(request(("cc90",)), probe_targets((V100,), (75, 80)), Settings())


# -- CUDA cells: nvcc's release and its name in the header --------------------------------------

NVCC_VERSION = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
                "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, "
                "V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n")


def test_cuda_cells_name_nvcc_and_its_release_with_a_fake_nvcc(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from idrrun.toolchains.machine import probe_compiler

    fake = tmp_path / "nvcc"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVCC_VERSION}EOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    nvcc = probe_compiler("nvcc")
    assert nvcc.version == "Cuda compilation tools, release 13.0, V13.0.88"
    assert probe_compiler("gcc").version.startswith("gcc (")  # its first line, as before
    src = from_cell("int main(){return 0;}\n", "cell[1]", "cuda", None, Path("/tmp"))
    cuda = RunRequest(source=src, workdir=Path("/tmp"))
    for family in ("gcc", "nvhpc"):
        p = Probe(family=family, compilers=(GCC, nvcc), gpus=(), offload=True)
        tc = toolchain_for(cuda, p, Settings())
        assert (tc.family, tc.label, tc.compiler.version) == (family, "nvcc", nvcc.version)
    assert toolchain_for(request(), probe("gcc"), Settings()).label == "gcc"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_a_cuda_file_s_header_names_nvcc(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from conftest import PYTHONPATH

    (tmp_path / "h.cu").write_text('#include <cstdio>\n__global__ void k() {}\n'
                                   'int main() { printf("host ok\\n"); return 0; }\n')
    r = subprocess.run([sys.executable, "-m", "idrrun", "run", "-l", "cuda", "h.cu"], cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    header = r.stdout.splitlines()[0]
    assert "[nvcc] · cuda" in header and "release" in header and "[gcc]" not in header, header


def test_nvcc_arch_sm_70_is_read_as_a_target_this_nvcc_builds_with_a_fake_nvcc(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from idrrun.toolchains import translate
    from idrrun.toolchains.machine import probe_compiler

    # IDRIS's CUDA cell asks for sm_70 (a V100); CUDA 13's nvcc builds from compute_75 on.
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --list-gpu-arch ] && printf 'compute_75\\ncompute_80\\n'"
                    f" && exit 0\ncat <<'EOF'\n{NVCC_VERSION}EOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    nvcc = probe_compiler("nvcc")
    src = from_cell("int main(){return 0;}\n", "cell[1]", "cuda", None, Path("/tmp"))
    cell = RunRequest(source=src, workdir=Path("/tmp"), compiler_options=("-arch=sm_70", "-O3"))
    h200 = GpuInfo("NVIDIA H200", "9.0", "580")
    for family in ("gcc", "nvhpc"):
        on_host = translate(cell, Probe(family=family, compilers=(GCC, nvcc), gpus=(), offload=True), Settings())
        assert on_host.request.compiler_options == ("-arch=sm_75", "-O3")
        assert on_host.notes == ("-arch=sm_70: this nvcc does not build sm_70 (CUDA 13 dropped the "
                                 "GPUs before Turing); idrrun built with -arch=sm_75 (the nearest "
                                 "target it builds)",)
        on_gpu = translate(cell, Probe(family=family, compilers=(GCC, nvcc), gpus=(h200,), offload=True), Settings())
        assert on_gpu.request.compiler_options == ("-arch=native", "-O3")
        known = replace(cell, compiler_options=("-arch=sm_80",))
        assert translate(known, Probe(family=family, compilers=(GCC, nvcc), gpus=(), offload=True),
                         Settings()).request == known
