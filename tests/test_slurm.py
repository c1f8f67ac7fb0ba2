"""srun against a real SLURM cluster of three nodes started here (tests/slurmcluster.py): notebook
cells over several nodes, grading a class with every build and run a job step, cancellation of
steps on every node after a timeout, an interrupt or a killed grader, and resuming.

The nodes are slurmd daemons of one machine, each with its own /tmp and /dev/shm (where the
machine allows it), and the grader's guard cannot reach their tasks (see slurmcluster.py): a
step that scancel missed would still be alive, and the tests look for it (`live_tasks`).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import PYTHONPATH, CellResult, Kernel, started
import slurmcluster
import answer_course

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster() -> Iterator[slurmcluster.Cluster]:
    missing = slurmcluster.missing_tools()
    if missing:
        pytest.skip(f"SLURM is not installed ({', '.join(missing)}): apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root")
    # Not under /tmp: the nodes have their own.
    folder = Path(tempfile.mkdtemp(prefix="idrrun-slurm-", dir="/var/tmp"))
    c = slurmcluster.start(folder, nodes=3, cpus=2)
    try:
        yield c
    finally:
        left = slurmcluster.stop(c)
        shutil.rmtree(folder, ignore_errors=True)
        assert not left, f"left after the cluster stopped: {left}"


def client_env(cluster: slurmcluster.Cluster, **extra: str) -> dict[str, str]:
    """A client of the cluster: idrrun's cache on the shared file system, as on a real cluster."""
    return dict(cluster.env, PYTHONPATH=PYTHONPATH, XDG_CACHE_HOME=str(cluster.shared / "cache"),
                **extra)


def eventually(check: Callable[[], bool], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def programs(cluster: slurmcluster.Cluster) -> list[str]:
    """The programs running as tasks (a build's compiler is a task too; a graded program runs
    as its box's copy, .idrrun-prog, behind bubblewrap and the guard, which are tasks too)."""
    return [t for t in cluster.live_tasks()
            if len(t.split()) > 1 and t.split()[1].endswith(("/prog", "/.idrrun-prog"))]


def sleeping(cluster: slurmcluster.Cluster, count: int) -> Callable[[], bool]:
    """`count` programs run, and still do half a second later: the students' that sleep, not
    the solution, which is gone in a few milliseconds."""
    return lambda: len(programs(cluster)) == count and not time.sleep(0.5) and len(programs(cluster)) == count


def nothing_left(cluster: slurmcluster.Cluster) -> None:
    assert cluster.steps() == [] and cluster.jobs() == []
    # Cancelled tasks may take a moment to be reaped by their slurmstepd.
    assert eventually(lambda: not cluster.live_tasks(), 5), cluster.live_tasks()


def test_the_cluster_has_three_nodes_that_share_only_the_file_system(
        cluster: slurmcluster.Cluster) -> None:
    r = cluster.run("srun", "--nodes=3", "--ntasks=3", "--label", "sh", "-c",
                    'echo "$SLURMD_NODENAME ${IDRRUN_RUN:-no-marker} $(ls /tmp | wc -l)"')
    assert r.returncode == 0, r.stderr
    lines = sorted(line.split(": ", 1)[1].split() for line in r.stdout.strip().splitlines())
    assert [line[0] for line in lines] == ["n1", "n2", "n3"]
    assert all(line[1] == "no-marker" for line in lines)  # the guard's marker does not reach nodes
    if cluster.private_tmp:
        assert all(line[2] == "0" for line in lines)  # each node's /tmp is its own (and empty)


# ---------------------------------------------------------------------------------------------
# Notebook cells


@pytest.fixture(scope="module")
def srun_kernel(cluster: slurmcluster.Cluster) -> Iterator[Kernel]:
    cwd = cluster.shared / "notebook"
    cwd.mkdir()
    # MPI programs start through PMIx, as on a real cluster; it needs each node's own /tmp.
    mpi = ', "--mpi=pmix"' if cluster.private_tmp else ""
    (cwd / "idrrun.toml").write_text(f'[launcher]\nkind = "srun"\noptions = ["--partition=debug"{mpi}]\n')
    with started(cwd, client_env(cluster)) as k:
        yield k


def test_cell_runs_through_srun_and_streams(srun_kernel: Kernel) -> None:
    cell = ("%%idrrun -m 2\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\nint main(void){\n"
            "  const char *rank = getenv(\"SLURM_PROCID\"), *step = getenv(\"SLURM_STEP_ID\");\n"
            "  printf(\"task %s in step %s\\n\", rank ? rank : \"?\", step ? step : \"?\");\n"
            "  sleep(2);\n  printf(\"task %s done\\n\", rank ? rank : \"?\");\n  return 0;\n}\n")
    r = srun_kernel.run(cell)
    assert r.status == "ok", r.error_text + r.stdout
    assert "task 0 in step" in r.stdout and "task 1 in step" in r.stdout
    assert "task ? " not in r.stdout  # really under SLURM
    first = next(c for c in r.chunks if "in step" in c.text)
    done = next(c for c in r.chunks if "done" in c.text)
    assert done.at - first.at > 1.5, "output must stream through srun"


MPI_CELL = """\
%%idrrun -m 4 -g 1 --nodes 2
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *node = getenv("SLURMD_NODENAME");
    printf("rank %d of %d on %s\\n", rank, size, node ? node : "?");
    fflush(stdout);
    sleep(2);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d done, sum of ranks %d\\n", rank, sum);
    MPI_Finalize();
    return 0;
}
"""


def test_mpi_cell_over_two_nodes(srun_kernel: Kernel, cluster: slurmcluster.Cluster) -> None:
    if not cluster.private_tmp:
        pytest.skip("MPI over the test nodes needs a /tmp per node (mount namespaces, CAP_SYS_ADMIN)")
    r = srun_kernel.run(MPI_CELL)
    assert r.status == "ok", r.error_text + r.stdout
    where = dict(line.split(" on ") for line in r.stdout.splitlines() if " of 4 on " in line)
    assert sorted(where) == ["rank 0 of 4", "rank 1 of 4", "rank 2 of 4", "rank 3 of 4"], r.stdout
    nodes = [where[f"rank {i} of 4"] for i in range(4)]
    # Two nodes, two ranks each, in SLURM's block order; which two is SLURM's choice.
    assert nodes[0] == nodes[1] != nodes[2] == nodes[3] and set(nodes) <= {"n1", "n2", "n3"}
    assert r.stdout.count("sum of ranks 6") == 4
    assert f"ranks 0-1 on {nodes[0]}, 2-3 on {nodes[2]}" in r.stdout  # idrrun's own record
    # No GPU on these nodes: -g 1 is not asked from srun (it would refuse), and the cell says so.
    assert "-g 1: this cluster has no GPUs" in r.stdout
    # Output streams from both nodes while they run.
    first = min(c.at for c in r.chunks if " of 4 on " in c.text)
    done = min(c.at for c in r.chunks if "sum of ranks" in c.text)
    assert done - first > 1.5
    early = "".join(c.text for c in r.chunks if c.at < done)
    assert f"on {nodes[0]}" in early and f"on {nodes[2]}" in early  # from both, before the end


def run_interrupted(kernel: Kernel, cell: str, ready: Callable[[], bool]) -> tuple[CellResult, float]:
    """Run the cell, interrupt the kernel (Ctrl-C) once ready() holds; the result and how long
    the cell took to end after the interrupt."""
    result: list[CellResult] = []
    runner = threading.Thread(target=lambda: result.append(kernel.run(cell, timeout=120)))
    runner.start()
    try:
        assert eventually(ready, 60), "the step did not start"
    finally:
        t0 = time.monotonic()
        kernel.km.interrupt_kernel()
        runner.join(60)
    return result[0], time.monotonic() - t0


def test_interrupt_cancels_the_step_on_every_node(srun_kernel: Kernel, cluster: slurmcluster.Cluster) -> None:
    cell = ("%%idrrun --timeout 120 -m 4 --nodes 2\n#include <stdio.h>\n#include <stdlib.h>\n"
            "#include <unistd.h>\nint main(void){\n  printf(\"rank %s on %s\\n\", getenv(\"SLURM_PROCID\"),"
            " getenv(\"SLURMD_NODENAME\"));\n  fflush(stdout);\n  sleep(300);\n  return 0;\n}\n")
    r, took = run_interrupted(srun_kernel, cell, lambda: len(programs(cluster)) == 4)
    assert r.status == "error" and "interrupted" in r.error_text
    assert r.stdout.count("rank ") >= 1 and "job step cancelled on the cluster" in r.stdout
    assert took < 10
    nothing_left(cluster)
    assert srun_kernel.alive()


def test_timeout_cancels_the_job_step(srun_kernel: Kernel, cluster: slurmcluster.Cluster) -> None:
    cell = ("%%idrrun --timeout 3\n#include <stdio.h>\n#include <unistd.h>\nint main(void){\n"
            "  printf(\"started\\n\");\n  sleep(300);\n  return 0;\n}\n")
    r = srun_kernel.run(cell)
    assert r.status == "error" and "timed out after 3 s" in r.error_text
    assert "started" in r.stdout and "job step cancelled on the cluster" in r.stdout
    nothing_left(cluster)


# ---------------------------------------------------------------------------------------------
# Grading a class


# The classroom's "answer" exercise, and its output against the solution's and a line the
# program writes in a job step
SPEC = answer_course.SPEC + """\
[[check]]
kind = "matches_solution"
pattern = 'C\\[0\\]\\s*=\\s*(\\S+)'
[[check]]
kind = "line"
regex = "^in a job step"
"""

# {tag} makes every submission a build of its own; {extra} is what the student did.
PROGRAM = """\
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* {tag} */
int main(void)
{{
    {extra}
    printf("C[0] = {value}\\n");
    printf("%s\\n", getenv("SLURM_JOB_ID") ? "in a job step" : "not under SLURM");
    return 0;
}}
"""


def make_exercise(folder: Path, tag: str) -> Path:
    """An exercise whose solution says where it ran, with a tag of its own (its output, which
    the grader caches once for every node, is then found by that tag). It runs in a box, like
    every program a grader runs: it cannot leave a note anywhere else."""
    (folder / "C").mkdir(parents=True)
    (folder / "answer.toml").write_text(SPEC)
    (folder / "C" / "answer_exercise.c").write_text(PROGRAM.format(tag="start", extra="", value=0))
    note = f'printf("solution {tag} ran on %s\\n", getenv("SLURMD_NODENAME"));'
    (folder / "C" / "answer_solution.c").write_text(PROGRAM.format(tag=tag, extra=note, value=42))
    return folder


def solution_outputs(cluster: slurmcluster.Cluster, tag: str) -> list[str]:
    """The cached outputs of the solution tagged `tag` (one per solution run that completed)."""
    cache = cluster.shared / "cache" / "idrrun" / "solutions"
    return [p.read_text() for p in cache.glob("*.out") if f"solution {tag} ran on" in p.read_text()]


def submission(folder: Path, student: str, value: int = 42, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{student}.c").write_text(PROGRAM.format(tag=student, extra=extra, value=value))


def grade(cluster: slurmcluster.Cluster, cwd: Path, examples: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "idrrun.cli", "grade", "answer", *args],
                            cwd=cwd, env=client_env(cluster, IDRRUN_EXAMPLES=str(examples)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def report(path: Path) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader(path.open())}


def test_grade_across_nodes_with_one_solution_run(cluster: slurmcluster.Cluster, tmp_path: Path) -> None:
    examples = make_exercise(tmp_path / "examples", "across")
    klass = tmp_path / "class"
    for student in ("ann", "cid", "dan", "fay"):
        submission(klass, student, extra="sleep(2);")  # long enough for the runs to overlap
    submission(klass, "ben", value=41, extra="sleep(2);")
    submission(klass, "eve", extra="this is not C;")
    p = grade(cluster, tmp_path, examples, *sorted(map(str, klass.iterdir())), "--launcher", "srun",
              "-j", "6", "--report", str(tmp_path / "r.csv"))
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, out + err
    rows = report(tmp_path / "r.csv")
    for student in ("ann", "cid", "dan", "fay"):
        assert rows[student]["verdict"] == "pass", rows[student]["reasons"]
    assert rows["ben"]["verdict"] == "fail" and "C[0] is 41" in rows["ben"]["reasons"]
    assert rows["eve"]["verdict"] == "fail" and "compile failed" in rows["eve"]["reasons"]
    # Every build and every run was a job step, and SLURM spread them over the three nodes.
    nodes = {"n1", "n2", "n3"}
    assert all(rows[s]["build_node"] in nodes for s in rows)
    assert all(rows[s]["node"] in nodes for s in rows if s != "eve") and rows["eve"]["node"] == ""
    used = {rows[s][k] for s in rows for k in ("node", "build_node")} - {""}
    assert used == nodes, rows
    assert "placement: runs " in out
    # The solution ran once, as a step on some node, and its cached output served every node.
    (output,) = solution_outputs(cluster, "across")
    assert re.search(r"solution across ran on (n[123])\n", output), output
    state = json.loads((tmp_path / ".r.csv.idrrun-state.json").read_text())
    assert {r["student"]: r["node"] for r in state} == {s: rows[s]["node"] for s in rows}
    nothing_left(cluster)


def test_killed_grader_cancels_its_steps_everywhere_then_resumes(cluster: slurmcluster.Cluster,
                                                                 tmp_path: Path) -> None:
    examples = make_exercise(tmp_path / "examples", "t2")
    klass = tmp_path / "class"
    for student in ("amy", "bob", "cat"):
        submission(klass, student)
    for student in ("dov", "eli", "fox"):
        submission(klass, student, extra="sleep(300);")
    entries = sorted(map(str, klass.iterdir()))
    csv_report = tmp_path / "r.csv"
    state = tmp_path / ".r.csv.idrrun-state.json"

    def three_rows_and_three_sleepers() -> bool:
        rows = json.loads(state.read_text()) if state.exists() else []
        return len(rows) == 3 and sleeping(cluster, 3)()

    # The time limit decides rows (state.policy_digest): both runs have the same, long enough
    # for the sleepers to be caught asleep, short enough for the resumed run to end them.
    p = grade(cluster, tmp_path, examples, *entries, "--launcher", "srun", "-j", "6",
              "--timeout", "15", "--report", str(csv_report))
    try:
        assert eventually(three_rows_and_three_sleepers, 60), (cluster.steps(), cluster.live_tasks())
        assert len(cluster.steps()) == 3
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, out + err
    assert "interrupted; its job steps were cancelled" in err and "to resume" in err
    assert time.monotonic() - t0 < 15
    nothing_left(cluster)
    kept = report(csv_report)
    assert sorted(kept) == ["amy", "bob", "cat"] and all(r["verdict"] == "pass" for r in kept.values())

    # The same command again grades only what was not done.
    r = grade(cluster, tmp_path, examples, *entries, "--launcher", "srun", "-j", "6",
              "--timeout", "15", "--report", str(csv_report))
    out, err = r.communicate(timeout=180)
    assert r.returncode == 0, out + err
    assert "resuming: 3 rows kept" in out
    rows = report(csv_report)
    assert {s: rows[s]["node"] for s in kept} == {s: kept[s]["node"] for s in kept}
    for student in ("dov", "eli", "fox"):
        assert rows[student]["verdict"] == "fail" and "timed out" in rows[student]["reasons"]
        assert rows[student]["node"] in {"n1", "n2", "n3"}
    nothing_left(cluster)


def tree(pid: int) -> list[int]:
    """pid and all its descendants, parents before their children (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_bytes()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def test_grader_killed_outright_leaves_steps_that_the_next_grading_cancels(
        cluster: slurmcluster.Cluster, tmp_path: Path) -> None:
    """The grader and all it started on its machine killed at once (SIGKILL: the login node's
    session killed, the OOM killer): nobody is left to cancel anything, and SLURM keeps a step
    whose srun died (until its --time). The next grading with the same report cancels them
    before it starts."""
    examples = make_exercise(tmp_path / "examples", "t3")
    klass = tmp_path / "class"
    for student in ("gil", "hal"):
        submission(klass, student, extra="sleep(300);")
    entries = sorted(map(str, klass.iterdir()))
    csv_report = tmp_path / "r.csv"
    p = grade(cluster, tmp_path, examples, *entries, "--launcher", "srun", "-j", "2",
              "--timeout", "120", "--report", str(csv_report))
    try:
        assert eventually(sleeping(cluster, 2), 60), cluster.steps()
        # Children first: a guard that outlived its grader by a moment would pass its srun a
        # SIGTERM, and srun would cancel its step (as it should).
        for pid in reversed(tree(p.pid)):
            with contextlib.suppress(ProcessLookupError):  # one that ended since it was listed
                os.kill(pid, signal.SIGKILL)
        p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    time.sleep(1)
    orphans = cluster.steps()
    assert len(orphans) == 2 and len(programs(cluster)) == 2, orphans

    r = grade(cluster, tmp_path, examples, *entries, "--launcher", "srun", "-j", "2",
              "--timeout", "2", "--report", str(csv_report))
    out, err = r.communicate(timeout=180)
    assert r.returncode == 0, out + err
    ids = sorted(line.split()[0].split(".")[0] for line in orphans)
    assert "cancelled 2 job steps left running by an earlier, killed grading" in out.replace("\n", " ")
    assert all(i in out for i in ids), out
    assert all(row["verdict"] == "fail" for row in report(csv_report).values())
    nothing_left(cluster)


def test_inside_an_allocation_the_grader_runs_steps_and_cancels_them_by_id(
        cluster: slurmcluster.Cluster, tmp_path: Path) -> None:
    """`salloc -N3 …` then grading inside it: every build and run is a step of that one job
    (scancel by job name cannot reach steps: idrrun finds them by step name); a stopped grader
    cancels its steps and leaves the allocation to its owner."""
    alloc = cluster.run("salloc", "--no-shell", "--nodes=3", "--ntasks=6", "--job-name=course-alloc")
    job = next(w for w in alloc.stderr.split() if w.isdigit())
    try:
        examples = make_exercise(tmp_path / "examples", "t4")
        klass = tmp_path / "class"
        submission(klass, "ida")
        for student in ("jon", "kim"):
            submission(klass, student, extra="sleep(300);")
        env = client_env(cluster, IDRRUN_EXAMPLES=str(examples), SLURM_JOB_ID=job, SLURM_JOBID=job)
        p = subprocess.Popen([sys.executable, "-m", "idrrun.cli", "grade", "answer",
                              *sorted(map(str, klass.iterdir())), "--launcher", "srun", "-j", "3",
                              "--timeout", "120", "--report", str(tmp_path / "r.csv")],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert eventually(sleeping(cluster, 2), 60), cluster.steps()
            steps = cluster.steps()
            assert len(steps) == 2 and all(s.startswith(f"{job}.") for s in steps), steps
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 130, out + err
        assert cluster.steps() == [] and [j.split()[1] for j in cluster.jobs()] == ["course-alloc"]
        assert eventually(lambda: not cluster.live_tasks(), 5), cluster.live_tasks()
        assert report(tmp_path / "r.csv")["ida"]["verdict"] == "pass"
    finally:
        cluster.run("scancel", job)
    assert eventually(lambda: not cluster.jobs(), 10)
