"""Shared fixtures: a real Jupyter kernel, isolated caches and configs, and a report header."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# For child processes (kernels, the CLI): the checkout first, and whatever the environment had.
PYTHONPATH = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _version(cmd: str) -> str:
    path = shutil.which(cmd)
    if not path:
        return "missing"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.splitlines()[0] if out else "unknown"


def _gpu() -> str:
    if not shutil.which("nvidia-smi"):
        return "none"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "none (nvidia-smi failed)"
    return out or "none"


def pytest_report_header(config: Any) -> list[str]:
    return [
        f"gcc: {_version('gcc')}",
        f"gfortran: {_version('gfortran')}",
        f"nvc: {_version('nvc')}",
        f"mpirun: {_version('mpirun')}",
        f"GPU: {_gpu()}",
    ]


def has_gpu() -> bool:
    return _gpu() not in ("none", "none (nvidia-smi failed)")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's config or writes to the developer's cache."""
    home = tmp_path_factory.getbasetemp() / "home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    for var in ("IDRRUN_CONFIG", "IDR_CONFIG_FILE", "IDRRUN_FAMILY", "IDRRUN_LANGUAGE",
                "IDRRUN_TIMEOUT", "IDRRUN_OFFLOAD", "IDRRUN_EXAMPLES", "IDRRUN_GRADING_SEED"):
        monkeypatch.delenv(var, raising=False)


# ---------------------------------------------------------------------------------------
# A real Jupyter kernel


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
    started: float = 0.0
    ended: float = 0.0

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


class Kernel:
    def __init__(self, km: Any, kc: Any, cwd: Path) -> None:
        self.km, self.kc, self.cwd = km, kc, cwd

    def run(self, code: str, timeout: float = 120) -> CellResult:
        kc = self.kc
        result = CellResult(status="?", started=time.monotonic())
        msg_id = kc.execute(code)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"cell did not finish in {timeout} s: {code[:80]!r}")
            try:
                msg = kc.get_iopub_msg(timeout=remaining)
            except Exception:  # queue.Empty
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                result.chunks.append(Chunk(time.monotonic(), content["name"], content["text"]))
            elif kind == "error":
                result.error = content
            elif kind in ("display_data", "execute_result"):
                result.displays.append(content["data"])
            elif kind == "status" and content["execution_state"] == "idle":
                break
        while True:
            reply = kc.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        result.status = reply["content"]["status"]
        result.ended = time.monotonic()
        return result

    def alive(self) -> bool:
        return self.run("1 + 1", timeout=30).status == "ok"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    from jupyter_client.manager import start_new_kernel

    cwd = tmp_path_factory.mktemp("nb")
    home = tmp_path_factory.getbasetemp() / "home"
    env = dict(os.environ)
    env.update(XDG_CACHE_HOME=str(home / "cache"), XDG_CONFIG_HOME=str(home / "config"),
               PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    for var in ("IDRRUN_CONFIG", "IDR_CONFIG_FILE", "IDRRUN_FAMILY"):
        env.pop(var, None)
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=env, startup_timeout=60)
    k = Kernel(km, kc, cwd)
    setup = k.run("%load_ext idrrun")
    assert setup.status == "ok", setup.error_text
    try:
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
