"""The exchange's receiver (`idrrun classroom serve`, as root): the one party that writes the
exchange for students. She hands her files in as bytes over HTTP; it knows who she is without
trusting anything she says, keeps what it got with the time it got it, and hands her back only
what is hers (the assignments released to her, her receipts, her feedback).

Two ways in, one set of routes:
    a Unix socket (`--socket PATH`): who she is from the kernel (SO_PEERCRED), for a class on
        one machine;
    TCP (`--listen HOST:PORT`), as a JupyterHub service: who she is from her hub token (the
        one her server has, JUPYTERHUB_API_TOKEN), asked of the hub (jupyterhub's HubAuth), for
        a class whose servers run on other nodes (nothing shared but the network, as ngshare
        and JupyterHub on Kubernetes need).

    GET  /api/assignments             released to her: name, deadline, files, her last receipt
    GET  /api/assignments/NAME        its files (fetch)
    POST /api/submissions/NAME        {"files": {name: base64}} -> her receipt
    GET  /api/submissions/NAME        her receipts
    GET  /api/feedback/NAME           {"files": {name: base64}} (NAME.md and its pictures)

Why the standard library's http.server and not tornado: a class sends a few hundred small
requests an hour, each a file write; a thread per request is plenty, and the receiver then
needs nothing beyond Python where no hub is used.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import pwd
import socket
import socketserver
import stat
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..run import boundary
from . import exchange

# A request's body: the largest submission, in base64 and JSON, with room for names.
MAX_BODY = exchange.MAX_TOTAL_BYTES * 4 // 3 + 64 * 1024
SERVICE_NAME = "idrrun-exchange"


class Denied(Exception):
    """No identity: the request is answered 403 (or 401) and nothing else is done."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


Identify = Callable[["Handler"], str]


def peer_login(handler: Handler) -> str:
    """Who is at the other end of the Unix socket, from the kernel's record of the peer."""
    raw = handler.connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", raw)
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        raise Denied(f"uid {uid} has no login on this machine") from None


def hub_identity(api_url: str | None = None) -> Identify:
    """Who holds the request's token (`Authorization: token T`), as the hub says; HubAuth
    caches the answer for a few minutes."""
    from jupyterhub.services.auth import HubAuth  # only the hub's environment has it

    auth = HubAuth(**({"api_url": api_url} if api_url else {}))

    def identify(handler: Handler) -> str:
        header = handler.headers.get("Authorization", "")
        kind, _, token = header.partition(" ")
        if kind.lower() not in ("token", "bearer") or not token:
            raise Denied("no hub token (Authorization: token ...): submit from your hub server")
        try:
            model = auth.user_for_token(token.strip())
        except Exception as exc:  # HubAuth raises tornado's HTTPError when the hub is away
            raise Denied(f"the hub could not say who holds this token ({exc})") from None
        if not model or model.get("kind", "user") != "user" or not model.get("name"):
            raise Denied("the hub does not know this token")
        return str(model["name"])

    return identify


@dataclass(frozen=True)
class Receiver:
    root: Path
    identify: Identify
    prefix: str = ""  # the hub's /services/NAME/ when reached through its proxy

    def route(self, method: str, path: str, login: str, body: bytes) -> Answer:
        path = path.split("?", 1)[0]
        if self.prefix and path.startswith(self.prefix.rstrip("/")):
            path = path[len(self.prefix.rstrip("/")):]
        parts = [p for p in path.split("/") if p]
        if parts[:1] != ["api"]:
            return Answer(404, {"error": f"no such route {path}"})
        try:
            return self._route(method, parts[1:], login, body)
        except exchange.Refused as exc:
            return Answer(400, {"error": str(exc)})
        except UsageError as exc:
            return Answer(404, {"error": str(exc)})
        except OSError as exc:
            # A full disk, an exchange folder gone: nothing of the request was kept.
            return Answer(507 if exc.errno == 28 else 500,
                          {"error": f"the exchange could not store it ({exc.strerror or exc}); "
                                    "nothing was received: try again later, or tell your teacher"})

    # Complexity: the receiver's routes, one branch each (a table of handlers would hide the method
    # and path they answer).
    def _route(self, method: str, parts: list[str], login: str, body: bytes) -> Answer:
        if parts == ["assignments"] and method == "GET":
            out = []
            for task in exchange.assignments(self.root, login):
                mine = exchange.receipts(self.root, login, task.exercise)
                out.append({"exercise": task.exercise, "files": sorted(task.files),
                            "deadline": task.deadline.isoformat() if task.deadline else None,
                            "last": mine[-1].to_json() if mine else None,
                            "feedback": exchange.feedback_of(self.root, login, task.exercise) is not None})
            return Answer(200, {"student": login, "assignments": out})
        if len(parts) != 2:
            return Answer(404, {"error": "no such route"})
        what, name = parts[0], exchange.exercise_name(parts[1])
        task = exchange.assignment(self.root, name, with_files=(what == "assignments"))
        if login not in task.students:
            raise UsageError(f"{name} is not released to {login}")
        if what == "assignments" and method == "GET":
            return Answer(200, {"exercise": name, "deadline": task.deadline.isoformat() if task.deadline else None,
                                "files": _encoded(task.files)})
        if what == "submissions" and method == "POST":
            receipt = exchange.receive(self.root, login, name, _decoded(body))
            return Answer(200, receipt.to_json())
        if what == "submissions" and method == "GET":
            return Answer(200, {"receipts": [r.to_json() for r in exchange.receipts(self.root, login, name)]})
        if what == "feedback" and method == "GET":
            files = exchange.feedback_of(self.root, login, name)
            if files is None:
                return Answer(404, {"error": f"no feedback of {name} yet"})
            return Answer(200, {"files": _encoded(files)})
        return Answer(404, {"error": "no such route"})


def _encoded(files: dict[str, bytes] | Any) -> dict[str, str]:
    return {name: base64.b64encode(data).decode() for name, data in files.items()}


def _decoded(body: bytes) -> dict[str, bytes]:
    try:
        record = json.loads(body)
        files = record["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not an object")
        return {str(name): base64.b64decode(data, validate=True) for name, data in files.items()}
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise exchange.Refused(f"not a submission: {exc}") from None


class Handler(BaseHTTPRequestHandler):
    server: Any
    protocol_version = "HTTP/1.1"
    # A connection that sends nothing for this long is closed: a thread per connection, and a
    # student's idle ones must not pile up (the largest submission arrives in well under it).
    timeout = 60

    def address_string(self) -> str:
        return str(self.client_address[0]) if self.client_address else "unix"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        sys.stderr.write(f"idrrun-exchange: {self.address_string()} {format % args}\n")

    def _answer(self, answer: Answer) -> None:
        data = json.dumps(answer.body).encode()
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def _serve(self, method: str) -> None:
        receiver: Receiver = self.server.receiver
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            self._answer(Answer(413, {"error": f"more than {exchange.MAX_TOTAL_BYTES} bytes: "
                                               "hand in fewer or smaller files"}))
            return
        try:
            login = receiver.identify(self)
        except Denied as exc:
            self._answer(Answer(HTTPStatus.FORBIDDEN, {"error": str(exc)}))
            return
        body = self.rfile.read(length) if length else b""
        self._answer(receiver.route(method, self.path, login, body))

    def do_GET(self) -> None:  # noqa: N802 (http.server's names)
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def unix_server(path: Path, receiver: Receiver) -> UnixServer:
    """The receiver on a Unix socket anyone may connect to (who they are is the kernel's
    answer), in a folder of ours that nobody else may write (no one can put another socket in
    its place)."""
    try:
        folder = boundary.open_published(path.parent, 0o755)  # the way to it checked, ours
    except OSError as exc:
        raise UsageError(f"--socket {path}: {exc.strerror or exc}") from None
    try:
        if stat.S_ISSOCK(os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode):
            os.unlink(path.name, dir_fd=folder)  # an earlier receiver's
    except FileNotFoundError:
        pass
    finally:
        os.close(folder)
    server = UnixServer(str(path), Handler, bind_and_activate=False)
    old = os.umask(0o111)  # the socket rw for all: connecting is how a student is known
    try:
        server.server_bind()
    finally:
        os.umask(old)
    server.server_activate()
    server.receiver = receiver  # type: ignore[attr-defined]
    return server


def tcp_server(address: tuple[str, int], receiver: Receiver) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    server.receiver = receiver  # type: ignore[attr-defined]
    return server
