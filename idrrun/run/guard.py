"""The guard (guard.c): the small C supervisor every run and compile goes through.

Its command line is one typed record, GuardArgs, written here as `--name=value` options that
guard.c reads by name (a test checks that guard.c's OPTIONS table lists these fields, in order).
It reports on a pipe that only idrrun holds: "child PID" when the program started, then
"exit N" or "signal N" when it ended (`read_status`).
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

    def argv(self, guard: Path) -> tuple[str, ...]:
        """The guard's command line, up to and including "--" (the program follows)."""
        words = [str(guard)]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            text = ":".join(str(p) for p in value) if isinstance(value, tuple) else str(value)
            words.append(f"--{f.name.replace('_', '-')}={text}")
        return (*words, "--")


@dataclass(frozen=True)
class GuardStatus:
    """What the guard said on its pipe."""

    child: int | None = None  # pid of the program (leader of its own process group)
    returncode: int | None = None  # the program's own status (negative: signal); None: not reported


def read_status(text: str) -> GuardStatus:
    child = returncode = None
    for line in text.splitlines():
        kind, _, value = line.partition(" ")
        try:
            if kind == "child":
                child = int(value)
            elif kind == "exit":
                returncode = int(value)
            elif kind == "signal":
                returncode = -int(value)
        except ValueError:
            continue
    return GuardStatus(child, returncode)
