"""benchmarks/ as a suite: every driver (and each of its subcommands) answers --help, run.sh
lists its suites and refuses an unknown one, and figures reach RESULTS.md one section per run.
Fast: nothing is measured here (shellcheck of run.sh: test_docker.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ROOT

BENCH = ROOT / "benchmarks"
DRIVERS = sorted(p.name for p in BENCH.glob("*.py"))


def _help(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH / argv[0]), *argv[1:], "--help"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def _subcommands(help_text: str) -> list[str]:
    """The subcommands a driver's --help lists under COMMAND (bench.subcommands)."""
    _, listed, rest = help_text.partition("\npositional arguments:\n  COMMAND\n")
    return re.findall(r"^    (\S+)", rest.split("\noptions:")[0], re.MULTILINE) if listed else []


def test_every_driver_and_subcommand_answers_help() -> None:
    assert {"bench.py", "cell_overhead.py", "run_overhead.py", "grade_bench.py", "box_cost.py",
            "profile_cost.py", "course_gpu.py", "similarity_bench.py"} <= set(DRIVERS)
    with ThreadPoolExecutor(4) as pool:
        tops = dict(zip(DRIVERS, pool.map(_help, DRIVERS)))
        calls = [(name, sub) for name, r in tops.items() for sub in _subcommands(r.stdout)]
        subs = dict(zip(calls, pool.map(lambda c: _help(*c), calls)))
    for name, r in tops.items():
        assert (r.returncode, r.stderr) == (0, ""), name
        assert r.stdout.startswith("usage: "), name
    for (name, sub), r in subs.items():
        assert (r.returncode, r.stderr) == (0, ""), (name, sub)
        if name != "bench.py":  # the helper's own commands are not drivers
            assert "--record" in r.stdout, (name, sub)  # the figures can reach RESULTS.md
    found = {name: sorted(sub for n, sub in calls if n == name) for name in DRIVERS}
    assert found["profile_cost.py"] == ["after", "phases", "steps", "timelines", "tracer", "where"]
    assert found["run_overhead.py"] == ["files", "jacobi", "where"]
    assert found["course_gpu.py"] == ["class", "table", "variants", "versus-host"]


def _run_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(BENCH / "run.sh"), *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, **env})


def test_run_sh_lists_its_suites() -> None:
    r = _run_sh("--list")
    assert r.returncode == 0, r.stderr
    listed = re.findall(r"^  (\S+)\s{2,}", r.stdout, re.MULTILINE)
    for suite in ("cell", "run", "jacobi", "grade", "similarity", "sandbox", "profile", "course-gpu",
                  "host", "gpu", "all"):
        assert suite in listed, r.stdout


def test_run_sh_refuses_an_unknown_suite_before_running_anything(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = _run_sh("cell", "nope", OUT=str(out))
    assert r.returncode == 2
    assert r.stderr.startswith("run.sh: unknown suite 'nope' (suites: cell run "), r.stderr
    assert not out.exists()  # nothing started, not even the cell suite named first
    r = _run_sh()
    assert r.returncode == 2 and r.stderr.startswith("usage: bash benchmarks/run.sh")
    r = _run_sh("--budget", "soon", "cell")
    assert (r.returncode, r.stderr) == (2, "run.sh: --budget wants seconds, not 'soon'\n")


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> object:
    monkeypatch.syspath_prepend(str(BENCH))
    results = tmp_path / "RESULTS.md"
    results.write_text("# Measured figures\n\nNewest first.\n\n## an older run\n\nold figures\n")
    monkeypatch.setenv("BENCH_RESULTS", str(results))
    monkeypatch.delenv("BENCH_SECTION", raising=False)
    import bench as module

    return module


def test_a_driver_alone_adds_its_own_section_newest_first(bench: object, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    bench.report("the figures", ["a  1.0 ms", "b  2.0 ms"], record=True)  # type: ignore[attr-defined]
    text = (tmp_path / "RESULTS.md").read_text()
    head, _, rest = text.partition("## an older run")
    assert rest == "\n\nold figures\n"
    assert re.search(r"^## \d{4}-\d\d-\d\d \d\d:\d\d — `python3 [^`]+`\n\nMachine: .*cores.*\n\n"
                     r"\*\*the figures\*\* \(`python3 [^`]+`\):\n```\na  1\.0 ms\nb  2\.0 ms\n```\n\n$",
                     head.split("Newest first.\n\n")[1], re.MULTILINE), head
    assert capsys.readouterr().out == "\n== the figures\na  1.0 ms\nb  2.0 ms\n"


def test_under_run_sh_figures_join_the_run_s_one_section(bench: object, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    section = tmp_path / "section.md"
    assert bench.main(["begin", str(section), "--command", "bash benchmarks/run.sh cell"]) == 0  # type: ignore[attr-defined]
    monkeypatch.setenv("BENCH_SECTION", str(section))
    bench.report("first", ["1"], record=True)  # type: ignore[attr-defined]
    assert bench.main(["note", "second: not run, no GPU here."]) == 0  # type: ignore[attr-defined]
    bench.report("third", ["3"], record=False)  # type: ignore[attr-defined]
    assert (tmp_path / "RESULTS.md").read_text().count("## ") == 1  # nothing inserted yet
    assert bench.main(["insert", str(section)]) == 0  # type: ignore[attr-defined]
    text = (tmp_path / "RESULTS.md").read_text()
    assert text.count("## ") == 2 and text.index("run.sh cell") < text.index("## an older run")
    assert "**first**" in text and "second: not run, no GPU here." in text and "third" not in text
