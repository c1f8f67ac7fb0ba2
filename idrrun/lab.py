"""The student's exchange inside JupyterLab: the routes the Assignments panel
(labextension/src/assignments.ts) calls on her own Jupyter server, which asks the exchange's
receiver as `idrrun classroom` does (grading/exchange_client.py: the same client, her server's
hub token or her uid), and reads and writes her files below the server's root only.

    GET  /idrrun/exchange/assignments       released to her, each with its folder's state
    POST /idrrun/exchange/fetch/NAME        the released files into NAME/ (hers kept)
    POST /idrrun/exchange/submit/NAME       {"files": [paths] | null} -> the receipt
    POST /idrrun/exchange/feedback/NAME     her feedback into NAME/feedback/ -> its path

Submit with no files named hands in the files of NAME/ that differ from the release (what she
changed: the notebook she worked in, a header of hers), or all of them when none does (the
receipt then says "unchanged from the release"). The panel saves her open documents first.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .errors import UsageError
from .grading import exchange, exchange_client

T = TypeVar("T")
ROUTE = "idrrun/exchange"


def _within(root: Path, rel: str) -> Path:
    """A path of hers, below the server's root (never outside it, never through '..')."""
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise UsageError(f"{rel}: not in your JupyterLab folder")
    return path


def folder_state(root: Path, name: str, released: dict[str, bytes]) -> dict[str, Any]:
    """Her copy of an assignment: fetched or not, and which files differ from the release."""
    folder = root / name
    if not folder.is_dir():
        return {"fetched": False, "changed": [], "files": []}
    files = sorted(p.name for p in folder.iterdir()
                   if p.is_file() and exchange.SAFE_NAME.fullmatch(p.name))
    changed = [f for f in files if released.get(f) != _bytes(folder / f)]
    return {"fetched": True, "files": files, "changed": changed}


def _bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def to_submit(root: Path, name: str, released: dict[str, bytes]) -> list[Path]:
    state = folder_state(root, name, released)
    if not state["fetched"]:
        raise UsageError(f"{name}/ is not in your folder: fetch the assignment first")
    chosen = state["changed"] or state["files"]
    return [root / name / f for f in chosen]


class ExchangeHandler(APIHandler):
    """One route; what the client raises is the student's message (400), never a traceback."""

    @property
    def root(self) -> Path:
        return Path(self.settings["server_root_dir"]).expanduser()

    async def _answer(self, work: Callable[[], T]) -> None:
        try:
            result = await asyncio.to_thread(work)
        except UsageError as exc:
            self.set_status(400)
            self.finish(json.dumps({"message": str(exc)}))
            return
        self.finish(json.dumps(result))

    def _released(self, name: str) -> dict[str, bytes]:
        answer = exchange_client.request(exchange_client.place(None), "GET",
                                         f"/api/assignments/{exchange.exercise_name(name)}")
        return {f: base64.b64decode(d) for f, d in dict(answer.get("files", {})).items()}


class AssignmentsHandler(ExchangeHandler):
    @web.authenticated
    async def get(self) -> None:
        def work() -> dict[str, Any]:
            where = exchange_client.place(None)
            if where.unix is not None and not Path(where.unix).exists():
                # A JupyterLab of no class (a course image, a laptop): said, not an error.
                return {"assignments": [], "exchange": None,
                        "message": f"No class exchange here ({where.url} does not exist; "
                                   "your teacher's hub sets IDRRUN_EXCHANGE_URL)."}
            listing = exchange_client.listing(where)
            for task in listing.get("assignments", []):
                folder = self.root / task["exercise"]
                task["fetched"] = folder.is_dir()
                task["folder"] = task["exercise"]
            listing["exchange"] = where.url
            return listing

        await self._answer(work)


class FetchHandler(ExchangeHandler):
    @web.authenticated
    async def post(self, name: str) -> None:
        def work() -> dict[str, Any]:
            got = exchange_client.fetch(exchange_client.place(None), name, self.root)
            return {"files": [{"path": str(p.relative_to(self.root)), "written": w} for p, w in got]}

        await self._answer(work)


class SubmitHandler(ExchangeHandler):
    @web.authenticated
    async def post(self, name: str) -> None:
        body = self.get_json_body() or {}

        def work() -> dict[str, Any]:
            named = body.get("files")
            paths = [_within(self.root, str(p)) for p in named] if named else \
                to_submit(self.root, name, self._released(name))
            receipt = exchange_client.submit(exchange_client.place(None), name, paths)
            return {**receipt.to_json(), "text": exchange_client.receipt_text(receipt)}

        await self._answer(work)


class FeedbackHandler(ExchangeHandler):
    @web.authenticated
    async def post(self, name: str) -> None:
        def work() -> dict[str, Any]:
            into = _within(self.root, f"{name}/feedback")
            files = exchange_client.feedback(exchange_client.place(None), name, into)
            return {"path": f"{name}/feedback/{name}.md", "files": sorted(files)}

        await self._answer(work)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "idrrun.lab"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    base = serverapp.web_app.settings["base_url"]
    name = r"([A-Za-z0-9_][A-Za-z0-9_.+-]{0,99})"
    serverapp.web_app.add_handlers(".*$", [
        (url_path_join(base, ROUTE, "assignments"), AssignmentsHandler),
        (url_path_join(base, ROUTE, "fetch", name), FetchHandler),
        (url_path_join(base, ROUTE, "submit", name), SubmitHandler),
        (url_path_join(base, ROUTE, "feedback", name), FeedbackHandler),
    ])
    serverapp.log.info("idrrun: the Assignments panel's routes at %s", url_path_join(base, ROUTE))
