"""The only module that starts processes.

Every call names what it runs ("compile", "run", "probe"), takes an argv list (never a shell
string), has a deadline, and returns a ProcResult whatever happens: a program that crashes, hangs
or cannot start is a result, not an exception. One run is three steps:

    spawn(argv, what, spec) -> Running    (the jail, the command (compose.py), the process)
    pump(running, deadline) -> Ending     (output forwarded until exit, deadline or Ctrl-C)
    finish(running, ending) -> ProcResult (drain, reap, the guard's status, cleanup)

A ProcSpec says everything of a run but its argv, its name and its deadline.
"""

from __future__ import annotations

import codecs
import logging
import os
import pty
import selectors
import signal
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..model import Limits, ProcResult, Protections
from . import compose, guard, jail as jail_mod, leftovers, sandbox
from .jail import Jail
from .sandbox import Box

log = logging.getLogger("idrrun.proc")

OutputSink = Callable[[str], None]
# Told the seconds a run has been running, about every TICK_SECONDS while it runs.
TickSink = Callable[[float], None]
TICK_SECONDS = 1.0

TRUNCATION_NOTE = "\n[idrrun: output truncated at {cap} bytes; the rest was discarded]\n"

# After a kill, how long each signal gets before the next, stronger one. On an interrupt, SIGINT
# first so that programs (and mpirun, srun) can clean up as after Ctrl-C, as IPython's %%script
# does. On a timeout the program had its time: SIGTERM, then SIGKILL soon (limit + 1 s at most).
_INTERRUPT_ESCALATION: tuple[tuple[signal.Signals, float], ...] = (
    (signal.SIGINT, 0.5),
    (signal.SIGTERM, 0.5),
    (signal.SIGKILL, 1.0),
)
_TIMEOUT_ESCALATION: tuple[tuple[signal.Signals, float], ...] = (
    (signal.SIGTERM, 0.3),
    (signal.SIGKILL, 1.0),
)
# Once the main child has exited and its group is killed, output is read until its end for at
# most this long: a grandchild in a session of its own that keeps the terminal open must not
# hold the cell forever.
_DRAIN_SECONDS = 1.0
# How often a sandboxed run's folders are measured against their disk caps.
_DISK_CHECK_SECONDS = 0.5


class _Stop:
    """An interrupt for every run of this process, whichever thread watches it: a signal's
    KeyboardInterrupt reaches only the main thread, and a grader's rows run in others. After
    `stop_all()` each pump kills its run as after Ctrl-C and `spawn` starts nothing until
    `resume()`. A pipe's read end sits in each run's selector: one byte written wakes every
    pump at once, however long its wait."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pipe: tuple[int, int] | None = None
        self.stopped = False

    def fd(self) -> int:
        with self._lock:
            if self._pipe is None:
                read, write = os.pipe()  # not inherited by children (PEP 446)
                os.set_blocking(read, False)
                self._pipe = (read, write)
            return self._pipe[0]

    def stop(self) -> None:
        with self._lock:
            if not self.stopped and self._pipe is not None:
                os.write(self._pipe[1], b"!")
            self.stopped = True

    def resume(self) -> None:
        with self._lock:
            self.stopped = False
            if self._pipe is not None:
                try:
                    os.read(self._pipe[0], 4096)
                except BlockingIOError:
                    pass


_STOP = _Stop()


def stop_all() -> None:
    """Interrupt every run of this process, in every thread, and start no new one until
    resume(): what an interrupted grader does, whose rows run in worker threads."""
    _STOP.stop()


def resume() -> None:
    """Runs may start again (after stop_all)."""
    _STOP.resume()


@dataclass(frozen=True)
class Deadline:
    """A moment on the monotonic clock: every wait is bounded by one."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()


@dataclass
class Running:
    """A started process and what is needed to finish it (mutable: it follows a live process)."""

    argv: tuple[str, ...]
    what: str
    popen: subprocess.Popen[bytes]
    fd: int  # where its output arrives (a pty master or a pipe)
    collector: _Collector
    selector: selectors.BaseSelector
    start: float
    terminal: bool
    jail: Jail | None = None
    status_fd: int = -1  # read end of the guard's status pipe
    status_text: str = ""  # what the guard said so far
    eof: bool = False
    box: Box | None = None
    pidfd: int = -1  # readable when the process has exited (Linux 5.3+): no polling for it
    exited: bool = False
    next_disk_check: float = 0.0
    over_disk: str | None = None  # why the box went past its disk caps
    inner_reports: bool = False  # a guard inside the box says the program's status (compose.py)
    seat: sandbox.Seat = sandbox.Seat()  # its place among the boxes: left at finish
    on_tick: TickSink | None = None
    next_tick: float = 0.0

    def tick(self, wait: float) -> float:
        """Tell on_tick the time when a tick is due; the wait, shortened to the next tick."""
        if self.on_tick is None:
            return wait
        now = time.monotonic()
        if now >= self.next_tick:
            self.on_tick(now - self.start)
            # From its start, not from now: a slow sink does not make the ticks drift.
            self.next_tick = self.start + TICK_SECONDS * (1 + int((now - self.start) / TICK_SECONDS))
        return max(0.0, min(wait, self.next_tick - now))

    def guard_status(self) -> guard.GuardStatus:
        return guard.read_status(self.status_text)


# How pump() ended: the process exited, the deadline passed, or the user interrupted.
Ending = Literal["exited", "timed out", "interrupted"]
EXITED: Ending = "exited"
TIMED_OUT: Ending = "timed out"
INTERRUPTED: Ending = "interrupted"


@dataclass(frozen=True)
class ProcSpec:
    """How a process is started and watched: everything of one run but its argv, its name
    ("compile", "run", "probe") and its deadline."""

    cwd: Path | None = None
    env: Mapping[str, str] | None = None  # None: this process's own
    on_output: OutputSink | None = None  # its output, live, as it comes
    on_tick: TickSink | None = None  # how long it has run, every TICK_SECONDS (a cell's clock)
    terminal: bool = False  # a pseudo-terminal as stdout and stderr (line-buffered C stdio)
    max_output: int = 1 << 20  # bytes kept; the rest is discarded, with a note
    # With both: through the guard and its jail (jail.py, guard.c). limits.stdin: its input.
    protections: Protections | None = None
    limits: Limits | None = None
    gpu_run: bool = False  # no address-space limit: a CUDA context maps ~13 GiB
    cgroups: bool = True  # False: rlimits only (a compile: see jail.open_jail)
    box: Box | None = None  # the sandbox (sandbox.py)
    outer: tuple[str, ...] = ()  # a launcher that stays outside the box (srun)
    # A run of hidden arguments: at the "uid" level no other box runs beside it (sandbox.beside).
    alone: bool = False


def spawn(argv: Sequence[str], *, what: str, spec: ProcSpec = ProcSpec()) -> Running | ProcResult:
    """Start argv as `spec` says (compose.py composes the command: guard, launcher, box).
    Returns a ProcResult instead when it could not start."""
    program = tuple(str(a) for a in argv)
    if _STOP.stopped:
        return ProcResult(argv=program, returncode=None, interrupted=True)
    seat = sandbox.beside(spec.box, spec.alone, lambda: _STOP.stopped)
    if seat is None:
        return ProcResult(argv=program, returncode=None, interrupted=True)
    try:
        started = _spawn(program, what, spec)
    except BaseException:
        sandbox.leave(seat)
        raise
    if isinstance(started, ProcResult):
        sandbox.leave(seat)
    else:
        started.seat = seat
    return started


def _spawn(program: tuple[str, ...], what: str, spec: ProcSpec) -> Running | ProcResult:
    jail = _open_jail(spec)
    status_r, status_w, inner_w = _status_pipe(jail)
    composed = compose.compose(program, spec.env if spec.env is not None else os.environ,
                               jail=jail, box=spec.box, outer=spec.outer,
                               found=sandbox.look(spec.box, spec.outer),
                               status_fd=status_w, inner_fd=inner_w)
    if isinstance(composed, compose.Refused):
        return _abandon(composed.why, program, jail, (status_r, status_w, inner_w))
    if log.isEnabledFor(logging.INFO):  # quoting the argv is work wasted when nobody logs
        log.info("%s: %s", what, subprocess.list2cmdline(composed.argv))
    master, slave = _open_terminal() if spec.terminal else (-1, -1)
    # The run's clock starts before its process: taken after Popen returns, a parent kept off
    # the CPU meanwhile (a loaded machine) would count less than the program took (a 500 ms
    # sleep was measured 0.499 s under the tests' load).
    start = time.monotonic()
    popen = _start(composed, spec, slave)
    _close(status_w, inner_w, slave)  # the child has its own copies
    if isinstance(popen, str):
        return _abandon(popen, composed.argv, jail, (status_r, master))
    fd = master if spec.terminal else _stdout(popen)
    selector, pidfd = _watch(popen, fd, status_r)
    return Running(argv=composed.argv, what=what, popen=popen, fd=fd,
                   collector=_Collector(spec.on_output, spec.max_output), selector=selector,
                   start=start, terminal=spec.terminal, jail=jail, status_fd=status_r,
                   box=spec.box, pidfd=pidfd, inner_reports=composed.inner_reports,
                   on_tick=spec.on_tick, next_tick=start + TICK_SECONDS)


def _open_jail(spec: ProcSpec) -> Jail | None:
    """The run's jail (its cgroups, its guard's arguments) when it has protections and limits."""
    if spec.protections is None or spec.limits is None:
        return None
    return jail_mod.open_jail(spec.protections, spec.limits, spec.cwd or Path.cwd(), spec.gpu_run,
                              spec.cgroups)


def _status_pipe(jail: Jail | None) -> tuple[int, int, int]:
    """The guard's status pipe, when the run has a guard: its read end, its write end and a
    second write end for the inner guard of a box (the command inherits those compose.py
    names); -1 for each when it has none."""
    if not compose.guarded(jail):
        return -1, -1, -1
    read, write = os.pipe()
    return read, write, os.dup(write)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def _abandon(error: str, argv: tuple[str, ...], jail: Jail | None,
             fds: tuple[int, ...]) -> ProcResult:
    """The run could not start: what was opened for it closed, its jail removed."""
    _close(*fds)
    if jail is not None:
        jail_mod.close_jail(jail, None)
    return ProcResult(argv=argv, returncode=None, start_error=error)


def _stdout(popen: subprocess.Popen[bytes]) -> int:
    assert popen.stdout is not None
    return popen.stdout.fileno()


def _open_terminal() -> tuple[int, int]:
    """A pseudo-terminal (master, slave) that passes "\\n" as written, not as "\\r\\n"."""
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    return master, slave


def _start(composed: compose.Composed, spec: ProcSpec,
           slave: int) -> subprocess.Popen[bytes] | str:
    """The composed command started in a session of its own (its output on the terminal
    `slave`, else a pipe), or why it could not start."""
    stdin_file = spec.limits.stdin if spec.limits is not None else None
    try:
        stdin = open(stdin_file, "rb") if stdin_file is not None else subprocess.DEVNULL
    except OSError as exc:
        return f"cannot open the standard input file {stdin_file}: {exc.strerror}"
    try:
        return subprocess.Popen(
            composed.argv,
            cwd=spec.cwd,
            env=dict(composed.env),
            stdin=stdin,
            stdout=slave if spec.terminal else subprocess.PIPE,
            stderr=slave if spec.terminal else subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            pass_fds=composed.pass_fds,
        )
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        if stdin is not subprocess.DEVNULL:
            stdin.close()  # type: ignore[union-attr]


def _watch(popen: subprocess.Popen[bytes], fd: int,
           status_fd: int) -> tuple[selectors.BaseSelector, int]:
    """A selector that wakes on output (`fd`), on the guard's news and, through a pidfd, on
    the exit; and that pidfd (-1 on an old kernel: the exit is polled for)."""
    os.set_blocking(fd, False)
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    if status_fd >= 0:
        os.set_blocking(status_fd, False)
        selector.register(status_fd, selectors.EVENT_READ)
    try:
        pidfd = os.pidfd_open(popen.pid)
        selector.register(pidfd, selectors.EVENT_READ)
    except (OSError, AttributeError):
        pidfd = -1
    # Registered last: a stop_all() since spawn's look at the flag has left its byte there.
    selector.register(_STOP.fd(), selectors.EVENT_READ)
    return selector, pidfd


def _read_status(running: Running) -> None:
    if running.status_fd < 0:
        return
    while True:
        try:
            data = os.read(running.status_fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            running.selector.unregister(running.status_fd)
            os.close(running.status_fd)
            running.status_fd = -1
            return
        running.status_text += data.decode("ascii", errors="replace")


def _poll(running: Running, timeout: float) -> None:
    """Wait up to `timeout` for output or guard news, and take what came."""
    for key, _ in running.selector.select(timeout):
        if key.fd == running.fd:
            running.eof = _read_available(running.fd, running.collector)
            if running.eof:
                running.selector.unregister(running.fd)
        elif key.fd == running.pidfd:
            running.exited = True
            running.selector.unregister(running.pidfd)
        elif key.fd == _STOP.fd():
            running.selector.unregister(key.fd)  # seen once: pump looks at the flag
        else:
            _read_status(running)


def pump(running: Running, deadline: Deadline) -> Ending:
    """Forward output until the process exits, the deadline passes or the user interrupts;
    on the last two, the whole run is killed (stronger signals each time) before returning."""
    popen = running.popen
    try:
        while True:
            if _STOP.stopped:
                raise KeyboardInterrupt  # stop_all() from another thread
            remaining = deadline.remaining()
            if remaining <= 0:
                log.info("%s: deadline reached, killing the group", running.what)
                _kill_group(running, _TIMEOUT_ESCALATION)
                return TIMED_OUT
            if running.box is not None and running.box.disk_caps and \
                    time.monotonic() >= running.next_disk_check:
                running.next_disk_check = time.monotonic() + _DISK_CHECK_SECONDS
                running.over_disk = sandbox.over_disk_caps(running.box)
                if running.over_disk is not None:
                    log.info("%s: %s, killing the group", running.what, running.over_disk)
                    _kill_group(running, _TIMEOUT_ESCALATION)
                    return EXITED
            if running.pidfd >= 0:
                # Output, the guard's news and the exit all wake the same select: the exit
                # is seen the moment it happens (a Popen.wait back-off can add 10 ms).
                _poll(running, running.tick(min(remaining, 0.5 if running.box is not None else 5.0)))
                if running.exited:
                    popen.wait()
                    return EXITED
            elif not running.eof:
                _poll(running, running.tick(min(remaining, 0.1)))
                if popen.poll() is not None:
                    return EXITED
            else:
                try:
                    popen.wait(timeout=running.tick(min(remaining, 0.5)))
                    return EXITED
                except subprocess.TimeoutExpired:
                    pass
    except KeyboardInterrupt:
        log.info("%s: interrupted, killing the group", running.what)
        _kill_group(running, _INTERRUPT_ESCALATION)
        return INTERRUPTED


def remove_leftovers(uid: int) -> list[str]:
    """After a box of the uid level (every process of `uid` gone): its files in the
    world-writable folders and its SysV IPC objects (leftovers.py), removed; what went."""
    notes = leftovers.remove_files(uid)
    objects = leftovers.ipc_objects(uid)
    argv = leftovers.ipcrm_argv(objects)
    if argv:
        removed = run(argv, what="remove IPC objects", timeout=30)
        notes.append(f"removed {len(objects)} SysV IPC objects left by the program"
                     if removed.ok else f"the program's SysV IPC objects: {' '.join(argv)} "
                     f"{removed.describe()}: {removed.output.strip()[-200:]}")
    return notes


def finish(running: Running, ending: Ending) -> ProcResult:
    """The process is gone or killed: take what is still buffered (briefly), make sure nothing
    of its group outlives it, and say how it ended."""
    popen = running.popen
    try:
        # What is left of the group first: then the output ends (EOF, EIO on a pty) as soon as
        # the last writer is gone. Waiting for that end, not for a quiet moment: under load, a
        # pty hands over what the program wrote last through a kernel worker, later than 20 ms
        # (CI lost the last lines of a solution's output so, and failed its check).
        _signal_group(popen.pid, signal.SIGKILL)
        drain_until = time.monotonic() + _DRAIN_SECONDS
        while not running.eof and (left := drain_until - time.monotonic()) > 0:
            _poll(running, left)
        returncode = _reap(popen)
        # The guard has exited: its pipe holds everything it said.
        if running.status_fd >= 0:
            os.set_blocking(running.status_fd, True)
            _read_status(running)
        limit: str | None = None
        notes: tuple[str, ...] = ()
        start_error: str | None = None
        if running.jail is not None:
            status = running.guard_status()
            start_error = _box_not_made(running, ending, status)
            if status.child is not None:
                _signal_group(status.child, signal.SIGKILL)
            if status.program is not None:
                returncode = status.program
            if status.returncode is None:
                # The guard did not finish its own sweep (it was killed): sweep here.
                jail_mod.sweep(running.jail.run_id)
            limit, notes = jail_mod.close_jail(running.jail, status.program)
            if running.over_disk is not None:
                limit, notes = "disk", notes + (f"the program wrote {running.over_disk} in its folder",)
            if running.box is not None and running.box.support.level == "uid":
                sandbox.end_uid(running.box.uid)
                notes += tuple(remove_leftovers(running.box.uid))
    finally:
        sandbox.leave(running.seat)
        running.seat = sandbox.Seat()
        running.selector.close()
        if running.pidfd >= 0:
            os.close(running.pidfd)
        if running.status_fd >= 0:
            os.close(running.status_fd)
        if running.terminal:
            os.close(running.fd)
        elif popen.stdout is not None:
            popen.stdout.close()
    running.collector.finish()
    return ProcResult(
        argv=running.argv,
        returncode=None if start_error is not None else returncode,
        start_error=start_error,
        timed_out=ending == TIMED_OUT,
        interrupted=ending == INTERRUPTED,
        output=running.collector.text(),
        truncated=running.collector.truncated,
        seconds=time.monotonic() - running.start,
        limit=limit,
        notes=notes,
    )


# How much of bubblewrap's own output says why it could not make the box.
_BWRAP_SAID_CHARS = 300


def _box_not_made(running: Running, ending: Ending, status: guard.GuardStatus) -> str | None:
    """Why the box was never made, when the grader can prove the program never started: the
    guard inside the box never wrote its launch mark (it writes it just before it executes
    the program, on a pipe the program never holds). Our failure then, not the program's, and
    what was printed is bubblewrap's own. Once the mark is there, whatever the program did to
    its guard, its box or its output is its result: never decided by what the output says."""
    if not running.inner_reports or status.launched or status.inner is not None or \
            ending != EXITED:
        return None
    said = " ".join(running.collector.text().split())[-_BWRAP_SAID_CHARS:]
    code = f"exit status {status.returncode}" if status.returncode is not None else \
        "no status"
    return f"the sandbox could not be set up (bubblewrap: {code}" + \
        (f"; it said: {said})" if said else ")")


def run(argv: Sequence[str], *, what: str, timeout: float,
        spec: ProcSpec = ProcSpec()) -> ProcResult:
    """Run argv to completion or deadline; stream its merged stdout/stderr to spec.on_output.

    spec.terminal gives the child a pseudo-terminal as stdout and stderr: C stdio and the
    gfortran runtime then flush at every line, so output reaches the notebook while the
    program runs, in the order it was written. Standard input is /dev/null unless
    spec.limits.stdin names a file: a kernel's stdin is a pipe nobody writes to, and a scanf
    on it would wait forever.

    The child leads a new session; on timeout or interrupt its whole process group is killed.
    With spec.protections and spec.limits, the run goes through the isolation layer (jail.py,
    guard.c): the guard, a cgroup, resource limits, and a sweep of escaped processes at the end.
    """
    deadline = Deadline.after(timeout)
    started = spawn(argv, what=what, spec=spec)
    if isinstance(started, ProcResult):
        return started
    try:
        ending = pump(started, deadline)
    except BaseException:
        sandbox.leave(started.seat)
        started.seat = sandbox.Seat()
        raise
    return finish(started, ending)


def capture(argv: Sequence[str], *, what: str, timeout: float = 5.0) -> ProcResult:
    """Run a short probe (a --version, nvidia-smi) and keep its output."""
    return run(argv, what=what, timeout=timeout, spec=ProcSpec(max_output=64 * 1024))


class _Collector:
    """Decodes output incrementally, keeps it up to a cap, forwards it live."""

    def __init__(self, sink: OutputSink | None, cap: int) -> None:
        self._sink = sink
        self._cap = cap
        self._seen = 0
        self._parts: list[str] = []
        # Student programs print anything; undecodable bytes are shown escaped, never raised.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")
        self.truncated = False

    def feed(self, data: bytes) -> None:
        if self.truncated:
            return
        room = self._cap - self._seen
        self._seen += len(data)
        if len(data) > room:
            data = data[:room]
            self.truncated = True
        text = self._decoder.decode(data, final=self.truncated)
        if self.truncated:
            text += TRUNCATION_NOTE.format(cap=self._cap)
        self._emit(text)

    def finish(self) -> None:
        if not self.truncated:
            self._emit(self._decoder.decode(b"", final=True))

    def _emit(self, text: str) -> None:
        if not text:
            return
        text = text.replace("\r\n", "\n")
        self._parts.append(text)
        if self._sink is not None:
            self._sink(text)

    def text(self) -> str:
        return "".join(self._parts)


def _read_available(fd: int, collector: _Collector) -> bool:
    """Read what is there; True at end of file (a pty reports EIO once all writers closed)."""
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not data:
            return True
        collector.feed(data)


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _kill_group(running: Running,
                escalation: tuple[tuple[signal.Signals, float], ...]) -> None:
    """Signal the run's group (and, through a guard, the program's own group), stronger each time."""
    popen = running.popen
    for sig, grace in escalation:
        _poll(running, 0)  # the guard may have just said which pid is the program
        child = running.guard_status().child
        if child is not None:
            _signal_group(child, sig)
            if sig != signal.SIGKILL:
                _signal_group(child, signal.SIGCONT)  # a stopped program must see its SIGTERM
        if not _signal_group(popen.pid, sig) and child is None:
            return
        end = time.monotonic() + grace
        while time.monotonic() < end:
            if popen.poll() is not None and not _group_alive(popen.pid) and \
                    (child is None or not _group_alive(child)):
                return
            time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    """True while a live process is in the group. Zombies do not count: a fork bomb's children,
    once killed, may wait a while for init to reap them, and they hold nothing."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _reap(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
