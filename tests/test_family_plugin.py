"""A compiler family added from outside idrrun (tests/plugins/toy_family.py, its compiler the
fake tests/fakes/toycc): registered at run time, it works end to end through the magic in a real
kernel and through `idrrun grade`, with no change to idrrun."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Kernel, ROOT

from idrrun import build, cli, toolchains
from idrrun.request import config, options, resolve, source
from idrrun.run import boundary
from idrrun.toolchains import registry

FAKES = ROOT / "tests" / "fakes"
PLUGINS = ROOT / "tests" / "plugins"
SOLUTION = (ROOT / "examples" / "C" / "intro_saxpy_solution.c").read_text()
START = (ROOT / "examples" / "C" / "intro_saxpy_exercise.c").read_text()


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The toy family registered, toycc on PATH; yields its argv log."""
    log = tmp_path / "toycc.log"
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_TOY_LOG", str(log))
    monkeypatch.syspath_prepend(str(PLUGINS))
    import toy_family

    assert "toy" not in registry.names()
    toy_family.register()
    try:
        yield log
    finally:
        registry.unregister("toy")


def test_unknown_until_registered() -> None:
    assert "toy" not in registry.names()
    with pytest.raises(Exception, match="invalid choice: 'toy'"):
        options.parse_line("-c toy")


def test_grade_with_the_toy_family(toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "good.c").write_text(SOLUTION)
    (tmp_path / "start.c").write_text(START)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["grade", "intro_saxpy", str(tmp_path / "good.c"), str(tmp_path / "start.c"),
                     "-c", "toy", "--report", str(tmp_path / "report.json")])
    assert code == 0, capsys.readouterr()  # a completed grading (start fails its checks)
    rows = {r["student"]: r for r in json.loads((tmp_path / "report.json").read_text())}
    assert rows["good"]["verdict"] == "pass"
    assert rows["start"]["verdict"] == "fail" and "uses OpenACC" in rows["start"]["reasons"]
    # The regions that ran were counted as they ran (graded builds run in a sandbox: toycc's
    # argv log stays inside it).
    [acc] = [c for c in rows["good"]["checks"] if c["name"] == "uses OpenACC"]
    assert "ran" in acc["reason"]


def test_a_graded_build_keeps_the_family_s_feedback_files(toy: Path, tmp_path: Path) -> None:
    """A graded build (a room) takes out of its box's folder only what the grader asks for:
    the product, and the files the family's feedback() reads (toycc's toy-report.txt)."""
    import toy_family

    settings = config.load(tmp_path, environ={})
    probe = toolchains.probe(settings, "toy")
    src = source.from_file(ROOT / "examples" / "C" / "intro_saxpy_solution.c", "c", "good.c")
    request, toolchain = resolve.resolve(options.Options(acc=True, check="intro_saxpy"), src,
                                         tmp_path, settings, probe)
    room = boundary.own_dir(tmp_path / "room", 0o711)
    request = dataclasses.replace(request, room=room)
    built = build.build(request, toolchain, tmp_path / "cache", probe.protections,
                        feedback_files=toy_family.TOY.feedback_files(toolchain))
    assert built.ok and built.build_dir is not None, built.output
    assert sorted(p.name for p in built.build_dir.iterdir()) == ["build.json", "prog", "toy-report.txt"]
    report = toy_family.TOY.feedback(built)
    assert report is not None and report.regions >= 1 and report.method == "toycc --toy-report"
    without = build.build(dataclasses.replace(request, force=True), toolchain, tmp_path / "cache",
                          probe.protections)
    assert toy_family.TOY.feedback(without) is None  # not asked for: not taken out


def test_config_accepts_the_toy_family(toy: Path, tmp_path: Path) -> None:
    (tmp_path / "idrrun.toml").write_text('family = "toy"\n[compilers.toy]\nc = "toycc"\n')
    settings = config.load(tmp_path, environ={})
    assert settings.family == "toy" and settings.compiler_command("toy", "c") == "toycc"


def test_magic_with_the_toy_family(kernel: Kernel, tmp_path: Path) -> None:
    log = tmp_path / "toycc-kernel.log"
    setup = kernel.run(
        f"import os, sys\nos.environ['PATH'] = {str(FAKES)!r} + os.pathsep + os.environ['PATH']\n"
        f"os.environ['FAKE_TOY_LOG'] = {str(log)!r}\nsys.path.insert(0, {str(PLUGINS)!r})\n"
        "import toy_family\ntoy_family.register()\n")
    assert setup.status == "ok", setup.error_text
    try:
        cell = kernel.run(f"%%idrrun -c toy -a --check intro_saxpy\n{SOLUTION}")
        assert cell.status == "ok", cell.stdout + cell.error_text
        assert "[toy]" in cell.stdout and "toy: OpenACC runs on the host" in cell.stdout
        html = "".join(d.get("text/html", "") for d in cell.displays)
        assert "intro_saxpy: PASS" in html
        assert any("--toy-acc" in json.loads(line) for line in log.read_text().splitlines())
        env = kernel.run(f"%%idrrun -c toy\n#include <stdio.h>\n#include <stdlib.h>\n"
                         "int main(void){ puts(getenv(\"TOY_FAMILY_RUN\")); return 0; }\n")
        assert env.status == "ok" and "\n1\n" in env.stdout, env.stdout  # the family's run_env
    finally:
        kernel.run("from idrrun.toolchains import registry\nregistry.unregister('toy')")
