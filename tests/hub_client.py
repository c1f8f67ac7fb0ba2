"""The course's hub as a teacher's script talks to it (tests/test_hub.py and
benchmarks/classroom_scale.py): its REST API with a service token, and a cell run in a
student's kernel through her server's websocket (the browser's own path: the proxy, the
server, the kernel)."""

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
