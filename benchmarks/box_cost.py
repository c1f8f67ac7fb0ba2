"""What the grader's protections cost per run, part by part: the guard, the sandbox, the
boundary around a graded run (issue 23), and, with --cgroup, the run's cgroup (issue 13).

    python3 benchmarks/box_cost.py [--rounds 30] [--cgroup]

Times, medians of ROUNDS, ms, on this machine:
- proc.run of `true`: plain; through the guard and its limits; in a bubblewrap box as idrrun's
  own user;
- the boundary's work around a graded run (run/boundary.py): a fresh run folder filled with a
  copy of the submission and handed to the box's uid, the executable sealed in a folder of its
  own, the outputs taken out, both folders removed; then the same with the run in its box (a
  fresh uid as root);
- a whole graded run of a small program whose build is cached (pipeline.execute on a request
  with a room): what each hidden argument set costs a grading.
Reading them: each row over the one above is that layer's cost; the sandbox level (namespaces:
bubblewrap; uid: a fresh uid without it; none) decides which rows there are.

With --cgroup (root, or a user with a writable cgroup), each figure taken after a small gcc
compile (as a cell runs after its compile: the last cgroup migration long past), medians (max):
- a forked child joining a fresh cgroup by cgroup.procs (a migration: the kernel's
  cgroup_threadgroup_rwsem, an RCU grace period) and, on v1, by writing "0" to tasks (the
  guard's v1 way);
- on v2, a child written into cgroup.procs against one born there by clone3(CLONE_INTO_CGROUP)
  (the guard's v2 way), both timed from C (benchmarks/cgroup_clone3.c: Python has no clone3);
- a hello program bare, through the guard without a cgroup, and through the guard and its cgroup.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import bench

sys.path.insert(0, str(bench.ROOT))

from idrrun import pipeline, toolchains  # noqa: E402
from idrrun.model import Limits, Settings  # noqa: E402
from idrrun.request import resolve, source  # noqa: E402
from idrrun.request.options import Options  # noqa: E402
from idrrun.run import boundary, isolation, proc, sandbox, tools  # noqa: E402
from idrrun.run.isolation import Protections  # noqa: E402
from idrrun.run.sandbox import Box  # noqa: E402

PROGRAM = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


def median_ms(fn: Callable[[], object], rounds: int) -> float:
    fn()  # warm
    return 1000 * bench.timed(fn, rounds)[0]


def per_run(work: Path, protections: Protections, rounds: int) -> list[str]:
    """The rows of a run's protections and of the boundary, ms."""
    support = isolation.sandbox_support()
    limits = Limits()
    rows: list[tuple[str, float]] = []

    def run_true(box: Box | None = None, guarded: bool = True) -> None:
        r = proc.run(["/bin/true"], what="run", timeout=10, spec=proc.ProcSpec(
            cwd=box.workdir if box else work, protections=protections if guarded else None,
            limits=limits if guarded else None, box=box))
        assert r.ok, r.describe()

    rows.append(("proc.run true, plain", median_ms(lambda: run_true(guarded=False), rounds)))
    rows.append(("... guard and limits", median_ms(run_true, rounds)))
    if support.level == "namespaces":
        own = work / "own"
        own.mkdir()
        box = Box(workdir=own, writable=(own,), env=sandbox.clean_env(os.environ, {}),
                  support=support)
        rows.append(("... bubblewrap box, idrrun's user", median_ms(lambda: run_true(box), rounds)))
    room = boundary.own_dir(work / "room", 0o711)
    src = boundary.own_dir(room / "src", 0o700)
    (src / "main.c").write_text(PROGRAM)
    exe = work / "prog"
    exe.write_bytes(Path("/bin/true").read_bytes())
    os.chmod(exe, 0o755)
    root = os.geteuid() == 0

    def staged(run: bool) -> None:
        uid = sandbox.fresh_uid() if root else -1
        folder = boundary.box_folder(room, "run-", uid, uid, files_from=src,
                                     tmp=".tmp" if support.level == "uid" else "")
        sealed = boundary.sealed_folder(room, "bin-", uid)
        program = boundary.seal(exe, sealed, "prog", uid)
        if run:
            guard = tools.place(protections.guard, room / "tools") \
                if uid >= 0 and protections.guard is not None else None
            box = Box(workdir=folder, writable=(folder,), readable=(sealed,),
                      env=sandbox.clean_env(os.environ, {}), uid=uid, gid=uid, support=support,
                      disk_caps=True, inner_guard=guard)
            r = proc.run([str(program)], what="run", timeout=10, spec=proc.ProcSpec(
                cwd=folder, protections=protections, limits=limits, box=box))
            assert r.ok, (r.describe(), r.output)
        fd = boundary.open_dir(folder)
        try:
            boundary.take(fd, "picture.pgm", 1 << 20)
        finally:
            os.close(fd)
        boundary.remove(folder)
        boundary.remove(sealed)

    rows.append(("boundary around a run (stage, seal, take, remove)",
                 median_ms(lambda: staged(False), rounds)))
    if support.level != "none":
        label = "... with the run, in its box" + (" as a fresh uid" if root else "")
        rows.append((label, median_ms(lambda: staged(True), rounds)))
        settings = Settings(cache_dir=work / "cache")
        probe = toolchains.probe(settings, "gcc")
        request, toolchain = resolve.resolve(Options(), source.from_file(src / "main.c", "c", "main.c"),
                                             src, settings, probe)
        request = request.__class__(**{**request.__dict__, "sandbox": True, "room": room})

        job = pipeline.prepare(request, toolchain, probe, settings)

        def graded() -> None:
            outcome = pipeline.execute(job)
            assert outcome.failure is None, outcome.failure

        rows.append(("a graded run, build cached (pipeline.execute)", median_ms(graded, rounds)))
    return [f"sandbox level: {support.level}; root: {root}; {rounds} rounds, medians, ms; "
            f"{len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}",
            *(f"  {label:55s} {ms:7.2f}" for label, ms in rows)]


# ---------------------------------------------------------------------------------------------
# --cgroup


def hierarchies() -> list[tuple[str, Path]]:
    """(label, a folder where a child cgroup can be made)."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        if kind == "cgroup2" or (kind == "cgroup" and "pids" in options.split(",")):
            probe = Path(point) / f"bench-cgroup-{os.getpid()}"
            try:
                probe.mkdir()
                probe.rmdir()
            except OSError:
                continue
            found.append(("v2" if kind == "cgroup2" else "v1 pids", Path(point)))
    return found


def child_join(cgroup: Path, how: str) -> float:
    """Seconds a forked child spends joining `cgroup` the given way."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        start = time.perf_counter()
        if how == "procs":
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        else:
            (cgroup / "tasks").write_text("0")
        os.write(write, repr(time.perf_counter() - start).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        seconds = float(f.read())
    os.waitpid(pid, 0)
    return seconds


def in_fresh_cgroup(parent: Path, measure: Callable[[Path], float], compile_cmd: list[str]) -> float:
    """One figure, after a compile, in a cgroup made for it and removed after."""
    subprocess.run(compile_cmd, check=True)
    cgroup = parent / f"bench-cgroup-{uuid.uuid4().hex}"  # not idrrun-*: idrrun sweeps those when empty
    cgroup.mkdir()
    try:
        return measure(cgroup)
    finally:
        cgroup.rmdir()


def cgroup_rows(work: Path, protections: Protections, rounds: int) -> list[str]:
    (work / "hello.c").write_text(PROGRAM)
    compile_cmd = ["gcc", "-c", "-o", str(work / "x.o"), str(work / "hello.c")]
    subprocess.run(["gcc", "-o", str(work / "hello"), str(work / "hello.c")], check=True)
    helper = work / "cgroup_clone3"
    subprocess.run(["gcc", "-O2", "-o", str(helper), str(bench.ROOT / "benchmarks" / "cgroup_clone3.c")],
                   check=True)

    def from_c(way: str) -> Callable[[Path], float]:
        return lambda cgroup: float(subprocess.run([str(helper), str(cgroup), way], capture_output=True,
                                                   text=True, check=True).stdout) / 1e3

    times: dict[str, list[float]] = {}
    for label, parent in hierarchies():
        ways: dict[str, Callable[[Path], float]] = {
            "cgroup.procs": lambda cgroup: child_join(cgroup, "procs")}
        if (parent / "tasks").exists():
            ways['tasks "0"'] = lambda cgroup: child_join(cgroup, "tasks")
        if label == "v2":
            ways["child by procs (from C)"] = from_c("procs")
            ways["child by clone3 (from C)"] = from_c("clone3")
        for way, measure in ways.items():
            times[f"{label}: {way}"] = [in_fresh_cgroup(parent, measure, compile_cmd)
                                        for _ in range(rounds)]
    hello = [str(work / "hello")]
    for _ in range(rounds):
        for name, cgroups in (("hello bare", None), ("hello, guard without cgroup", False),
                              ("hello, guard and its cgroup", True)):
            subprocess.run(compile_cmd, check=True)
            start = time.perf_counter()
            if cgroups is None:
                subprocess.run(hello, stdout=subprocess.DEVNULL, check=True)
            else:
                r = proc.run(hello, what="run", timeout=10, spec=proc.ProcSpec(cwd=work, protections=protections, limits=Limits(), terminal=True, cgroups=cgroups))
                assert r.ok, r.describe()
            times.setdefault(name, []).append(time.perf_counter() - start)
    if not hierarchies():
        times.pop("hello, guard and its cgroup", None)
    cgroups = protections.cgroups
    return [f"{rounds} rounds, each after a gcc compile; medians (max), ms; the guard's cgroups: "
            f"{f'v{cgroups.version}' if cgroups else 'none'}",
            *(f"  {name:34s} {1e3 * bench.median(v):7.2f}  ({1e3 * max(v):.2f})"
              for name, v in times.items())]


def main() -> int:
    p = bench.parser(__doc__)
    p.add_argument("--rounds", type=int, default=30, help="repetitions per figure (default 30)")
    p.add_argument("--cgroup", action="store_true", help="also what joining the run's cgroup costs")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="box-cost-"))
    os.chmod(work, 0o711)
    try:
        protections = isolation.probe(work / "cache")
        bench.report("a run's protections and the grader's boundary",
                     per_run(work, protections, args.rounds), record=args.record)
        if args.cgroup:
            bench.report("the run's cgroup", cgroup_rows(work, protections, args.rounds), record=args.record)
    finally:
        boundary.remove(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
