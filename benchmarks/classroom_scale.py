"""The classroom at scale (issue 36.5): N students on the course's hub over the 3-node test
cluster (tests/slurmcluster.py), each a real user (useradd) whose server the hub starts as a
SLURM job; each student's work goes in through her server (the hub's REST API: her server
started, a kernel in it, a cell that fetches, writes her answer and runs `idrrun classroom
submit` as her, on her node); then the teacher collects, grades (`--launcher srun`) and returns.

    python3 benchmarks/classroom_scale.py [--students 5 30] [--jobs 4] [--submitters 4]

As root, with SLURM and munge, the hub's environment (IDRRUN_HUB_VENV, default /opt/idrrun-hub:
bash hub/install.sh) and configurable-http-proxy. The nodes are slurmd processes of this
machine: each declares as many CPUs as N servers need (4 jobs per CPU, config_overrides), so a
server's start-up (JupyterLab's imports) shares the machine's cores with every other one.
Printed, for each N: the time from asking every server at once until every one is ready; the
submissions (cells run `--submitters` at a time: total, and per student); collect; grade;
return; the load average before and after.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import bench

ROOT = bench.ROOT
sys.path.insert(0, str(ROOT / "tests"))

import slurmcluster  # noqa: E402  (tests/ holds the cluster, shared with the tests and CI)
from answer_course import PROGRAM, write_course  # noqa: E402
from ports import free_port  # noqa: E402
from hub_client import HubClient as Hub  # noqa: E402

VENV = Path(os.environ.get("IDRRUN_HUB_VENV", "/opt/idrrun-hub"))
SLOTS_PER_CPU = 4  # the test cluster's OverSubscribe=FORCE:4




def submit(hub: Hub, login: str, value: int) -> float:
    """Her work in through her server: a kernel, one cell (fetch, write, submit); seconds."""
    started = time.monotonic()
    code, kernel = hub.api("POST", f"/user/{login}/api/kernels", {"name": "python3"})
    if code != 201:
        raise RuntimeError(f"{login}: no kernel: {kernel}")
    cell = ("!idrrun classroom fetch answer\n"
            f"open('answer/answer.c', 'w').write({PROGRAM.format(value=value)!r})\n"
            "!idrrun classroom submit answer answer/answer.c")
    status, out = hub.run_cell(login, kernel["id"], cell, 300)
    if status != "ok" or "received answer" not in out:
        raise RuntimeError(f"{login}: the submit cell said: {out}")
    hub.api("DELETE", f"/user/{login}/api/kernels/{kernel['id']}")
    return time.monotonic() - started


def start_servers(hub: Hub, students: list[str], log: Path) -> float:
    """Every server asked for at once (a class's "Start my server": one request each, side by
    side; the hub answers a request when its job has started or after 10 s, its
    slow_spawn_timeout); seconds until all are ready."""
    def ask(login: str) -> None:
        hub.api("POST", f"/hub/api/users/{login}")
        code, body = hub.api("POST", f"/hub/api/users/{login}/server")
        if code not in (201, 202):
            raise RuntimeError(f"{login}: {code} {body}\n{log.read_text()[-3000:]}")

    started = time.monotonic()
    with ThreadPoolExecutor(len(students)) as pool:
        list(pool.map(ask, students))
    waiting = set(students)
    deadline = time.monotonic() + 900
    while waiting:
        for login in sorted(waiting):
            code, user = hub.api("GET", f"/hub/api/users/{login}")
            if code == 200 and (user.get("servers") or {}).get("", {}).get("ready"):
                waiting.discard(login)
        if time.monotonic() > deadline:
            raise RuntimeError(f"servers not ready after 900 s: {sorted(waiting)}\n"
                               f"{log.read_text()[-3000:]}")
        time.sleep(1)
    return time.monotonic() - started


def idrrun(env: dict[str, str], cwd: Path, *args: str) -> float:
    """The teacher's command, as root; seconds."""
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", *args], env=env, cwd=cwd,
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"idrrun {' '.join(args[:2])}: {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return time.monotonic() - started


def one_class(n: int, jobs: int, submitters: int) -> list[str]:
    top = Path(tempfile.mkdtemp(prefix="idrrun-classroom-scale-", dir="/var/tmp"))
    top.chmod(0o755)
    cpus = max(2, math.ceil((n + jobs) / (3 * SLOTS_PER_CPU)))
    cluster = slurmcluster.start(top / "cluster", nodes=3, cpus=cpus)
    (top / "cluster").chmod(0o755)
    tag = secrets.token_hex(2)
    students = [f"iscale{tag}{i}" for i in range(n)]
    process: subprocess.Popen[bytes] | None = None
    lines = [f"N = {n}: 3 nodes x {cpus} CPUs declared ({3 * cpus * SLOTS_PER_CPU} job slots), "
             f"load average before {os.getloadavg()[0]:.1f}"]
    try:
        homes = top / "home"
        homes.mkdir(mode=0o755)
        for login in students:
            subprocess.run(["useradd", "-m", "-d", str(homes / login), "-U", "-s", "/bin/bash", login],
                           check=True)
        roster = top / "roster.csv"
        roster.write_text("submission,login\n" + "".join(f"{s},{s}\n" for s in students))
        examples = top / "examples"
        write_course(examples)
        port, token = free_port(), secrets.token_hex(16)
        proxy = shutil.which("configurable-http-proxy", path=f"{VENV}/bin:{os.environ['PATH']}")
        if proxy is None:
            raise RuntimeError("configurable-http-proxy is not installed")
        env = dict(cluster.env, IDRRUN_HUB_VENV=str(VENV), IDRRUN_HUB_STATE=str(top / "hub"),
                   IDRRUN_HUB_PORT=str(port), IDRRUN_HUB_INTERNAL_PORT=str(free_port()),
                   IDRRUN_HUB_PROXY_PORT=str(free_port()), IDRRUN_HUB_AUTH="dummy",
                   IDRRUN_HUB_PASSWORD=secrets.token_hex(8), IDRRUN_HUB_USERS=",".join(students),
                   IDRRUN_HUB_API_TOKEN=token, IDRRUN_EXAMPLES=str(examples),
                   IDRRUN_HUB_START_TIMEOUT="900", IDRRUN_HUB_EXCHANGE=str(top / "exchange"),
                   IDRRUN_HUB_EXCHANGE_PORT=str(free_port()),
                   IDRRUN_HUB_NODES=",".join(f"{node}=127.0.0.1" for node in cluster.nodes),
                   PATH=f"{VENV}/bin:{Path(proxy).parent}:{os.environ['PATH']}")
        log = top / "hub.log"
        with log.open("w") as out:
            process = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f",
                                        str(ROOT / "hub" / "jupyterhub_config.py")],
                                       cwd=top, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        hub = Hub(f"http://127.0.0.1:{port}", token)
        deadline = time.monotonic() + 120
        while hub.api("GET", "/hub/api/")[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(log.read_text()[-3000:])
            time.sleep(0.5)
        teacher = dict(cluster.env, PYTHONPATH=str(ROOT), IDRRUN_EXAMPLES=str(examples),
                       XDG_CACHE_HOME=str(cluster.shared / "cache"))
        exchange = top / "exchange"
        idrrun(teacher, top, "classroom", "release", "answer", str(examples / "C" / "answer_exercise.c"),
               "--exchange", str(exchange), "--roster", str(roster))
        lines.append(f"  servers started (all asked at once, until every one is ready): "
                     f"{start_servers(hub, students, log):.1f} s")
        started = time.monotonic()
        with ThreadPoolExecutor(submitters) as pool:
            each = list(pool.map(lambda s: submit(hub, s[1], 42 if s[0] % 2 == 0 else 41),
                                 enumerate(students)))
        lines.append(f"  submitted through their servers ({submitters} at a time): "
                     f"{time.monotonic() - started:.1f} s; per student "
                     f"{min(each):.1f} / {bench.median(each):.1f} / {max(each):.1f} s (min / median / max)")
        collected = top / "collected"
        lines.append(f"  collect: {idrrun(teacher, top, 'classroom', 'collect', 'answer', '--exchange', str(exchange), '--roster', str(roster), '--to', str(collected)):.1f} s")
        subs = sorted(str(p) for p in (collected / "submissions").iterdir())
        lines.append(f"  grade (--launcher srun -j {jobs}): "
                     f"{idrrun(teacher, top, 'grade', 'answer', '-j', str(jobs), '--launcher', 'srun', *subs, '--feedback', str(top / 'feedback'), '--report', str(top / 'r.csv')):.1f} s")
        lines.append(f"  return: {idrrun(teacher, top, 'classroom', 'return', 'answer', '--exchange', str(exchange), '--roster', str(roster), '--feedback', str(top / 'feedback')):.1f} s")
        lines.append(f"  load average after {os.getloadavg()[0]:.1f}")
        return lines
    finally:
        if process is not None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for login in students:
            cluster.run("scancel", "-u", login)
        left = slurmcluster.stop(cluster)
        for login in students:
            subprocess.run(["pkill", "-KILL", "-u", login], check=False)
            subprocess.run(["userdel", login], check=False, capture_output=True)
        shutil.rmtree(top, ignore_errors=True)
        if left:
            print(f"left after the cluster stopped: {left}", file=sys.stderr)


def main() -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--students", type=int, nargs="+", default=[5, 30], metavar="N",
                    help="class sizes, one class each (default 5 30)")
    ap.add_argument("--jobs", type=int, default=4, help="idrrun grade -j (default 4)")
    ap.add_argument("--submitters", type=int, default=4,
                    help="students submitting at once (default 4)")
    args = ap.parse_args()
    if slurmcluster.missing_tools() or os.geteuid() != 0 or shutil.which("useradd") is None:
        sys.exit("classroom_scale: needs SLURM and munge, and root (useradd, the cluster's daemons)")
    if not (VENV / "bin" / "jupyterhub").exists():
        sys.exit(f"classroom_scale: no hub environment in {VENV}: bash hub/install.sh {VENV}")
    lines = [f"# {datetime.date.today()} · {platform.node()} · {os.cpu_count()} cores · "
             f"SLURM test cluster of 3 slurmd on this machine"]
    for n in args.students:
        for line in one_class(n, args.jobs, args.submitters):
            print(line, flush=True)
            lines.append(line)
    bench.report("the classroom at scale: servers, submissions, collect, grade, return", lines,
                 record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
