"""A real Jupyter kernel for the tests and the benchmarks (jupyter_client): start one, send it
cells, and read what each cell showed, as a notebook front end does.

    with started(cwd, env) as kernel:             # %load_ext idrrun already done
        r = kernel.run("%%idrrun\\n...")          # a CellResult: status, stdout, displays, error
        cell = kernel.start(code)                 # a cell left running
        cell.wait_for("started")                  # its stdout so far, once it holds that text
        kernel.km.interrupt_kernel()
        r = cell.finish()                         # read to its end, the shell's reply included

tests/conftest.py's `kernel` fixture is one of these; benchmarks/cell_overhead.py times cells with
it. No pytest here: the benchmarks import this module too.
"""

from __future__ import annotations

import queue
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Chunk:
    at: float
    stream: str
    text: str


@dataclass
class CellResult:
    status: str
    chunks: list[Chunk] = field(default_factory=list)
    error: dict[str, Any] | None = None
    displays: list[dict[str, Any]] = field(default_factory=list)
    # Each display's id (its transient display_id; None for a display without one), beside
    # `displays`; and the updates of displays in place (update_display_data): (id, data).
    display_ids: list[str | None] = field(default_factory=list)
    updates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0
    # The In [N] a front end shows for the cell (its execute_input message), and the content of
    # the shell's execute_reply.
    execution_count: int | None = None
    reply: dict[str, Any] = field(default_factory=dict)

    @property
    def stdout(self) -> str:
        return ANSI.sub("", "".join(c.text for c in self.chunks if c.stream == "stdout"))

    @property
    def stderr(self) -> str:
        return ANSI.sub("", "".join(c.text for c in self.chunks if c.stream == "stderr"))

    @property
    def error_text(self) -> str:
        if not self.error:
            return ""
        head = f"{self.error.get('ename')}: {self.error.get('evalue')}"
        return ANSI.sub("", "\n".join([head, *self.error.get("traceback", [])]))

    @property
    def seconds(self) -> float:
        return self.ended - self.started


class Cell:
    """A cell sent to the kernel; its messages are read when asked for, until it is idle."""

    def __init__(self, kernel: Kernel, code: str) -> None:
        self.kernel = kernel
        self.code = code
        self.result = CellResult(status="?", started=time.monotonic())
        self.msg_id: str = kernel.kc.execute(code)
        self.idle = False

    def wait_for(self, text: str, timeout: float = 30) -> str:
        """The cell's stdout so far, once it holds `text`; the cell runs on."""
        deadline = time.monotonic() + timeout
        while text not in self.result.stdout:
            if self.idle:
                raise AssertionError(f"the cell ended without printing {text!r}: "
                                     f"{self.result.stdout[-1000:]}{self.result.error_text}")
            self._next(deadline, f"{text!r} not printed in {timeout} s")
        return self.result.stdout

    def finish(self, timeout: float = 120) -> CellResult:
        """The whole result: every message to the cell's end, then the shell's reply."""
        deadline = time.monotonic() + timeout
        while not self.idle:
            self._next(deadline, f"cell did not finish in {timeout} s")
        while True:
            reply = self.kernel.kc.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == self.msg_id:
                break
        self.result.reply = reply["content"]
        self.result.status = reply["content"]["status"]
        self.result.ended = time.monotonic()
        return self.result

    def _next(self, deadline: float, late: str) -> None:
        """Takes in the cell's next message (other cells' are passed over)."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{late}: {self.code[:80]!r}")
            try:
                msg = self.kernel.kc.get_iopub_msg(timeout=remaining)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") == self.msg_id:
                self._take(msg["msg_type"], msg["content"])
                return

    def _take(self, kind: str, content: dict[str, Any]) -> None:
        r = self.result
        if kind == "stream":
            r.chunks.append(Chunk(time.monotonic(), content["name"], content["text"]))
        elif kind == "error":
            r.error = content
        elif kind in ("display_data", "execute_result"):
            r.displays.append(content["data"])
            r.display_ids.append(content.get("transient", {}).get("display_id"))
        elif kind == "update_display_data":
            r.updates.append((content["transient"]["display_id"], content["data"]))
        elif kind == "execute_input":
            r.execution_count = content["execution_count"]
        elif kind == "status" and content["execution_state"] == "idle":
            self.idle = True


class Kernel:
    def __init__(self, km: Any, kc: Any, cwd: Path) -> None:
        self.km, self.kc, self.cwd = km, kc, cwd

    def start(self, code: str) -> Cell:
        return Cell(self, code)

    def run(self, code: str, timeout: float = 120) -> CellResult:
        return self.start(code).finish(timeout)

    def alive(self) -> bool:
        return self.run("1 + 1", timeout=30).status == "ok"


@contextmanager
def started(cwd: Path, env: Mapping[str, str], *, kernel_name: str = "python3",
            load_idrrun: bool = True, startup_timeout: float = 60) -> Iterator[Kernel]:
    """A kernel in `cwd` with exactly `env`, idrrun's magics loaded; shut down at the end."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=kernel_name, cwd=str(cwd), env=dict(env),
                              startup_timeout=startup_timeout)
    try:
        kernel = Kernel(km, kc, cwd)
        if load_idrrun:
            setup = kernel.run("%load_ext idrrun")
            assert setup.status == "ok", setup.error_text
        yield kernel
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
