"""What joining a run's cgroup costs, and what the guard pays now (issue 13: a cell's overhead).

    python benchmarks/cgroup_join.py [--rounds 12]     (root, or a user with a writable cgroup)

Each round first runs a small gcc compile (as a cell does before its run: the last cgroup
migration is then long past), then times:
- procs: a forked child writing its pid to a fresh cgroup's cgroup.procs (the usual way, which
  takes the kernel's cgroup_threadgroup_rwsem for writing: an RCU grace period)
- tasks "0": the child moving its own thread through v1's tasks file (the guard's v1 way)
- clone3: on a v2 hierarchy, a child born in the cgroup (clone3 CLONE_INTO_CGROUP: the guard's
  v2 way), against the same child writing cgroup.procs, both timed from C (cgroup_clone3.c)
- guard: a hello program run through idrrun's guard and its pids cgroup (proc.run), against the
  same without a cgroup and bare
Prints medians and maxima in ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELLO = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


def hierarchies() -> list[tuple[str, Path]]:
    """(label, a folder where a child cgroup can be made)."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        if kind == "cgroup2" or (kind == "cgroup" and "pids" in options.split(",")):
            probe = Path(point) / f"idrrun-bench-{os.getpid()}"
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=12)
    rounds = ap.parse_args().rounds
    sys.path.insert(0, str(ROOT))
    from idrrun.model import Limits
    from idrrun.run import isolation, proc

    work = Path(tempfile.mkdtemp(prefix="idrrun-cgjoin-"))
    (work / "hello.c").write_text(HELLO)
    compile_cmd = ["gcc", "-c", "-o", str(work / "x.o"), str(work / "hello.c")]
    subprocess.run(["gcc", "-o", str(work / "hello"), str(work / "hello.c")], check=True)
    times: dict[str, list[float]] = {}
    for label, parent in hierarchies():
        ways = ["procs"] + (["tasks"] if (parent / "tasks").exists() else [])
        for way in ways:
            shown = "cgroup.procs" if way == "procs" else 'tasks "0"'
            name = f"{label}: {shown}"
            for _ in range(rounds):
                subprocess.run(compile_cmd, check=True)
                cgroup = parent / f"idrrun-bench-{uuid.uuid4().hex}"
                cgroup.mkdir()
                try:
                    times.setdefault(name, []).append(child_join(cgroup, way))
                finally:
                    cgroup.rmdir()
    helper = work / "cgroup_clone3"
    subprocess.run(["gcc", "-O2", "-o", str(helper), str(ROOT / "benchmarks" / "cgroup_clone3.c")],
                   check=True)
    for label, parent in hierarchies():
        if label != "v2":
            continue
        for way in ("procs", "clone3"):
            for _ in range(rounds):
                subprocess.run(compile_cmd, check=True)
                cgroup = parent / f"idrrun-bench-{uuid.uuid4().hex}"
                cgroup.mkdir()
                try:
                    out = subprocess.run([str(helper), str(cgroup), way], capture_output=True,
                                         text=True, check=True).stdout
                finally:
                    cgroup.rmdir()
                times.setdefault(f"v2: child by {way} (from C)", []).append(float(out) / 1e3)
    protections = isolation.probe(work / "cache")
    hello = [str(work / "hello")]
    for _ in range(rounds):
        for name, kwargs in (("hello bare", None), ("hello, guard without cgroup", False),
                             ("hello, guard and its cgroup", True)):
            subprocess.run(compile_cmd, check=True)
            start = time.perf_counter()
            if kwargs is None:
                subprocess.run(hello, stdout=subprocess.DEVNULL, check=True)
            else:
                r = proc.run(hello, what="run", timeout=10, spec=proc.ProcSpec(
                    cwd=work, protections=protections, limits=Limits(), terminal=True,
                    cgroups=kwargs))
                assert r.ok, r.describe()
            times.setdefault(name, []).append(time.perf_counter() - start)
    print(f"{rounds} rounds, each after a gcc compile; medians (max), ms; cgroups: "
          f"{protections.cgroups}")
    for name, values in times.items():
        print(f"  {name:34s} {1e3 * statistics.median(values):7.2f}  ({1e3 * max(values):.2f})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
