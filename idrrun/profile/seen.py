"""The evidence of one run, joined for the diagnosis (diagnose.py, causes.py): its GPU trace
with each kernel placed on its construct's line, the compiler's remarks by line, the compute
constructs that ran and how often, the source read (program.py), the solution's run; and what
a fix would gain, reckoned from them.

    seen_of(source, trace, build, acc, regions, solution) -> Seen
    kernel_lines(names, program, executable) -> {kernel: construct line}
    run_shape(trace) -> RunShape                      (the solution's run, kept in its cache)

A kernel's line: nvc names it (`main_42_gpu`); gcc names the function and the region
(`main$_omp_fn$0`), whose host version `main._omp_fn.0` starts, in the executable's line table,
on the construct's line or in its body (elflines.functions); without the executable, the N-th
compute construct of the function in the source. Pure but for reading the executable.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..model import AccReport, BuildResult, ImplicitData, RegionsRan, Source
from ..toolchains import diagnostics
from . import elflines
from .model import DTOH, HTOD, Copy, Device, Gain, Kernel, KernelShape, RunShape, Trace
from .program import Construct, Loop, Program
from .reader import read
from .render import fmt_ns
from .summary import queues

# A copy is an array's (not a scalar's, a reduction's result or the runtime's argument block)
# from 64 kB on: the runtime's own copies are bytes to a few kB.
ARRAY_BYTES = 64 * 1024
# The same block crossing 3 times or more crosses at every iteration of a loop (an array may
# legitimately go in once and come back once).
REPEATS = 3

_GCC_KERNEL = re.compile(r"^(?P<func>.+?)\$_omp_fn\$(?P<n>\d+)$")
_NV_KERNEL = (re.compile(r"^(?P<func>.+?)_(?P<line>\d+)_gpu(?:__\w+)?$"),
              re.compile(r"^nvkernel_(?P<func>.+?)_F\d+L(?P<line>\d+)_\d+$"))
_GCC_LEVELS = re.compile(r"assigned OpenACC (?P<levels>(?:gang|worker|vector|seq)(?: (?:gang|worker|"
                         r"vector))*) loop parallelism")
_NV_LEVELS = re.compile(r"(?:#pragma acc|!\$acc) loop (?P<levels>(?:gang|worker|vector|seq)[^/!]*)")


@dataclass(frozen=True)
class KernelRun:
    """One kernel of the run, all its launches, placed on its construct's line when known."""

    name: str
    line: int | None
    launches: tuple[Kernel, ...]

    @property
    def calls(self) -> int:
        return len(self.launches)

    @functools.cached_property
    def total_ns(self) -> int:
        return sum(k.ns for k in self.launches)

    @functools.cached_property
    def grid(self) -> tuple[int, int, int]:
        return Counter(k.grid for k in self.launches).most_common(1)[0][0]

    @functools.cached_property
    def block(self) -> tuple[int, int, int]:
        return Counter(k.block for k in self.launches).most_common(1)[0][0]

    @property
    def gangs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def lanes(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def first(self) -> int:
        return min(k.start for k in self.launches)

    @property
    def last(self) -> int:
        return max(k.end for k in self.launches)


@dataclass(frozen=True)
class CopyGroup:
    """Copies of one size in one direction: an array crossing, perhaps again and again."""

    direction: str
    bytes: int
    copies: tuple[Copy, ...]

    @property
    def count(self) -> int:
        return len(self.copies)

    @property
    def ns(self) -> int:
        return sum(c.ns for c in self.copies)


@dataclass(frozen=True)
class Seen:
    """Everything the rules look at, joined once."""

    program: Program
    trace: Trace | None = None
    # line -> what the compiler said of it (gcc's -fopt-info, nvhpc's -Minfo), its own words
    remarks: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    implicit: tuple[ImplicitData, ...] = ()
    counts: Mapping[int, int] = field(default_factory=dict)  # construct line -> times it ran
    kernel_lines: Mapping[str, int] = field(default_factory=dict)  # kernel -> construct line
    solution: RunShape | None = None

    @functools.cached_property
    def kernels(self) -> tuple[KernelRun, ...]:
        by_name: dict[str, list[Kernel]] = {}
        for k in self.trace.kernels if self.trace is not None else ():
            by_name.setdefault(k.name, []).append(k)
        runs = [KernelRun(name, self.kernel_lines.get(name), tuple(ks)) for name, ks in by_name.items()]
        return tuple(sorted(runs, key=lambda r: -r.total_ns))

    def kernels_at(self, line: int) -> list[KernelRun]:
        return [k for k in self.kernels if k.line == line]

    @functools.cached_property
    def device(self) -> Device | None:
        return self.trace.devices[0] if self.trace is not None and self.trace.devices else None

    @property
    def sms(self) -> int:
        return self.device.sms if self.device is not None else 0

    @functools.cached_property
    def span_ns(self) -> int:
        if self.trace is None or not self.trace.busy:
            return 0
        return self.trace.finish - self.trace.origin

    @functools.cached_property
    def busy_ns(self) -> int:
        return sum(b - a for a, b in self.trace.busy) if self.trace is not None else 0

    @property
    def measured(self) -> bool:
        return self.trace is not None and not self.trace.empty

    @functools.cached_property
    def copy_groups(self) -> tuple[CopyGroup, ...]:
        groups: dict[tuple[str, int], list[Copy]] = {}
        for c in self.trace.copies if self.trace is not None else ():
            if c.direction in (HTOD, DTOH) and c.bytes >= ARRAY_BYTES:
                groups.setdefault((c.direction, c.bytes), []).append(c)
        return tuple(CopyGroup(d, b, tuple(cs)) for (d, b), cs in sorted(groups.items()))

    def repeated(self, direction: str, at_least: int = REPEATS) -> list[CopyGroup]:
        return [g for g in self.copy_groups if g.direction == direction and g.count >= at_least]

    def _remarks(self, line: int, last: int | None) -> Iterator[str]:
        # A continued directive's remark: gcc gives C's first line, gfortran's last.
        for n in range(line, (last if last is not None else line) + 1):
            yield from self.remarks.get(n, ())

    def levels(self, line: int, last: int | None = None) -> frozenset[str] | None:
        """How the compiler said it spread the loop of the directive on these lines (gang,
        worker, vector, seq), None when it said nothing of it."""
        for text in self._remarks(line, last):
            m = _GCC_LEVELS.search(text) or _NV_LEVELS.search(text)
            if m is not None:
                return frozenset(re.findall(r"\b(gang|worker|vector|seq)\b", m.group("levels")))
        return None

    def said(self, line: int, pattern: str, last: int | None = None) -> str:
        """The compiler's first remark of the lines that matches the pattern ("" when none)."""
        return next((t for t in self._remarks(line, last) if re.search(pattern, t)), "")

    def iterations(self, loop: Loop) -> int:
        """How many times the loop's body ran, as the constructs in it counted it (the regions
        library), else as their kernels' launches did; 0 when nothing says."""
        inside = [c.line for c in self.program.constructs if loop.line < c.line <= loop.end]
        counted = [self.counts[line] for line in inside if line in self.counts]
        if counted:
            return max(counted)
        return max((k.calls for k in self.kernels if k.line in inside), default=0)

    def solution_kernel(self, k: KernelRun) -> KernelShape | None:
        return self.solution.kernel(k.name) if self.solution is not None else None

    def between(self, lines: Iterable[int],
                operations: Sequence[tuple[int, int]]) -> tuple[int, int, int]:
        """What lies between one launch and the next of the kernels on these lines, where
        these operations (start, end: copies, allocations at their moment) fall:
        (the intervals that hold some, the operations' spans in them: from the first one's
        start to the last one's end, the intervals' length). A data region removes the
        operations and the runtime's work between them; the launch and the wait for the
        kernel before stay (a plain interval's length)."""
        wanted = set(lines)
        launches = sorted((k for run in self.kernels if run.line in wanted for k in run.launches),
                          key=lambda k: k.start)
        ordered = sorted(operations)
        starts = [op[0] for op in ordered]
        held = spans = length = 0
        for before, after in zip(launches, launches[1:]):
            if after.start <= before.end:
                continue
            inside = ordered[bisect.bisect_left(starts, before.end):
                             bisect.bisect_right(starts, after.start)]
            inside = [op for op in inside if op[1] <= after.start]
            if inside:
                held += 1
                spans += max(op[1] for op in inside) - inside[0][0]
                length += after.start - before.end
        return held, spans, length

    def gaps_after(self, moments: Iterable[int]) -> int:
        """The GPU's idle time in the gaps that hold these moments (or open within a
        microsecond of them: an operation's end), each gap counted once."""
        busy = self.trace.busy if self.trace is not None else ()
        starts = [b[0] for b in busy]
        held: set[int] = set()
        for at in moments:
            i = bisect.bisect_right(starts, at + 1000) - 1
            if 0 <= i < len(busy) - 1 and busy[i][1] - 1000 <= at < busy[i + 1][0]:
                held.add(i)
        return sum(busy[i + 1][0] - busy[i][1] for i in held)


# ---------------------------------------------------------------------------------------------
# What the fix would gain


def solution_said(seen: Seen) -> str:
    """The solution's run beside this one, in a few words ("" without one)."""
    s = seen.solution
    if s is None or not s.span_ns or not seen.span_ns:
        return ""
    return f"the solution's GPU span is {fmt_ns(s.span_ns)}, this run's {fmt_ns(seen.span_ns)}"


# What a fix leaves of the run, at least, when no solution's run says: a run does not vanish.
LEFT = 0.01


def gain(seen: Seen, low: float, high: float, basis: str) -> Gain | None:
    """A gain of low..high ns of the run's span, its high end clipped to what the fixed run must
    still take (the solution's span, when it was measured: it is the fixed run), but never
    below the low end, what the trace shows would go: the solution's span is one run, and two
    runs of one build differ by more than a small fix saves (intro_saxpy's solution on the
    H200: 162 and 198 ms, its pageable copies 32 ms apart). None when nothing is measured."""
    if not seen.measured:
        return None
    span = seen.span_ns or int(high)
    floor = seen.solution.span_ns if seen.solution is not None and seen.solution.span_ns \
        else LEFT * span
    low = max(0.0, min(low, (1 - LEFT) * span))
    high = max(low, min(high, span - floor, (1 - LEFT) * span))
    return Gain(int(low), int(high), basis, seen.span_ns, solution_said(seen))


def kernel_gain(seen: Seen, k: KernelRun | None, low: float, high: float,
                what: str) -> Gain | None:
    """What fixing a kernel would save: its time against the same kernel of the solution's run
    when there is one (the kernel's time at the solution's launch configuration), else the
    fractions low..high of its time (what the rule expects of the fix)."""
    if k is None:
        return None
    fixed = seen.solution_kernel(k)
    if fixed is not None and fixed.calls and fixed.total_ns < k.total_ns:
        saved = k.total_ns - fixed.total_ns
        return gain(seen, 0.85 * saved, min(1.1 * saved, k.total_ns),
                    f"the kernel's {fmt_ns(k.total_ns)} against the solution's "
                    f"{fmt_ns(fixed.total_ns)} ({fixed.gangs} gangs of {fixed.lanes} threads)")
    return gain(seen, low * k.total_ns, high * k.total_ns,
                f"{what} of the kernel's {fmt_ns(k.total_ns)} "
                f"({k.calls} launch{'' if k.calls == 1 else 'es'})")


def biggest(kernels: Sequence[KernelRun]) -> KernelRun | None:
    return max(kernels, key=lambda k: k.total_ns, default=None)


# ---------------------------------------------------------------------------------------------
# The run's shape (for the solution's cache)


def run_shape(trace: Trace | None) -> RunShape | None:
    """A run's GPU time in a few figures; None without a trace."""
    if trace is None or trace.empty:
        return None
    by_name: dict[str, list[Kernel]] = {}
    for k in trace.kernels:
        by_name.setdefault(k.name, []).append(k)
    kernels = tuple(KernelShape(name, len(ks), sum(k.ns for k in ks),
                                Counter(k.grid for k in ks).most_common(1)[0][0],
                                Counter(k.block for k in ks).most_common(1)[0][0])
                    for name, ks in sorted(by_name.items()))
    h2d = [c for c in trace.copies if c.direction == HTOD]
    d2h = [c for c in trace.copies if c.direction == DTOH]
    return RunShape(span_ns=trace.finish - trace.origin, busy_ns=sum(b - a for a, b in trace.busy),
                    kernel_ns=sum(k.ns for k in trace.kernels), h2d_ns=sum(c.ns for c in h2d),
                    d2h_ns=sum(c.ns for c in d2h), h2d_bytes=sum(c.bytes for c in h2d),
                    d2h_bytes=sum(c.bytes for c in d2h), queues=len(queues(trace)),
                    kernels=kernels)


# ---------------------------------------------------------------------------------------------
# Kernels on their lines


def _construct_of(program: Program, line: int) -> Construct | None:
    """The compute construct a kernel's line belongs to: the innermost holding it."""
    return program.compute_at(line)


def _function_regions(program: Program, symbol: str) -> list[Construct]:
    """The compute constructs of the source function a compiler symbol names, in source order."""
    student = diagnostics.student_symbol(symbol)
    for f in program.functions:
        named = f.kind == "program" if student == diagnostics.MAIN_PROGRAM else \
            program.same(f.name, student)
        if named:
            return [c for c in program.constructs if c.directive.compute and f.line <= c.line <= f.end]
    return []


def kernel_lines(names: Iterable[str], program: Program,
                 executable: Path | None = None) -> dict[str, int]:
    """Each kernel's construct line: nvc's names say it; gcc's regions are found by their host
    version's first line in the executable, else by their number among the function's
    compute constructs in the source (gcc numbers them in the order it outlines them, which is
    the source's for constructs one after the other)."""
    out: dict[str, int] = {}
    gcc: dict[str, str] = {}
    for name in names:
        nv = next((m for p in _NV_KERNEL if (m := p.match(name)) is not None), None)
        if nv is not None:
            construct = _construct_of(program, int(nv["line"]))
            out[name] = construct.line if construct is not None else int(nv["line"])
        elif _GCC_KERNEL.match(name):
            gcc[name.replace("$", ".")] = name
    places = elflines.functions(executable, gcc) if executable is not None and gcc else {}
    for host, name in gcc.items():
        place = places.get(host)
        construct = _construct_of(program, place.line) if place is not None and place.line else None
        if construct is None:
            m = _GCC_KERNEL.match(name)
            assert m is not None
            # (gfortran's contained procedures: `saxpy.0`, `saxpy$0` on the device)
            regions = _function_regions(program, re.sub(r"[.$]\d+$", "", m["func"]))
            n = int(m["n"])
            construct = regions[n] if n < len(regions) else None
        if construct is not None:
            out[name] = construct.line
    return out


# ---------------------------------------------------------------------------------------------
# From a run


def compiler_remarks(build_output: str, name: str, acc: AccReport | None) -> dict[int, tuple[str, ...]]:
    """line -> the compiler's remarks of it: gcc's -fopt-info lines of the build's output (its
    file's), nvhpc's -Minfo lines as the report read them."""
    found: dict[int, list[str]] = {}
    for d in diagnostics.parse(build_output):
        if d.file == name and d.severity in ("optimized", "missed", "note", "remark", "warning"):
            found.setdefault(d.line, []).append(d.message)
    for r in acc.remarks if acc is not None else ():
        found.setdefault(r.line, []).append(r.text)
    return {line: tuple(texts) for line, texts in found.items()}


def _counts(regions: RegionsRan | None) -> dict[int, int]:
    if regions is None or not regions.counted:
        return {}
    out: dict[int, int] = {}
    for c in regions.constructs:
        if c.line is not None:
            out[c.line] = out.get(c.line, 0) + c.count
    return out


def seen_of(source: Source, trace: Trace | None, build: BuildResult | None = None,
            acc: AccReport | None = None, regions: RegionsRan | None = None,
            solution: RunShape | None = None) -> Seen:
    """The evidence of one run, joined: its source read, its kernels placed."""
    program = read(source.text, source.language, source.first_line)
    names = {k.name for k in trace.kernels} if trace is not None else set()
    executable = build.executable if build is not None else None
    return Seen(program=program, trace=trace,
                remarks=compiler_remarks(build.output if build is not None else "", source.name, acc),
                implicit=acc.implicit if acc is not None else (),
                counts=_counts(regions),
                kernel_lines=kernel_lines(names, program, executable),
                solution=solution)
