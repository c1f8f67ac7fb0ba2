"""The guard (guard.c): the small C supervisor every run and compile goes through.

Its command line is one typed record, GuardArgs (outside the sandbox) or InnerGuardArgs (inside
it), written here as `--name=value` options that guard.c reads by name (a test checks that
guard.c's OPTIONS tables list these fields, in order). It reports on a pipe that only idrrun
holds: "child PID" when the program started, then "exit N" or "signal N" when it ended; the
inner guard adds "inner launched" just before it executes the program (the launch mark: the box
was made), then "inner exit N" / "inner signal N", the program's own status, which bubblewrap
cannot tell apart from `exit 128+N` (`read_status`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).with_name("guard.c")


@dataclass(frozen=True)
class GuardArgs:
    status_fd: int  # write end of the status pipe (idrrun passes it, the program never gets it)
    parent: int  # pid of idrrun: when it dies, the guard removes the run
    file_size: int  # RLIMIT_FSIZE in bytes, 0: none
    nproc: int  # RLIMIT_NPROC, 0: none
    address_space: int  # RLIMIT_AS in bytes, 0: none
    cgroups: tuple[Path, ...]  # cgroup.procs files to join before starting the program
    uid: int = -1  # run the program as this user (root only; -1: as idrrun's own user)
    gid: int = -1
    sweep: int = 1  # 1: kill what carries the run's marker afterwards (no cgroup, no PID namespace)
    # RLIMIT_STACK in bytes (-1: unlimited, 0: as inherited), never above the hard limit
    stack: int = 0
    # The CPUs the program may run on (sched_setaffinity); (): as inherited (run/lanes.py)
    cpus: tuple[int, ...] = ()

    def argv(self, guard: Path) -> tuple[str, ...]:
        """The guard's command line, up to and including "--" (the program follows)."""
        return _argv(self, guard)


@dataclass(frozen=True)
class InnerGuardArgs:
    inner_status_fd: int  # the descriptor number the pipe has inside the sandbox

    def argv(self, guard: Path) -> tuple[str, ...]:
        return _argv(self, guard)


def _argv(record: GuardArgs | InnerGuardArgs, guard: Path) -> tuple[str, ...]:
    words = [str(guard)]
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        text = ":".join(str(p) for p in value) if isinstance(value, tuple) else str(value)
        words.append(f"--{f.name.replace('_', '-')}={text}")
    return (*words, "--")


@dataclass(frozen=True)
class GuardStatus:
    """What the guard said on its pipe."""

    child: int | None = None  # pid of the program (leader of its own process group)
    returncode: int | None = None  # the program's own status (negative: signal); None: not reported
    inner: int | None = None  # the same, from inside the sandbox (the program, not bubblewrap)
    # The inner guard's launch mark: the box was made and the program was about to start, so
    # whatever happened next is the program's doing.
    launched: bool = False

    @property
    def program(self) -> int | None:
        """The program's status: the inner guard's when there is one."""
        return self.inner if self.inner is not None else self.returncode


def read_status(text: str) -> GuardStatus:
    child = returncode = inner = None
    launched = False
    for line in text.splitlines():
        words = line.split()
        try:
            if words == ["inner", "launched"]:
                launched = True
            elif len(words) == 2 and words[0] == "child":
                child = int(words[1])
            elif len(words) == 2 and words[0] in ("exit", "signal"):
                returncode = int(words[1]) * (1 if words[0] == "exit" else -1)
            elif len(words) == 3 and words[0] == "inner" and words[1] in ("exit", "signal"):
                inner = int(words[2]) * (1 if words[1] == "exit" else -1)
        except ValueError:
            continue
    return GuardStatus(child, returncode, inner, launched)
