"""A run beside the solution's (issue 26.5): the figures of the trace and of the compiler's
report side by side, in the notebook's verdict and in the students' feedback, with the two
timelines. No GPU here: recorded traces stand for the runs' (tests/data: the async matrix
product recorded on an H200, and its synthetic twin that copies A and B from the host), fed
where the pipeline's profile comes from; the Jacobi shapes of test_profile_views stand for
data_laplace's start file and solution; -Minfo as nvc prints it."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from idrrun import checking, pipeline, toolchains
from idrrun.checks import compare, specs
from idrrun.display import VerdictView
from idrrun.grading import comparison as comparison_mod
from idrrun.grading import feedback as feedback_mod
from idrrun.grading import report as report_mod
from idrrun.grading import rows as rows_mod
from idrrun.grading import state as state_mod
from idrrun.grading.discover import Submission
from idrrun.model import Comparison, Figure, Verdict
from idrrun.pipeline import Outcome
from idrrun.profile.model import ProfilePlan
from idrrun.profile.stages import TRACE_FILE, collect
from idrrun.profile.tracefile import read_trace
from idrrun.request import config, options, resolve
from idrrun.request import source as source_mod
from idrrun.toolchains.minfo import from_nvhpc_minfo
from test_profile_views import jacobi_exercise, jacobi_solution

DATA = ROOT / "tests" / "data"
EXAMPLES = ROOT / "examples"
ON_H200 = DATA / "async_trace_h200.jsonl"  # the solution: A, B, C made on the device
FROM_HOST = DATA / "async_trace_synthetic.jsonl"  # A and B made on the host, copied in


def exercise(name: str) -> specs.Exercise:
    return specs.load(EXAMPLES / f"{name}.toml")


def rows(comparison: Comparison | None) -> dict[str, tuple[str, str]]:
    assert comparison is not None
    return {f.label: (f.yours, f.solution) for f in comparison.figures}


def test_recorded_traces_side_by_side() -> None:
    async_matmul = exercise("async_matmul")
    yours = compare.figures(async_matmul, read_trace(FROM_HOST), True, None, "C[0] = 42\n")
    solution = compare.figures(async_matmul, read_trace(ON_H200), True, None, "C[0] = 42\n")
    table = rows(compare.compare(async_matmul, yours, solution))
    # No iteration count in this exercise: totals. The trace has each copy's size and
    # direction, not its array: A and B's two 32 MB copies in are the difference.
    assert table["data moved"] == ("96 MB (host → device 64 MB, device → host 32 MB)",
                                   "32 MB (host → device 144 B, device → host 32 MB)")
    assert table["host → device copies of 32 MB"] == ("2", "none")
    assert table["device → host copies of 32 MB"] == ("1", "1")
    # Four sizes one by one, the most bytes first; the runtime's small copies in one row.
    assert table["host → device copies of 24 B"] == ("none", "3")
    assert table["other copies (smaller)"] == ("none", "7 copies")
    assert table["kernel launches"] == ("4 (2 kernels)", "4 (2 kernels)")
    assert table["queues with work"] == ("4", "4")
    assert table["GPU busy"] == ("99 %", "93 %")
    # The figures survive the solution's cache.
    assert compare.RunFigures.from_dict(json.loads(json.dumps(solution.as_dict()))) == solution


NVC_EXERCISE = """\
main:
     52, Generating implicit copy(A[:][:],Anew[:][:]) [if not already present]
         Generating implicit copy(error) [if not already present]
         Generating NVIDIA GPU code
     61, Generating implicit copyin(Anew[:][:]) [if not already present]
         Generating implicit copy(A[:][:]) [if not already present]
         Generating NVIDIA GPU code
"""
NVC_SOLUTION = """\
main:
     51, Generating copy(A[:n][:]) [if not already present]
         Generating create(Anew[:n][:]) [if not already present]
     55, Generating present(A[:n][:],Anew[:n][:])
         Generating implicit copy(error) [if not already present]
         Generating NVIDIA GPU code
     64, Generating present(A[:n][:],Anew[:n][:])
         Generating NVIDIA GPU code
"""


def test_per_iteration_and_each_array_of_nvhpc_minfo() -> None:
    laplace = exercise("data_laplace")
    yours = compare.figures(laplace, jacobi_exercise(20), True, from_nvhpc_minfo(NVC_EXERCISE),
                            "iterations = 20\nerror = 1\n")
    solution = compare.figures(laplace, jacobi_solution(1000), True, from_nvhpc_minfo(NVC_SOLUTION),
                               "iterations = 1000\nerror = 1\n")
    found = compare.compare(laplace, yours, solution)
    table = rows(found)
    assert table["data moved per iteration"] == (
        "1.07 GB (host → device 537 MB, device → host 537 MB)",
        "269 kB (host → device 134 kB, device → host 134 kB)")
    assert table["host → device copies of 134 MB"] == ("4 per iteration", "1 in all")
    assert table["device → host copies of 134 MB"] == ("4 per iteration", "1 in all")
    assert table["kernel launches"] == ("2 per iteration (2 kernels)", "2 per iteration (2 kernels)")
    # From the compiler: which arrays each construct moves, on its own lines.
    assert table["arrays moved implicitly"] == ("A, Anew", "none")
    assert table["array A"] == ("implicit copy (lines 52, 61)", "copy (line 51); present (lines 55, 64)")
    assert table["array Anew"] == ("implicit copy (line 52); implicit copyin (line 61)",
                                   "create (line 51); present (lines 55, 64)")
    assert found is not None and any("not the array it moved" in n for n in found.notes)
    # Without a trace on either side (no GPU, no --profile), the compiler's figures alone.
    host = compare.compare(laplace, dataclasses.replace(yours, traced=False), solution)
    assert "GPU busy" not in rows(host) and "array A" in rows(host)


# ---------------------------------------------------------------------------------------------
# Through execute_checked: the solution profiled once, its figures and timeline cached


class RecordedProfiles:
    """pipeline.execute as it is, but each profiled run's profile read from a recorded trace
    (the student's or the solution's), drawn and summed up as collect() does for the built-in
    tracer's file; counts the solution's runs."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp
        self.solution_runs: list[tuple[str, ...]] = []
        self.real = pipeline.execute
        monkeypatch.setattr(pipeline, "execute", self)

    def __call__(self, job: Any, *args: Any, **kwargs: Any) -> Outcome:
        outcome = self.real(job, *args, **kwargs)
        request = job.request
        if request.profile is None:
            return outcome
        solution = "solution" in request.source.name
        if solution:
            self.solution_runs.append(request.program_args)
        folder = self.tmp / f"profile-{len(list(self.tmp.glob('profile-*')))}"
        folder.mkdir()
        shutil.copyfile(ON_H200 if solution else FROM_HOST, folder / TRACE_FILE)
        plan = ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=folder,
                           output=folder / TRACE_FILE)
        return dataclasses.replace(outcome, profile=collect(plan))


def checked(student: Path, settings: config.Settings, probe: Any) -> Outcome:
    ex = specs.find("async_matmul", settings, None)
    src = source_mod.from_file(student, "c", student.name)
    opts = options.parse_line("-a --profiler builtin --check async_matmul")
    assert opts is not None
    request, toolchain = resolve.resolve(opts, src, student.parent, settings, probe, ex)
    # The recorded traces stand for a GPU's: the checks read a trace of a GPU build only.
    toolchain = dataclasses.replace(toolchain, target="gpu")
    return checking.execute_checked(pipeline.prepare(request, toolchain, probe, settings), ex)


def test_the_solution_is_profiled_once_and_both_timelines_reach_the_feedback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IDRRUN_EXAMPLES", str(EXAMPLES))
    monkeypatch.setenv("IDRRUN_OFFLOAD", "host")
    # A cache of its own: the solution's cached run (another test's) would not be profiled here
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    recorded = RecordedProfiles(tmp_path, monkeypatch)
    settings = config.load(tmp_path)
    probe = toolchains.probe(settings)
    outcomes = {}
    for name, source in (("ann", "C/async_matmul_exercise.c"), ("bob", "C/async_matmul_solution.c")):
        (tmp_path / name).mkdir()
        shutil.copyfile(EXAMPLES / source, tmp_path / name / f"{name}.c")
        outcomes[name] = checked(tmp_path / name / f"{name}.c", settings, probe)
    # Profiled once for both students (and cached with its output, its figures, its timeline).
    assert recorded.solution_runs == [("200",)]
    cached = {p.name.split("-", 1)[1] for p in (settings.cache_dir / "solutions").iterdir()}
    assert {name.split(".", 1)[1] for name in cached} >= {"out", "figures.json", "timeline.png"}
    ann = outcomes["ann"].verdict
    assert ann is not None and ann.comparison is not None
    assert rows(ann.comparison)["host → device copies of 32 MB"] == ("2", "none")
    assert ann.comparison.timeline is not None and ann.comparison.timeline.is_file()
    assert ann.comparison.solution_timeline is not None and ann.comparison.solution_timeline.is_file()
    # The notebook's verdict: the same table, and the two timelines one above the other.
    text = str(VerdictView(ann))
    assert "your run beside the solution's" in text and "host → device copies of 32 MB" in text
    page = VerdictView(ann)._repr_html_()
    assert page.count("data:image/png;base64,") == 2
    assert page.index("your GPU timeline") < page.index("the solution&#x27;s GPU timeline")
    # The feedback: the table "you / the solution", the two PNGs beside the file, linked.
    sub = Submission("ann", tmp_path / "ann" / "ann.c", None)
    row = rows_mod.row_from_outcome(sub, specs.find("async_matmul", settings, None),
                                    outcomes["ann"], "none (--unsafe)",
                                    state_mod.content_key(sub, specs.find("async_matmul", settings, None),
                                                          "policy"))
    row = dataclasses.replace(row, comparison=comparison_mod.kept(row.comparison, settings))
    feedback = tmp_path / "feedback"
    feedback_mod.write_feedback([row], specs.find("async_matmul", settings, None), feedback)
    md = (feedback / "ann.md").read_text()
    assert "| | you | the solution |" in md
    assert "| host → device copies of 32 MB | 2 | none |" in md
    assert "[![your GPU timeline](ann.timeline.png)](ann.timeline.png)" in md
    assert md.index("ann.timeline.png") < md.index("ann.solution-timeline.png")
    assert (feedback / "ann.timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert (feedback / "ann.solution-timeline.png").read_bytes() == \
        ann.comparison.solution_timeline.read_bytes()
    # The instructor's state keeps the comparison: a resumed row's feedback has the table.
    key = b"k" * 32
    report_mod.write_report([row], tmp_path / "r.json", key)
    again = state_mod.load_report(tmp_path / "r.json", "async_matmul", key)[str(sub.path)]
    assert again.comparison == row.comparison


def test_feedback_of_a_row_without_its_timelines_says_so(tmp_path: Path) -> None:
    figures = (Figure("queues with work", "1", "3", "trace"),)
    gone = Comparison(figures, ("a note",), tmp_path / "gone.png", tmp_path / "gone-too.png")
    row = rows_mod.GradeRow("cy|d", "async_matmul", "c", "fail", 0.1, 0.1, "/c.c", comparison=gone)
    feedback_mod.write_feedback([row], exercise("async_matmul"), tmp_path / "fb")
    (md,) = (tmp_path / "fb").iterdir()
    text = md.read_text()
    assert "| queues with work | 1 | 3 |" in text and comparison_mod.NOT_KEPT in text
    assert sorted(p.suffix for p in (tmp_path / "fb").iterdir()) == [".md"]
    # No comparison, no section.
    plain = dataclasses.replace(row, comparison=None)
    assert comparison_mod.HEADING not in feedback_mod.feedback_markdown(plain, exercise("async_matmul"))
    assert "your run beside" not in str(VerdictView(Verdict("async_matmul", ())))
