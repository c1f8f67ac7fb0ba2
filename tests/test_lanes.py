"""run/lanes.py: timed runs alone on their GPU and on CPUs of their own, the other graded runs
shared beside them, across threads and processes. No GPU here: the lanes' GPUs are injected
(CUDA_VISIBLE_DEVICES names), a program prints what its run was given, and the timed check is
a real gpu_busy check (incomplete on a host: its runs are timed all the same)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT, has_gpu
from idrrun import toolchains
from idrrun.checks import specs
from idrrun.grading import grader
from idrrun.grading.discover import Submission
from idrrun.grading.session import Session
from idrrun.model import Lanes, Limits, Settings
from idrrun.request import config
from idrrun.request import source as source_mod
from idrrun.run import boundary, lanes


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
    fprintf(log, "%s %.6f %.6f %s %s\n", argv[2], start, end, gpu ? gpu : "-", cpus);
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
from idrrun.run import boundary, lanes

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
