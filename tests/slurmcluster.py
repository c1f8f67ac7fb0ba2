"""A real SLURM cluster of several nodes on this one machine: for the tests, CI and the benchmark.

One munged with a key and socket of its own, one slurmctld, and one slurmd per node
(`slurmd -N nX`: Debian's slurm-wlm is built with multiple-slurmd support), all as root, from a
configuration in a folder of their own, on free ports. Nothing of the machine's own SLURM or
munge is touched, so several clusters (several engineers, several test runs) can live side by
side.

What makes the nodes behave like separate machines, where the machine allows it (root with
CAP_SYS_ADMIN; `Cluster.private_tmp` says whether it did):
- each slurmd lives in a mount namespace of its own with a private /tmp and /dev/shm: what a
  client leaves in its /tmp is not seen on the nodes, only the rest of the file system is shared
  (as a cluster's home and work file systems are), and Open MPI's shared memory segments of two
  nodes do not collide;
- the nodes' task prolog (slurm.conf TaskProlog) drops IDRRUN_RUN, the marker with which
  idrrun's guard finds and kills a run's processes on its own machine: on a real cluster the
  guard cannot reach the tasks of another node, so here too only SLURM (scancel) can end them;
- Open MPI talks over the loopback interface (the only network the "nodes" share).
Every task also carries IDRRUN_TEST_TASK=<folder>, so that a test can list the tasks still alive
(`live_tasks`), and every daemon IDRRUN_TEST_CLUSTER=<folder>, so that `stop` can check that
nothing of the cluster is left and kills by PID only what carries it.

    python3 tests/slurmcluster.py up DIR [--nodes 3] [--cpus 2]   # prints: export SLURM_CONF=...
    python3 tests/slurmcluster.py down DIR                        # exit 1 when something was left
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ports import free_ports

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "sinfo", "squeue", "scancel", "salloc")
CLUSTER_MARK = "IDRRUN_TEST_CLUSTER"
TASK_MARK = "IDRRUN_TEST_TASK"


def tool(name: str) -> str | None:
    """The daemons live in /usr/sbin, often not on a non-root PATH."""
    found = shutil.which(name)
    if found is None and Path("/usr/sbin", name).exists():
        found = f"/usr/sbin/{name}"
    return found


def missing_tools() -> list[str]:
    return [name for name in (*DAEMONS, *CLIENTS) if tool(name) is None]


CONF = """\
ClusterName=idrrun-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog={d}/node-task-prolog
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
# The nodes have the CPUs the configuration declares, not the machine's: `--cpus` above the
# machine's count makes room for more jobs (a benchmark's 30 students' servers) on 2 cores.
SlurmdParameters=config_overrides
KillWait=2
MinJobAge=30
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
{nodes}
# Steps of one CPU each run side by side, and a few more than the CPUs when asked (the
# machine has 2 cores: the figures are about placement and overhead, not speed).
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""

NODE = "NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs={cpus} State=UNKNOWN"

# Run by slurmstepd on the node before each task; "export"/"unset" lines change the task's
# environment (see the module's docstring for why).
NODE_TASK_PROLOG = """\
#!/bin/sh
echo "unset IDRRUN_RUN"
echo "export {task_mark}={d}"
echo "export OMPI_MCA_btl_tcp_if_include=lo"
echo "export OMPI_MCA_oob_tcp_if_include=lo"
exit 0
"""


@dataclass
class Cluster:
    folder: Path
    nodes: tuple[str, ...]
    cpus: int
    private_tmp: bool
    pids: dict[str, int] = field(default_factory=dict)  # daemon name ("slurmd-n1") -> pid

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    @property
    def shared(self) -> Path:
        """A folder every node sees: put caches, working folders and notebooks here."""
        return self.folder / "shared"

    @property
    def env(self) -> dict[str, str]:
        """The environment of a client of this cluster (srun, squeue, idrrun)."""
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def run(self, *argv: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        exe = tool(argv[0]) or argv[0]
        return subprocess.run([exe, *argv[1:]], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def steps(self) -> list[str]:
        """Job steps known to the controller: "JOBID.STEP NAME NODES" lines."""
        r = self.run("squeue", "--steps", "--noheader", "--format=%i %j %N")
        return r.stdout.strip().split("\n") if r.stdout.strip() else []

    def jobs(self) -> list[str]:
        r = self.run("squeue", "--noheader", "--format=%i %j %T %N")
        return r.stdout.strip().split("\n") if r.stdout.strip() else []

    def live_tasks(self) -> list[str]:
        """Tasks of this cluster's job steps still alive (zombies, which hold nothing and wait
        for their parent, do not count): "PID COMMAND" lines."""
        return [f"{pid} {cmd}" for pid, cmd in _marked(f"{TASK_MARK}={self.folder}")]

    def log(self, lines: int = 30) -> str:
        out = []
        for path in sorted(self.folder.glob("*.log")) + sorted(self.folder.glob("*.out")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(out)


def _can_unshare_mounts() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    r = subprocess.run([unshare, "-m", "sh", "-c", "mount -t tmpfs none /mnt"],
                       capture_output=True, timeout=10)
    return r.returncode == 0


def _state(pid: int) -> str | None:
    """The process's state letter, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()[0].decode()


def _marked(mark: str) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose environment holds `mark`."""
    found = []
    needle = mark.encode() + b"\0"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes() + b"\0"
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in environ and _state(pid) not in (None, "Z", "X"):
            found.append((pid, cmd.strip()))
    return found


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # reap it when it is our child (the tests start the daemons themselves)
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if _state(pid) in (None, "Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _belongs(pid: int, folder: Path) -> bool:
    """PIDs are reused: only signal a process that carries this cluster's mark."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes() + b"\0"
    except OSError:
        return False
    return f"{CLUSTER_MARK}={folder}".encode() + b"\0" in environ


def _spawn(argv: list[str], folder: Path, log: str) -> int:
    env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"), **{CLUSTER_MARK: str(folder)})
    with open(folder / log, "wb") as out:
        # Their own session: a Ctrl-C in the terminal of `up` or of pytest does not reach them;
        # `stop` ends them by PID.
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
    return p.pid


def start(folder: Path, nodes: int = 3, cpus: int = 2, timeout: float = 30) -> Cluster:
    """Start munged, slurmctld and `nodes` slurmd in `folder` (created; it must not be under /tmp,
    which the nodes do not share). Raises RuntimeError, with the daemons' logs, when the cluster
    does not come up; what was started is stopped first."""
    folder = folder.resolve()
    missing = missing_tools()
    if missing:
        raise RuntimeError(f"SLURM is not installed ({', '.join(missing)}): apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        raise RuntimeError("the test cluster runs its daemons as root")
    names = tuple(f"n{i}" for i in range(1, nodes + 1))
    private = _can_unshare_mounts() and not str(folder).startswith("/tmp/")
    cluster = Cluster(folder, names, cpus, private)
    for sub in ("state", "munge", "shared", *(f"spool/{n}" for n in names), *(f"nodes/{n}" for n in names)):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "munge").chmod(0o711)
    # Like a cluster's home or work file system: every user passes through to what is theirs
    # (a grader as root runs each submission as a uid of its own, in the shared cache).
    folder.chmod(0o711)
    for n in names:
        (folder / "nodes" / n).chmod(0o1777)
    key = folder / "munge" / "key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    ports = free_ports(nodes + 1)
    node_lines = "\n".join(NODE.format(name=n, port=p, cpus=cpus) for n, p in zip(names, ports[1:]))
    cluster.conf.write_text(CONF.format(d=folder, ctld_port=ports[0], nodes=node_lines))
    prolog = folder / "node-task-prolog"
    prolog.write_text(NODE_TASK_PROLOG.format(d=folder, task_mark=TASK_MARK))
    prolog.chmod(0o755)
    try:
        munged = tool("munged")
        assert munged is not None
        cluster.pids["munged"] = _spawn(
            [munged, "--foreground", "--force", f"--socket={folder}/munge/socket",
             f"--key-file={key}", f"--pid-file={folder}/munge/pid", f"--seed-file={folder}/munge/seed",
             f"--log-file={folder}/munge/log"], folder, "munged.out")
        _wait_for(lambda: (folder / "munge" / "socket").exists(), 10, cluster, "munged")
        cluster.pids["slurmctld"] = _spawn([str(tool("slurmctld")), "-D", "-f", str(cluster.conf)],
                                           folder, "slurmctld.out")
        for n in names:
            slurmd = [str(tool("slurmd")), "-D", "-N", n, "-f", str(cluster.conf)]
            if private:
                # The node's own /tmp and /dev/shm; exec keeps the PID that `stop` signals.
                script = ("mount --make-rprivate / && mount --bind \"$0\" /tmp && "
                          "mount -t tmpfs -o size=512m,mode=1777 tmpfs /dev/shm && exec \"$@\"")
                slurmd = [str(shutil.which("unshare")), "-m", "sh", "-c", script,
                          str(folder / "nodes" / n), *slurmd]
            cluster.pids[f"slurmd-{n}"] = _spawn(slurmd, folder, f"slurmd-{n}.out")
        _wait_for(lambda: _all_idle(cluster), timeout, cluster, "the nodes")
    except BaseException:
        stop(cluster)
        raise
    (folder / "cluster.json").write_text(json.dumps(
        {"nodes": names, "cpus": cpus, "private_tmp": private, "pids": cluster.pids}))
    return cluster


def _all_idle(cluster: Cluster) -> bool:
    for name, pid in cluster.pids.items():
        if _state(pid) in (None, "Z", "X"):
            raise RuntimeError(f"{name} exited at start-up:\n{cluster.log()}")
    r = cluster.run("sinfo", "--noheader", "--Node", "--format=%N %t")
    states = dict(line.split() for line in r.stdout.strip().splitlines() if line.strip())
    return r.returncode == 0 and set(states) == set(cluster.nodes) and set(states.values()) == {"idle"}


def _wait_for(ready: object, timeout: float, cluster: Cluster, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up in {timeout:g} s:\n{cluster.log()}")
        time.sleep(0.1)


def load(folder: Path) -> Cluster:
    """The cluster that `up` started in folder."""
    folder = folder.resolve()
    data = json.loads((folder / "cluster.json").read_text())
    return Cluster(folder, tuple(data["nodes"]), int(data["cpus"]), bool(data["private_tmp"]),
                   {k: int(v) for k, v in data["pids"].items()})


def stop(cluster: Cluster) -> list[str]:
    """Cancel every job, stop the daemons by PID (nodes, controller, munged: the order in which
    nothing waits on a daemon already gone), then check that nothing marked as this cluster's is
    alive. Returns what had to be killed after that (empty: a clean stop)."""
    if "slurmctld" in cluster.pids and cluster.conf.exists():
        try:
            cluster.run("scancel", "--full", "--user=root", timeout=10)
            deadline = time.monotonic() + 10
            while (cluster.jobs() or cluster.live_tasks()) and time.monotonic() < deadline:
                time.sleep(0.1)
        except (OSError, subprocess.TimeoutExpired):
            pass
    order = [k for k in cluster.pids if k.startswith("slurmd-")] + ["slurmctld", "munged"]
    for name in order:
        pid = cluster.pids.get(name)
        if pid is None or not _belongs(pid, cluster.folder):
            continue
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, 15):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5)
    left = []
    for mark in (f"{CLUSTER_MARK}={cluster.folder}", f"{TASK_MARK}={cluster.folder}"):
        for pid, cmd in _marked(mark):
            left.append(f"{pid} {cmd}")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return left


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="slurmcluster.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up")
    up.add_argument("folder", type=Path)
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--cpus", type=int, default=2)
    down = sub.add_parser("down")
    down.add_argument("folder", type=Path)
    args = p.parse_args(argv)
    if args.action == "up":
        t0 = time.monotonic()
        cluster = start(args.folder, args.nodes, args.cpus)
        print(f"# {len(cluster.nodes)} nodes up in {time.monotonic() - t0:.1f} s "
              f"(private /tmp per node: {'yes' if cluster.private_tmp else 'no'})", file=sys.stderr)
        print(f"export SLURM_CONF={cluster.conf}")
        return 0
    cluster = load(args.folder)
    left = stop(cluster)
    for line in left:
        print(f"left after stop, killed: {line}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
