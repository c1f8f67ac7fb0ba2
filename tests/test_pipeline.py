"""pipeline.execute on a hand-built request and toolchain: each failure kind, as data."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest

from idrrun import pipeline
from idrrun.profile import running
from idrrun.pipeline import Outcome
from idrrun.model import (BuildResult, FailureKind, Probe, RunRequest, RunResult, Settings,
                          Toolchain, Verdict)
from idrrun.profile.model import ProfileReport
from idrrun.request.source import from_cell
from idrrun.toolchains.machine import probe_compiler


class Recorder(pipeline.Reporter):
    """A Reporter that keeps what it was told (what it does not override shows nothing)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.text = ""

    def started(self, request: RunRequest, toolchain: Toolchain) -> None:
        self.events.append("started")

    def notes(self, notes: Sequence[str]) -> None:
        self.events += [f"note: {n}" for n in notes]

    def built(self, request: RunRequest, result: BuildResult) -> None:
        self.events.append("built" if result.ok else "build failed")

    def output(self, text: str) -> None:
        self.text += text

    def ran(self, request: RunRequest, result: RunResult) -> None:
        self.events.append("ran")

    def profile(self, report: ProfileReport) -> None:
        self.events.append("profile")

    def verdict(self, verdict: Verdict) -> None:
        self.events.append("verdict")


def run(tmp_path: Path, body: str, settings: Settings | None = None,
        **kw: object) -> tuple[Recorder, Outcome]:
    src = from_cell("#include <stdio.h>\n#include <stdlib.h>\n#include <signal.h>\n#include <unistd.h>\n"
                    f"int main(int argc, char **argv) {{ {body} }}\n", "cell[1]", "c", None, tmp_path)
    gcc = probe_compiler("gcc")
    toolchain = Toolchain(family="gcc", language="c", compiler=gcc, flags=("-O0",), link_flags=(),
                          target="none")
    request = dataclasses.replace(RunRequest(source=src, workdir=tmp_path), **kw)  # type: ignore[arg-type]
    probe = Probe(family="gcc", compilers=(gcc,), gpus=(), offload=False)
    reporter = Recorder()
    outcome = pipeline.execute(pipeline.prepare(
        request, toolchain, probe, settings or Settings(cache_dir=tmp_path / "cache"), reporter))
    return reporter, outcome


def test_ok(tmp_path: Path) -> None:
    reporter, outcome = run(tmp_path, 'printf("%s\\n", argv[1]); return 0;', program_args=("hey",))
    assert outcome.ok and outcome.failure is None and reporter.text == "hey\n"
    assert reporter.events[:3] == ["started", "built", "ran"]


@pytest.mark.parametrize("body, kind, step", [
    ("return 0", FailureKind.COMPILE_ERROR, "compile"),
    ("return 4;", FailureKind.EXIT_STATUS, "run"),
    ("raise(SIGSEGV); return 0;", FailureKind.SIGNAL, "run"),
    ("sleep(20); return 0;", FailureKind.TIMEOUT, "run"),
])
def test_failure_kinds(tmp_path: Path, body: str, kind: FailureKind, step: str) -> None:
    _, outcome = run(tmp_path, body, timeout=0.5)
    assert outcome.failure is not None and outcome.failure.kind is kind
    assert outcome.failure.step == step and outcome.failure.hint


def test_missing_get_files(tmp_path: Path) -> None:
    _, outcome = run(tmp_path, "return 0;", get_files=("out.dat",))
    assert outcome.failure is not None and outcome.failure.kind is FailureKind.MISSING_FILES
    assert outcome.run is not None and outcome.run.missing_files == ("out.dat",)


def test_build_only_and_object(tmp_path: Path) -> None:
    _, outcome = run(tmp_path, "return 0;", execute=False)
    assert outcome.ok and outcome.run is None and outcome.build is not None and outcome.build.ok
    _, outcome = run(tmp_path, "return 0;", object_only=True, execute=False, keep="mine.c")
    assert outcome.ok and (tmp_path / "mine.c.o").is_file() and (tmp_path / "mine.c").is_file()


needs_cupti = pytest.mark.skipif(not Path("/usr/local/cuda/include/cupti.h").is_file(),
                                 reason="no CUDA toolkit with CUPTI here")


@needs_cupti
def test_a_trace_for_the_checks_only_is_taken_quietly(tmp_path: Path) -> None:
    """A --check whose checks read the GPU trace, without --profile (show_profile False): the
    program runs with the built-in tracer injected (CUDA_INJECTION64_PATH, which the CUDA
    driver loads), nothing of the profile is shown (no report, no profiler note), nothing is
    drawn, and its folder is gone after the run; the outcome keeps the report the checks read.
    With --profile the same run shows its profile and keeps its folder."""
    body = 'const char *t = getenv("CUDA_INJECTION64_PATH"); printf("%s\\n", t ? t : "none"); return 0;'
    reporter, outcome = run(tmp_path, body, profile="builtin", show_profile=False)
    assert outcome.ok and reporter.text.strip().endswith(".so"), reporter.text
    assert "profile" not in reporter.events
    assert not [e for e in reporter.events if "tracer" in e or "nsys" in e], reporter.events
    assert outcome.profile is not None and outcome.profile.kind == "builtin"
    assert outcome.profile.timeline_png is None and outcome.profile.trace_json is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no folder left
    reporter, outcome = run(tmp_path, body, profile="builtin")
    assert "profile" in reporter.events and (tmp_path / running.PROFILE_DIR).is_dir()


@needs_cupti
def test_a_note_about_the_profiler_is_said_once(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """"nsys is not on PATH: using the built-in CUPTI tracer" in the profile it is about, not
    also among the run's notes before it. (nsys is hidden from the profiler's lookup only:
    this machine may have one.)"""
    import shutil

    from idrrun.profile import stages as session
    from idrrun.profile.render import ProfileView

    which = shutil.which
    monkeypatch.setattr(session.shutil, "which",
                        lambda name, **kw: None if name == "nsys" else which(name, **kw))
    reporter, outcome = run(tmp_path, "return 0;", profile="auto")
    assert outcome.profile is not None and outcome.profile.kind == "builtin", outcome.profile
    shown = str(ProfileView(outcome.profile))
    said = [e for e in reporter.events if "nsys is not on PATH" in e] + \
        [line for line in shown.splitlines() if "nsys is not on PATH" in line]
    assert len(said) == 1, (reporter.events, shown)


def test_the_pipeline_asks_the_profile_session_twice(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """profile/stages.py is two stages around the run: the pipeline asks it for the plan
    before the run and collects after; the rest (the output filter, the follower, the launch
    mark, the files a box keeps, the grace) belongs to the profile session value the run's
    plan holds (profile/running.py). Before: eight entries, from six rungs. Here the profiler
    is a configured command (a fake that records its argv and runs the program)."""
    import sys
    from types import FrameType

    from conftest import ROOT
    from idrrun.profile import stages as session

    monkeypatch.setenv("FAKE_PROFILER_LOG", str(tmp_path / "profiler.log"))
    settings = Settings(cache_dir=tmp_path / "cache",
                        profiler=(str(ROOT / "tests" / "fakes" / "record_profiler"),))
    entries: list[str] = []

    def trace(frame: FrameType, event: str, arg: object) -> None:
        caller = frame.f_back
        if event == "call" and frame.f_code.co_filename == session.__file__ and \
                caller is not None and caller.f_code.co_filename != session.__file__:
            entries.append(f"{caller.f_code.co_name} -> {frame.f_code.co_name}")

    before = sys.gettrace()
    sys.settrace(trace)
    try:
        reporter, outcome = run(tmp_path, 'printf("hey\\n"); return 0;', settings, profile="auto")
    finally:
        sys.settrace(before)
    assert outcome.ok and reporter.text == "hey\n", (outcome.failure, reporter.text)
    assert outcome.profile is not None and outcome.profile.kind == "command"
    assert (tmp_path / "profiler.log").is_file()
    assert entries == ["profile_stage -> plan", "collect_stage -> collect"], entries
