"""run/compose: the command of a run for every combination of guard, box, launcher and profiler,
composed from values built here by hand; no process starts and no file is read."""

from __future__ import annotations

from pathlib import Path

from idrrun.model import Limits, SandboxSupport
from idrrun.run import compose
from idrrun.run.compose import Composed, Refused
from idrrun.run.guard import GuardArgs
from idrrun.run.jail import Jail
from idrrun.run.sandbox import Box, Found

GUARD = Path("/cache/guard/idrrun-guard")
PLACED = Path("/room/tools/idrrun-guard")  # the guard's copy a box of its own uid can run
W, I = 7, 8  # the status pipe's write end and its second one, for the inner guard
UID = 1_900_000_123
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/root", "SECRET": "s", "SLURM_CONF": "/etc/slurm.conf"}
BOX_ENV = {"PATH": "/usr/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "ACC_X": "1"}
PROGRAM = ("./prog", "a")
SRUN = ("/usr/bin/srun", "--ntasks=2", "--unbuffered")
MPIRUN = ("/usr/bin/mpirun", "-np", "2")
NAMESPACES = SandboxSupport("namespaces", "/usr/bin/bwrap", True)
UID_LEVEL = SandboxSupport("uid", None, True, "no namespaces")
# What sandbox.look would have seen of a machine with a merged /usr.
FOUND = Found(system=(("/usr", None), ("/bin", "usr/bin")), etc=("passwd",),
              hidden=(Path("/usr/local/lib/idrrun"),), setpriv="/usr/bin/setpriv")

JAIL = Jail(run_id="r1", workdir=Path("/w"), guard=GUARD,
            guard_args=GuardArgs(status_fd=-1, parent=42, file_size=1 << 20, nproc=0,
                                 address_space=0, cgroups=(Path("/cg/idrrun-r1/cgroup.procs"),),
                                 stack=1 << 30),
            cgroup_dirs=(Path("/cg/idrrun-r1"),), cgroup_version=2, limits=Limits())
NO_GUARD = Jail(run_id="r1", workdir=Path("/w"), guard=None, guard_args=None, cgroup_dirs=(),
                cgroup_version=0, limits=Limits())


def box(support: SandboxSupport = NAMESPACES, uid: int = -1, inner_guard: Path | None = None,
        gpu: bool = False) -> Box:
    return Box(workdir=Path("/box/w"), writable=(Path("/box/w"),),
               readable=(Path("/opt/exe/prog"),), hidden=(Path("/usr/local/lib/idrrun"),),
               env=BOX_ENV, gpu=gpu, uid=uid, gid=uid, support=support, inner_guard=inner_guard)


def guard_words(uid: int = -1, sweep: int = 1) -> tuple[str, ...]:
    return (str(GUARD), f"--status-fd={W}", "--parent=42", "--file-size=1048576", "--nproc=0",
            "--address-space=0", "--cgroups=/cg/idrrun-r1/cgroup.procs", f"--uid={uid}",
            f"--gid={uid}", f"--sweep={sweep}", "--stack=1073741824", "--cpus=", "--")


def bwrap_words(inner_guard: Path = GUARD, inner_fd: int = I) -> tuple[str, ...]:
    g = str(inner_guard)
    return ("/usr/bin/bwrap", "--unshare-all", "--die-with-parent",
            "--size", str(1 << 20), "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
            "--dir", "/etc", "--ro-bind", "/etc/passwd", "/etc/passwd",
            "--proc", "/proc", "--dev", "/dev", "--size", str(256 << 20), "--tmpfs", "/tmp",
            "--size", str(1 << 20), "--tmpfs", "/usr/local/lib/idrrun",
            "--remount-ro", "/usr/local/lib/idrrun", "--ro-bind", g, g,
            "--ro-bind-try", "/opt/exe/prog", "/opt/exe/prog", "--bind", "/box/w", "/box/w",
            "--remount-ro", "/dev", "--size", str(64 << 20), "--tmpfs", "/dev/shm",
            "--remount-ro", "/", "--chdir", "/box/w", "--", g, f"--inner-status-fd={inner_fd}", "--")


# The box's environment set on the node, behind a launcher: what the launcher passed on and the
# box must not see is unset (SLURM_* stays: srun's own), then the box's variables.
ON_NODE_ENV = ("env", "--unset=SECRET", "ACC_X=1", "HOME=/tmp", "IDRRUN_RUN=r1", "PATH=/usr/bin",
               "TMPDIR=/tmp")
SETPRIV = ("/usr/bin/setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--")


def composed(**kw: object) -> Composed:
    kw.setdefault("jail", JAIL)
    kw.setdefault("found", FOUND)
    kw.setdefault("status_fd", W)
    kw.setdefault("inner_fd", I)
    result = compose.compose(kw.pop("program", PROGRAM), ENV, **kw)  # type: ignore[arg-type]
    assert isinstance(result, Composed), result
    return result


def test_without_guard_the_program_runs_as_given() -> None:
    bare = composed(jail=None, status_fd=-1, inner_fd=-1)
    assert bare == Composed(PROGRAM, ENV)
    # srun for a compile that needs no guard: the launcher in front
    assert composed(jail=None, outer=SRUN).argv == (*SRUN, *PROGRAM)
    assert not compose.guarded(None) and not compose.guarded(NO_GUARD) and compose.guarded(JAIL)


def test_limits_without_a_guard_keep_the_program_and_mark_its_environment() -> None:
    assert composed(jail=NO_GUARD) == Composed(PROGRAM, {**ENV, "IDRRUN_RUN": "r1"})
    # a compile meant for srun still goes through srun (it used to run here, the launcher lost)
    assert composed(jail=NO_GUARD, outer=SRUN).argv == (*SRUN, *PROGRAM)


def test_guard_without_box() -> None:
    c = composed()
    assert c == Composed((*guard_words(), *PROGRAM), {**ENV, "IDRRUN_RUN": "r1"}, (W,))
    # a compile through srun: the guard outside, srun inside it, as idrrun's user
    assert composed(outer=SRUN).argv == (*guard_words(), *SRUN, *PROGRAM)


def test_box_at_the_namespaces_level_with_idrrun_s_uid() -> None:
    c = composed(box=box())
    assert c.argv == (*guard_words(sweep=0), *bwrap_words(), *PROGRAM)
    # The box's own environment, not the caller's; the inner guard writes on the second end.
    assert c.env == {**BOX_ENV, "IDRRUN_RUN": "r1"}
    assert c.pass_fds == (W, I) and c.inner_reports


def test_box_at_the_namespaces_level_with_a_fresh_uid() -> None:
    c = composed(box=box(uid=UID, inner_guard=PLACED))
    assert c.argv == (*guard_words(uid=UID, sweep=0), *bwrap_words(PLACED), *PROGRAM)
    assert c.pass_fds == (W, I) and c.inner_reports


def test_box_with_a_gpu_binds_the_devices_and_sys() -> None:
    found = Found(gpu_devices=("/dev/nvidia0", "/dev/nvidiactl"), sys=True)
    words = composed(box=box(gpu=True), found=found).argv
    gpu = ("--dev-bind", "/dev/nvidia0", "/dev/nvidia0", "--dev-bind", "/dev/nvidiactl",
           "/dev/nvidiactl", "--ro-bind", "/sys", "/sys", "--remount-ro", "/dev")
    assert any(words[i:i + len(gpu)] == gpu for i in range(len(words)))
    assert "/dev/nvidia0" not in composed(box=box(), found=found).argv


def test_box_at_the_uid_level() -> None:
    c = composed(box=box(UID_LEVEL, uid=UID))
    # no bwrap: the guard takes the uid and sweeps what escaped (no PID namespace to end it)
    assert c == Composed((*guard_words(uid=UID, sweep=1), *PROGRAM),
                         {**BOX_ENV, "IDRRUN_RUN": "r1"}, (W,))


def test_srun_outside_the_box() -> None:
    c = composed(box=box(uid=UID, inner_guard=PLACED), outer=SRUN)
    # srun starts as idrrun's user with the run's whole environment; on the node, env sets the
    # box's, setpriv takes its uid, and no descriptor crosses srun to the inner guard.
    assert c.argv == (*guard_words(uid=-1, sweep=0), *SRUN, *ON_NODE_ENV, *SETPRIV,
                      *bwrap_words(PLACED, -1), *PROGRAM)
    assert c.env == {**ENV, "IDRRUN_RUN": "r1"}
    assert c.pass_fds == (W,) and not c.inner_reports


def test_srun_outside_a_box_of_idrrun_s_uid_needs_no_setpriv() -> None:
    c = composed(box=box(), outer=SRUN, found=Found(system=FOUND.system, etc=FOUND.etc,
                                                   hidden=FOUND.hidden, setpriv=None))
    assert c.argv == (*guard_words(sweep=0), *SRUN, *ON_NODE_ENV, *bwrap_words(GUARD, -1),
                      *PROGRAM)


def test_srun_outside_a_box_at_the_uid_level() -> None:
    c = composed(box=box(UID_LEVEL, uid=UID), outer=SRUN)
    assert c.argv == (*guard_words(uid=-1, sweep=1), *SRUN, *ON_NODE_ENV, *SETPRIV, *PROGRAM)
    assert c.pass_fds == (W,)


def test_srun_without_setpriv_is_a_start_error() -> None:
    refused = compose.compose(PROGRAM, ENV, jail=JAIL, box=box(uid=UID), outer=SRUN,
                              found=Found(setpriv=None), status_fd=W, inner_fd=I)
    assert refused == Refused(compose.NO_SETPRIV)
    assert "setpriv" in refused.why


def test_a_box_without_guard_is_a_start_error() -> None:
    for jail in (None, NO_GUARD):
        assert compose.compose(PROGRAM, ENV, jail=jail, box=box(), found=FOUND) == \
            Refused(compose.NO_GUARD)


def test_mpirun_in_front_of_the_program() -> None:
    # Without a box, mpirun is part of the program: the guard, then mpirun and its ranks.
    program = (*MPIRUN, *PROGRAM)
    assert composed(program=program).argv == (*guard_words(), *MPIRUN, *PROGRAM)
    assert composed(program=program, jail=None, status_fd=-1).argv == program
    # With a box, every rank gets one: mpirun stays outside it, like srun.
    c = composed(box=box(uid=UID), outer=MPIRUN)
    assert c.argv == (*guard_words(sweep=0), *MPIRUN, *ON_NODE_ENV, *SETPRIV,
                      *bwrap_words(GUARD, -1), *PROGRAM)


def test_a_profiler_prefix_runs_inside_the_box() -> None:
    nsys = ("/opt/nsys/bin/nsys", "profile", "-o", "report")
    c = composed(program=(*nsys, *PROGRAM), box=box(uid=UID, inner_guard=PLACED))
    assert c.argv == (*guard_words(uid=UID, sweep=0), *bwrap_words(PLACED), *nsys, *PROGRAM)
    c = composed(program=(*nsys, *PROGRAM), box=box(uid=UID), outer=SRUN)
    assert c.argv[-len(nsys) - len(PROGRAM):] == (*nsys, *PROGRAM)
