"""run/lanes.py: timed runs alone on their GPU and on CPUs of their own, the other graded runs
shared beside them, across threads and processes. No GPU here: the lanes' GPUs are injected
(CUDA_VISIBLE_DEVICES names), a program prints what its run was given, and the timed check is
a real gpu_busy check (incomplete on a host: its runs are timed all the same)."""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import PYTHONPATH, ROOT, has_gpu
from idrrun import checking, toolchains
from idrrun.checks import specs
from idrrun.grading import grader
from idrrun.grading.discover import Submission
from idrrun.grading.session import Session
from idrrun.model import Lanes, Limits, Settings
from idrrun.request import config
from idrrun.request import source as source_mod
from idrrun.run import boundary, isolation, lanes


# ---------------------------------------------------------------------------------------------
# Which CPUs, which GPUs: pure


@pytest.mark.parametrize("cpus, count, cores, rest", [
    (range(16), 1, ((12, 13, 14, 15),), tuple(range(12))),         # an H100 machine, one GPU
    (range(2), 1, ((1,),), (0,)),                                  # the development machine
    (range(2), 2, ((0, 1), (0, 1)), (0, 1)),                       # too small to keep CPUs apart
    (range(3), 2, ((1,), (2,)), (0,)),
    (range(8), 2, ((4, 5), (6, 7)), (0, 1, 2, 3)),                 # at most half the machine
    (range(128), 8, tuple(tuple(range(96 + 4 * i, 100 + 4 * i)) for i in range(8)), tuple(range(96))),
    ((7, 3, 5, 1), 1, ((5, 7),), (1, 3)),                          # the CPUs this process may use
    (range(4), 0, (), (0, 1, 2, 3)),
])
def test_each_lane_keeps_cpus_of_its_own(cpus: range | tuple[int, ...], count: int,
                                         cores: tuple[tuple[int, ...], ...],
                                         rest: tuple[int, ...]) -> None:
    assert lanes.split_cpus(list(cpus), count) == (cores, rest)


def test_the_gpus_a_grader_gives_out() -> None:
    assert lanes.visible(2, {}) == ("0", "1")
    assert lanes.visible(8, {"CUDA_VISIBLE_DEVICES": "2,3"}) == ("2", "3")
    assert lanes.visible(8, {"CUDA_VISIBLE_DEVICES": "GPU-1a2b, MIG-3c"}) == ("GPU-1a2b", "MIG-3c")
    assert lanes.visible(8, {"CUDA_VISIBLE_DEVICES": "1,-1,2"}) == ("1",)  # CUDA stops at -1
    assert lanes.visible(8, {"CUDA_VISIBLE_DEVICES": ""}) == ()
    assert lanes.cpu_list((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"


def test_no_lanes_without_a_gpu_or_under_srun(tmp_path: Path) -> None:
    settings = Settings(cache_dir=tmp_path)
    assert lanes.for_machine(0, settings, {}) == (None, [])
    assert lanes.for_machine(2, settings, {"CUDA_VISIBLE_DEVICES": ""}) == (None, [])
    srun = Settings(cache_dir=tmp_path, launcher=config.LauncherConfig(kind="srun"))
    assert lanes.for_machine(2, srun, {})[0] is None
    found, notes = lanes.for_machine(2, settings, {})
    assert found is not None and found.gpus == ("0", "1") and "GPU lanes: GPU 0: CPUs" in notes[-1]
    boundary.check_own(found.folder)


# ---------------------------------------------------------------------------------------------
# The holds: threads of one grading


def _lanes(tmp_path: Path, *gpus: str) -> Lanes:
    return lanes.layout(gpus, [0, 1], boundary.own_dir(tmp_path / "lanes", 0o700))


def test_a_timed_run_waits_for_its_gpu_then_holds_it_alone(tmp_path: Path) -> None:
    plan = _lanes(tmp_path, "0")
    events: list[str] = []
    timed_in = threading.Event()

    def timed() -> None:
        with lanes.hold(plan, True) as held:
            assert held is not None and held.alone and held.cpus == (1,) and held.gpus == ("0",)
            assert held.env == {"CUDA_VISIBLE_DEVICES": "0"}
            assert held.limits(Limits()).cpus == (1,)
            assert held.describe() == "GPU 0 alone, CPUs 1"
            events.append("timed in")
            timed_in.set()
            time.sleep(0.3)
            events.append("timed out")

    def late_shared() -> None:
        with lanes.hold(plan, False) as held:
            assert held is not None and not held.alone and held.cpus == (0,)
            assert held.describe() == "GPU 0"
            events.append("late in")

    with lanes.hold(plan, False) as first, lanes.hold(plan, False) as second:
        assert first is not None and second is not None  # shared runs share the GPU
        waiting = threading.Thread(target=timed)
        waiting.start()
        time.sleep(0.2)
        assert events == []  # the timed run waits for both to leave the GPU
        # A shared run that comes while the timed one waits goes behind it (the gate).
        behind = threading.Thread(target=late_shared)
        behind.start()
        time.sleep(0.2)
        assert events == []
    waiting.join(5)
    behind.join(5)
    assert events == ["timed in", "timed out", "late in"]


def test_runs_spread_over_the_lanes_and_wait_only_when_all_are_held(tmp_path: Path) -> None:
    plan = _lanes(tmp_path, "3", "5")
    seen = []
    for _ in range(4):
        with lanes.hold(plan, False) as held:
            assert held is not None
            seen.append(held.gpus)
    assert {("3",), ("5",)} == set(seen)
    # One timed run on each GPU at once: two lanes, no wait.
    with lanes.hold(plan, True) as a, lanes.hold(plan, True) as b:
        assert a is not None and b is not None and {a.gpus, b.gpus} == {("3",), ("5",)}
    # A run of several ranks shares every GPU.
    with lanes.hold(plan, False, every=True) as all_gpus:
        assert all_gpus is not None and all_gpus.env == {"CUDA_VISIBLE_DEVICES": "3,5"}
    with lanes.hold(None, True) as nothing:
        assert nothing is None


# ---------------------------------------------------------------------------------------------
# Gradings in lanes: real compiles and runs, the GPUs injected

PROBE_C = r"""
#define _GNU_SOURCE
#include <openacc.h> /* a program that may use the GPU (directives.reaches_gpu), as a port does */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* LOG TAG MS: sleeps MS milliseconds, then appends to LOG: TAG start end GPU CPUS */
int main(int argc, char **argv)
{
    double start = now();
    long ms = argc > 3 ? atol(argv[3]) : 300;
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    double end = now();
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    char cpus[512] = "";
    for (int c = 0; c < 256; c++)
        if (CPU_ISSET(c, &set))
            snprintf(cpus + strlen(cpus), sizeof cpus - strlen(cpus), "%s%d", cpus[0] ? "," : "", c);
    const char *gpu = getenv("CUDA_VISIBLE_DEVICES");
    FILE *log = fopen(argv[1], "a");
    fprintf(log, "%s %.6f %.6f %s %s\n", argv[2], start, end, gpu ? (*gpu ? gpu : "hidden") : "-", cpus);
    fclose(log);
    printf("done\n");
    return 0;
}
"""

SPEC = """
name = "{name}"
[sources.c]
exercise = "probe.c"
solution = "probe.c"
[args]
host = ["{log}", "{name}", "{ms}"]
[[check]]
kind = "exit_ok"
{timed}
"""
TIMED = '[[check]]\nkind = "gpu_busy"\nmin = 0.5\n'


def course(folder: Path, log: Path) -> Path:
    """examples/ with lane_timed (a timed check) and lane_plain (none), one program."""
    examples = folder / "examples"
    examples.mkdir(parents=True)
    (examples / "probe.c").write_text(PROBE_C)
    (examples / "lane_timed.toml").write_text(SPEC.format(name="lane_timed", log=log, ms=300,
                                                          timed=TIMED))
    (examples / "lane_plain.toml").write_text(SPEC.format(name="lane_plain", log=log, ms=800,
                                                          timed=""))
    return examples


def submissions(folder: Path, count: int) -> list[Submission]:
    folder.mkdir(parents=True, exist_ok=True)
    subs = []
    for i in range(count):
        path = folder / f"s{i}.c"
        path.write_text(f"/* {i} */\n{PROBE_C}")
        subs.append(Submission(f"s{i}", path, source_mod.from_file(path, "c", path.name)))
    return subs


GRADE = """
import json, sys
from pathlib import Path
from idrrun import toolchains
from idrrun.checks import specs
from idrrun.grading import grader
from idrrun.grading.discover import Submission
from idrrun.grading.session import Session
from idrrun.request import config, source
from idrrun.run import boundary, isolation, lanes

examples, name, subs, lock, cpus, gpus = sys.argv[1:7]
folder = Path(subs)
settings = config.load(folder, environ={})
probe = toolchains.probe(settings, "gcc")
plan = lanes.layout(gpus.split(","), [int(c) for c in cpus.split(",")], boundary.own_dir(Path(lock), 0o700))
exercise = specs.load(Path(examples) / f"{name}.toml")
todo = [Submission(p.stem, p, source.from_file(p, "c", p.name)) for p in sorted(folder.glob("*.c"))]
rows = grader.grade_all(Session(settings, probe, "none (test)", plan, jobs=2), exercise, todo)
print(json.dumps([[r.student, r.status, r.lane, r.reasons] for r in rows]))
"""


def read_log(log: Path) -> list[tuple[str, float, float, str, str]]:
    out = []
    for line in log.read_text().splitlines():
        tag, start, end, gpu, cpus = line.split()
        out.append((tag, float(start), float(end), gpu, cpus))
    return out


def overlap(a: tuple[str, float, float, str, str], b: tuple[str, float, float, str, str]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_two_gradings_at_once_share_a_lane(tmp_path: Path) -> None:
    """Two processes grade at once on one (fake) GPU: one an exercise with a timed check, the
    other one without. No run of either overlaps a timed run; the timed runs had the lane's
    CPU, every other run the rest; each row says its lane."""
    log = tmp_path / "runs.log"
    examples = course(tmp_path, log)
    lock = tmp_path / "lanes"
    for name in ("lane_timed", "lane_plain"):
        submissions(tmp_path / name, 3)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    started = [subprocess.Popen([sys.executable, "-c", GRADE, str(examples), name,
                                 str(tmp_path / name), str(lock), "0,1", "0"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("lane_timed", "lane_plain")]
    results = []
    for p in started:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    timed_rows, plain_rows = results
    assert {r[2] for r in timed_rows} == {"GPU 0 alone, CPUs 1"}, timed_rows
    assert {r[2] for r in plain_rows} == {"GPU 0"}, plain_rows
    assert {r[1] for r in timed_rows} == {"incomplete"}  # gpu_busy needs a GPU trace here
    assert {r[1] for r in plain_rows} == {"pass"}
    runs = read_log(log)
    # The students' runs of the timed exercise, on the lane's CPU; its solution's run (once,
    # its figures compared with the students': untimed) shares the others.
    timed = [r for r in runs if r[0] == "lane_timed" and r[4] == "1"]
    solution = [r for r in runs if r[0] == "lane_timed" and r[4] != "1"]
    plain = [r for r in runs if r[0] == "lane_plain"]
    assert len(timed) == 3 and len(plain) == 3 and len(solution) <= 1, runs
    assert {(r[3], r[4]) for r in timed} == {("0", "1")}
    assert {(r[3], r[4]) for r in solution} <= {("0", "0")}
    assert {(r[3], r[4]) for r in plain} == {("0", "0")}
    for t in timed:
        assert not [r for r in runs if r is not t and overlap(t, r)], (t, runs)


def test_ordinary_runs_share_their_gpu(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    examples = course(tmp_path, log)
    settings = config.load(tmp_path, environ={})
    probe = toolchains.probe(settings, "gcc")
    plan = _lanes(tmp_path, "0")
    rows = grader.grade_all(Session(settings, probe, "none (test)", plan, jobs=2),
                               specs.load(examples / "lane_plain.toml"),
                               submissions(tmp_path / "class", 4))
    assert {r.status for r in rows} == {"pass"} and {r.lane for r in rows} == {"GPU 0"}
    runs = read_log(log)
    assert any(overlap(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]), runs


def test_a_lane_per_gpu(tmp_path: Path) -> None:
    """Two fake GPUs: the runs of a grading spread over them, each run sees its lane's GPU
    only (CUDA_VISIBLE_DEVICES, as the program prints it), a timed run holds its GPU alone."""
    log = tmp_path / "runs.log"
    examples = course(tmp_path, log)
    settings = config.load(tmp_path, environ={})
    probe = toolchains.probe(settings, "gcc")
    plan = _lanes(tmp_path, "3", "5")
    for name in ("lane_plain", "lane_timed"):
        rows = grader.grade_all(Session(settings, probe, "none (test)", plan, jobs=2),
                                   specs.load(examples / f"{name}.toml"),
                                   submissions(tmp_path / name, 4))
        shown = {r.lane for r in rows}
        assert shown == ({"GPU 3", "GPU 5"} if name == "lane_plain" else
                         {"GPU 3 alone, CPUs 0-1", "GPU 5 alone, CPUs 0-1"}), rows
    runs = read_log(log)
    assert {r[3] for r in runs if r[0] == "lane_plain"} == {"3", "5"}
    timed = [r for r in runs if r[0] == "lane_timed"]
    assert {r[3] for r in timed} == {"3", "5"}
    for t in timed:
        assert not [r for r in timed if r is not t and r[3] == t[3] and overlap(t, r)], timed


# ---------------------------------------------------------------------------------------------
# On the GPU machine: source .gpu/activate.sh && python3 -m pytest -m gpu tests/test_lanes.py


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no GPU on this machine")
def test_a_timed_check_on_the_gpu_runs_alone_and_is_measured(tmp_path: Path) -> None:
    """profile_cg graded on the GPU: its solution's run holds GPU 0 alone on the lane's CPUs,
    and its gpu_busy figure is the median of several runs, shown with their spread."""
    (tmp_path / "sol.c").write_text((ROOT / "examples" / "C" / "profile_cg_solution.c").read_text())
    (tmp_path / "start.c").write_text((ROOT / "examples" / "C" / "profile_cg_exercise.c").read_text())
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ROOT / "examples"))
    done = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "profile_cg",
                           str(tmp_path / "sol.c"), str(tmp_path / "start.c"), "-j", "2", "--json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    rows = {r["student"]: r for r in json.loads(done.stdout)["rows"]}
    print(json.dumps(rows, indent=1))
    assert rows["sol"]["verdict"] == "pass" and rows["start"]["verdict"] == "fail"
    for row in rows.values():
        assert re.fullmatch(r"GPU \S+ alone, CPUs [0-9,-]+", row["lane"]), row["lane"]
    [busy] = [c for c in rows["sol"]["checks"] if c["name"] == "GPU busy"]
    assert re.fullmatch(r"\d+ % \(median of [3-7] runs: \d+–\d+ %\)", busy["got"]), busy
    [idle] = [c for c in rows["start"]["checks"] if c["name"] == "GPU busy"]
    assert idle["got"] == "0 %"  # nothing ran on the GPU: one run says it


# ---------------------------------------------------------------------------------------------
# What the timed runs hold: the program's run only, counted per GPU (issue 49)


def test_timed_holds_are_counted_per_gpu(tmp_path: Path) -> None:
    """Only a run alone on its GPU counts, on its GPU; a grading reads what it added."""
    plan = _lanes(tmp_path, "3", "5")
    before, started = lanes.held_alone(plan), time.monotonic()
    assert before == {"3": 0.0, "5": 0.0}
    with lanes.hold(plan, True) as held:
        assert held is not None
        time.sleep(0.2)
    with lanes.hold(plan, False):
        time.sleep(0.2)  # shared: not counted
    use = lanes.use_since(plan, before, started)
    assert use is not None and use.wall >= 0.4
    [(gpu, seconds)] = [(g, s) for g, s in use.held.items() if s > 0]
    assert gpu == held.gpus[0] and 0.2 <= seconds < use.wall - 0.15, use
    said = use.describe()
    assert said.startswith("GPUs held alone by the timed runs: GPU 3 ") and \
        f"GPU {gpu} 0.2 s (" in said and said.endswith(f"of the {use.wall:.1f} s of grading"), said
    assert use.as_dict()["wall_seconds"] == round(use.wall, 3)
    assert lanes.use_since(None, {}, started) is None


def test_a_timed_lane_is_held_for_the_programs_run_only(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Of the ladder's rungs, only the run itself happens while a timed run holds its GPU
    alone: its plan (launch, box, libraries placed) before, its reading after."""
    from idrrun import pipeline

    log = tmp_path / "runs.log"
    examples = course(tmp_path, log)
    inside: list[bool] = [False]
    seen: list[tuple[str, bool]] = []
    hold = lanes.hold

    @contextlib.contextmanager
    def watched(plan: Lanes | None, timed: bool, every: bool = False) -> Iterator[lanes.Held | None]:
        with hold(plan, timed, every) as held:
            inside[0] = timed
            try:
                yield held
            finally:
                inside[0] = False

    def noting(rung: pipeline.Rung) -> pipeline.Rung:
        def step(job: pipeline.Job, run: pipeline.Run) -> pipeline.Run | pipeline.Outcome:
            seen.append((rung.name, inside[0]))
            return rung.step(job, run)
        return pipeline.Rung(rung.name, step)

    monkeypatch.setattr(lanes, "hold", watched)
    monkeypatch.setattr(pipeline, "LADDER", tuple(noting(r) if isinstance(r, pipeline.Rung) else r
                                                  for r in pipeline.LADDER))
    settings = config.load(tmp_path, environ={})
    rows = grader.grade_all(Session(settings, toolchains.probe(settings, "gcc"), "none (test)",
                                    _lanes(tmp_path, "0"), jobs=1),
                            specs.load(examples / "lane_timed.toml"), submissions(tmp_path / "c", 1))
    assert rows[0].lane == "GPU 0 alone, CPUs 1", rows
    held = {name for name, alone in seen if alone}
    assert held == {"run"}, seen
    assert {"plan the run", "after the run", "collect"} <= {name for name, _ in seen}


GPU_SMI = """#!/bin/sh
# A fake nvidia-smi (no GPU here): one GPU, as `--query-gpu=name,compute_cap,driver_version`.
echo "NVIDIA H200, 9.0, 580.159.04"
"""


def test_the_grading_says_how_long_its_timed_runs_held_the_gpu_with_a_fake_nvidia_smi(
        tmp_path: Path) -> None:
    """`idrrun grade` on a machine whose nvidia-smi lists a GPU (a fake; the builds for the
    host): its summary line and its --json say each GPU's seconds held alone by the timed
    runs, against the grading's wall time."""
    log = tmp_path / "runs.log"
    examples = course(tmp_path, log)
    subs = [str(s.path) for s in submissions(tmp_path / "class", 2)]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(GPU_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(examples),
               IDRRUN_OFFLOAD="host", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               XDG_CACHE_HOME=str(tmp_path / "cache"), COLUMNS="300")
    done = subprocess.run([sys.executable, "-m", "idrrun", "grade", "lane_timed", *subs, "-j", "2",
                           "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    use = json.loads(done.stdout)["lanes"]
    [(gpu, held)] = use["held_alone_seconds"].items()
    # Two timed runs of 300 ms each, alone on GPU 0; the grading's compiles beside them.
    assert gpu == "0" and 0.6 <= held < use["wall_seconds"], use
    shown = subprocess.run([sys.executable, "-m", "idrrun", "grade", "lane_timed", *subs],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert re.search(r"errors?; GPUs held alone by the timed runs: GPU 0 \d+\.\d s \(\d+ %\) of "
                     r"the \d+\.\d s of grading", shown.stdout), shown.stdout


# ---------------------------------------------------------------------------------------------
# Identical work measured once (checking.work_key, relative.Shared): issue 49

RELATIVE = '[[check]]\nkind = "gpu_busy"\nlabel = "GPU busy"\nmin_ratio = 0.7\npoints = 2\n'


def _graded_with_faked_traces(folder: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str],
                              jobs: int, timed: str = RELATIVE) -> tuple[dict[str, Any], dict[str, int]]:
    """A class graded in a (fake) lane, each run's GPU trace faked (no GPU here): the solution
    busy 55 %, the students' runs in turn 50, 30, 52, 53, 51 % (the first two straddle 0.7 of
    the solution's: more runs). Returns the rows by student and how many runs each made."""
    folder.mkdir()
    (folder / "probe.c").write_text(PROBE_C)
    (folder / "same_work.toml").write_text(SPEC.format(name="same_work", log=folder / "runs.log",
                                                       ms=0, timed=timed))
    feed = itertools.cycle((0.50, 0.30, 0.52, 0.53, 0.51))
    seen: dict[int, dict[str, float]] = {}
    alive: list[object] = []
    made: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()

    def fake_trace(toolchain: object, outcome: Any) -> dict[str, float]:
        with lock:
            if id(outcome) not in seen:
                alive.append(outcome)
                name = Path(outcome.request.source.name).stem
                made[name] += 1
                busy = 0.55 if name == "probe" else next(feed)
                seen[id(outcome)] = {"gpu_busy": busy, "kernels": 4.0, "bytes_moved": 1e3}
            return seen[id(outcome)]

    monkeypatch.setattr(checking, "gpu_trace_values", fake_trace)
    subs = []
    for name, text in files.items():
        (folder / name).write_text(text)
        subs.append(Submission(Path(name).stem, folder / name,
                               source_mod.from_file(folder / name, "c", name)))
    settings = config.load(folder, environ={})
    rows = grader.grade_all(Session(settings, toolchains.probe(settings, "gcc"), "none (test)",
                                    _lanes(folder, "0"), jobs=jobs),
                            specs.load(folder / "same_work.toml"), subs)
    return {r.student: r for r in rows}, dict(made)


def _busy(row: Any) -> tuple[str, str, str]:
    [check] = [c for c in row.checks if c.name == "GPU busy"]
    return check.status, check.got, check.reason


def test_identical_builds_share_their_timed_figures_with_faked_gpu_traces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three renamed copies and one other program: the first copy is measured (its runs
    straddle the bound at first: several), the two others take its figures and its times
    without a run of their own beyond the graded one, which then shares the GPU (nothing
    left to measure alone); the other program is measured on its own runs."""
    files = {"ann.c": PROBE_C, "bob.c": PROBE_C, "cid.c": PROBE_C, "dan.c": "/* mine */\n" + PROBE_C}
    rows, made = _graded_with_faked_traces(tmp_path / "j1", monkeypatch, files, jobs=1)
    assert made["ann"] >= 3 and made["bob"] == made["cid"] == 1 and made["dan"] >= 3, made
    assert _busy(rows["ann"]) == _busy(rows["bob"]) == _busy(rows["cid"]), rows
    assert _busy(rows["ann"])[0] == "pass" and f"over {made['ann']} runs" in _busy(rows["ann"])[1]
    assert rows["ann"].run_times == rows["bob"].run_times == rows["cid"].run_times
    assert len(rows["ann"].run_times) == made["ann"]
    assert rows["ann"].lane == rows["dan"].lane == "GPU 0 alone, CPUs 1"
    assert rows["bob"].lane == rows["cid"].lane == "GPU 0", rows
    assert {r.score for r in rows.values()} == {rows["ann"].score}
    # At once (-j 3): the copies that come while the first is measured wait for its figures,
    # then run once, sharing the GPU: one of them alone on it, measured; the others one run each
    # (before the turn, each copy that came meanwhile ran its graded run alone).
    rows, made = _graded_with_faked_traces(tmp_path / "j3", monkeypatch,
                                           {k: v for k, v in files.items() if k != "dan.c"}, jobs=3)
    copies = ("ann", "bob", "cid")
    assert sorted(made[s] for s in copies)[:2] == [1, 1] and max(made.values()) >= 3, made
    assert sorted(rows[s].lane for s in copies) == ["GPU 0", "GPU 0", "GPU 0 alone, CPUs 1"], rows
    assert _busy(rows["ann"]) == _busy(rows["bob"]) == _busy(rows["cid"]), rows


# The GPU busy's points count once the program uses OpenACC, which the probe does not.
GATED = ('[[check]]\nkind = "uses_openacc"\nlabel = "the port"\npoints = 1\n'
         + RELATIVE + 'counts_in_part = ["the port"]\n')


def test_a_timed_figure_whose_points_cannot_count_is_not_measured_with_faked_gpu_traces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two programs that fail the check the GPU busy's points count in: each makes its graded
    run only (its first run's figure stands, said so), none held the GPU again to measure a
    figure that could earn nothing; the same programs measured over several runs once their
    points can count."""
    files = {"ann.c": PROBE_C, "dan.c": "/* mine */\n" + PROBE_C}
    rows, made = _graded_with_faked_traces(tmp_path / "gated", monkeypatch, files, jobs=1,
                                           timed=GATED)
    assert made["ann"] == made["dan"] == 1, made
    for row in rows.values():
        status, got, reason = _busy(row)
        assert "not measured further, its points count only once OpenACC compute regions run" \
            in reason and "(one run)" not in got, (status, got, reason)
        assert [i.outcome for i in row.score.items if i.label == "GPU busy"] == ["lost"], row.score
    rows, made = _graded_with_faked_traces(tmp_path / "counted", monkeypatch, files, jobs=1)
    assert made["ann"] >= 3 and made["dan"] >= 3, made


def test_a_program_without_gpu_code_holds_no_gpu_and_never_waits_for_one(tmp_path: Path) -> None:
    """While another grading holds the GPU alone (a timed run), a class of start files (no GPU
    code, nor in the solution this spec runs them beside) is graded to its end: its runs hold
    no GPU, share the other CPUs and see no GPU. A port is graded only once the GPU is free.
    Before, each start file's timed run waited for the GPU and held it alone."""
    log = tmp_path / "runs.log"
    host_only = PROBE_C.replace("#include <openacc.h>", "")
    (tmp_path / "probe.c").write_text(host_only)
    (tmp_path / "lane_timed.toml").write_text(SPEC.format(name="lane_timed", log=log, ms=100,
                                                          timed=TIMED))
    files = {"ann.c": host_only, "bob.c": "/* bob */\n" + host_only, "port.c": PROBE_C}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    settings = config.load(tmp_path, environ={})
    plan = _lanes(tmp_path, "0")
    rows: dict[str, Any] = {}

    def grade(*names: str) -> None:
        subs = [Submission(Path(n).stem, tmp_path / n, source_mod.from_file(tmp_path / n, "c", n))
                for n in names]
        rows.update({r.student: r for r in grader.grade_all(
            Session(settings, toolchains.probe(settings, "gcc"), "none (test)", plan, jobs=2),
            specs.load(tmp_path / "lane_timed.toml"), subs)})

    with lanes.hold(plan, True):
        starts = threading.Thread(target=grade, args=("ann.c", "bob.c"))
        starts.start()
        starts.join(120)
        assert not starts.is_alive(), "a program without GPU code waited for the GPU"
        port = threading.Thread(target=grade, args=("port.c",))
        port.start()
        port.join(1.5)
        assert port.is_alive() and "port" not in rows  # a port waits for the GPU
    port.join(120)
    assert rows["ann"].lane == rows["bob"].lane == lanes.NO_GPU_CODE, rows
    assert rows["port"].lane == "GPU 0 alone, CPUs 1", rows["port"]
    runs = [line.split() for line in log.read_text().splitlines()]
    assert {r[3] for r in runs if r[4] == "0"} == {"hidden"}, runs  # the shared CPUs, no GPU
    assert [r[3] for r in runs if r[3] != "hidden"] == ["0"], runs  # the port's run, on GPU 0


def test_the_work_key_holds_what_decides_a_figure(tmp_path: Path) -> None:
    """A renamed copy is the same work; a data file beside it, or a changed one, is not."""
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, name in ((a, "ann.c"), (b, "bob.c")):
        folder.mkdir()
        (folder / name).write_text(PROBE_C)
    assert checking.files_digest(a, "ann.c") == checking.files_digest(b, "bob.c")
    assert checking.files_digest(a, "ann.c") != checking.files_digest(b, "other.c")
    (b / "input.txt").write_text("1 2 3\n")
    assert checking.files_digest(a, "ann.c") != checking.files_digest(b, "bob.c")
    (a / "input.txt").write_text("1 2 4\n")
    assert checking.files_digest(a, "ann.c") != checking.files_digest(b, "bob.c")


ENV_C = r"""
#include <openacc.h> /* a program that may use the GPU (directives.reaches_gpu) */
#include <stdio.h>
#include <stdlib.h>
int main(void) { const char *g = getenv("CUDA_VISIBLE_DEVICES"); printf("gpu = %s\n", g ? g : "none"); return 0; }
"""
ENV_SPEC = """
name = "lane_env"
[sources.c]
exercise = "env.c"
solution = "env.c"
[args]
host = ["1"]
[[check]]
kind = "value"
pattern = 'gpu = (\\S+)'
expected = 7
abs_tol = 0
""" + TIMED


@pytest.mark.skipif(isolation.sandbox_support().level != "namespaces", reason="no namespaces here")
def test_a_boxed_run_planned_before_its_lane_sees_the_lanes_gpu(tmp_path: Path) -> None:
    """The run is planned before its lane is held: the box it runs in gets the lane's GPU
    (Held.placed), as the program's own environment says."""
    (tmp_path / "env.c").write_text(ENV_C)
    (tmp_path / "lane_env.toml").write_text(ENV_SPEC)
    (tmp_path / "sub.c").write_text(ENV_C)
    tmp_path.chmod(0o755)
    settings = config.load(tmp_path, environ={})
    plan = lanes.layout(["7"], [0, 1], boundary.own_dir(tmp_path / "lanes", 0o700))
    [row] = grader.grade_all(Session(settings, toolchains.probe(settings, "gcc"), "namespaces", plan),
                             specs.load(tmp_path / "lane_env.toml"),
                             [Submission("sub", tmp_path / "sub.c",
                                         source_mod.from_file(tmp_path / "sub.c", "c", "sub.c"))])
    assert row.lane == "GPU 7 alone, CPUs 1"
    [gpu] = [c for c in row.checks if c.name == "gpu"]
    assert (gpu.status, gpu.got) == ("pass", "7"), row.checks


def test_the_box_of_a_program_without_gpu_code_shows_no_gpu(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU machine (the family's GPU context faked: no GPU here) a boxed graded run of a
    program without GPU code is planned with no GPU device in its box, so that what the
    reading of its source missed could only run on the host; a port's box has the GPU."""
    from idrrun import pipeline
    from idrrun.toolchains import gcc

    monkeypatch.setattr(gcc.GccFamily, "gpu_context", lambda self, toolchain: True)
    made: list[tuple[str, bool]] = []
    box = pipeline.sandbox.box

    def spied(kind: str, *args: Any, **kwargs: Any) -> Any:
        if kind == "run":
            made.append((str(kwargs.get("readable", [""])[0]), bool(kwargs.get("gpu"))))
        return box(kind, *args, **kwargs)

    monkeypatch.setattr(pipeline.sandbox, "box", spied)
    host_only = ENV_C.replace("#include <openacc.h>", "")
    (tmp_path / "env.c").write_text(host_only)
    (tmp_path / "lane_env.toml").write_text(ENV_SPEC)
    (tmp_path / "start.c").write_text(host_only)
    (tmp_path / "port.c").write_text(ENV_C)
    tmp_path.chmod(0o755)
    settings = config.load(tmp_path, environ={})
    plan = lanes.layout(["7"], [0, 1], boundary.own_dir(tmp_path / "lanes", 0o700))
    rows = {r.student: r for r in grader.grade_all(
        Session(settings, toolchains.probe(settings, "gcc"), "namespaces", plan),
        specs.load(tmp_path / "lane_env.toml"),
        [Submission(n, tmp_path / f"{n}.c", source_mod.from_file(tmp_path / f"{n}.c", "c", f"{n}.c"))
         for n in ("start", "port")])}
    assert rows["start"].lane == lanes.NO_GPU_CODE and rows["port"].lane == "GPU 7 alone, CPUs 1", rows
    # The solution (no GPU code) and the start file: boxes without the GPU; the port's with it.
    assert sorted(gpu for _, gpu in made) == [False, False, True], made
