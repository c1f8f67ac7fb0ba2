"""nvcc's target options as this nvcc can build them: a `-arch=sm_70` written for an older CUDA.

The IDRIS notebooks build their CUDA cells with `-arch=sm_70` (their V100s). CUDA 13 dropped
the GPUs before Turing (sm_50 to sm_72): its nvcc stops with "Unsupported gpu architecture",
though the cell's code runs on any GPU here. The target asked for is read as the GPU here
(`-arch=native`) or, without one, the oldest target this nvcc builds, and said so.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..model import CompilerInfo, Probe, RunRequest
from ..run import proc

_ARCH = re.compile(r"-arch=(?:sm|compute)_(\d+)")
_LISTED = re.compile(r"\bcompute_(\d+)\b")


def known_targets(nvcc: str) -> tuple[int, ...]:
    """The compute_XY targets this nvcc builds (`nvcc --list-gpu-arch`); () when it cannot say."""
    result = proc.capture([nvcc, "--list-gpu-arch"], what="probe", timeout=10)
    return tuple(sorted({int(m) for m in _LISTED.findall(result.output)}))


def _instead(cc: int, known: tuple[int, ...], probe: Probe) -> tuple[str, str]:
    if probe.gpus:
        return "-arch=native", "the GPU here"
    newer = [k for k in known if k >= cc]
    return f"-arch=sm_{min(newer) if newer else max(known)}", "the nearest target it builds"


def read_arch(request: RunRequest, compiler: CompilerInfo,
              probe: Probe) -> tuple[RunRequest, tuple[str, ...]]:
    """The request with each `-arch=sm_XY` this nvcc cannot build replaced (its note says by
    what); unchanged where every target is known, or nvcc lists none."""
    asked = [(i, int(m.group(1))) for i, w in enumerate(request.compiler_options)
             if (m := _ARCH.fullmatch(w))]
    if not asked or compiler.path is None:
        return request, ()
    known = known_targets(compiler.path)
    if not known:
        return request, ()
    options = list(request.compiler_options)
    notes: list[str] = []
    for index, cc in asked:
        if cc in known:
            continue
        instead, why = _instead(cc, known, probe)
        options[index] = instead
        notes.append(f"{request.compiler_options[index]}: this nvcc does not build sm_{cc} (CUDA 13 "
                     f"dropped the GPUs before Turing); idrrun built with {instead} ({why})")
    return replace(request, compiler_options=tuple(options)), tuple(notes)
