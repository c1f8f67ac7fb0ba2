"""The run command: launcher (mpirun/srun), profiler, program, arguments, environment; and for
srun, what finds a job step again on the cluster: the node of each task, its cancellation.

A launch has two parts, so that a wrapper that must run on the node, around the program only
(a sandbox), goes between them: `Launch.launcher` (srun or mpirun with their options, and what
makes the remote output line-buffered) and `Launch.program` (profiler, executable, arguments):

    argv = launcher + [wrapper] + program

Every srun of this process is named idrrun-SESSION-N (SESSION: one per process), so that one
step can be cancelled after a timeout or an interrupt (`after`) and an interrupted grader can
cancel all of its steps on every node at once (`cancel_session`), with SLURM's own tools.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import files
from ..errors import MPI_MISSING, ToolNotFound
from ..model import LauncherConfig, ProcResult, RunRequest, Settings
from . import boundary, proc

# One per process: every SLURM job or step this process starts is named with it.
SESSION = uuid.uuid4().hex[:8]
_counter = itertools.count(1)

# Run by slurmstepd on the node before each task of an idrrun step (srun --task-prolog), outside
# any sandbox of the program: it writes where the task runs into a folder of the client (on the
# shared file system) and takes that folder's name out of the program's environment.
TASK_PROLOG = """\
#!/bin/sh
# idrrun: where each task of a job step runs (written by slurmstepd, not by the program)
d=$IDRRUN_STEP_RECORDS
echo "unset IDRRUN_STEP_RECORDS"
if [ -n "$d" ] && [ -d "$d" ]; then
  printf '%s %s.%s\\n' "$SLURMD_NODENAME" "$SLURM_JOB_ID" "$SLURM_STEP_ID" > "$d/$SLURM_PROCID"
fi
exit 0
"""

# How long after a cancel the controller may still list the step before we say so.
CANCEL_WAIT = 10.0

SRUN_DEFAULTS = {"tasks": "--ntasks=", "threads": "--cpus-per-task=", "gpus": "--gres=gpu:",
                 "nodes": "--nodes="}


@dataclass(frozen=True)
class Step:
    """One srun on the cluster, and how to find it again."""

    name: str  # --job-name: the job's name outside an allocation, the step's inside one
    records: Path  # one file per task, written by the task prolog: "NODE JOBID.STEPID"


@dataclass(frozen=True)
class Launch:
    launcher: tuple[str, ...]  # () for a program run directly
    program: tuple[str, ...]  # what runs on the node(s): profiler, executable, arguments
    env: Mapping[str, str]
    notes: tuple[str, ...] = ()
    step: Step | None = None  # set for srun
    # The command as the student reads it: argv without idrrun's own wrappers (the rank
    # variables' shell, the profiler's launch mark); () when it is argv.
    shown_argv: tuple[str, ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        return (*self.launcher, *self.program)

    @property
    def shown(self) -> tuple[str, ...]:
        return self.shown_argv or self.argv

    def around_box(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(outside, inside) a sandbox. srun stays outside: it starts the step as idrrun's
        user and speaks with SLURM's daemons; the box is made on the node around each task.
        mpirun goes inside with its ranks, which reach it through the box's own /tmp and
        loopback: a box per rank cuts them off from it (MPI_Init fails in PMIx)."""
        if self.step is not None:
            return self.launcher, self.program
        return (), self.argv


# Between mpirun and the program, a shell that gives each rank the variables a program written
# for srun reads to pick its GPU (IDRIS's init_openacc.h: SLURM_LOCALID, "impossible to determine
# the local rank of the process" without it), from Open MPI's own, then execs the program (the
# same process, so mpirun, the profiler and the signals see the program). mpirun's `-x VAR=VALUE`
# cannot: it gives every rank the same value. A value already set (a run inside an allocation)
# is kept, and nothing is set under another MPI (no OMPI_ variables: an empty SLURM_LOCALID
# would read as rank 0 everywhere). SLURM_JOB_ID and the like are left alone: they tell Open MPI
# to talk to SLURM.
RANK_VARIABLES = ("/bin/sh", "-c",
                  'if [ -n "${OMPI_COMM_WORLD_LOCAL_RANK-}" ]; then export '
                  'SLURM_LOCALID="${SLURM_LOCALID-$OMPI_COMM_WORLD_LOCAL_RANK}" '
                  'SLURM_PROCID="${SLURM_PROCID-$OMPI_COMM_WORLD_RANK}" '
                  'SLURM_NTASKS="${SLURM_NTASKS-$OMPI_COMM_WORLD_SIZE}"; fi; exec "$0" "$@"')


def without_wrappers(argv: Sequence[str]) -> tuple[str, ...]:
    """argv without idrrun's `/bin/sh -c '…; exec "$0" "$@"'` wrappers (RANK_VARIABLES, the
    profiler's launch mark): what the student would type."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "/bin/sh" and i + 2 < len(argv) and argv[i + 1] == "-c" and \
                argv[i + 2].endswith('exec "$0" "$@"'):
            i += 3
            continue
        out.append(argv[i])
        i += 1
    return tuple(out)


def _flag(flag: str, value: int) -> tuple[str, ...]:
    """IDRIS site files write "--ntasks=" (glued) or "-np" (separate word)."""
    if not flag:
        return ()
    return (f"{flag}{value}",) if flag.endswith(("=", ":")) else (flag, str(value))


def launcher_for(request: RunRequest, settings: Settings) -> LauncherConfig | None:
    launcher = settings.launcher
    if launcher.kind == "none":
        if request.mpi_ranks is None:
            return None
        return LauncherConfig(kind="mpirun", command="mpirun", tasks="-np")
    if launcher.kind == "srun":
        return _with_srun_defaults(launcher)
    if not launcher.command:
        return LauncherConfig(kind=launcher.kind, command="mpirun", tasks=launcher.tasks or "-np",
                              threads=launcher.threads, gpus=launcher.gpus, nodes=launcher.nodes,
                              options=launcher.options, builds=launcher.builds)
    return launcher


def _with_srun_defaults(launcher: LauncherConfig) -> LauncherConfig:
    """A site file that names its srun but not every flag still gets SLURM's spellings."""
    return LauncherConfig(kind="srun", command=launcher.command or "srun",
                          tasks=launcher.tasks or SRUN_DEFAULTS["tasks"],
                          threads=launcher.threads or SRUN_DEFAULTS["threads"],
                          gpus=launcher.gpus or SRUN_DEFAULTS["gpus"],
                          nodes=launcher.nodes or SRUN_DEFAULTS["nodes"],
                          options=launcher.options, builds=launcher.builds)


def _executable(launcher: LauncherConfig) -> list[str]:
    words = launcher.command.split()
    exe = shutil.which(words[0])
    if exe is None:
        hint = MPI_MISSING if launcher.kind == "mpirun" else "run on a SLURM login node"
        raise ToolNotFound(f"launcher '{words[0]}' not found on PATH: {hint}")
    return [exe, *words[1:]]


@functools.lru_cache(maxsize=8)
def _cluster_has_gpus(sinfo: str, slurm_conf: str) -> bool | None:
    """Whether any node of the cluster offers a gpu GRES; None when sinfo cannot tell."""
    env = dict(os.environ, SLURM_CONF=slurm_conf) if slurm_conf else None
    result = proc.run([sinfo, "--noheader", "--format=%G"], what="probe", timeout=10,
                      spec=proc.ProcSpec(env=env))
    if not result.ok:
        return None
    return any(line.strip().startswith("gpu") for line in result.output.splitlines())


def _gpu_option(launcher: LauncherConfig, exe: str, gpus: int,
                env: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """`-g N` as srun's option, unless the cluster has no GPUs at all: srun would refuse the
    request ("Invalid generic resource"), so the run goes on without it and says so."""
    sinfo = Path(exe).with_name("sinfo")
    if sinfo.exists() and _cluster_has_gpus(str(sinfo), env.get("SLURM_CONF", "")) is False:
        return (), (f"-g {gpus}: this cluster has no GPUs (sinfo lists no gpu GRES), so srun is "
                    "not asked for any; the program runs on CPU nodes")
    return _flag(launcher.gpus, gpus), ""


def task_prolog(cache_dir: Path) -> Path:
    """The task prolog script, in the cache (which every node must see, as the builds)."""
    path = cache_dir / "slurm" / "task-prolog.sh"
    try:
        current = path.read_text()
    except OSError:
        current = ""
    if current != TASK_PROLOG:
        files.write_atomic(path, TASK_PROLOG)
    if path.stat().st_mode & 0o111 != 0o111:
        path.chmod(0o755)
    return path


def _srun(launcher: LauncherConfig, exe: list[str], cache_dir: Path, *, tasks: int,
          nodes: int | None, threads: int | None, seconds: float,
          gpus: tuple[str, ...] = ()) -> tuple[list[str], Step, dict[str, str]]:
    """srun's part of the argv for one step, its Step, and the environment it needs."""
    name = f"idrrun-{SESSION}-{next(_counter)}"
    records = cache_dir / "slurm" / "steps" / name
    records.mkdir(parents=True, exist_ok=True)
    argv = [*exe, *launcher.options, *_flag(launcher.tasks, tasks)]
    if nodes is not None:
        argv += _flag(launcher.nodes, nodes)
    if threads is not None:
        argv += _flag(launcher.threads, threads)
    argv += gpus
    # The limit goes to SLURM too (whole minutes); idrrun enforces it locally as well.
    argv += [f"--job-name={name}", f"--time={max(1, math.ceil(seconds / 60))}",
             f"--task-prolog={task_prolog(cache_dir)}"]
    return argv, Step(name, records), {"IDRRUN_STEP_RECORDS": str(records)}


def command(
    request: RunRequest, executable: Path, settings: Settings, base_env: Mapping[str, str],
    profiler_prefix: tuple[str, ...] = (), profiler_env: Mapping[str, str] | None = None,
) -> Launch:
    """argv and environment of the run; base_env already holds what the build needs (the
    family's run environment)."""
    env = dict(base_env)
    if request.threads is not None:
        env["OMP_NUM_THREADS"] = str(request.threads)
    launcher = launcher_for(request, settings)
    argv: list[str] = []
    step: Step | None = None
    if launcher is None:
        notes = _unlaunched(request)
    elif launcher.kind == "srun":
        argv, step, notes = _srun_launcher(request, launcher, settings.cache_dir, env)
    else:
        argv, notes = _mpirun_launcher(request, launcher, env)
    # After the launcher, before the program: one profile per task under srun or mpirun.
    env.update(profiler_env or {})
    program = (*profiler_prefix, str(executable), *request.program_args)
    shown = (*without_wrappers(argv), *without_wrappers(profiler_prefix), str(executable),
             *request.program_args)
    return Launch(launcher=tuple(argv), program=program, env=env, notes=tuple(notes), step=step,
                  shown_argv=shown)


def _unlaunched(request: RunRequest) -> list[str]:
    """What a run without launcher says of the launcher's options it was given."""
    notes = []
    if request.gpus is not None:
        notes.append("-g/--gpus only applies with a launcher (srun); ignored")
    if request.nodes is not None:
        notes.append("-N/--nodes only applies with a launcher (srun); ignored")
    return notes


def _srun_launcher(request: RunRequest, launcher: LauncherConfig, cache_dir: Path,
                   env: dict[str, str]) -> tuple[list[str], Step, list[str]]:
    """srun's part of the run's argv, its step and notes; adds to `env` what the step needs."""
    exe = _executable(launcher)
    notes: list[str] = []
    gpus: tuple[str, ...] = ()
    if request.gpus is not None:
        gpus, note = _gpu_option(launcher, exe[0], request.gpus, env)
        notes += [note] if note else []
    argv, step, step_env = _srun(launcher, exe, cache_dir, tasks=request.mpi_ranks or 1,
                                 nodes=request.nodes, threads=request.threads,
                                 seconds=request.timeout, gpus=gpus)
    env.update(step_env)
    argv.append("--unbuffered")
    # Remote tasks write to a pipe, not a terminal: ask stdio and gfortran for lines.
    env.setdefault("GFORTRAN_UNBUFFERED_PRECONNECTED", "y")
    stdbuf = shutil.which("stdbuf")
    if stdbuf:
        argv += [stdbuf, "-oL", "-eL"]
    return argv, step, notes


def _mpirun_launcher(request: RunRequest, launcher: LauncherConfig,
                     env: dict[str, str]) -> tuple[list[str], list[str]]:
    """mpirun's part of the run's argv and notes; adds to `env` what Open MPI needs."""
    argv = [*_executable(launcher), *launcher.options,
            *_flag(launcher.tasks, request.mpi_ranks or 1)]
    if request.threads is not None:
        argv += _flag(launcher.threads, request.threads)
    notes = ["-N/--nodes only applies with srun; ignored"] if request.nodes is not None else []
    if request.gpus is not None:
        argv += _flag(launcher.gpus, request.gpus)
        if not launcher.gpus:
            notes.append(GPUS_UNDER_MPIRUN.format(gpus=request.gpus))
    # Open MPI refuses root and more ranks than cores unless told; course containers
    # run as root and laptops have few cores. Set both Open MPI 4 and 5 spellings.
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env.setdefault("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe")
    return [*argv, *RANK_VARIABLES], notes


# mpirun has no option for GPUs: every rank sees every GPU of the machine, and the program
# picks one (acc_set_device_num with its local rank, as the course's -m cells do).
GPUS_UNDER_MPIRUN = ("-g/--gpus {gpus} has no effect under mpirun (it has no GPU option): each "
                     "rank sees every GPU here and picks its own, e.g. acc_set_device_num(local rank "
                     "% number of GPUs, acc_device_nvidia)")


def compile_launch(request: RunRequest, settings: Settings, base_env: Mapping[str, str]) -> Launch | None:
    """The compiler as a one-task job step, when the launcher is srun and builds go through it
    ([launcher] builds; `idrrun grade --launcher srun` turns it on). None: compile here.
    The caller puts the compiler's argv in `program`."""
    launcher = launcher_for(request, settings)
    if launcher is None or launcher.kind != "srun" or not launcher.builds:
        return None
    exe = _executable(launcher)
    argv, step, step_env = _srun(launcher, exe, settings.cache_dir, tasks=1, nodes=1, threads=None,
                                 seconds=request.compile_timeout)
    return Launch(launcher=tuple(argv), program=(), env={**base_env, **step_env}, step=step)


# How long the check that a node sees the cache may take, a wait in the queue included.
SEES_TIMEOUT = 120.0
# What the check prints on the node: the first word says whether the folder was there.
_SEES = 'if [ -d "$1" ]; then echo idrrun-seen "$SLURMD_NODENAME"; else echo idrrun-unseen "$SLURMD_NODENAME"; fi'


def node_sees(settings: Settings, folder: Path) -> tuple[bool | None, str]:
    """Whether a one-task job step sees `folder`, made here: (True, NODE), (False, NODE), or
    (None, why) when the step did not run to say. The builds and runs of a grading through
    srun happen in the cache, on the nodes: a cache on a file system they do not share (a
    login node's /tmp, a home the nodes do not mount) fails every row there, each as the
    student's compile failure. No task prolog: it lives in the cache too."""
    launcher = _with_srun_defaults(settings.launcher)
    argv = [*_executable(launcher), *launcher.options, *_flag(launcher.tasks, 1),
            f"--job-name=idrrun-{SESSION}-{next(_counter)}", "--time=1",
            "/bin/sh", "-c", _SEES, "sh", str(folder)]
    result = proc.run(argv, what="check", timeout=SEES_TIMEOUT, spec=proc.ProcSpec())
    for line in reversed(result.output.splitlines()):
        words = line.split()
        if words[:1] in (["idrrun-seen"], ["idrrun-unseen"]):
            return words[0] == "idrrun-seen", " ".join(words[1:2]) or "?"
    if not result.ok:
        cancel_session()  # (a step still waiting in the queue)
    return None, f"{' '.join(argv[:2])} ... {result.describe()}: {result.output.strip()[-300:]}"


def scratch_root(settings: Settings) -> Path | None:
    """Where a grader's scratch copies go when their steps run on other nodes: the cache, which
    the nodes see (a login node's /tmp is its own). None: the system's temporary folder."""
    if settings.launcher.kind != "srun":
        return None
    # a box's own uid passes through to its folder, lists nothing; someone else's is refused
    return boundary.own_dir(settings.cache_dir / "scratch", 0o711, parents=True)


# ---------------------------------------------------------------------------------------------
# After a step: its placement, and what is left of it on the cluster


def placement(step: Step) -> tuple[str, ...]:
    """The node of each task, in rank order, from the task prolog's records ("" where a task
    left none: it never started)."""
    nodes: dict[int, str] = {}
    try:
        for entry in step.records.iterdir():
            if entry.name.isdigit():
                words = entry.read_text(errors="replace").split()
                nodes[int(entry.name)] = words[0] if words else ""
    except OSError:
        return ()
    return tuple(nodes.get(rank, "") for rank in range(max(nodes) + 1)) if nodes else ()


def describe_placement(nodes: Sequence[str]) -> str:
    """"ranks 0-1 on n1, 2-3 on n2" (ranks as srun numbers them)."""
    parts: list[str] = []
    for node, group in itertools.groupby(enumerate(nodes), key=lambda item: item[1]):
        ranks = [rank for rank, _ in group]
        span = str(ranks[0]) if len(ranks) == 1 else f"{ranks[0]}-{ranks[-1]}"
        parts.append(f"{span} on {node or '?'}")
    return "ranks " + ", ".join(parts)


def _listed(match: Callable[[str], bool], env: Mapping[str, str] | None) -> list[str]:
    """Ids of this user's jobs and job steps whose name matches: a job started by srun outside
    an allocation (pending or running) carries the name; inside one, only its step does."""
    ids: list[str] = []
    for what in ((), ("--steps",)):
        result = proc.run([shutil.which("squeue") or "squeue", "--me", "--noheader", "--format=%i %j", *what],
                          what="cancel", timeout=10, spec=proc.ProcSpec(env=env))
        for line in result.output.splitlines():
            words = line.split(maxsplit=1)
            if len(words) == 2 and match(words[1].strip()):
                job = words[0].split(".")[0]
                if words[0] not in ids and job not in ids:
                    ids.append(words[0])
    return ids


def _cancel(match: Callable[[str], bool], env: Mapping[str, str] | None) -> tuple[list[str], bool]:
    """Cancel every job and step that matches, then wait until the controller lists none.
    Returns (what was cancelled, whether nothing is listed any more)."""
    ids = _listed(match, env)
    if ids:
        proc.run([shutil.which("scancel") or "scancel", *ids], what="cancel", timeout=15,
                 spec=proc.ProcSpec(env=env))
    deadline = time.monotonic() + CANCEL_WAIT
    while True:
        left = _listed(match, env)
        if not left:
            return ids, True
        if time.monotonic() > deadline:
            return ids, False
        time.sleep(0.2)


def after(launched: Launch, result: ProcResult | None) -> tuple[tuple[str, ...], list[str]]:
    """Once the launcher has exited: where the step ran, and, when it did not end well, its
    cancellation on the cluster (a killed srun does not always take its step along)."""
    step = launched.step
    if step is None:
        return (), []
    notes: list[str] = []
    nodes = placement(step)
    if result is not None and not result.ok:
        killed = result.timed_out or result.interrupted or result.signal_name is not None
        cancelled, gone = _cancel(lambda name: name == step.name, launched.env)
        if not gone:
            notes.append(f"the job step {step.name} was cancelled but squeue still lists it")
        elif killed or cancelled:
            notes.append("job step cancelled on the cluster")
    shutil.rmtree(step.records, ignore_errors=True)
    return nodes, notes


def cancel_session(session: str = SESSION, env: Mapping[str, str] | None = None) -> tuple[list[str], bool]:
    """Cancel, on every node, every job step of a session: this process's (an interrupted
    grader), or an earlier process's that was killed outright and could not do it itself."""
    prefix = f"idrrun-{session}-"
    return _cancel(lambda name: name.startswith(prefix), env)
