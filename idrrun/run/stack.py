"""The stack a run gets from what its compiler measured: a program whose functions keep more on
the stack than the default limit (IDRIS's Fortran cells with big automatic arrays, written for
an nvfortran run under `ulimit -s unlimited`) gets a stack that holds them, said in a note.
Pure: the frames come from the build (gcc's -fstack-usage, BuildResult.frames).

    raised(limits, frames, memory) -> (Limits, note or "")
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from ..model import Limits, StackFrame

# Room above the largest frame: the frames below it on the call chain (the runtime's, libgomp's
# and the program's smaller ones) and what glibc keeps at the top (environment, auxv).
MARGIN = 64 << 20
# Only a stack left at its default is raised: one a line or a setting chose is that person's.
DEFAULT = Limits().stack
RAISED = ("stack raised to {size} for this run: {where} on the stack, as the compiler measured "
          "it, more than the default {default} (--stack SIZE sets it yourself)")
TOO_BIG = ("{where} on the stack, as the compiler measured it: more than this machine's memory "
           "({memory}); allocate these arrays (malloc, ALLOCATABLE)")


def memory() -> int:
    """This machine's physical memory in bytes (0 when it cannot say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def raised(limits: Limits, frames: Sequence[StackFrame], machine: int) -> tuple[Limits, str]:
    """The run's limits with a stack that holds its largest measured frame (rounded up to a
    whole MiB above it plus MARGIN), where the stack is at its default and that frame would not
    fit in it; unchanged otherwise. A frame past the machine's memory gets no stack (a stack
    is reserved, not used, but nothing could hold it): the note says to allocate instead."""
    if limits.stack != DEFAULT or DEFAULT is None or not frames:
        return limits, ""
    biggest = max(frames, key=lambda f: f.size)
    if biggest.size + MARGIN <= DEFAULT:
        return limits, ""
    where = f"{_name(biggest)} keeps {size_text(biggest.size)}"
    if machine and biggest.size + MARGIN > machine:
        return limits, TOO_BIG.format(where=where, memory=size_text(machine))
    size = -(-(biggest.size + MARGIN) // (1 << 20)) << 20
    return replace(limits, stack=size), RAISED.format(size=size_text(size), where=where,
                                                      default=size_text(DEFAULT))


def _name(frame: StackFrame) -> str:
    name = "the main program" if frame.function == "MAIN__" else frame.function
    return f"{name} (line {frame.line})" if frame.line is not None else name


def size_text(n: int) -> str:
    """1073741824 -> "1 GiB", 3200000016 -> "3.0 GiB", 200 -> "200 B"."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"
