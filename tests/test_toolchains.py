"""Compiler families as data: OpenACC flags and accopts translation for nvhpc, pgi and gcc."""

from __future__ import annotations

from pathlib import Path

import pytest

from idrrun.model import CompilerInfo, GpuInfo, Probe, RunRequest, Settings
from idrrun.request.source import from_cell
from idrrun.toolchains import resolve

GCC = CompilerInfo("gcc", "/usr/bin/gcc", "gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
H100 = GpuInfo("NVIDIA H100 80GB HBM3", "9.0", "580.1")
V100 = GpuInfo("Tesla V100", "7.0", "525.1")


def probe(family: str = "gcc", gpus: tuple[GpuInfo, ...] = (), offload: bool = True) -> Probe:
    compilers = (GCC, CompilerInfo("nvc", "/opt/nv/nvc", "nvc 24.3"),
                 CompilerInfo("pgcc", "/opt/pgi/pgcc", "pgcc 20.1"))
    return Probe(family=family, family_source="flag", compilers=compilers, gpus=gpus,
                 offload=offload)


def request(accopts: tuple[str, ...] = (), acc: bool = True) -> RunRequest:
    src = from_cell("#include <stdio.h>\nint main(void){return 0;}\n", "cell[1]", "c", None, Path("/tmp"))
    return RunRequest(source=src, workdir=Path("/tmp"), acc=acc, accopts=accopts)


def test_nvhpc_accopts_become_gpu_flag() -> None:
    tc = resolve(request(("cc70", "pinned")), probe("nvhpc", (V100,)), Settings())
    assert tc.flags[:3] == ("-acc", "-gpu=cc70,pinned", "-Minfo=accel")
    assert tc.target == "gpu"


def test_pgi_accopts_become_ta_tesla() -> None:
    tc = resolve(request(("cc70", "pinned")), probe("pgi", (V100,)), Settings())
    assert "-ta=tesla:cc70,pinned" in tc.flags and "-acc" in tc.flags


def test_gcc_on_a_gpu_offloads_with_misa_capped_at_sm80() -> None:
    tc = resolve(request(), probe("gcc", (H100,)), Settings())
    assert "-foffload=nvptx-none" in tc.flags
    assert "-foffload-options=nvptx-none=-misa=sm_80 -lm" in tc.flags
    assert tc.target == "gpu"
    assert any("sm_90 asked, GCC 12 can build for sm_80 at best" in n for n in tc.notes)


def test_gcc_ccxy_picks_misa_and_ignores_pinned_once() -> None:
    tc = resolve(request(("cc70", "pinned", "managed")), probe("gcc", (V100,)), Settings())
    assert "-foffload-options=nvptx-none=-misa=sm_70 -lm" in tc.flags
    ignored = [n for n in tc.notes if "ignores these accopts" in n]
    assert ignored == ["gcc ignores these accopts (nvhpc options without a gcc equivalent): pinned, managed"]
    assert not any("pinned" in f for f in tc.flags)


def test_gcc_without_gpu_builds_for_the_host_and_says_so() -> None:
    tc = resolve(request(), probe("gcc", ()), Settings())
    assert "-foffload=disable" in tc.flags and tc.target == "host"
    assert any("no GPU found" in n for n in tc.notes)


def test_gcc_without_gpu_offloads_when_asked() -> None:
    tc = resolve(request(("cc80",)), probe("gcc", ()), Settings())
    assert "-foffload=nvptx-none" in tc.flags
    assert any("falls back to the host" in n for n in tc.notes)


def test_gcc_without_offload_compiler_says_how_to_install() -> None:
    tc = resolve(request(), probe("gcc", (H100,), offload=False), Settings())
    assert "-foffload=disable" in tc.flags
    assert any("apt-get install gcc-12-offload-nvptx" in n for n in tc.notes)


@pytest.mark.parametrize("cc, isa", [("cc35", 35), ("cc60", 53), ("cc75", 75), ("cc90", 80), ("sm_86", 80)])
def test_gcc12_isa_table(cc: str, isa: int) -> None:
    tc = resolve(request((cc,)), probe("gcc", (H100,)), Settings())
    assert f"-foffload-options=nvptx-none=-misa=sm_{isa} -lm" in tc.flags


def test_accopts_without_acc_are_reported() -> None:
    tc = resolve(request(("cc70",), acc=False), probe("nvhpc", (V100,)), Settings())
    assert "-acc" not in tc.flags and not any(f.startswith("-gpu") for f in tc.flags)
    assert "--accopts is ignored without -a/--acc" in tc.notes
