"""What one run starts: the guard, the launcher, the box and the program as one argv and its
environment, composed from typed values only (no process, no pipe, no file read: proc.spawn).

The layers, outside in, each there only when the run has it:

    guard --status-fd=W ...   the jail's limits, the box's uid (or, behind a launcher, none)
    launcher                  srun or mpirun, which must stay outside the box (`outer`)
    env -u K... K=V...        behind a launcher: the box's environment, set on the node
    setpriv --reuid=U ...     behind a launcher: the box's uid, taken on the node
    bwrap ... guard --inner-status-fd=I --   the box ("namespaces" level) and its inner guard
    program                   with a profiler or mpirun in front when the caller put them there
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .guard import GuardArgs
from .jail import Jail
from .sandbox import Box, Found, bwrap_argv, drop_to, env_argv

NO_GUARD = "a sandboxed run needs the run guard, which could not be built"
NO_SETPRIV = ("a sandboxed run through a launcher needs setpriv (util-linux) to take the box's uid "
              "on the node")


@dataclass(frozen=True)
class Composed:
    """What to start: the argv, its environment, and the descriptors it must inherit."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    pass_fds: tuple[int, ...] = ()
    # The inner guard, inside the box, reports on the status pipe too (its second descriptor):
    # the program's own status, which bubblewrap's cannot tell from `exit 128+N`.
    inner_reports: bool = False


@dataclass(frozen=True)
class Refused:
    """Why the run cannot start as asked (a start error, not an exception)."""

    why: str


def guarded(jail: Jail | None) -> bool:
    """Whether the run goes through the guard: then the caller opens the status pipe."""
    return jail is not None and jail.guard is not None and jail.guard_args is not None


def compose(program: Sequence[str], env: Mapping[str, str], *, jail: Jail | None = None,
            box: Box | None = None, outer: Sequence[str] = (), found: Found = Found(),
            status_fd: int = -1, inner_fd: int = -1) -> Composed | Refused:
    """The command of one run.

    program: what runs in the box (a profiler or mpirun in front of the executable, when the
    caller put them there); env: the run's environment (the caller's, or this process's);
    jail: its limits and guard (jail.open_jail), None for a bare process; box: the sandbox;
    outer: a launcher that must stay outside the box (srun: it starts as idrrun's user);
    found: what sandbox.look saw of this machine for this box (its folders, setpriv);
    status_fd, inner_fd: the write end of the guard's status pipe and a second descriptor of
    it for the inner guard, opened by the caller when `guarded(jail)`; only those the command
    uses are in `pass_fds`, and the caller closes both once it started."""
    refused = _refusal(jail, box, outer, found)
    if refused is not None:
        return Refused(refused)
    if jail is None:
        return Composed((*outer, *program), dict(env))
    run_env = _environment(env, jail, box, outer)
    if jail.guard is None or jail.guard_args is None:
        # Limits without a guard to apply them (it could not be built): the cgroups only. The
        # launcher stays (a compile meant for srun must not run here instead).
        return Composed((*outer, *program), run_env)
    assert status_fd >= 0, "a guarded run needs the status pipe"
    args = dataclasses.replace(jail.guard_args, status_fd=status_fd)
    if box is None:
        return Composed((*args.argv(jail.guard), *outer, *program), run_env, (status_fd,))
    return _boxed(program, run_env, jail.guard, args, jail.env, box, outer, found, inner_fd)


def _refusal(jail: Jail | None, box: Box | None, outer: Sequence[str], found: Found) -> str | None:
    if box is None:
        return None
    if not guarded(jail):
        return NO_GUARD
    if outer and drop_to(box, found.setpriv) is None:
        return NO_SETPRIV
    return None


def _environment(env: Mapping[str, str], jail: Jail, box: Box | None,
                 outer: Sequence[str]) -> dict[str, str]:
    """The environment the command starts with. A box started here gets its own clean one;
    through a launcher, the launcher gets the run's whole environment (srun needs its own
    variables, the step's records) and the box its clean one, set on the node (`_on_node`)."""
    base = box.env if box is not None and not outer else env
    return {**base, **jail.env}


def _boxed(program: Sequence[str], run_env: Mapping[str, str], guard: Path, args: GuardArgs,
           jail_env: Mapping[str, str], box: Box, outer: Sequence[str], found: Found,
           inner_fd: int) -> Composed:
    """guard, launcher, what takes the box's environment and uid on the node, bwrap and the
    inner guard, program."""
    # Processes that escape the program are the PID namespace's to end; without one, the
    # guard sweeps them by their marker.
    namespaces = box.support.level == "namespaces"
    args = dataclasses.replace(args, sweep=int(not namespaces))
    if outer:
        inner = _on_node(run_env, {**box.env, **jail_env}, box, found)
    else:
        args = dataclasses.replace(args, uid=box.uid, gid=box.gid)
        inner = ()
    # No descriptor crosses a launcher: behind one, the program's status is the step's.
    reports = namespaces and not outer
    if namespaces:
        inner += bwrap_argv(box, box.inner_guard or guard, inner_fd if reports else -1, found)
    pass_fds = (args.status_fd, inner_fd) if reports else (args.status_fd,)
    return Composed((*args.argv(guard), *outer, *inner, *program), run_env, pass_fds, reports)


def _on_node(passed: Mapping[str, str], box_env: Mapping[str, str], box: Box,
             found: Found) -> tuple[str, ...]:
    """Behind a launcher (srun), which must start as idrrun's own user, whom the cluster knows:
    the box's environment and uid, taken on the node just before the box."""
    drop = drop_to(box, found.setpriv)
    assert drop is not None  # refused before
    return (*env_argv(passed, box_env), *drop)
