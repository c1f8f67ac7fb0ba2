"""The text reporter on a real build and run: when it flushes (a kernel's stdout sends what was
written on a timer by itself, and each explicit flush there waits for its I/O thread); the header
on where the regions run; the verdict's table."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import pytest

from idrrun import pipeline
from idrrun.display import TextReporter, VerdictView
from idrrun.model import CheckResult, Probe, RunRequest, Settings, Toolchain, Verdict
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
    outcome = pipeline.execute(pipeline.prepare(RunRequest(source=src, workdir=tmp_path),
                                                toolchain, probe,
                                                Settings(cache_dir=tmp_path / "cache"),
                                                TextReporter(out)))
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


def test_the_verdict_table_reads_from_the_left() -> None:
    """JupyterLab right-aligns the cells of output tables; every cell of the verdict's says
    text-align:left itself (a <style> block would be dropped from an untrusted notebook)."""
    verdict = Verdict(exercise="intro_saxpy", checks=(
        CheckResult("exit_ok", "pass", "exit 0", "exit 0", ""),
        CheckResult("matches_solution", "fail", "y_last = 3", "y_last = 2", "differs"),
        CheckResult("ran_on_gpu", "incomplete", "a kernel on the GPU", "", "no GPU here")))
    page = VerdictView(verdict)._repr_html_()
    cells = re.findall(r"<t[dh]( style='[^']*')?>", page)
    assert len(cells) == 5 * 4
    assert all("text-align:left" in style for style in cells), page
    assert "<style" not in page


@pytest.mark.parametrize(("target", "offload", "acc", "said"), [
    ("gpu", True, True, "OpenACC on the GPU"),
    ("gpu", False, True, "OpenACC on the GPU"),  # a family that does not say it offloads
    ("host", True, True, "OpenACC built for a GPU, none found here"),
    ("host", False, True, "OpenACC on the host (no GPU offload)"),
    ("none", False, True, "no OpenACC"),
    ("none", False, False, "no OpenACC"),
])
def test_the_header_says_where_the_regions_run(tmp_path: Path, target: str, offload: bool,
                                               acc: bool, said: str) -> None:
    """One header per toolchain, which its notes never contradict ("built for a GPU as asked;
    here the program falls back to the host" goes with the third)."""
    src = from_cell("int main(void) { return 0; }\n", "cell[1]", "c", None, tmp_path)
    toolchain = dataclasses.replace(
        Toolchain(family="gcc", language="c", compiler=probe_compiler("gcc"), flags=(),
                  link_flags=(), target="none"), target=target, offload=offload)
    out = io.StringIO()
    TextReporter(out).started(RunRequest(source=src, workdir=tmp_path, acc=acc), toolchain)
    assert out.getvalue().rstrip().endswith(f" · c · {said}"), out.getvalue()
