"""What each GCC release does for OpenACC, by its major version: the one place gcc.py asks.

GCC 12, 13 and 14 are one family (gcc.py); what differs between them is a row of RELEASES, and
what its runtime (libgomp, whose nvptx plugin starts the kernels) does is a row of RUNTIMES.
Measured with Debian 12's GCC 12.2 and Debian 13's GCC 13.3 and 14.2 (docs/compilers.md):

- nvptx targets: all three accept -misa=sm_30, sm_35, sm_53, sm_70, sm_75, sm_80 (GCC 11:
  sm_30 and sm_35). No GCC emits Hopper-specific code: GCC 14 maps sm_89 and sm_90 to sm_80
  (-march-map), whose PTX the driver compiles for the GPU when the program starts.
- OpenACC 2.7: GCC 14 reads the `readonly` modifier of copyin, the `self` clause of compute
  constructs and `default` on data constructs; GCC 12 and 13 stop at them (OpenACC 2.6).
- OpenACC and OpenMP offloaded in one program: refused by the nvptx mkoffload of 12, 13 and 14
  ("either -fopenacc or -fopenmp must be set").
- The feedback: the tree dumps (their names, 000i.cgraph, 005t.original, 006t.gimple) and the
  -fopt-info-optimized-omp lines are the same in 12, 13 and 14 for the course's 76 sources
  (solutions and start files, host and nvptx builds): gccdumps.py reads them alike.
- The runtime: GCC 12's libgomp allocates each synchronous launch's argument table on the
  device, copies it there, waits for the kernel and frees it (cuMemAlloc, cuMemcpyHtoD,
  cuStreamSynchronize, cuMemFree: ~0.35 ms a launch on an H200); GCC 14's passes the table it
  mapped with the data and only waits (GOMP_OFFLOAD_openacc_exec: 936 bytes of code in 12's
  plugin, 145 in 14's), yet its mapping of the region's data still allocates, copies and frees
  one block a launch (counted on an H200, benchmarks/driver_calls.c: one cuMemAlloc,
  cuMemcpyHtoD and cuMemFree a launch under GCC 14, two of each under GCC 12). Its `present` failure reads differently (explain.py knows both).
  Distributions ship libgomp from their newest GCC: Debian 13's gcc-13 runs with GCC 14's.

A version idrrun does not know is taken as the nearest it knows, with a warning saying so.
Pure, but for `runtime_of`, which reads the library's bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Release:
    """What one GCC major version does for OpenACC."""

    major: int
    isas: tuple[int, ...]  # the -misa=sm_XY values its nvptx compiler accepts
    openacc: str  # the OpenACC it implements, in words
    # OpenACC 2.7's readonly modifier (copyin), self clause (compute constructs) and default
    # clause (data constructs)
    openacc27: bool
    # nvptx's libatomic, for two reductions of one construct (a 16-byte compare-and-swap)
    libatomic: bool = True
    # its nvptx mkoffload refuses -fopenacc and -fopenmp together
    models_apart: bool = True
    # Its nvptx plugin allocates, copies and frees each synchronous launch's argument table
    # around the launch (GOMP_OFFLOAD_openacc_exec: cuMemAlloc, cuMemcpyHtoD, the launch,
    # cuStreamSynchronize, cuMemFree; 936 bytes of code in GCC 12's, 145 in GCC 14's: the
    # launch and one wait). Said only where read: GCC 12's and 14's plugins.
    launch_table: bool = False


_AMPERE = (30, 35, 53, 70, 75, 80)
_NO_27 = ("OpenACC 2.6, none of 2.7 (no readonly modifier, no self clause on compute constructs, no "
          "default clause on data constructs: GCC 14 reads them)")
RELEASES: dict[int, Release] = {
    11: Release(11, (30, 35), _NO_27, False, libatomic=False),
    12: Release(12, _AMPERE, _NO_27, False, launch_table=True),
    13: Release(13, _AMPERE, _NO_27, False),
    14: Release(14, _AMPERE, "OpenACC 2.6 and, of 2.7, the readonly modifier, the self clause "
                             "of compute constructs and default on data constructs", True),
}
# The version gcc's --version line carries, "gcc (Debian 14.2.0-19) 14.2.0": its first X.Y[.Z].
_VERSION = re.compile(r"\b(\d+)\.\d+(?:\.\d+)?\b")
UNREADABLE = 12  # the course's own GCC, for a version line that says none


def major_of(version: str) -> int | None:
    """The major version in gcc's --version line; None when it holds none."""
    match = _VERSION.search(version)
    return int(match.group(1)) if match else None


def release(version: str) -> tuple[Release, str]:
    """The facts of the GCC that printed `version`, and a warning ("" for a release idrrun
    knows): a newer one is taken as the newest known, an older one as the oldest, one whose
    version cannot be read as GCC 12."""
    major = major_of(version)
    if major in RELEASES:
        return RELEASES[major], ""
    known = f"GCC {min(RELEASES)} to {max(RELEASES)}"
    if major is None:
        return RELEASES[UNREADABLE], (f"gcc's version could not be read ({version or 'nothing'}): "
                                      f"taken as GCC {UNREADABLE}'s (idrrun knows {known})")
    nearest = max(RELEASES) if major > max(RELEASES) else min(RELEASES)
    age = "newer" if major > max(RELEASES) else "older"
    return RELEASES[nearest], (f"GCC {major} is {age} than the releases idrrun knows ({known}): "
                               f"its nvptx targets and limits are taken as GCC {nearest}'s")


def summary(found: Release) -> str:
    """What the release means for the course, in one line (idrrun doctor)."""
    together = ("OpenACC and OpenMP offloaded in one program: refused (its nvptx mkoffload takes "
                "one of them)" if found.models_apart else "OpenACC and OpenMP in one program")
    return (f"{found.openacc}; nvptx code for sm_{max(found.isas)} at most (no GPU-specific code "
            "for newer GPUs: the driver compiles that PTX for them when the program starts); "
            f"{together}")


# -------------------------------------------------------------------------------------------
# The runtime: libgomp and its nvptx plugin


@dataclass(frozen=True)
class Runtime:
    """What one GCC's libgomp does at each kernel launch."""

    major: int
    # a synchronous launch allocates, copies and frees its argument table on the device; None:
    # not measured
    table_per_launch: bool | None


# GCC 11's plugin has GCC 12's launch (the allocation is as old as the plugin); GCC 13's was
# not available to measure (Debian 13 and Ubuntu 24.04 ship GCC 14's libgomp with their gcc-13).
RUNTIMES: dict[int, Runtime] = {
    11: Runtime(11, True),
    12: Runtime(12, True),
    13: Runtime(13, None),
    14: Runtime(14, False),
}
# The newest symbol version a libgomp defines names its GCC: libgomp.map adds one a release.
_SYMBOL_VERSIONS: tuple[tuple[tuple[int, ...], int], ...] = (
    ((5, 0, 1), 11), ((5, 1), 12), ((5, 1, 1), 13), ((5, 1, 2), 14))
_GOMP_TAG = re.compile(rb"(?<=\x00)GOMP_(\d+(?:\.\d+)+)(?=\x00)")
# What is read of a library: libgomp is ~0.3 MB; its version names sit in .dynstr, near the start.
_READ_CAP = 8 << 20


@dataclass(frozen=True)
class RuntimeFound:
    """The libgomp a gcc's programs load, and what idrrun knows of it."""

    path: str
    tag: str  # its newest symbol version, "GOMP_5.1.2"; "" when none was found
    runtime: Runtime | None  # None: a libgomp idrrun does not know (said in `warning`)
    warning: str = ""


def runtime_from(data: bytes, path: str) -> RuntimeFound:
    """The runtime whose library holds `data`: the GCC of its newest GOMP_ symbol version."""
    found = sorted({tuple(int(p) for p in m.decode().split(".")) for m in _GOMP_TAG.findall(data)})
    if not found:
        return RuntimeFound(path, "", None, f"{path} defines no GOMP_ symbol version: is it libgomp?")
    newest = found[-1]
    tag = "GOMP_" + ".".join(str(p) for p in newest)
    for version, major in reversed(_SYMBOL_VERSIONS):
        if newest == version:
            return RuntimeFound(path, tag, RUNTIMES[major])
    if newest > _SYMBOL_VERSIONS[-1][0]:
        newest_known = _SYMBOL_VERSIONS[-1][1]
        return RuntimeFound(path, tag, None, f"{path} ({tag}) is newer than the libgomp of GCC "
                                             f"{newest_known}, the newest idrrun knows")
    return RuntimeFound(path, tag, None, f"{path} ({tag}) is older than the libgomp of GCC "
                                         f"{_SYMBOL_VERSIONS[0][1]}, the oldest idrrun knows")


def runtime_of(library: Path) -> RuntimeFound:
    """The runtime in the file `library` (never raises: a file that cannot be read is a warning)."""
    try:
        with open(library, "rb") as f:
            data = f.read(_READ_CAP)
    except OSError as exc:
        return RuntimeFound(str(library), "", None, f"{library} could not be read: {exc.strerror}")
    return runtime_from(data, str(library))


def runtime_said(found: Runtime) -> str:
    """What the runtime does at each launch, in one line (idrrun doctor)."""
    if found.table_per_launch is None:
        return ("its launches are not measured by idrrun (GCC 12's runtime allocates each "
                "synchronous launch's argument table on the device, GCC 14's does not)")
    if found.table_per_launch:
        return ("each synchronous launch allocates its argument table on the device, copies it, "
                "waits for the kernel and frees it (cuMemAlloc, cuMemcpyHtoD, cuStreamSynchronize, "
                "cuMemFree: ~0.35 ms a launch measured on an H200, what keeps a short kernel far "
                "from the GPU's bandwidth); GCC 14's runtime does not")
    return ("a synchronous launch passes the argument table mapped with the data and waits for the "
            "kernel: no allocation or copy of its own, but the mapping of the region's data still "
            "allocates, copies and frees one block a launch (counted on an H200: one cuMemAlloc, "
            "cuMemcpyHtoD and cuMemFree a launch, GCC 12's runtime two of each)")
