"""The stack a run gets from what its compiler measured: a program whose functions keep more on
the stack than the default limit (IDRIS's Fortran cells with big automatic arrays, written for
an nvfortran run under `ulimit -s unlimited`) gets a stack that holds them. Pure: the frames
come from the build (gcc's -fstack-usage, BuildResult.frames); what is said of it is
failures.stack_note's.

    raised(limits, frames, memory) -> Stack
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..model import Limits, StackFrame

# Room above the largest frame: the frames below it on the call chain (the runtime's, libgomp's
# and the program's smaller ones) and what glibc keeps at the top (environment, auxv).
MARGIN = 64 << 20
# Only a stack left at its default is raised: one a line or a setting chose is that person's.
DEFAULT = Limits().stack


@dataclass(frozen=True)
class Stack:
    """The run's limits, and the frame that made them differ from the request's (None: they
    do not). fits: the frame got a stack that holds it; not: it is past the machine's memory."""

    limits: Limits
    frame: StackFrame | None = None
    fits: bool = True


def memory() -> int:
    """This machine's physical memory in bytes (0 when it cannot say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def raised(limits: Limits, frames: Sequence[StackFrame], machine: int) -> Stack:
    """The run's limits with a stack that holds its largest measured frame (rounded up to a
    whole MiB above it plus MARGIN), where the stack is at its default and that frame would not
    fit in it; unchanged otherwise. A frame past the machine's memory gets no stack (a stack
    is reserved, not used, but nothing could hold it)."""
    current = limits.stack
    if current is None or current != DEFAULT or not frames:
        return Stack(limits)
    biggest = max(frames, key=lambda f: f.size)
    if biggest.size + MARGIN <= current:
        return Stack(limits)
    if machine and biggest.size + MARGIN > machine:
        return Stack(limits, biggest, fits=False)
    size = -(-(biggest.size + MARGIN) // (1 << 20)) << 20
    return Stack(replace(limits, stack=size), biggest)


def size_text(n: int) -> str:
    """1073741824 -> "1 GiB", 3200000016 -> "3.0 GiB", 200 -> "200 B"."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"
