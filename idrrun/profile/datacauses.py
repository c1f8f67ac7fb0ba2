"""The diagnosis's rules about data between host and GPU (causes.py lists them all): copies at
every iteration, the host's work on the GPU's data between the regions, an update at every
iteration, device memory allocated at every iteration, a copy where copyin, copyout or create
suffice. Each is a plain function (Seen) -> [Cause]; the source must show the pattern, and the
trace, when there is one, what it costs (the copies' sizes and times, the GPU's idle time).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence

from .loopfacts import at_line, body_of, carried_scalar, listed, time_loop
from .model import DTOH, HTOD, Allocation, Cause, Copy, Gain, Kernel
from .program import ALLOCATING, MOVING, Construct, Directive, Loop, Program
from .render import fmt_bytes, fmt_ns
from .seen import REPEATS, CopyGroup, Seen, gain

def _device_arrays(p: Program, loop: Loop) -> set[str]:
    """Arrays the device holds around the loop: named by a data construct around it, an enter
    data before it, or a construct in it."""
    names = {n for c in p.data_around(loop.line) for n in c.directive.named(ALLOCATING | {"present"})}
    names |= {n for d in p.directives if d.name == "enter data" and d.line < loop.line
              for n in d.named(ALLOCATING)}
    names |= {n for d in p.directives if loop.line < d.line <= loop.end
              for n in d.named(ALLOCATING | {"present", "self", "host", "device"})}
    return {n.lower() if p.fortran else n for n in names}


def _present_around(p: Program, line: int, name: str) -> bool:
    """The array is on the device already at this line: a data construct around it names it,
    or an enter data before it does."""
    held = [n for c in p.data_around(line) for n in c.directive.named(ALLOCATING | {"present"})]
    held += [n for d in p.directives if d.name == "enter data" and d.line < line
             for n in d.named(ALLOCATING)]
    return any(p.same(n, name) for n in held)


def _every_iteration(seen: Seen, loop: Loop, group: CopyGroup) -> bool:
    """The copies happen at (nearly) every iteration of the loop."""
    iterations = seen.iterations(loop)
    return group.count >= max(REPEATS, iterations // 2)


def _moved_in(seen: Seen, c: Construct) -> tuple[list[str], list[str]]:
    """(arrays its clauses move, arrays it moves because no clause names them)."""
    p = seen.program
    # A moving clause inside a data region that holds the array moves nothing (present_or_).
    named = [n for n in c.directive.named(MOVING) if not _present_around(p, c.line, n)]
    implicit = [i.variable for i in seen.implicit if i.line == c.line
                and not _present_around(p, c.line, i.variable)
                and not c.directive.has("default")]
    return named, list(dict.fromkeys(implicit))


Movers = list[tuple[Construct, list[str], list[str]]]  # construct, named arrays, implicit ones


def _movers(seen: Seen) -> dict[int, Movers]:
    """The constructs that move arrays, by the line of the loop the host runs around them."""
    movers: dict[int, Movers] = {}
    for c in seen.program.constructs:
        loop = time_loop(seen.program, c.line)
        named, implicit = _moved_in(seen, c) if loop is not None else ([], [])
        if loop is not None and (named or implicit):
            movers.setdefault(loop.line, []).append((c, named, implicit))
    return movers


def _copies_evidence(loop: Loop, found: Movers, groups: Sequence[CopyGroup]) -> str:
    arrays = [n for _, named, implicit in found for n in (*named, *implicit)]
    how = "without a data clause naming them, so the runtime moves them" \
        if all(not named for _, named, _ in found) else "by their data clauses"
    evidence = (f"{listed(arrays)} go to the GPU and back at each construct in the loop at "
                f"{at_line(loop.line)}, {how}")
    if groups:
        evidence += (f"; the trace: {sum(g.count for g in groups)} copies of {_sizes(groups)} "
                     f"({fmt_ns(sum(g.ns for g in groups))}, "
                     f"{max(g.count for g in groups)} of each)")
    return evidence


def copies_in_loop(seen: Seen) -> list[Cause]:
    """The arrays cross between host and GPU at every iteration: a compute (or data) construct
    in the loop moves them, and nothing keeps them on the GPU around the loop."""
    out = []
    for loop_line, found in _movers(seen).items():
        loop = seen.program.loop_at(loop_line)
        assert loop is not None
        groups = [g for g in seen.copy_groups if _every_iteration(seen, loop, g)]
        if seen.measured and not groups:
            continue
        out.append(Cause(
            "copies_in_loop", found[0][0].line,
            "the arrays cross between host and GPU at every iteration",
            _copies_evidence(loop, found, groups),
            f"open a data region around the loop at {at_line(loop.line)} (data copy(...) "
            "create(...), or enter data before it and exit data after) so that the arrays stay "
            "on the GPU, and name them present in the constructs",
            _copies_gain(seen, loop, groups) if groups else None,
            tuple(c.line for c, _, _ in found[1:])))
    return out


def _loop_kernels(p: Program, loop: Loop) -> list[int]:
    """The lines of the compute constructs in the loop (their kernels' lines)."""
    return [c.line for c in p.constructs if c.directive.compute and loop.line < c.line <= loop.end]


def _copies_gain(seen: Seen, loop: Loop, groups: Sequence[CopyGroup]) -> Gain | None:
    """What a data region saves: between the loop's kernels, the copies and the runtime's work
    between them (each array's allocation, its staging: with arrays of a MiB, 1.1 ms of the
    1.2 ms between two kernels, the copies 84 µs of it), up to all the time between the
    kernels; from the copies and the allocations' idle GPU where the kernels are not placed."""
    allocations = seen.trace.allocations if seen.trace is not None else ()
    operations = [(cp.start, cp.end) for g in groups for cp in g.copies]
    operations += [(a.at, a.at) for a in allocations]
    count = sum(g.count for g in groups)
    held, spans, length = seen.between(_loop_kernels(seen.program, loop), operations)
    if held >= REPEATS:
        return gain(seen, spans, length,
                    f"the {count} copies and the runtime's work between them, {fmt_ns(spans)} of "
                    f"the {fmt_ns(length)} between the loop's kernels")
    ns = sum(g.ns for g in groups)
    # Without a data region the runtime also takes and gives back the arrays' device memory
    # at each construct: the GPU's idle time around those allocations goes with the copies.
    idle = seen.gaps_after(a.at for a in allocations)
    return gain(seen, 0.85 * ns * (1 - 2 / max(max(g.count for g in groups), 3)), ns + idle,
                f"the {count} copies' time" + (" and the allocations' idle GPU" if idle else ""))


def _sizes(groups: Sequence[CopyGroup]) -> str:
    return ", ".join(dict.fromkeys(fmt_bytes(g.bytes) for g in groups))


def _time_loops(p: Program) -> list[Loop]:
    """The loops the host runs around compute constructs."""
    return [lp for lp in p.loops if p.compute_at(lp.line) is None and any(
        lp.line < c.line <= lp.end and c.directive.compute for c in p.constructs)]


def _host_loops_in(p: Program, loop: Loop) -> list[Loop]:
    """The loops the host runs directly in the loop, with no construct in them."""
    return [h for h in p.loops if loop.line < h.line and h.end <= loop.end
            and p.compute_at(h.line) is None and time_loop(p, h.line) == loop
            and not any(h.line <= c.line <= h.end for c in p.constructs)]


# Complexity: one rule's conditions (a time loop, a host loop in it, the data the GPU holds, an
# update not under an if), each a guard read in order.
def _host_loops_reading(seen: Seen) -> list[tuple[Loop, Loop, list[Directive], list[str]]]:
    """(time loop, host loop in it, updates that bring its data back, arrays) of every loop the
    host runs between the compute regions of a loop on data the GPU holds (an update that
    runs only now and then, in an if, does not count)."""
    p = seen.program
    out = []
    for loop in _time_loops(p):
        device = _device_arrays(p, loop)
        updates = [d for d in p.directives if loop.line < d.line <= loop.end and d.name == "update"
                   and d.has("self", "host") and not p.conditional(d.line, loop)]
        for h in _host_loops_in(p, loop):
            read = list(dict.fromkeys(a.array for a in p.accesses_in(h.line, h.end) if not a.write
                                      and (a.array.lower() if p.fortran else a.array) in device))
            brought = [u for u in updates if u.line < h.line
                       and any(p.same(n, r) for n in u.named(("self", "host")) for r in read)]
            if read and brought:
                out.append((loop, h, brought, read))
    return out


def _operator(p: Program, loop: Loop, name: str) -> str:
    """The reduction's operator as the loop's update of the scalar reads: max, min, +, *."""
    text = body_of(p, loop)
    found = re.search(rf"(?<![\w.>]){re.escape(name)}\s*(?P<op>[-+*])?=(?!=)(?P<rhs>[^;\n]*)", text)
    if found is None:
        return "+"
    rhs = found.group("rhs")
    if found.group("op"):
        return "*" if found.group("op") == "*" else "+"
    if re.search(r"\bf?max\b|>", rhs, re.IGNORECASE):
        return "max"
    if re.search(r"\bf?min\b|<", rhs, re.IGNORECASE):
        return "min"
    return "*" if re.search(rf"{re.escape(name)}\s*\*|\*\s*{re.escape(name)}", rhs) else "+"


def host_work(seen: Seen) -> list[Cause]:
    """The host works on the GPU's data between the regions of the loop (a reduction, a check):
    the arrays come back at each iteration and the GPU waits meanwhile."""
    p = seen.program
    out = []
    for loop, h, brought, arrays in _host_loops_reading(seen):
        groups = [g for g in seen.repeated(DTOH) if _every_iteration(seen, loop, g)]
        if seen.measured and not groups:
            continue
        ns = sum(g.ns for g in groups)
        idle = seen.gaps_after(c.end for g in groups for c in g.copies)
        reduction = carried_scalar(p, h, set())
        what = f"a reduction ({reduction}) on the host" if reduction else "a loop on the host"
        evidence = (f"{what} at every iteration of the loop at {at_line(loop.line)}, on "
                    f"{listed(arrays)}, which the update at {at_line(brought[0].line)} brings back "
                    "from the GPU each time (the data region keeps them there otherwise)")
        if groups:
            evidence += (f"; the trace: {sum(g.count for g in groups)} copies back of "
                         f"{_sizes(groups)} ({fmt_ns(ns)}) and the GPU idle {fmt_ns(idle)} after them")
        out.append(Cause(
            "host_work", h.line, "work on the host between the compute regions", evidence,
            "do this loop on the GPU as well (parallel loop" +
            (f" reduction({_operator(p, h, reduction)}:{reduction})" if reduction else "")
            + " present(...)), so that only "
            "its result comes back, and drop the update",
            gain(seen, 0.7 * (ns + idle), ns + idle, "the copies back and the GPU's idle time "
                 "after them") if groups else None,
            tuple(u.line for u in brought)))
    return out


def update_in_loop(seen: Seen) -> list[Cause]:
    """An update directive at every iteration of a loop (the host's work on it is another
    cause: host_work)."""
    p = seen.program
    claimed = {u.line for _, _, brought, _ in _host_loops_reading(seen) for u in brought}
    out = []
    for d in p.directives:
        loop = time_loop(p, d.line)
        if d.name != "update" or loop is None or d.line in claimed:
            continue
        direction = HTOD if d.has("device") else DTOH
        groups = [g for g in seen.repeated(direction) if _every_iteration(seen, loop, g)]
        if (seen.measured and not groups) or (not seen.measured and p.conditional(d.line, loop)):
            continue
        ns = sum(g.ns for g in groups)
        arrays = d.named(("self", "host", "device"))
        evidence = f"update of {listed(arrays)} at every iteration of the loop at {at_line(loop.line)}"
        if groups:
            evidence += (f"; the trace: {sum(g.count for g in groups)} copies of "
                         f"{_sizes(groups)} ({fmt_ns(ns)})")
        out.append(Cause(
            "update_in_loop", d.line, "an update at every iteration", evidence,
            "update only when the host needs the data (every few iterations, or once after the "
            "loop), or do the host's work with it on the GPU",
            gain(seen, 0.8 * ns, ns, "the updates' copies") if groups else None))
    return out


def alloc_in_loop(seen: Seen) -> list[Cause]:
    """Device memory taken and given back at every iteration: a data construct that creates
    arrays inside the loop."""
    p = seen.program
    out = []
    for d in p.directives:
        loop = time_loop(p, d.line)
        if loop is None or d.construct not in ("data", "enter"):
            continue
        created = [n for n in d.named(("create", "pcreate", "present_or_create"))
                   if not _present_around(p, loop.line, n)]
        if not created:
            continue
        allocations = [a for a in seen.trace.allocations] if seen.trace is not None else []
        taken = [a for a in allocations if a.kind == "alloc"]
        idle = seen.gaps_after(a.at for a in allocations)
        evidence = f"{listed(created)} created on the device at every iteration of the loop at " \
                   f"{at_line(loop.line)}, and freed at its end"
        if taken:
            evidence += f"; the trace: {len(taken)} allocations, the GPU idle {fmt_ns(idle)} around them"
        out.append(Cause(
            "alloc_in_loop", d.line, "device memory allocated at every iteration", evidence,
            f"create {listed(created)} once, before the loop at {at_line(loop.line)} (a data "
            "region around it, or enter data before it and exit data after), and name them "
            "present inside",
            _alloc_gain(seen, loop, allocations, idle) if len(taken) >= REPEATS else None))
    return out


def _alloc_gain(seen: Seen, loop: Loop, allocations: Sequence[Allocation], idle: int) -> Gain | None:
    """What creating the arrays once saves: between the loop's kernels, the time from each
    free to the next allocation (the runtime's calls; the launch and the wait stay), up to all
    the time between the kernels that hold them (blur_passes on the H200: 140 of the 280 µs;
    the fix measured 163 µs a pass); the GPU's idle time around them where the kernels are
    not placed."""
    held, spans, length = seen.between(_loop_kernels(seen.program, loop),
                                       [(a.at, a.at) for a in allocations])
    if held >= REPEATS:
        return gain(seen, spans, length,
                    f"the allocations' calls, {fmt_ns(spans)} of the {fmt_ns(length)} between "
                    "the loop's kernels that hold them")
    return gain(seen, 0.5 * idle, idle, "the GPU's idle time around the allocations")


def _aliased(p: Program, name: str) -> bool:
    """Another pointer is set to the array (`cur = a`, `p => a`): who writes it cannot be told."""
    return re.search(rf"(?:(?<![\w.>])[A-Za-z_]\w*\s*=|=>)\s*{re.escape(name)}\s*[;,)\n]",
                     "\n".join(p.code), re.IGNORECASE if p.fortran else 0) is not None


def _read_after(p: Program, c: Construct, name: str) -> bool:
    """The host reads the array after the construct, in the same function (not to free it)."""
    f = p.function_at(c.line)
    end = f.end if f is not None else p.first_line + len(p.code)
    return any(not a.write and c.end < a.line <= end and p.same(a.array, name)
               and not re.search(r"\b(?:free|deallocate)\s*\(", p.text(a.line), re.IGNORECASE)
               for a in p.accesses)


def _wasted(p: Program, c: Construct, name: str) -> str:
    """What `copy(name)` could be: "copyin" (never written there), "create" (written first,
    never read by the host after), "copyout" (written first); "" when copy is right or it
    cannot be told (the array passed to a function, reached through another name)."""
    inside = [a for a in p.accesses if p.same(a.array, name) and c.directive.last < a.line <= c.end]
    if not inside or any(not a.subscripts and not a.write for a in inside) or _aliased(p, name):
        return ""
    if not any(a.write for a in inside):
        return "copyin"
    first = min(inside, key=lambda a: a.at)
    if not first.write or first.update:
        return ""
    return "copyout" if _read_after(p, c, name) else "create"


_WASTED = {"copyin": (DTOH,), "copyout": (HTOD,), "create": (HTOD, DTOH)}


_WHY = {"copyin": "{name} is only read there: its copy back to the host is for nothing",
        "create": "{name} is written there before it is read, and the host does not read it "
                  "after: neither copy is needed",
        "copyout": "{name} is written there before it is read: its copy to the GPU is for nothing"}


def _typical(seen: Seen, directions: set[str]) -> dict[str, float]:
    """Each direction's typical copy of an array: the median of the copies of arrays in it (the
    trace does not say which array a copy moved; a data clause's arrays are often alike, and
    other constructs may move arrays of the same size once each)."""
    moved = [cp for g in seen.copy_groups if g.direction in directions for cp in g.copies]
    return {d: statistics.median([cp.ns for cp in moved if cp.direction == d])
            for d in directions if any(cp.direction == d for cp in moved)}


# Complexity: one rule: each way of a copy clause checked against the reads and writes of the
# construct, in one place.
def copy_not_needed(seen: Seen) -> list[Cause]:
    """`copy` where copyin, copyout or create suffice: one way of the copy is for nothing."""
    p = seen.program
    out = []
    for c in p.constructs:
        if time_loop(p, c.line) is not None:
            continue  # copies at every iteration: copies_in_loop
        instead = {name: how for name in c.directive.named(("copy", "pcopy", "present_or_copy"))
                   if (how := _wasted(p, c, name))}
        typical = _typical(seen, {d for how in instead.values() for d in _WASTED[how]})
        if not instead or (seen.measured and not typical):
            continue
        shown, found = _not_needed_gain(seen, c, instead, typical)
        said = "; ".join(_WHY[how].format(name=name) for name, how in instead.items()) + shown
        kinds = " and ".join(dict.fromkeys(instead.values()))
        out.append(Cause(
            "copy_not_needed", c.line,
            f"copy where {kinds} " + ("suffice" if " and " in kinds else "suffices"), said,
            " ".join(f"{how}({name})" for name, how in instead.items()) + " in place of "
            + ", ".join(f"copy({name})" for name in instead),
            found))
    return out


def _not_needed_gain(seen: Seen, c: Construct, instead: dict[str, str],
                     typical: dict[str, float]) -> tuple[str, Gain | None]:
    """(what the trace shows, what the copies that would go take): the construct's own copies
    of each wasted way, the smallest to the largest (the trace does not say which array each
    moved); the run's typical copy where the construct's kernels are not placed."""
    wasted = Counter(d for how in instead.values() for d in _WASTED[how])
    own = _own_copies(seen, c)
    if own and all(own.get(d) for d in wasted):
        return ("; the trace: " + ", ".join(f"its copies {_DIRECTION[d]} take {_listed_ns(own[d])}"
                                            for d in wasted),
                gain(seen, sum(_ends(own[d], n, min) for d, n in wasted.items()),
                     sum(_ends(own[d], n, max) for d, n in wasted.items()),
                     "its copies that would go (the trace does not say which array each moved: "
                     "the smallest to the largest)"))
    if not typical:
        return "", None
    ns = sum(typical.get(d, 0.0) * n for d, n in wasted.items())
    return ("; the trace: " + ", ".join(f"a copy {_DIRECTION[d]} takes {fmt_ns(int(v))}"
                                        for d, v in typical.items()),
            gain(seen, 0.7 * ns, 1.3 * ns, "the copies that would go"))


def _own_copies(seen: Seen, c: Construct) -> dict[str, list[list[int]]]:
    """The array copies of the construct itself, each time it ran: those to the GPU after the
    kernel before it (another construct's) and before its first kernel, those back after its
    last kernel and before the next; direction -> for each time, their durations. The copies
    of one size in the whole run are not the construct's: intro_saxpy's init copies back to
    pages never touched (530-630 ms for 800 MB, against 60 ms for saxpy's). Empty where its
    kernels are not placed."""
    p = seen.program
    inside = {x.line for x in p.constructs if x.directive.compute and c.holds(x.line)}
    launches = sorted(((k, run.line in inside) for run in seen.kernels for k in run.launches),
                      key=lambda pair: pair[0].start)
    copies = [cp for g in seen.copy_groups for cp in g.copies]
    last_copy = max((cp.end for cp in copies), default=0)
    out: dict[str, list[list[int]]] = {HTOD: [], DTOH: []}
    for first, last in _runs(launches):
        after = launches[first - 1][0].end if first > 0 else 0
        before = launches[last + 1][0].start if last + 1 < len(launches) else last_copy
        out[HTOD].append(_within(copies, HTOD, after, launches[first][0].start))
        out[DTOH].append(_within(copies, DTOH, launches[last][0].end, before))
    return {d: times for d, times in out.items() if times and all(times)}


def _within(copies: Sequence[Copy], direction: str, start: int, end: int) -> list[int]:
    """The durations of the copies in this direction between these moments."""
    return [cp.ns for cp in copies if cp.direction == direction and start <= cp.start
            and cp.end <= end]


def _runs(launches: Sequence[tuple[Kernel, bool]]) -> list[tuple[int, int]]:
    """(first, last) index of each run of consecutive launches that are the construct's."""
    runs: list[tuple[int, int]] = []
    for i, (_, mine) in enumerate(launches):
        if mine and runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        elif mine:
            runs.append((i, i))
    return runs


def _ends(times: list[list[int]], n: int, end: Callable[..., int]) -> int:
    """The n smallest (min) or largest (max) of each time's copies, summed over the times."""
    return sum(sum(sorted(t, reverse=end is max)[:n]) for t in times)


def _listed_ns(times: list[list[int]]) -> str:
    flat = sorted(ns for t in times for ns in t)
    return fmt_ns(flat[0]) if len(flat) == 1 else f"{fmt_ns(flat[0])} to {fmt_ns(flat[-1])}"


_DIRECTION = {HTOD: "to the GPU", DTOH: "back to the host"}
