"""The built-in tracer (tracer.c): where CUPTI is, and building it once into the cache.

CUPTI ships with the CUDA toolkit and with the NVIDIA HPC SDK's copy of it. It is looked up in
this order, and the first folder that has both the header and the library wins:
1. CUDA_HOME, else CUDA_PATH, when set: only there (a teacher who points at a CUDA means it);
2. the CUDA of the nvcc on PATH (through a wrapper script such as `exec /usr/local/cuda-13.0/bin/nvcc`);
3. /usr/local/cuda;
4. the HPC SDK's CUDA: next to the nvc on PATH, then /opt/nvidia/hpc_sdk/Linux_x86_64/*/cuda;
5. NVIDIA's Python wheels (`pip install idrrun[gpu]`: nvidia-cuda-cupti-cu12 for cupti.h and
   libcupti, nvidia-cuda-runtime-cu12 for the cuda.h that cupti.h includes), so that a machine
   with only the NVIDIA driver can profile.
In a CUDA folder: headers in include/ or extras/CUPTI/include/, the library in lib64/,
targets/x86_64-linux/lib/, lib/ or extras/CUPTI/lib64/. An HPC SDK `cuda` folder holds one folder
per CUDA version; the newest with CUPTI is taken.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..run import proc, tools

TRACER_SOURCE = Path(__file__).with_name("tracer.c")

_HEADER_DIRS = ("include", "extras/CUPTI/include", "targets/x86_64-linux/include",
                "targets/sbsa-linux/include")
_LIB_DIRS = ("lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib",
             "lib")
_HPC_SDK = Path("/opt/nvidia/hpc_sdk")

INSTALL_HINT = ("pip install 'idrrun[gpu]' (CUPTI from NVIDIA's wheels), or install the CUDA "
                "toolkit, or set CUDA_HOME to a CUDA that has CUPTI")


@dataclass(frozen=True)
class Cupti:
    root: Path  # the CUDA folder (or the wheels' nvidia/ folder) it was found in
    include: Path  # holds cupti.h
    lib: Path  # holds libcupti.so
    library: Path | None = None  # the library file itself, when it has no libcupti.so name
    extra_include: Path | None = None  # holds the cuda.h that cupti.h includes (wheels)


def _from_wheels(paths: list[str]) -> Cupti | None:
    """CUPTI from NVIDIA's wheels in an installed environment: site-packages/nvidia/..."""
    for entry in paths:
        nvidia = Path(entry) / "nvidia"
        include = nvidia / "cuda_cupti" / "include"
        libs = sorted((nvidia / "cuda_cupti" / "lib").glob("libcupti.so*")) \
            if (nvidia / "cuda_cupti" / "lib").is_dir() else []
        cuda_h = next((d for d in (nvidia / "cuda_runtime" / "include", nvidia / "cuda_nvcc" / "include")
                       if (d / "cuda.h").is_file()), None)
        if (include / "cupti.h").is_file() and libs and cuda_h is not None:
            return Cupti(root=nvidia, include=include, lib=libs[0].parent, library=libs[0],
                         extra_include=cuda_h)
    return None


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", path.name)) or (-1,)


def _with_versions(cuda: Path) -> Iterator[Path]:
    """The folder itself, then its version subfolders (HPC SDK: cuda/12.3, cuda/11.8), newest first."""
    yield cuda
    try:
        subdirs = [p for p in cuda.iterdir() if p.is_dir() and re.fullmatch(r"\d+(\.\d+)*", p.name)]
    except OSError:
        return
    yield from sorted(subdirs, key=_version_key, reverse=True)


def _nvcc_root(path: str | None) -> Path | None:
    """The CUDA folder of an nvcc: bin/nvcc's parent, or the target of a small wrapper script."""
    if path is None:
        return None
    real = Path(os.path.realpath(path))
    try:
        if real.stat().st_size < 4096:
            head = real.read_bytes()
            if head.startswith(b"#!"):
                found = re.search(rb"(/[^\s\"']+)/bin/nvcc\b", head)
                if found:
                    return Path(found.group(1).decode(errors="replace"))
    except OSError:
        return None
    return real.parent.parent


def candidate_roots(environ: Mapping[str, str]) -> list[Path]:
    """Where to look for CUPTI, in order (see the module docstring)."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(var):
            return list(_with_versions(Path(environ[var])))
    search = environ.get("PATH", os.defpath)
    roots: list[Path] = []
    nvcc = _nvcc_root(shutil.which("nvcc", path=search))
    if nvcc is not None:
        roots.append(nvcc)
    roots.append(Path("/usr/local/cuda"))
    nvc = shutil.which("nvc", path=search)
    if nvc is not None:
        # .../Linux_x86_64/24.3/compilers/bin/nvc -> .../Linux_x86_64/24.3/cuda
        roots.extend(_with_versions(Path(os.path.realpath(nvc)).parent.parent.parent / "cuda"))
    try:
        sdk = sorted((_HPC_SDK / "Linux_x86_64").iterdir(), key=_version_key, reverse=True)
    except OSError:
        sdk = []
    for release in sdk:
        roots.extend(_with_versions(release / "cuda"))
    return roots


def find_cupti(environ: Mapping[str, str] | None = None) -> Cupti | str:
    """The CUPTI to build against, or why there is none (a sentence that says what to install)."""
    env = os.environ if environ is None else environ
    roots = candidate_roots(env)
    for root in roots:
        include = next((root / d for d in _HEADER_DIRS if (root / d / "cupti.h").is_file()), None)
        lib = next((root / d for d in _LIB_DIRS if (root / d / "libcupti.so").exists()), None)
        if include is not None and lib is not None:
            return Cupti(root=root, include=include, lib=lib)
    # Then NVIDIA's wheels, also when CUDA_HOME names a toolkit without CUPTI (a runtime-only
    # CUDA, a container's): what pip installed beside idrrun is the user's choice too.
    wheels = _from_wheels(sys.path)
    if wheels is not None:
        return wheels
    roots.append(Path("site-packages/nvidia (pip install 'idrrun[gpu]')"))
    looked = ", ".join(str(r) for r in roots[:7]) or "nowhere"
    return f"no CUPTI found (looked in {looked}): {INSTALL_HINT}"


def tracer_key(cupti: Cupti) -> str:
    """Cache key: the C source, the CUPTI it is built against, and that library's identity (a
    CUDA updated in place must not keep a tracer linked to a library that is gone)."""
    lib = cupti.library or cupti.lib / "libcupti.so"
    try:
        st = os.stat(lib)
        identity = f"{os.path.realpath(lib)}:{st.st_size}:{int(st.st_mtime)}"
    except OSError:
        identity = str(lib)
    digest = hashlib.sha256(TRACER_SOURCE.read_bytes())
    digest.update(f"\0{cupti.include}\0{cupti.lib}\0{identity}".encode())
    return digest.hexdigest()[:16]


# The one header of CUDA's compiler that cupti.h reaches (through device_types.h) and that NVIDIA's
# runtime wheel does not ship: the attribute macros it defines mean nothing to a host C compiler.
# Written here rather than taken from the 60 MB nvcc wheel.
HOST_DEFINES = """/* idrrun: the macros of CUDA's crt/host_defines.h that CUPTI's headers use, for a host C build. */
#pragma once
#define __host__
#define __device__
#define __global__
#define __shared__
#define __constant__
#define __managed__
#define __device_builtin__
#define __device_builtin_texture_type__
#define __device_builtin_surface_type__
#define __cudart_builtin__
#define CUDARTAPI
#define CUDA_CB
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(a) __align__(a)
#define __annotate__(a)
#define __location__(a) __annotate__(a)
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __specialization_static
#define __cdecl
"""


def _shim(cupti: Cupti, folder: Path) -> tuple[str, ...]:
    """-I for a crt/host_defines.h when the CUPTI headers need one that is not there."""
    if cupti.extra_include is None or (cupti.extra_include / "crt" / "host_defines.h").is_file():
        return ()
    header = folder / "shim" / "crt" / "host_defines.h"
    if not header.is_file() or header.read_text() != HOST_DEFINES:
        header.parent.mkdir(parents=True, exist_ok=True)
        header.write_text(HOST_DEFINES)
    return (f"-I{folder / 'shim'}",)


def build_command(compiler: str, cupti: Cupti, output: Path) -> tuple[str, ...]:
    # rpath: the traced program has no LD_LIBRARY_PATH to CUDA, the tracer must find libcupti.
    extra = (f"-I{cupti.extra_include}", *_shim(cupti, output.parent)) \
        if cupti.extra_include is not None else ()
    link = (str(cupti.library),) if cupti.library is not None else (f"-L{cupti.lib}", "-lcupti")
    return (compiler, "-O2", "-shared", "-fPIC", "-o", str(output), str(TRACER_SOURCE),
            f"-I{cupti.include}", *extra, *link, f"-Wl,-rpath,{cupti.lib}",
            "-lpthread", "-ldl")


def build_tracer(cache_dir: Path, cc: str | None = None,
                 environ: Mapping[str, str] | None = None,
                 timeout: float = 120.0) -> tuple[Path | None, str]:
    """Compile tracer.c once per (source, CUPTI); (None, why) when it cannot be built."""
    env = os.environ if environ is None else environ
    found = find_cupti(env)
    if isinstance(found, str):
        return None, found
    target = cache_dir / "tracer" / f"idrrun-tracer-{tracer_key(found)}.so"
    if tools.checked(target):
        return target, ""
    compiler = tools.c_compiler(env, cc)
    if compiler is None:
        return None, "no C compiler (cc or gcc) to build the GPU tracer: install gcc"
    return tools.build(target, lambda tmp: proc.run(build_command(compiler, found, tmp),
                                                    what="build GPU tracer", timeout=timeout),
                       f"the GPU tracer (against {found.root})")
