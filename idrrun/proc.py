"""The only module that starts processes.

Every call names what it runs ("compile", "run", "probe"), takes an argv list (never a shell
string), has a deadline, and returns a ProcResult whatever happens: a program that crashes, hangs
or cannot start is a result, not an exception.
"""

from __future__ import annotations

import codecs
import logging
import os
import pty
import selectors
import signal
import subprocess
import tempfile
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from . import isolation
from .model import Limits, ProcResult, Protections

log = logging.getLogger("idrrun.proc")

OutputSink = Callable[[str], None]

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
# Data still readable once the main child has exited is drained for at most this long: a
# background grandchild that keeps the terminal open must not hold the cell forever.
_DRAIN_SECONDS = 0.2


def run(
    argv: Sequence[str],
    *,
    what: str,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    on_output: OutputSink | None = None,
    terminal: bool = False,
    max_output: int = 1 << 20,
    protections: Protections | None = None,
    limits: Limits | None = None,
    gpu_run: bool = False,
) -> ProcResult:
    """Run argv to completion or deadline; stream its merged stdout/stderr to on_output.

    terminal=True gives the child a pseudo-terminal as stdout and stderr: C stdio and the
    gfortran runtime then flush at every line, so output reaches the notebook while the
    program runs, in the order it was written. Standard input is /dev/null, always: a kernel's
    stdin is a pipe nobody writes to, and a scanf on it would wait forever.

    The child leads a new session; on timeout or interrupt its whole process group is killed.
    With protections and limits, the run goes through the isolation layer (isolation.py): the
    guard, a cgroup, resource limits, and a sweep of escaped processes at the end.
    """
    argv = tuple(str(a) for a in argv)
    jail = None
    if protections is not None and limits is not None:
        jail = isolation.open_jail(protections, limits, cwd or Path.cwd(),
                                   Path(tempfile.gettempdir()), gpu_run)
        argv = jail.wrap(argv)
        env = {**(dict(env) if env is not None else os.environ), **jail.env}
    stdin_file = limits.stdin if limits is not None else None
    log.info("%s: %s", what, subprocess.list2cmdline(argv))
    start = time.monotonic()
    deadline = start + timeout
    master = slave = -1
    if terminal:
        master, slave = pty.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST  # no "\n" -> "\r\n" translation
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
    try:
        stdin = open(stdin_file, "rb") if stdin_file is not None else subprocess.DEVNULL
    except OSError as exc:
        return ProcResult(argv=argv, returncode=None,
                          start_error=f"cannot open the standard input file {stdin_file}: {exc.strerror}")
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=stdin,
            stdout=slave if terminal else subprocess.PIPE,
            stderr=slave if terminal else subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        for fd in (master, slave):
            if fd >= 0:
                os.close(fd)
        if jail is not None:
            isolation.close_jail(jail)
        return ProcResult(argv=argv, returncode=None, start_error=exc.strerror or str(exc))
    finally:
        if stdin is not subprocess.DEVNULL:
            stdin.close()  # type: ignore[union-attr]
    if terminal:
        os.close(slave)
        fd = master
    else:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
    os.set_blocking(fd, False)

    collector = _Collector(on_output, max_output)
    timed_out = interrupted = False
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    eof = False
    try:
        while True:
            try:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    log.info("%s: deadline of %.1f s reached, killing the group", what, timeout)
                    _kill_group(proc, _TIMEOUT_ESCALATION, jail)
                    break
                if not eof:
                    if sel.select(min(remaining, 0.1)):
                        eof = _read_available(fd, collector)
                    if proc.poll() is not None:
                        break
                else:
                    # Output closed: only the exit is left to wait for (Popen.wait polls with
                    # a short back-off, so a fast program is reaped within a millisecond).
                    try:
                        proc.wait(timeout=min(remaining, 0.5))
                        break
                    except subprocess.TimeoutExpired:
                        pass
            except KeyboardInterrupt:
                interrupted = True
                log.info("%s: interrupted, killing the group", what)
                _kill_group(proc, _INTERRUPT_ESCALATION, jail)
                break
        # The main child is gone (or killed). Take what is still buffered, briefly, then make
        # sure nothing of its group outlives it.
        drain_until = time.monotonic() + _DRAIN_SECONDS
        while not eof and time.monotonic() < drain_until:
            if not sel.select(0.02):
                break
            eof = _read_available(fd, collector)
        _signal_group(proc.pid, signal.SIGKILL)
        returncode = _reap(proc)
        limit: str | None = None
        notes: tuple[str, ...] = ()
        if jail is not None:
            child = jail.child_pid()
            if child is not None:
                _signal_group(child, signal.SIGKILL)
            own = jail.status()
            if own is not None:
                returncode = own
            isolation.sweep(jail.run_id)
            limit, notes = isolation.close_jail(jail)
    finally:
        sel.close()
        if terminal:
            os.close(master)
        elif proc.stdout is not None:
            proc.stdout.close()
    collector.finish()
    return ProcResult(
        argv=argv,
        returncode=returncode,
        timed_out=timed_out,
        interrupted=interrupted,
        output=collector.text(),
        truncated=collector.truncated,
        seconds=time.monotonic() - start,
        limit=limit,
        notes=notes,
    )


def capture(argv: Sequence[str], *, what: str, timeout: float = 5.0) -> ProcResult:
    """Run a short probe (a --version, nvidia-smi) and keep its output."""
    return run(argv, what=what, timeout=timeout, max_output=64 * 1024)


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


def _kill_group(proc: subprocess.Popen[bytes],
                escalation: tuple[tuple[signal.Signals, float], ...],
                jail: isolation.Jail | None) -> None:
    """Signal the run's group (and, through a guard, the program's own group), stronger each time."""
    for sig, grace in escalation:
        child = jail.child_pid() if jail is not None else None
        if child is not None:
            _signal_group(child, sig)
            if sig != signal.SIGKILL:
                _signal_group(child, signal.SIGCONT)  # a stopped program must see its SIGTERM
        if not _signal_group(proc.pid, sig) and child is None:
            return
        end = time.monotonic() + grace
        while time.monotonic() < end:
            if proc.poll() is not None and not _group_alive(proc.pid) and \
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
