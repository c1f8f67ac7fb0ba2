"""The text reporter on a real build and run: when it flushes (a kernel's stdout sends what was
written on a timer by itself, and each explicit flush there waits for its I/O thread)."""

from __future__ import annotations

import io
from pathlib import Path

from idrrun import pipeline
from idrrun.display import TextReporter
from idrrun.model import Probe, RunRequest, Settings, Toolchain
from idrrun.request.source import from_cell
from idrrun.toolchains.machine import probe_compiler


class Counting(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


class TimedStream(Counting):
    """As ipykernel's OutStream: what is written is sent every flush_interval seconds."""

    flush_interval = 0.2


def run_hello(tmp_path: Path, out: Counting) -> None:
    src = from_cell('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n',
                    "cell[1]", "c", None, tmp_path)
    gcc = probe_compiler("gcc")
    toolchain = Toolchain(family="gcc", language="c", compiler=gcc, flags=("-O0",), link_flags=(),
                          target="none")
    probe = Probe(family="gcc", compilers=(gcc,), gpus=(), offload=False)
    outcome = pipeline.execute(RunRequest(source=src, workdir=tmp_path), toolchain, probe,
                               Settings(cache_dir=tmp_path / "cache"), TextReporter(out))
    assert outcome.ok, outcome.failure
    assert "\nhi\n" in out.getvalue() and "exit 0" in out.getvalue()


def test_a_plain_stream_is_flushed_at_every_step(tmp_path: Path) -> None:
    out = Counting()
    run_hello(tmp_path, out)
    assert out.flushes >= 3  # the build, the program's output, the run's end


def test_a_stream_that_flushes_itself_is_not_flushed_per_step(tmp_path: Path) -> None:
    out = TimedStream()
    run_hello(tmp_path, out)
    assert out.flushes == 0
