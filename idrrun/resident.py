"""A resident `idrrun run`: the caller's side. The server (server.py) has imported idrrun
once and forks a worker per call.

Why: a Python start-up with idrrun's imports costs 0.2-0.4 s, two to four times a small
program's own compile and run (benchmarks/run_overhead.py files). As Gradle's and Bazel's
servers do, a second `idrrun run` within BURST_SECONDS starts one in the background (and runs
in-process itself, as the first did: a lone call leaves nothing running); the next calls
hand it their argv, working folder, environment, umask and standard streams (file descriptors
over a Unix socket, SCM_RIGHTS), and a forked worker runs `idrrun run` with them: it writes
straight to the caller's terminal or pipes, and the caller exits with its exit code. The caller
forwards its signals (Ctrl-C) to the worker; a caller killed outright interrupts it. The streams
are sent once the worker has said its pid; a server that does not answer within START_SECONDS
gets none, and the call runs in-process.

What a worker cannot take from its caller (cgroup, namespaces, resource limits, groups,
niceness, CPU set, the interpreter and its flags, sys.path and the packages there, idrrun's
own files) makes the server's key: a caller that differs in any of them gets another server.
A server leaves after IDLE_SECONDS without a call, or when idrrun's files change. Its socket is
in a folder only its user can enter (`$XDG_RUNTIME_DIR/idrrun`, else `$TMPDIR/idrrun-UID`, as
tmux does), and it serves callers of its own uid only (SO_PEERCRED). IDRRUN_RESIDENT=0: every
call in-process.

This module starts a process outside run/proc.py on purpose: the caller's side must stay
cheaper than a millisecond or two (stdlib already loaded and C modules only, no idrrun import).
"""

from __future__ import annotations

# Only modules Python has loaded at start, or C modules: `socket`, `signal`, `json`, `hashlib`
# and `collections` would cost ~20 ms, more than the 16 ms a call may add to a small program's
# compile and run (issue 13); hence _socket, _signal, _struct, marshal and zlib.
import _signal
import _socket
import _struct
import time as _time
import marshal
import os
import resource
import stat
import sys
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

ENV_SWITCH = "IDRRUN_RESIDENT"  # "0", "off", "no", "false": every call in-process
ENV_IDLE = "IDRRUN_RESIDENT_IDLE"  # seconds a server waits for a call before it leaves
IDLE_SECONDS = 900.0
START_SECONDS = 15.0  # for a worker to say it started, after which the caller runs in-process
# A server is started by the second call within this many seconds (the same key): a lone call
# (a test in a folder of its own, a command typed once) leaves no process behind for IDLE_SECONDS.
BURST_SECONDS = 120.0
HEADER = "!I"  # the request's length, then the request (marshal)
PACKAGE = os.path.dirname(os.path.abspath(__file__))


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "off", "no", "false")


class socket_address:  # noqa: N801  (a context manager used as a function)
    """The address to bind or connect the socket NAME of FOLDER by: its path, or where the path
    is longer than a socket address holds (108 bytes: a deep TMPDIR),
    /proc/self/fd/N/NAME, N a descriptor of FOLDER held open meanwhile."""

    def __init__(self, folder: str, name: str) -> None:
        self.path, self.fd = os.path.join(folder, name), -1
        if len(os.fsencode(self.path)) > UNIX_PATH_MAX:
            self.fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            self.path = f"/proc/self/fd/{self.fd}/{name}"

    def __enter__(self) -> str:
        return self.path

    def __exit__(self, *_: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)


# sockaddr_un's sun_path: 108 bytes with the final NUL
UNIX_PATH_MAX = 107


def folder_path() -> str:
    """Where the servers' sockets and logs are: `$XDG_RUNTIME_DIR/idrrun`, else
    `$TMPDIR/idrrun-UID` (`/tmp` without TMPDIR)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "idrrun")
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", f"idrrun-{os.getuid()}")


def socket_folder() -> str | None:
    """folder_path(), made if needed; None when it is not private (another owner, a symbolic
    link, open to others): then no server is used."""
    uid = os.getuid()
    folder = folder_path()
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        return None
    return folder


def files_state(package: str = PACKAGE) -> list[tuple[str, int, int]]:
    """idrrun's own files (name, size, mtime): an edit or an upgrade means another server.
    (os.scandir, names made by hand: with os.walk and os.path.relpath it took 2.7 ms of every
    call here, for 123 files; 0.8 ms.)"""
    state = []
    todo = [""]
    while todo:
        prefix = todo.pop()
        with os.scandir(os.path.join(package, prefix)) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in ("__pycache__", "course"):
                        todo.append(prefix + entry.name + "/")
                elif entry.name.endswith((".py", ".c", ".h")):
                    info = entry.stat()
                    state.append((prefix + entry.name, info.st_size, info.st_mtime_ns))
    return sorted(state)


def key(package: str = PACKAGE) -> str:
    """What a forked worker inherits from its server rather than from its caller, as 16 hex
    digits (two CRC-32s: a server is found by its key, not protected by it)."""
    # sys.path without its first entry: the script's folder or, with -m, the working folder
    # (the server's own is "/"), which would give every folder its own server
    path = sys.path[1:]
    parts: list[object] = [os.getuid(), os.getgid(), sorted(os.getgroups()), sys.executable,
                           sys.version, repr(sys.flags), path, files_state(package)]
    # what Python reads from the environment once, at its start
    parts += [os.environ.get(v) for v in ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONUTF8", "TZ")]
    # A package installed or removed (a compiler family plug-in, an upgrade) changes its
    # site-packages folder; other entries (a checkout on PYTHONPATH) change with every file
    # written there, and their modules are in idrrun's files or read at import only.
    for entry in path:
        if os.path.basename(entry) in ("site-packages", "dist-packages"):
            try:
                parts.append(os.stat(entry).st_mtime_ns)
            except OSError:
                parts.append(None)
    for name in ("cgroup", "mnt", "pid", "net", "user", "ipc", "uts"):
        try:
            parts.append(os.readlink(f"/proc/self/ns/{name}"))
        except OSError:
            parts.append(None)
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            parts.append(f.read())
    except OSError:
        parts.append(None)
    limits = sorted(n for n in dir(resource) if n.startswith("RLIMIT_"))
    parts.append([(n, resource.getrlimit(getattr(resource, n))) for n in limits])
    parts.append(os.getpriority(os.PRIO_PROCESS, 0))
    parts.append(sorted(os.sched_getaffinity(0)))
    data = marshal.dumps(repr(parts))
    return f"{zlib.crc32(data):08x}{zlib.crc32(data[::-1]):08x}"


def _stream(s: object) -> tuple[str, str, bool, bool]:
    """How Python set up a standard stream: the worker rebuilds it the same way."""
    return (getattr(s, "encoding", None) or "utf-8", getattr(s, "errors", None) or "strict",
            bool(getattr(s, "line_buffering", False)), bool(getattr(s, "write_through", False)))


def call(argv: Sequence[str]) -> int | None:
    """`idrrun ARGV` by this user's server: its exit code; None when there is none to ask
    (then one is started for the next calls, and this call runs in-process)."""
    if not enabled():
        return None
    folder = socket_folder()
    if folder is None:
        return None
    try:
        k = key()
        cwd = os.getcwd()
        for fd, stream in enumerate((sys.stdin, sys.stdout, sys.stderr)):
            os.fstat(fd)
            if stream is None or stream.fileno() != fd:
                return None  # a caller that swapped sys.stdout (contextlib.redirect_stdout)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both
        # a deleted working folder, a closed standard stream, one without a file (a test's
        # capture): in-process, where the output goes where the caller expects it
        return None
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        with socket_address(folder, k + ".sock") as address:
            conn.connect(address)
    except OSError:
        conn.close()
        if _called_recently(folder, k):
            _start_server(folder, k)
        return None
    try:
        mask = os.umask(0o022)
        os.umask(mask)
        request = marshal.dumps({
            "argv": list(argv), "cwd": cwd, "env": dict(os.environ), "umask": mask,
            "streams": [_stream(sys.stdin), _stream(sys.stdout), _stream(sys.stderr)],
        })
        try:
            conn.sendall(_struct.pack(HEADER, len(request)) + request)
        except OSError:
            return None  # the server left as we called: nothing ran yet
        return _wait(conn)
    finally:
        conn.close()


_FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT)
_worker: list[int] = []  # its pid, once it said it
_received: list[int] = []  # the signals we got, forwarded to the worker


def _forward(signum: int, _frame: object) -> None:
    _received.append(signum)
    for pid in _worker:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _restore_signals() -> None:
    for signum in _FORWARDED:
        _signal.signal(signum, _signal.SIG_DFL if signum != _signal.SIGINT
                       else _signal.default_int_handler)


def _wait(conn: _socket.socket) -> int | None:
    """Forward our signals to the worker until it says its exit code. A worker that died of a
    signal without saying one: we die of the same, as the in-process run would have. None: no
    worker started within START_SECONDS (a stopped or frozen server), so nothing ran."""
    del _worker[:], _received[:]  # a second call in this process (a test, a benchmark)
    for signum in _FORWARDED:
        _signal.signal(signum, _forward)
    try:
        return _exchange(conn)
    finally:
        _restore_signals()


def _exchange(conn: _socket.socket) -> int | None:
    try:
        data = _reply(conn)
    except TimeoutError:
        if _received:
            return 130
        print(f"idrrun: the resident server did not answer in {START_SECONDS:g} s: running "
              f"in-process ({ENV_SWITCH}=0 turns the server off)", file=sys.stderr)
        return None
    for line in data.split(b"\n"):
        if line.startswith(b"X"):
            return int(line[1:])
    return _ended_unsaid()


def _reply(conn: _socket.socket) -> bytes:
    """What the worker says, to its exit code or its end: "P<pid>" first (our streams then go
    to it), "X<code>" last. TimeoutError: no worker said its pid within START_SECONDS (the
    server gives up a request after 10 s itself)."""
    data = b""
    conn.settimeout(START_SECONDS)
    while not data.endswith(b"\n") or b"X" not in data:
        chunk = conn.recv(256)  # retried after our handler (PEP 475)
        if not chunk:
            break
        data += chunk
        if not _worker and data.startswith(b"P") and b"\n" in data:
            if not _hand_over(conn, int(data[1:data.index(b"\n")])):
                break  # the worker is gone: said by _ended_unsaid
    return data


def _hand_over(conn: _socket.socket, pid: int) -> bool:
    """The worker `pid` started: our streams to it, and the signals that came before it; False
    when it is gone already."""
    _worker.append(pid)
    conn.settimeout(None)  # the run's own deadlines bound the rest
    # Our streams go to the worker only now: had the server not answered, it would
    # hold our pipes open (a `| tee` waiting for their end) while we ran in-process.
    try:
        conn.sendmsg([b"F"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                               _struct.pack("3i", 0, 1, 2))])
    except OSError:
        return False
    for signum in _received:  # those that came before the pid
        os.kill(pid, signum)
    return True


def _ended_unsaid() -> int:
    """The worker ended without an exit code: why, and ours (a signal's: we die of it)."""
    if not _worker:
        print("idrrun: the resident server did not start a worker: run again, or with "
              f"{ENV_SWITCH}=0", file=sys.stderr)
        return 130 if _received else 2
    if not _received:
        print(f"idrrun: the resident server's worker (pid {_worker[0]}) ended without an exit "
              "status (killed by another process?)", file=sys.stderr)
        return 1
    signum = _received[-1]
    if signum == _signal.SIGINT:
        return 130  # as idrrun's own Ctrl-C
    _restore_signals()
    _signal.signal(signum, _signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum


def _called_recently(folder: str, k: str) -> bool:
    """Whether a call with this key found no server less than BURST_SECONDS ago; says this one
    did (the mtime of FOLDER/KEY.last)."""
    mark = os.path.join(folder, k + ".last")
    try:
        recent = _time.time() - os.stat(mark).st_mtime < BURST_SECONDS
    except OSError:
        recent = False
    try:
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        os.utime(mark)
    except OSError:
        pass
    return recent


def _start_server(folder: str, k: str) -> None:
    """The server, detached (its own session, no terminal), for the next calls; a second one
    started at the same time finds the first's lock and leaves."""
    import subprocess  # here only: the usual call does not need it

    path = os.path.join(folder, k + ".log")
    try:
        # one line per call: a log past 1 MiB starts again rather than grow for good
        mode = "wb" if os.path.exists(path) and os.path.getsize(path) > 1 << 20 else "ab"
        with open(path, mode) as log:
            # the caller's interpreter flags (-B, -X ...), as multiprocessing starts its own
            flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
            subprocess.Popen([sys.executable, *flags, "-m", "idrrun.server", folder, k],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                             start_new_session=True, close_fds=True)
    except OSError:
        pass
