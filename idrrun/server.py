"""The resident `idrrun run` server (resident.py says why and how it is found): imports
what a run needs once, then forks a worker per call that runs it with the caller's argv,
folder, environment, umask and standard streams.

    python -m idrrun.server FOLDER KEY     (started by resident.call, detached)
"""

from __future__ import annotations

import array
import atexit
import fcntl
import gc
import io
import marshal
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from . import resident
from .errors import IdrrunError

CHECK_SECONDS = 30.0  # how often an idle server looks whether its key still holds
MAX_REQUEST = 16 << 20  # an environment of megabytes is already unusual
_held: list[int] = []  # the server's lock: closed in its workers


def log(message: str) -> None:
    print(f"{time.strftime('%F %T')} {message}", flush=True)


def serve(folder: str, key: str, run: Callable[[list[str]], int]) -> int:
    """Serve calls until IDLE seconds pass without one, the socket is taken away, or the key
    changes (idrrun's files edited or upgraded)."""
    base = os.path.join(folder, key)
    lock = os.open(base + ".lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server has this key
    _held.append(lock)
    idle = float(os.environ.get(resident.ENV_IDLE) or resident.IDLE_SECONDS)
    path = base + ".sock"
    try:
        os.unlink(path)  # a killed server's
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o177)
    with resident.socket_address(folder, key + ".sock") as address:
        listener.bind(address)
    os.umask(umask)
    listener.listen(64)
    inode = os.stat(path).st_ino
    own = resident.key()  # not the caller's: this process's sys.path[0] differs from it
    log(f"serving {path} (pid {os.getpid()}, leaves after {idle:g} s idle)")
    last = time.monotonic()
    try:
        while True:
            listener.settimeout(min(CHECK_SECONDS, idle))
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                _reap()
                if time.monotonic() - last >= idle:
                    log(f"no call for {idle:g} s: leaving")
                    return 0
                if _moved(path, inode) or resident.key() != own:
                    log("the socket was removed or idrrun changed: leaving")
                    return 0
                continue
            last = time.monotonic()
            _reap()
            with conn:
                _serve_one(conn, listener, run)
    finally:
        if not _moved(path, inode):
            os.unlink(path)


def _moved(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino != inode
    except OSError:
        return True


def _reap() -> None:
    """Workers that ended (their callers got their exit codes from them)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _serve_one(conn: socket.socket, listener: socket.socket,
               run: Callable[[list[str]], int]) -> None:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.getuid():
        log(f"refused a call from uid {uid}")
        return
    conn.settimeout(10)
    try:
        (size,) = struct.unpack(resident.HEADER, _exactly(conn, struct.calcsize(resident.HEADER)))
        if size > MAX_REQUEST:
            raise ValueError(f"a request of {size} bytes")
        request = marshal.loads(_exactly(conn, size))
        pid = os.fork()
        if pid == 0:
            listener.close()
            for fd in _held:
                os.close(fd)
            _worker(conn, request, run)  # never returns
        log(f"worker {pid}: idrrun {' '.join(map(str, request['argv']))}")
    except (OSError, ValueError, EOFError, KeyError, TypeError) as exc:
        log(f"a bad call: {exc!r}")


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ValueError("the caller left mid-request")
        data += chunk
    return bytes(data)


def _streams(conn: socket.socket) -> list[int]:
    """The caller's stdin, stdout and stderr, which it sends once this worker said its pid (so
    that a server that never answers holds none of them: a pipe would stay open for nobody)."""
    fds = array.array("i")
    _data, ancillary, _flags, _addr = conn.recvmsg(1, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"{len(fds)} standard streams instead of 3")
    return list(fds)


def _worker(conn: socket.socket, request: dict[str, object],
            run: Callable[[list[str]], int]) -> None:
    """The caller's `idrrun run`, in a fork of the server, with the caller's streams, folder,
    environment and umask; its exit code sent back. Never returns."""
    code = 1
    try:
        conn.sendall(f"P{os.getpid()}\n".encode())
        argv = _become_caller(conn, request)
        threading.Thread(target=_watch_caller, args=(conn,), daemon=True).start()
        code = _run(run, argv)
        conn.sendall(f"X{code}\n".encode())
    except BaseException:  # noqa: BLE001 - a worker that could not start: the server's log
        traceback.print_exc()
    finally:
        os._exit(code)


def _become_caller(conn: socket.socket, request: dict[str, object]) -> list[str]:
    """The caller's standard streams (as its Python set them up), environment, umask and
    folder, signals as a fresh process has them; the caller's argv."""
    fds = _streams(conn)  # within the 10 s the request had
    conn.settimeout(None)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    streams = request["streams"]
    assert isinstance(streams, list)
    for target, name in enumerate(("stdin", "stdout", "stderr")):
        encoding, errors, line_buffering, write_through = streams[target]
        binary = open(target, "wb" if target else "rb", closefd=False)  # noqa: SIM115
        stream = io.TextIOWrapper(binary, encoding=encoding, errors=errors,
                                  line_buffering=line_buffering, write_through=write_through)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    os.umask(int(str(request["umask"])))
    os.chdir(str(request["cwd"]))
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    sys.argv = ["idrrun", *argv]
    return argv


def _run(run: Callable[[list[str]], int], argv: list[str]) -> int:
    """`idrrun run` as the caller's process would have run it: its exit code, what it printed
    flushed, its exit functions run."""
    code = 1
    try:
        code = run(argv)
    except SystemExit as exc:  # argparse's --help and usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 - shown to the caller as Python would show it
        traceback.print_exc()
    atexit._run_exitfuncs()
    for out in (sys.stdout, sys.stderr):
        try:
            out.flush()
        except (OSError, ValueError):
            pass
    return code


def _watch_caller(conn: socket.socket) -> None:
    """The caller gone (killed outright): interrupt the run as its Ctrl-C would, so that the
    program it started is stopped and cleaned up rather than left running for nobody."""
    try:
        while conn.recv(64):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGINT)


def main(args: list[str]) -> int:
    folder, key = args
    from .cli import run_in_process
    from .commands import run as run_command  # what a run imports, once for all workers
    from .request import options
    from .request import config
    from .toolchains import probe, registry

    # Work every call would repeat: the plug-ins' entry points (sys.path's packages are in the
    # key), the option parser and the regular expressions argparse compiles, the machine's
    # probe as the environment that started the server has it (each worker then only checks
    # that PATH's folders and the tools are unchanged: toolchains/onpath.py, probecache.py), ...
    registry.names()
    options.parse_files(["warm-up.c"], prog=run_command.PROG, epilog=run_command.EXIT_HELP)
    try:
        probe(config.load(Path.cwd()))
    except IdrrunError:
        pass  # the worker says why, to its caller
    # and what a --profile run loads on first use: Pillow and the timeline's fonts. Only a
    # warm-up: a Python without Pillow (an interpreter other than the one idrrun was installed
    # for) still gets its server, whose runs say what a missing Pillow costs as an in-process
    # run would (on the H200, a server that died here left every call in-process: +0.4 s each).
    try:
        from PIL import Image, ImageDraw  # noqa: F401

        from .profile import timeline

        timeline.warm()
    except ImportError as exc:
        log(f"the pictures' warm-up left out ({exc}): --profile pictures load Pillow at first use")
    # Every object so far is left to the workers as is: a collection in a worker would write to
    # all of them and copy the server's pages one by one (the gc docs' advice for pre-fork servers).
    gc.freeze()
    return serve(folder, key, run_in_process)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
