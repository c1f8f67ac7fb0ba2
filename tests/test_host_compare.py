"""agrees_with_host: the same build run once more with its compute regions on the host, its
numbers compared with the GPU's. Here, without a GPU: a fake GPU family (the toy family's
compiler, tests/fakes/toycc, with its target said to be the GPU) whose host runs carry
TOY_DEVICE=host, and programs whose output depends on it; a gcc build on this host is
incomplete (nothing to compare). On the GPU machine (`-m gpu`): a racy histogram caught."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT, has_gpu
from idrrun import checking, pipeline, toolchains
from idrrun.checks import specs
from idrrun.model import CheckResult, CompilerInfo, Probe, RunRequest, Settings, Toolchain
from idrrun.pipeline import Outcome
from idrrun.request import config, resolve
from idrrun.request import source as source_mod
from idrrun.request.options import Options
from idrrun.toolchains import registry
from idrrun.toolchains.family import AccDecision

FAKES = ROOT / "tests" / "fakes"
PLUGINS = ROOT / "tests" / "plugins"

# n: the number of increments. On the "GPU" (TOY_DEVICE unset) the racy program loses some,
# as an update without atomic does; on the host it counts them all.
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000, total = 0;
    int on_host = getenv("TOY_DEVICE") != NULL;
    #pragma acc parallel loop reduction(+:total)
    for (long i = 0; i < n; i++)
        total += 1;
    if (RACY && !on_host)
        total -= n / 7;
    printf("n = %ld\ntotal = %ld\n", n, total);
    return 0;
}
"""

SPEC = """
name = "counted"
[sources.c]
exercise = "good.c"
solution = "good.c"
[args]
host = ["1000"]
gpu = ["{gpu}"]
[[check]]
kind = "exit_ok"
[[check]]
kind = "agrees_with_host"
label = "total (GPU as host)"
pattern = 'total\\s*=\\s*(\\d+)'
abs_tol = 0
rel_tol = 0
"""


@pytest.fixture
def toy_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A family whose builds are said to run on the GPU (toycc builds for the host), and whose
    runs on the host carry TOY_DEVICE=host: registered as "toygpu"."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_TOY_LOG", str(tmp_path / "toycc.log"))
    monkeypatch.syspath_prepend(str(PLUGINS))
    import toy_family

    @dataclass(frozen=True)
    class ToyGpu(toy_family.ToyFamily):
        def openacc(self, request: RunRequest, compiler: CompilerInfo, probe: Probe,
                    settings: Settings) -> AccDecision:
            return AccDecision(("--toy-acc", "--toy-report"), "gpu")

        def run_env(self, request: RunRequest, toolchain: Toolchain) -> Mapping[str, str]:
            return {"TOY_DEVICE": "host"} if request.run_on_host else {}

        def host_comparison(self, toolchain: Toolchain) -> str:
            return ""

    registry.register(ToyGpu(name="toygpu", summary="the toy family, said to build for a GPU",
                             compilers=toy_family.TOY.compilers,
                             install_hint=toy_family.TOY.install_hint))
    try:
        yield "toygpu"
    finally:
        registry.unregister("toygpu")


def check(folder: Path, family: str, racy: bool, gpu_args: str = "1000",
          exercise: specs.Exercise | None = None, program: Path | None = None) -> Outcome:
    if exercise is None:
        (folder / "good.c").write_text(PROGRAM.replace("RACY", "0"))
        (folder / "counted.toml").write_text(SPEC.format(gpu=gpu_args))
        exercise = specs.load(folder / "counted.toml")
        program = folder / "mine.c"
        program.write_text(PROGRAM.replace("RACY", "1" if racy else "0"))
    assert program is not None
    settings = config.load(folder, environ={})
    probe = toolchains.probe(settings, family)
    src = source_mod.from_file(program, "c", program.name)
    request, toolchain = resolve.resolve(Options(acc=True), src, folder, settings, probe, exercise)
    return checking.execute_checked(pipeline.prepare(request, toolchain, probe, settings), exercise)


def host_check(outcome: Outcome) -> CheckResult:
    assert outcome.verdict is not None
    [found] = [c for c in outcome.verdict.checks if "GPU as host" in c.name]
    return found


def test_a_race_that_prints_plausible_numbers_differs_from_the_host(toy_gpu: str,
                                                                   tmp_path: Path) -> None:
    good = host_check(check(tmp_path, toy_gpu, racy=False))
    assert good.status == "pass" and good.reason.startswith("prints the same ") and \
        good.reason.endswith(" on the GPU as on the host"), good
    racy = host_check(check(tmp_path, toy_gpu, racy=True))
    assert racy.status == "fail", racy
    assert "858 on the GPU, 1000 on the host" in racy.reason, racy.reason


def test_the_comparison_runs_at_the_host_arguments(toy_gpu: str, tmp_path: Path) -> None:
    """The checked run had the GPU's arguments: the GPU run compared is one more, with the
    host's (small: the host's run is serial)."""
    outcome = check(tmp_path, toy_gpu, racy=True, gpu_args="7000")
    assert "n = 7000" in outcome.run.proc.output if outcome.run else False
    racy = host_check(outcome)
    assert racy.status == "fail" and racy.expected == "1000" and racy.got == "858"


def test_a_host_build_has_nothing_to_compare(tmp_path: Path) -> None:
    """gcc on this machine builds for the host: the check is incomplete (needs a GPU), never a
    pass, and costs no second run."""
    exercise = specs.load(ROOT / "examples" / "atomic_histogram.toml")
    outcome = check(tmp_path, "gcc", racy=False, exercise=exercise,
                    program=ROOT / "examples" / "C" / "atomic_histogram_solution.c")
    found = host_check(outcome)
    assert (found.status, found.reason) == ("incomplete", checking.NOT_ON_GPU)
    assert outcome.verdict is not None and outcome.verdict.incomplete


def test_each_family_says_how_its_gpu_build_runs_on_the_host() -> None:
    """gcc: libgomp's host fallback, ACC_DEVICE_TYPE=host; nvhpc: built with -acc=gpu,host
    (the host's code of every region), run with ACC_DEVICE_TYPE=HOST; PGI: not offered."""
    gcc, nvhpc, pgi = (registry.get(n) for n in ("gcc", "nvhpc", "pgi"))
    source = source_mod.Source("int main(void){return 0;}\n", "a.c", "c", False, 1, Path("."), ".c")
    request = RunRequest(source=source, workdir=Path("."), acc=True, compare_host=True)
    gpu = Toolchain("gcc", "c", CompilerInfo("gcc", "/usr/bin/gcc", "gcc 12"), (), (), "gpu")
    assert gcc.host_comparison(gpu) == "" and nvhpc.host_comparison(gpu) == ""
    assert "PGI" in pgi.host_comparison(gpu)
    on_host = dataclasses.replace(request, run_on_host=True)
    assert gcc.run_env(request, gpu) == {} and gcc.run_env(on_host, gpu) == {"ACC_DEVICE_TYPE": "host"}
    assert nvhpc.run_env(request, gpu) == {} and nvhpc.run_env(on_host, gpu) == {"ACC_DEVICE_TYPE": "HOST"}
    probe = Probe("nvhpc", (), (), True)
    nvc = CompilerInfo("nvc", "/opt/nvc", "nvc 24.1")
    assert nvhpc.openacc(request, nvc, probe, Settings()).flags[0] == "-acc=gpu,host"
    plain = dataclasses.replace(request, compare_host=False)
    assert nvhpc.openacc(plain, nvc, probe, Settings()).flags[0] == "-acc"


# ---------------------------------------------------------------------------------------------
# On the GPU machine: source .gpu/activate.sh && python3 -m pytest -m gpu tests/test_host_compare.py


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no GPU on this machine")
def test_a_racy_histogram_is_caught_on_the_gpu(tmp_path: Path) -> None:
    """atomic_histogram graded on a GPU: the solution agrees with the host; the same program
    without its `acc atomic` loses updates on the GPU only, which agrees_with_host fails (as do
    the value checks: the bins were known here; agrees_with_host needs no expected value)."""
    solution = (ROOT / "examples" / "C" / "atomic_histogram_solution.c").read_text()
    racy = solution.replace("#pragma acc atomic update\n", "")
    assert racy != solution
    (tmp_path / "sol.c").write_text(solution)
    (tmp_path / "racy.c").write_text(racy)
    fortran = (ROOT / "examples" / "Fortran" / "atomic_histogram_solution.f90").read_text()
    (tmp_path / "racyf.f90").write_text(fortran.replace("!$acc atomic update\n", ""))
    report = tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ROOT / "examples"))
    done = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "atomic_histogram",
                           str(tmp_path / "sol.c"), str(tmp_path / "racy.c"),
                           str(tmp_path / "racyf.f90"), "--report", str(report), "-j", "3"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert report.is_file(), done.stdout + done.stderr
    rows = {r["student"]: r for r in json.loads(report.read_text())}
    compared = {name: next(c for c in row["checks"] if c["name"] == "bin (GPU as host)")
                for name, row in rows.items()}
    print(json.dumps(compared, indent=1))
    assert rows["sol"]["verdict"] == "pass", rows["sol"]
    assert compared["sol"]["status"] == "pass"
    for name in ("racy", "racyf"):
        assert rows[name]["verdict"] == "fail", rows[name]
        assert compared[name]["status"] == "fail", compared[name]
        assert "on the GPU" in compared[name]["reason"] and "on the host" in compared[name]["reason"]
