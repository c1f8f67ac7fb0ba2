"""The srun launcher against a real one-node SLURM cluster started here (munge, slurmctld, slurmd).

The cluster runs as root with ProctrackType=proctrack/linuxproc and TaskPlugin=task/none, from a
configuration written to a temporary folder (SLURM_CONF); the daemons stop at the end.
"""

from __future__ import annotations

import csv
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT, Kernel

pytestmark = pytest.mark.slurm

NEEDED = ("slurmctld", "slurmd", "munged", "srun", "sinfo", "squeue", "scancel")
MISSING = [c for c in NEEDED if not (shutil.which(c) or Path("/usr/sbin", c).exists())]


def _bin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


CONF = """ClusterName=idrrun-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
KillWait=2
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
"""


def _sinfo_idle(env: dict[str, str]) -> bool:
    r = subprocess.run([_bin("sinfo"), "-h", "-o", "%t"], env=env, capture_output=True, text=True, timeout=10)
    return r.returncode == 0 and r.stdout.strip() in ("idle", "mix", "alloc")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if MISSING:
        pytest.skip(f"SLURM is not installed ({', '.join(MISSING)}): apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    host = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(CONF.format(host=host, d=d, cpus=os.cpu_count() or 2))
    env = dict(os.environ, SLURM_CONF=str(conf))
    started: list[subprocess.Popen[bytes]] = []
    own_munge = subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode != 0
    if own_munge:
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", _bin("munged")], check=True, timeout=30)
    for daemon in ("slurmctld", "slurmd"):
        started.append(subprocess.Popen([_bin(daemon), "-D", "-f", str(conf)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + 60
    while not _sinfo_idle(env):
        if time.monotonic() > deadline:
            logs = "".join(p.read_text()[-2000:] for p in d.glob("*.log"))
            pytest.fail(f"the SLURM test cluster did not come up:\n{logs}")
        time.sleep(0.5)
    try:
        yield env
    finally:
        subprocess.run([_bin("scancel"), "--user", "root"], env=env, capture_output=True, timeout=30)
        for p in reversed(started):
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if own_munge:
            subprocess.run(["pkill", "-x", "munged"], capture_output=True)


def _squeue(env: dict[str, str]) -> str:
    return subprocess.run([_bin("squeue"), "-h"], env=env, capture_output=True, text=True, timeout=10).stdout.strip()


@pytest.fixture(scope="module")
def srun_kernel(cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    from jupyter_client.manager import start_new_kernel

    cwd = tmp_path_factory.mktemp("srun-nb")
    (cwd / "idrrun.toml").write_text('[launcher]\nkind = "srun"\ntasks = "--ntasks="\n'
                                     'threads = "--cpus-per-task="\noptions = ["--partition=debug"]\n')
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=dict(cluster, PYTHONPATH=PYTHONPATH))
    k = Kernel(km, kc, cwd)
    assert k.run("%load_ext idrrun").status == "ok"
    try:
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


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


def test_timeout_cancels_the_job_step(srun_kernel: Kernel, cluster: dict[str, str]) -> None:
    cell = ("%%idrrun --timeout 3\n#include <stdio.h>\n#include <unistd.h>\nint main(void){\n"
            "  printf(\"started\\n\");\n  sleep(300);\n  return 0;\n}\n")
    r = srun_kernel.run(cell)
    assert r.status == "error" and "timed out after 3 s" in r.error_text
    assert "started" in r.stdout
    assert "job step cancelled on the cluster" in r.stdout
    assert _squeue(cluster) == ""


def test_grade_through_srun(cluster: dict[str, str], tmp_path: Path) -> None:
    ex = tmp_path / "examples"
    (ex / "C").mkdir(parents=True)
    ok = '#include <stdio.h>\n#include <stdlib.h>\nint main(void){ printf("C[0] = 42 on %s\\n", getenv("SLURM_JOB_ID") ? "slurm" : "local"); return 0; }\n'
    wrong = ok.replace("42", "41")
    (ex / "C" / "answer_exercise.c").write_text(wrong)
    (ex / "C" / "answer_solution.c").write_text(ok)
    (ex / "answer.toml").write_text(
        'name = "answer"\ntimeout = 20\n[sources.c]\nexercise = "C/answer_exercise.c"\n'
        'solution = "C/answer_solution.c"\n[args]\nhost = []\n[[check]]\nkind = "exit_ok"\n'
        '[[check]]\nkind = "value"\nlabel = "C[0]"\npattern = \'C\\[0\\]\\s*=\\s*(\\S+)\'\nexpected = 42\n'
        '[[check]]\nkind = "line"\nregex = "on slurm"\n')
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "ann.c").write_text(ok)
    (klass / "ben.c").write_text(wrong)
    (klass / "cid.c").write_text("#include <unistd.h>\nint main(void){ sleep(300); return 0; }\n")
    env = dict(cluster, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(ex))
    r = subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", "answer", *sorted(map(str, klass.iterdir())),
                        "--launcher", "srun", "-j", "2", "--timeout", "4", "--report", str(tmp_path / "r.csv")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr  # graded, whatever the verdicts
    rows = {row["student"]: row for row in csv.DictReader((tmp_path / "r.csv").open())}
    assert rows["ann"]["verdict"] == "pass", rows["ann"]
    assert rows["ben"]["verdict"] == "fail" and "C[0] is 41" in rows["ben"]["reasons"]
    assert rows["cid"]["verdict"] == "fail" and "timed out" in rows["cid"]["reasons"]
    time.sleep(1)
    assert _squeue(cluster) == ""
