"""build: the compile command, the content-addressed cache, no stale executable after a failure."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from idrrun import build
from idrrun.model import CompilerInfo, RunRequest, Toolchain
from idrrun.request.source import from_cell
from idrrun.toolchains.machine import probe_compiler

GOOD = "#include <stdio.h>\nint main(void){ puts(\"hi\"); return 0; }\n"


def setup(tmp_path: Path, text: str = GOOD, name: str = "cell[4]") -> tuple[RunRequest, Toolchain]:
    src = from_cell(text, name, "c", None, tmp_path)
    gcc = probe_compiler("gcc")
    assert gcc.path is not None
    toolchain = Toolchain(family="gcc", language="c", compiler=gcc, flags=("-O2",),
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
