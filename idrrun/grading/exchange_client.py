"""The student's side of the exchange (`idrrun classroom fetch|submit|list|feedback`): requests
to the receiver (grading/receiver.py), as her, with her own files.

Where the receiver is: `--url`, else IDRRUN_EXCHANGE_URL (the hub sets it in every server),
else unix:/run/idrrun/exchange.sock (a class on one machine). Over http(s) she is known by her
hub token (JUPYTERHUB_API_TOKEN, in every kernel and terminal of her server); over a Unix socket
by her uid.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import stat
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import exchange
from .discover import MAX_SOURCE_BYTES
from .rows import stamp

DEFAULT_URL = "unix:/run/idrrun/exchange.sock"
TIMEOUT = 60.0


@dataclass(frozen=True)
class Place:
    """Where the receiver listens."""

    url: str

    @property
    def unix(self) -> str | None:
        return self.url[len("unix:"):] if self.url.startswith("unix:") else None


def place(url: str | None) -> Place:
    chosen = url or os.environ.get("IDRRUN_EXCHANGE_URL") or DEFAULT_URL
    if not (chosen.startswith("unix:/") or chosen.startswith(("http://", "https://"))):
        raise UsageError(f"exchange URL {chosen!r}: expected unix:/PATH or http(s)://HOST:PORT")
    return Place(chosen)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=TIMEOUT)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(self._path)


def request(where: Place, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One request to the receiver; UsageError with the receiver's own words when refused."""
    headers = {"Content-Type": "application/json"}
    data = json.dumps(body).encode() if body is not None else None
    if where.unix is not None:
        conn: http.client.HTTPConnection = _UnixConnection(where.unix)
        target = path
    else:
        token = os.environ.get("JUPYTERHUB_API_TOKEN")
        if not token:
            raise UsageError("no hub token (JUPYTERHUB_API_TOKEN): run this in a terminal or a "
                             "notebook of your hub server")
        headers["Authorization"] = f"token {token}"
        parts = urllib.parse.urlsplit(where.url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.netloc, timeout=TIMEOUT)
        target = parts.path.rstrip("/") + path
    try:
        conn.request(method, target, body=data, headers=headers)
        reply = conn.getresponse()
        raw = reply.read()
    except (OSError, http.client.HTTPException) as exc:
        raise UsageError(f"the exchange's receiver at {where.url} did not answer "
                         f"({getattr(exc, 'strerror', None) or exc}): nothing was sent; ask your "
                         "teacher whether it runs (idrrun classroom serve)") from None
    finally:
        conn.close()
    try:
        answer = json.loads(raw)
    except ValueError:
        answer = {"error": raw[:200].decode(errors="replace")}
    if reply.status != 200:
        raise UsageError(f"the exchange said: {answer.get('error', reply.reason)}")
    if not isinstance(answer, dict):
        raise UsageError("the exchange answered something that is not a record")
    return answer


def read_own(path: Path) -> bytes:
    """One of her files, read once: a regular file (not a FIFO that would block), bounded."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}: nothing was sent") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path}: not a regular file: nothing was sent")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_SOURCE_BYTES:
                raise UsageError(f"{path}: more than {MAX_SOURCE_BYTES} bytes: nothing was sent")
            chunks.append(chunk)
    finally:
        os.close(fd)


def gather(paths: Sequence[Path]) -> dict[str, bytes]:
    """The files to hand in: each FILE, and a FOLDER's own files (not its hidden ones)."""
    files: dict[str, bytes] = {}
    for path in paths:
        inside = sorted(p for p in path.iterdir() if not p.name.startswith(".")) \
            if path.is_dir() else [path]
        for one in inside:
            if one.is_dir():
                continue
            if not exchange.SAFE_NAME.fullmatch(one.name):
                raise UsageError(f"{one}: a submitted file's name is letters, digits, _ . + - "
                                 "(rename it): nothing was sent")
            if one.name in files:
                raise UsageError(f"{one}: two files named {one.name}: nothing was sent")
            files[one.name] = read_own(one)
    if not files:
        raise UsageError("no file to hand in: nothing was sent")
    try:
        exchange.check_files(files)
    except exchange.Refused as exc:
        raise UsageError(f"{exc}: nothing was sent") from None
    return files


def submit(where: Place, name: str, paths: Sequence[Path]) -> exchange.Receipt:
    files = gather(paths)
    answer = request(where, "POST", f"/api/submissions/{exchange.exercise_name(name)}",
                     {"files": {n: base64.b64encode(d).decode() for n, d in files.items()}})
    receipt = exchange.Receipt.from_json(answer)
    if receipt.digest != exchange.digest_of(files):
        raise UsageError("the exchange's receipt does not match what was sent: submit again")
    return receipt


def fetch(where: Place, name: str, into: Path) -> list[tuple[Path, bool]]:
    """The released files of NAME into INTO/NAME/; (path, written): a file already there is
    kept (her work), never overwritten."""
    answer = request(where, "GET", f"/api/assignments/{exchange.exercise_name(name)}")
    folder = into / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{folder}: {exc.strerror}") from None
    out = []
    for file, data in sorted(dict(answer.get("files", {})).items()):
        if not exchange.SAFE_NAME.fullmatch(file):
            continue
        target = folder / file
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            out.append((target, False))
            continue
        except OSError as exc:
            raise UsageError(f"{target}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(base64.b64decode(data))
        out.append((target, True))
    return out


def feedback(where: Place, name: str, into: Path | None) -> dict[str, bytes]:
    """Her feedback of NAME (NAME.md and its pictures), written into INTO when given."""
    answer = request(where, "GET", f"/api/feedback/{exchange.exercise_name(name)}")
    files = {f: base64.b64decode(d) for f, d in dict(answer.get("files", {})).items()
             if exchange.SAFE_NAME.fullmatch(f)}
    if into is not None:
        try:
            into.mkdir(parents=True, exist_ok=True)
            for file, data in files.items():
                (into / file).write_bytes(data)
        except OSError as exc:
            raise UsageError(f"{into}: {exc.strerror}") from None
    return files


def listing(where: Place) -> dict[str, Any]:
    return request(where, "GET", "/api/assignments")


def receipt_text(r: exchange.Receipt) -> str:
    """What a student reads after submit: what was received, when, against the deadline."""
    lines = [f"received {r.exercise} (submission {r.number}): {len(r.files)} file"
             f"{'s' if len(r.files) != 1 else ''}, {r.size} bytes, sha256 {r.digest[:16]}"]
    lines += [f"  {name}  {size} bytes  sha256 {digest[:16]}" for name, size, digest in r.files]
    when = f"received at {stamp(r.received)}"
    if r.deadline:
        when += f"; deadline {r.deadline}: {'LATE' if r.late else 'on time'}"
    lines.append(when)
    lines += [f"warning: {why}" for why in r.unchanged]
    return "\n".join(lines)
