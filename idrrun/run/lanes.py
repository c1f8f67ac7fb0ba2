"""GPU lanes: a graded run whose checks are timed has its GPU and CPUs to itself; every other
graded process shares the GPUs and keeps to the remaining CPUs.

A share of GPU time measured while seven other programs use the same GPU and CPUs says more
about the neighbours than about the program (at `-j 8` on an H100 both profile_cg solutions
failed their gpu_busy check, which they pass alone). DOMjudge pins each judge to a core for the
same reason. So, on a grading machine with GPUs:

- one lane per GPU; each keeps a few CPUs of its own (`split_cpus`), which only its timed runs
  use: every other graded process, compiles included, runs on the rest (`Lanes.rest`; the
  guard's sched_setaffinity, Limits.cpus);
- a timed run waits until its lane's GPU is free of every other graded run, then holds it
  alone; an ordinary run holds a GPU shared with other ordinary runs, spread over the lanes;
  each run sees its lane's GPU only (CUDA_VISIBLE_DEVICES);
- the holds are locks (fcntl.flock) on one file per GPU, so that two gradings of the same
  user at once share the lanes (rooms.lanes_folder says who may share them). A waiting timed
  run closes a gate first: ordinary runs that come after it wait behind it instead of keeping
  the GPU busy for ever (flock alone lets readers starve a writer).

    split_cpus(cpus, lanes) / layout(gpus, cpus, folder) / visible(count, environ)   pure
    for_machine(count, settings, environ) -> (Lanes | None, notes)
    hold(lanes, timed, every) -> Held (a context manager: the lock is held inside it)
    held_alone(lanes) / use_since(lanes, before, started) -> LaneUse   what timed runs held

A grading says how long its timed runs held each GPU alone against its wall time (LaneUse):
the class's timed runs go one after the other on a GPU, so that figure bounds the grading's
time, and what the GPU was held beyond the programs' own runs is what a grading can still cut.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..model import Lanes, Limits, Settings
from . import boundary, rooms
from .sandbox import Box

# CPUs a lane keeps for its timed runs: the program's own thread, the CUDA driver's threads
# and the tracer's (CUPTI hands its buffers over on a thread of its own).
LANE_CPUS = 4
NOT_SHARED = ("the GPU lanes' lock folder is not this user's own ({why}): this grading's lanes "
              "are not shared with other gradings on this machine")


def split_cpus(cpus: Sequence[int], lanes: int) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """Each lane's own CPUs and the rest. Lanes take the last CPUs (CPU 0 takes most of the
    interrupts), LANE_CPUS each, at most half of the machine between them and at least one
    each; a machine with fewer CPUs than lanes + 1 keeps none apart: its lanes then share all."""
    ordered = sorted(set(cpus))
    if lanes < 1:
        return (), tuple(ordered)
    if len(ordered) < lanes + 1:
        return tuple(tuple(ordered) for _ in range(lanes)), tuple(ordered)
    each = max(1, min(LANE_CPUS, len(ordered) // (2 * lanes)))
    first = len(ordered) - each * lanes
    kept = ordered[first:]
    return tuple(tuple(kept[i * each:(i + 1) * each]) for i in range(lanes)), tuple(ordered[:first])


def layout(gpus: Sequence[str], cpus: Sequence[int], folder: Path) -> Lanes:
    """The lanes of these GPUs (CUDA_VISIBLE_DEVICES names) on these CPUs."""
    cores, rest = split_cpus(cpus, len(gpus))
    return Lanes(gpus=tuple(gpus), cores=cores, rest=rest, folder=folder)


def visible(count: int, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The GPUs a grader may give out, as its runs' CUDA_VISIBLE_DEVICES will name them: the
    grader's own CUDA_VISIBLE_DEVICES when it has one (a part of the machine given to it), else
    0 to count - 1 (nvidia-smi's GPUs, which that variable does not filter)."""
    given = environ.get("CUDA_VISIBLE_DEVICES")
    if given is None:
        return tuple(str(i) for i in range(count))
    names = []
    for name in (g.strip() for g in given.split(",")):
        if not name or name.startswith("-"):
            break  # CUDA ignores an invalid entry and every one after it
        names.append(name)
    return tuple(names)


def for_machine(count: int, settings: Settings,
                environ: Mapping[str, str] | None = None) -> tuple[Lanes | None, list[str]]:
    """The lanes a grading on this machine runs in (count: the GPUs nvidia-smi lists), and
    what to tell the teacher; None without a GPU, or when SLURM places the runs (srun: the
    nodes' GPUs are the cluster's to share out)."""
    env = os.environ if environ is None else environ
    gpus = visible(count, env)
    if not gpus or settings.launcher.kind == "srun":
        return None, []
    try:
        folder = rooms.lanes_folder()
        notes = []
    except boundary.NotOwnFolder as exc:
        folder = rooms.remember(Path(tempfile.mkdtemp(prefix="idrrun-lanes-")))
        notes = [NOT_SHARED.format(why=exc.strerror)]
    lanes = layout(gpus, sorted(os.sched_getaffinity(0)), folder)
    return lanes, notes + [describe(lanes)]


def describe(lanes: Lanes) -> str:
    """One line for the teacher: the lanes, their CPUs, the rest."""
    each = "; ".join(f"GPU {gpu}: CPUs {cpu_list(cores)}" for gpu, cores in zip(lanes.gpus, lanes.cores))
    return (f"GPU lanes: {each} for the timed runs (each alone on its GPU); every other graded "
            f"process on CPUs {cpu_list(lanes.rest)}")


def cpu_list(cpus: Sequence[int]) -> str:
    """(0, 1, 2, 5) -> "0-2,5"."""
    parts = []
    for _, run in itertools.groupby(enumerate(sorted(cpus)), lambda iv: iv[1] - iv[0]):
        block = [c for _, c in run]
        parts.append(str(block[0]) if len(block) == 1 else f"{block[0]}-{block[-1]}")
    return ",".join(parts)


@dataclass(frozen=True)
class Held:
    """The lane a run holds: its GPU(s), its CPUs, and whether it holds its GPU alone."""

    gpus: tuple[str, ...]
    cpus: tuple[int, ...]
    alone: bool

    @property
    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus)}

    def limits(self, limits: Limits) -> Limits:
        return replace(limits, cpus=self.cpus)

    def placed(self, env: Mapping[str, str], box: Box | None) -> tuple[dict[str, str], Box | None]:
        """A run planned before its lane was held (its environment, its box) given this
        lane's GPU: CUDA_VISIBLE_DEVICES, which a box keeps (sandbox.ENV_KEEP)."""
        gpus = self.env
        return {**env, **gpus}, replace(box, env={**box.env, **gpus}) if box is not None else None

    def describe(self) -> str:
        if not self.gpus:
            return NO_GPU_CODE
        gpus = f"GPU {self.gpus[0]}" if len(self.gpus) == 1 else f"GPUs {','.join(self.gpus)}"
        return f"{gpus} alone, CPUs {cpu_list(self.cpus)}" if self.alone else gpus


_turn = itertools.count()
_turn_lock = threading.Lock()


def _rotation(n: int) -> list[int]:
    """The lanes in the order this run tries them: each run starts one further, so that the
    runs of a grading spread over the GPUs."""
    with _turn_lock:
        start = next(_turn) % n
    return [(start + i) % n for i in range(n)]


def _file(folder: Path, gpu: str, kind: str) -> Path:
    return folder / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', gpu)}.{kind}"


def _lock(path: Path, operation: int) -> int | None:
    """A new descriptor of `path` holding flock(operation); None when a LOCK_NB lock is taken.
    Every hold opens its own descriptor: flock locks of two descriptors conflict, also in one
    process, so that threads of a grading exclude each other as processes do."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, operation)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _take(lanes: Lanes, gpu: str, alone: bool, wait: bool) -> int | None:
    """The GPU's lock, alone or shared, through its gate (a waiting timed run holds the gate,
    so that ordinary runs that come later wait behind it); None when not waiting and taken."""
    nb = 0 if wait else fcntl.LOCK_NB
    gate = _lock(_file(lanes.folder, gpu, "gate"), fcntl.LOCK_EX | nb)
    if gate is None:
        return None
    try:
        return _lock(_file(lanes.folder, gpu, "lock"), (fcntl.LOCK_EX if alone else fcntl.LOCK_SH) | nb)
    finally:
        os.close(gate)


# Seconds this process held each GPU alone (timed runs), by its lanes' folder and the GPU.
_held_alone: dict[tuple[str, str], float] = {}
_held_lock = threading.Lock()


def _count_alone(lanes: Lanes, gpu: str, seconds: float) -> None:
    with _held_lock:
        key = (str(lanes.folder), gpu)
        _held_alone[key] = _held_alone.get(key, 0.0) + seconds


def held_alone(lanes: Lanes | None) -> dict[str, float]:
    """Seconds this process's timed runs have held each of these lanes' GPUs alone, so far."""
    if lanes is None:
        return {}
    with _held_lock:
        return {gpu: _held_alone.get((str(lanes.folder), gpu), 0.0) for gpu in lanes.gpus}


@dataclass(frozen=True)
class LaneUse:
    """What a grading's timed runs held of its GPUs: each GPU's seconds alone, against the
    grading's wall time."""

    wall: float
    held: Mapping[str, float]  # GPU -> seconds held alone

    def describe(self) -> str:
        """"GPU 0 held alone by the timed runs 24.1 s of the 60.3 s (40 %)"."""
        wall = max(self.wall, 1e-9)
        each = ", ".join(f"GPU {gpu} {seconds:.1f} s ({100 * seconds / wall:.0f} %)"
                         for gpu, seconds in self.held.items())
        return f"GPUs held alone by the timed runs: {each} of the {self.wall:.1f} s of grading"

    def as_dict(self) -> dict[str, object]:
        return {"wall_seconds": round(self.wall, 3),
                "held_alone_seconds": {gpu: round(s, 3) for gpu, s in self.held.items()}}


def use_since(lanes: Lanes | None, before: Mapping[str, float], started: float) -> LaneUse | None:
    """What the timed runs held since `before` (held_alone's then) and `started` (a
    time.monotonic()): None without lanes."""
    if lanes is None or not lanes.gpus:
        return None
    now = held_alone(lanes)
    return LaneUse(time.monotonic() - started,
                   {gpu: now[gpu] - before.get(gpu, 0.0) for gpu in lanes.gpus})


# A run whose build has no GPU code (checks/directives.reaches_gpu) holds no GPU: it runs on
# the CPUs every other graded process shares, its GPUs hidden, and never keeps a timed run of
# another program waiting (a class's start files, on the GPU arguments, ran 6.5 s each alone on
# the H200's GPU; a ladder's serial rungs 10-20 s each).
NO_GPU_CODE = "no GPU (no GPU code in the program)"


def without_gpu(lanes: Lanes) -> Held:
    """The hold of a run whose program has no GPU code: no GPU (CUDA_VISIBLE_DEVICES empty),
    the shared CPUs."""
    return Held((), lanes.rest, False)


@contextlib.contextmanager
def hold(lanes: Lanes | None, timed: bool, every: bool = False) -> Iterator[Held | None]:
    """Inside: a lane held for one run (None without lanes). timed: its GPU alone, on its
    lane's CPUs, once every other graded run left that GPU; else shared, on `rest`. every: a
    run of several ranks, which shares every GPU. A free lane is taken first (each run starts
    its search one lane further); when none is free, the run waits for the first it tried."""
    if lanes is None or not lanes.gpus:
        yield None
        return
    boundary.check_own(lanes.folder)
    held: list[int] = []
    try:
        if every:
            for gpu in lanes.gpus:  # in one order for all: no two runs wait for each other
                fd = _take(lanes, gpu, False, True)
                assert fd is not None
                held.append(fd)
            yield Held(lanes.gpus, lanes.rest, False)
            return
        order = _rotation(len(lanes.gpus))
        chosen = None
        for lane in order:
            fd = _take(lanes, lanes.gpus[lane], timed, False)
            if fd is not None:
                held.append(fd)
                chosen = lane
                break
        if chosen is None:
            chosen = order[0]
            fd = _take(lanes, lanes.gpus[chosen], timed, True)
            assert fd is not None
            held.append(fd)
        cpus = lanes.cores[chosen] if timed else lanes.rest
        taken = time.monotonic()
        try:
            yield Held((lanes.gpus[chosen],), cpus, timed)
        finally:
            if timed:
                _count_alone(lanes, lanes.gpus[chosen], time.monotonic() - taken)
    finally:
        for fd in held:
            os.close(fd)
