"""What srun costs per job step, and grading 60 submissions through srun on a cluster of 1 and
of 3 nodes started here (tests/slurmcluster.py), against grading without a launcher (issue 16).

    python3 benchmarks/slurm_bench.py [--count 60] [--jobs 6] [--repeat 20]   # as root, SLURM installed

The nodes share this machine's cores: the figures are the overhead of a job step and where
SLURM places steps, not a speed-up. Printed:
- the latency of one step, `srun true` one after the other: as its own job (srun outside an
  allocation: the controller schedules a job, then launches its step) and as a step of an
  allocation (`salloc`, then srun inside: a step only);
- the controller's step rate: `--count` sruns started at once;
- `idrrun grade` of `--count` submissions (each a build of its own, empty cache) with `-j`:
  no launcher, srun as jobs on 1 and on 3 nodes, srun as steps of one allocation on 3 nodes;
  wall time, mean build and run seconds of a row, and the placement of runs and builds.
"""

from __future__ import annotations

import collections
import csv
import datetime
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import bench

ROOT = bench.ROOT
sys.path.insert(0, str(ROOT / "tests"))

import slurmcluster  # noqa: E402  (tests/ holds the cluster, shared with the tests and CI)

SPEC = """\
name = "answer"
timeout = 30
[sources.c]
exercise = "C/answer_exercise.c"
solution = "C/answer_solution.c"
[args]
host = []
[[check]]
kind = "exit_ok"
[[check]]
kind = "matches_solution"
pattern = 'C\\[0\\]\\s*=\\s*(\\S+)'
"""
PROGRAM = '#include <stdio.h>\n/* {tag} */\nint main(void)\n{{\n    printf("C[0] = {value}\\n");\n    return 0;\n}}\n'


def cpu_seconds(pid: int, children: bool) -> float:
    """CPU time of a process (and of its reaped children: slurmd's slurmstepd), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def daemons_cpu(cluster: slurmcluster.Cluster) -> tuple[float, float]:
    """(slurmctld, all slurmd) CPU seconds so far."""
    ctld = cpu_seconds(cluster.pids["slurmctld"], children=False)
    nodes = sum(cpu_seconds(pid, children=True) for name, pid in cluster.pids.items() if name.startswith("slurmd-"))
    return ctld, nodes


class StepdSampler(threading.Thread):
    """slurmstepd leaves slurmd (init reaps it), so its CPU time is sampled while it lives:
    every 5 ms, the last value seen per process (a lower bound: its last moments are missed)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    try:
                        if Path(f"/proc/{entry.name}/comm").read_text().strip() == "slurmstepd":
                            self.seen[int(entry.name)] = cpu_seconds(int(entry.name), children=True)
                    except (OSError, ValueError, IndexError):
                        pass
            time.sleep(0.005)


def latency(cluster: slurmcluster.Cluster, argv: list[str], repeat: int) -> tuple[float, float, float, float]:
    """One `srun … true` after the other: median seconds, and CPU milliseconds per step of srun
    (the client), of slurmctld and of the node (slurmd and its slurmstepd)."""
    times = []
    for _ in range(repeat):
        t0 = time.monotonic()
        r = cluster.run(*argv, "true", timeout=60)
        times.append(time.monotonic() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {r.stderr}")
    # CPU in a second round: the sampler's own work must not slow the timed one.
    time.sleep(0.5)
    ctld0, node0 = daemons_cpu(cluster)
    client0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    stepd = StepdSampler()
    stepd.start()
    for _ in range(repeat):
        cluster.run(*argv, "true", timeout=60)
    time.sleep(0.5)  # the last slurmstepd ends
    stepd.stop.set()
    stepd.join()
    client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ctld1, node1 = daemons_cpu(cluster)
    client = client1.ru_utime + client1.ru_stime - client0.ru_utime - client0.ru_stime
    per = 1000 / repeat
    return (statistics.median(times), client * per, (ctld1 - ctld0) * per,
            (node1 - node0 + sum(stepd.seen.values())) * per)


def burst(cluster: slurmcluster.Cluster, count: int) -> float:
    """Seconds until `count` sruns started at once have all ended."""
    srun = slurmcluster.tool("srun")
    t0 = time.monotonic()
    procs = [subprocess.Popen([str(srun), "--quiet", "--ntasks=1", "true"], env=cluster.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(count)]
    codes = [p.wait(timeout=300) for p in procs]
    if any(codes):
        raise RuntimeError(f"{sum(1 for c in codes if c)} of {count} sruns failed")
    return time.monotonic() - t0


def make_class(work: Path, count: int) -> tuple[Path, list[str]]:
    examples = work / "examples"
    (examples / "C").mkdir(parents=True)
    (examples / "answer.toml").write_text(SPEC)
    (examples / "C" / "answer_exercise.c").write_text(PROGRAM.format(tag="start", value=0))
    (examples / "C" / "answer_solution.c").write_text(PROGRAM.format(tag="solution", value=42))
    klass = work / "class"
    klass.mkdir()
    for i in range(count):  # each differs by a comment: no build is shared
        (klass / f"s{i:03d}.c").write_text(PROGRAM.format(tag=f"student {i}", value=42))
    return examples, sorted(str(p) for p in klass.iterdir())


def grade(label: str, env: dict[str, str], work: Path, examples: Path, files: list[str], jobs: int,
          launcher: str) -> dict[str, object]:
    tag = label.replace(" ", "-")
    report = work / f"{tag}.csv"
    env = dict(env, PYTHONPATH=str(ROOT), IDRRUN_EXAMPLES=str(examples),
               IDRRUN_CACHE_DIR=str(work / "shared" / f"cache-{tag}"))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "answer", *files, "-j", str(jobs),
                        "--launcher", launcher, "--report", str(report)],
                       cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if not report.exists():
        raise RuntimeError(f"{label}: exit {r.returncode}, no report\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    rows = list(csv.DictReader(report.open()))
    bad = [row for row in rows if row["verdict"] != "pass"]
    if r.returncode != 0 or bad:
        raise RuntimeError(f"{label}: exit {r.returncode}, {len(bad)} rows not passed: "
                           f"{bad[:2]}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    runs = collections.Counter(row["node"] for row in rows if row["node"])
    builds = collections.Counter(row["build_node"] for row in rows if row["build_node"])
    return {"label": label, "wall": wall, "rows": len(rows),
            "build": statistics.mean(float(row["build_seconds"]) for row in rows),
            "run": statistics.mean(float(row["run_seconds"]) for row in rows),
            "runs": dict(sorted(runs.items())), "builds": dict(sorted(builds.items()))}


def show(result: dict[str, object], base: dict[str, object] | None) -> str:
    extra = ""
    if base is not None:
        extra = (f"  (+{result['build'] - base['build']:.3f} build, "  # type: ignore[operator]
                 f"+{result['run'] - base['run']:.3f} run s/row over no launcher)")  # type: ignore[operator]
    place = ""
    if result["runs"]:
        place = f"\n{'':34s}runs {result['runs']}  builds {result['builds']}"
    return (f"  {result['label']:32s}{result['wall']:6.2f} s wall  build {result['build']:.3f} s  "
            f"run {result['run']:.3f} s / row{extra}{place}")


def main() -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--count", type=int, default=60, help="submissions (default 60)")
    ap.add_argument("--jobs", type=int, default=6, help="idrrun grade -j (default 6)")
    ap.add_argument("--repeat", type=int, default=20, help="sruns per latency figure (default 20)")
    args = ap.parse_args()
    if slurmcluster.missing_tools() or os.geteuid() != 0:
        sys.exit("slurm_bench: needs SLURM (apt-get install slurm-wlm munge) and root: the test "
                 "cluster runs its daemons as root")
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    version = subprocess.run([str(slurmcluster.tool("slurmd")), "-V"], capture_output=True, text=True).stdout
    say(f"# {datetime.date.today()} · {platform.node()} · {os.cpu_count()} cores · {version.strip()} · "
          f"load average {os.getloadavg()[0]:.1f}")
    work = Path(tempfile.mkdtemp(prefix="idrrun-slurm-bench-", dir="/var/tmp"))
    os.chmod(work, 0o711)  # the boxes' users reach the grader's cache below it (not list it)
    examples, files = make_class(work, args.count)
    results = []
    try:
        base = grade("no launcher", dict(os.environ), work, examples, files, args.jobs, "none")
        for nodes in (1, 3):
            cluster = slurmcluster.start(work / f"cluster-{nodes}", nodes=nodes, cpus=2)
            try:
                env = dict(cluster.env)
                say(f"\n{nodes} node(s) × 2 CPUs (oversubscribed up to 4 steps per CPU), "
                      f"private /tmp per node: {'yes' if cluster.private_tmp else 'no'}")
                job, *job_cpu = latency(cluster, ["srun", "--quiet", "--ntasks=1"], args.repeat)
                # As many tasks as the allocation's CPUs (2 per node): its steps then run side by side.
                alloc = cluster.run("salloc", "--no-shell", f"--nodes={nodes}",
                                    f"--ntasks={min(args.jobs, 2 * nodes)}")
                granted = re.search(r"Granted job allocation (\d+)", alloc.stderr)
                if granted is None:
                    raise RuntimeError(f"salloc: {alloc.stderr}")
                jobid = granted.group(1)  # (a warning before it may hold numbers too)
                step, *step_cpu = latency(cluster, ["srun", "--quiet", f"--jobid={jobid}", "--ntasks=1"],
                                          args.repeat)
                say(f"  srun true, one after the other (median of {args.repeat}; CPU ms per step of "
                      "srun / slurmctld / slurmd+slurmstepd):")
                for what, wall, cpu in (("as a job", job, job_cpu), ("as a step of an allocation", step, step_cpu)):
                    say(f"    {what:28s}{wall * 1000:5.0f} ms   CPU {cpu[0]:4.0f} / {cpu[1]:4.1f} / {cpu[2]:4.0f} ms")
                wall = burst(cluster, args.count)
                say(f"  {args.count} sruns at once: {wall:.2f} s, {args.count / wall:.1f} jobs/s")
                results.append(grade(f"srun, {nodes} node(s), jobs", env, work, examples, files,
                                     args.jobs, "srun"))
                say(show(results[-1], base))
                if nodes == 3:
                    results.append(grade("srun, 3 nodes, steps of 1 alloc",
                                         dict(env, SLURM_JOB_ID=jobid, SLURM_JOBID=jobid), work,
                                         examples, files, args.jobs, "srun"))
                    say(show(results[-1], base))
                    conf = work / "overlap.toml"
                    conf.write_text('[launcher]\nkind = "srun"\noptions = ["--overlap"]\n')
                    results.append(grade("srun, 3 nodes, alloc, --overlap",
                                         dict(env, SLURM_JOB_ID=jobid, SLURM_JOBID=jobid, IDRRUN_CONFIG=str(conf)), work,
                                         examples, files, args.jobs, "srun"))
                    say(show(results[-1], base))
                cluster.run("scancel", jobid)
            finally:
                left = slurmcluster.stop(cluster)
                if left:
                    say(f"  left after stop: {left}")
        say(f"\nbaseline ({args.count} submissions, -j {args.jobs}):")
        say(show(base, None))
        say(f"# load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bench.report("srun per step and grading across nodes", lines, record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
