"""Probing the machine: a compiler's path and version, the GPUs. Short timeouts, never raises."""

from __future__ import annotations

import re
import shutil

from ..model import CompilerInfo, GpuInfo
from ..run import proc

PROBE_TIMEOUT = 5.0
_VERSION = re.compile(r"\b\d+\.\d+")


def probe_compiler(command: str) -> CompilerInfo:
    path = shutil.which(command)
    if path is None:
        return CompilerInfo(command=command, path=None, version="")
    result = proc.capture([path, "--version"], what="probe")
    lines = [ln.strip() for ln in result.output.splitlines() if ln.strip()]
    # The first line that holds a version number: gcc's and nvc's first, nvcc's fourth
    # ("Cuda compilation tools, release 13.0, V13.0.88"; its first is a banner).
    versioned = [ln for ln in lines if _VERSION.search(ln)]
    return CompilerInfo(command=command, path=path,
                        version=(versioned or lines or [""])[0])


def probe_gpus() -> tuple[tuple[GpuInfo, ...], str | None]:
    """GPUs seen by nvidia-smi; a warning instead of an exception when it misbehaves."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return (), None
    result = proc.capture(
        [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
        what="probe", timeout=PROBE_TIMEOUT,
    )
    if not result.ok:
        return (), f"nvidia-smi did not answer ({result.describe()}): assuming no GPU"
    gpus = []
    for line in result.output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0]:
            gpus.append(GpuInfo(name=parts[0], compute_capability=parts[1], driver=parts[2]))
    return tuple(gpus), None
