"""The course's hub as a teacher's script talks to it (tests/test_hub.py and
benchmarks/classroom_scale.py): its REST API with a service token, and a cell run in a
student's kernel through her server's websocket (the browser's own path: the proxy, the
server, the kernel), a line typed in a terminal of her JupyterLab (its terminal's websocket),
the message her spawn page shows (the hub's progress events)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass
class HubClient:
    url: str  # http://127.0.0.1:PORT
    token: str  # an API token of the hub's (the classroom service's)

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(HTTP status, the JSON answer, or the error's text); status 0: not listening yet."""
        req = urllib.request.Request(self.url + path, method=method,
                                     headers={"Authorization": f"token {self.token}"},
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                text = r.read()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except urllib.error.URLError as e:
            return 0, str(e)

    def run_cell(self, login: str, kernel: str, code: str,
                 timeout: float = 120) -> tuple[str, str]:
        """`code` run in her kernel `kernel`: (the reply's status, its output's text)."""
        url = self.url.replace("http", "ws", 1) + f"/user/{login}/api/kernels/{kernel}/channels"
        return asyncio.run(_execute(url, self.token, code, timeout))

    def type_in_terminal(self, login: str, line: str, timeout: float = 60) -> str:
        """`line` typed in a new terminal of her JupyterLab, as its browser page does (the
        terminals' REST API, then the terminal's websocket): what the terminal showed until
        the line had run."""
        code, term = self.api("POST", f"/user/{login}/api/terminals")
        if code != 200:
            raise RuntimeError(f"no terminal for {login}: {code} {term}")
        url = self.url.replace("http", "ws", 1) + f"/user/{login}/terminals/websocket/{term['name']}"
        try:
            return asyncio.run(_type(url, self.token, line, timeout))
        finally:
            self.api("DELETE", f"/user/{login}/api/terminals/{term['name']}")

    def spawn_outcome(self, login: str, timeout: float = 300) -> dict[str, Any]:
        """Her server asked for (as her "Start my server"), and the hub's last progress event
        once it is ready or has failed: what her spawn page shows ("message", "failed")."""
        self.api("POST", f"/hub/api/users/{login}")
        code, body = self.api("POST", f"/hub/api/users/{login}/server")
        if code not in (201, 202):  # failed within the hub's first seconds: the answer says why
            return {"failed": True, "message": json.loads(body).get("message", body)}
        req = urllib.request.Request(self.url + f"/hub/api/users/{login}/server/progress",
                                     headers={"Authorization": f"token {self.token}"})
        event: dict[str, Any] = {}
        with urllib.request.urlopen(req, timeout=timeout) as stream:
            for raw in stream:
                if raw.startswith(b"data:"):
                    event = json.loads(raw[5:])
                    if event.get("failed") or event.get("ready"):
                        break
        return event


async def _execute(url: str, token: str, code: str, timeout: float) -> tuple[str, str]:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
    msg_id = uuid.uuid4().hex
    ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "teacher",
                   "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    out, status, idle = [], "", False
    end = time.monotonic() + timeout
    while not (status and idle):
        raw = await asyncio.wait_for(ws.read_message(), max(1.0, end - time.monotonic()))
        if raw is None:
            raise RuntimeError("the kernel's websocket closed")
        msg = json.loads(raw)
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind in ("display_data", "execute_result"):
            out.append(content["data"].get("text/plain", ""))
        elif kind == "error":
            out.append("\n".join(content["traceback"]))
        elif kind == "execute_reply":
            status = content["status"]
        elif kind == "status":
            idle = content["execution_state"] == "idle"
    ws.close()
    return status, "".join(out)


# What a terminal shows once a typed line has run: "end-42" is in its output but not in the
# line as typed (echoed as the shell reads it), in sh and bash alike.
END_TYPED, END_SHOWN = "; echo end-$((6*7))", "end-42"


async def _type(url: str, token: str, line: str, timeout: float) -> str:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
    ws.write_message(json.dumps(["stdin", line + END_TYPED + "\r"]))
    shown = ""
    end = time.monotonic() + timeout
    while END_SHOWN not in shown:
        try:
            raw = await asyncio.wait_for(ws.read_message(), max(1.0, end - time.monotonic()))
        except asyncio.TimeoutError:
            raise RuntimeError(f"the terminal showed no {END_SHOWN} in {timeout} s:\n"
                               f"{shown}") from None
        if raw is None:
            raise RuntimeError(f"the terminal's websocket closed:\n{shown}")
        kind, *text = json.loads(raw)
        if kind == "stdout":
            shown += text[0]
    ws.close()
    return shown
