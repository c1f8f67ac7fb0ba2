"""The diagnosis's rules about kernels (causes.py lists them all): too few gangs or vector lanes
for the GPU, a kernels region left serial, an independent loop on a serial construct, an inner
loop on one vector lane, a missing collapse, lanes reading memory far apart (the loop order
against the layout), a reduction through atomics, a kernel launched per row, one synchronous
queue where the lesson is async. Each is a plain function (Seen) -> [Cause].

A kernel's gain is its time against the same kernel of the solution's run when the check ran
one (seen.kernel_gain); without it, the share of its time the fix usually saves on the course's
GPUs (KERNEL_*, as ranges).
"""

from __future__ import annotations

import re

from .loopfacts import (C_DECL, at_line, definitions, expanded, independent, inner_loop, levels,
                        listed, mentions, stride, time_loop, vector_loop)
from .model import Cause, Gain
from .program import Access, Construct, Directive, Loop, Program
from .render import fmt_ns
from .seen import KernelRun, Seen, biggest, gain, kernel_gain
from .summary import queues

# Fewer gangs than this is fewer than any GPU of the course has multiprocessors (V100 80, A100
# 108, H100 and H200 132): what a num_gangs clause is judged by when the trace does not say.
FEW_GANGS = 64


# A warp: fewer vector lanes than this leave most of each multiprocessor's lanes idle.
WARP = 32


# A kernel launched per row: a loop of rows launches it this many times or more.
ROWS = 50


# What a fix saves of a kernel's time, where the solution's run has no such kernel to compare
# with: lanes that read memory far apart (each warp 32 transactions instead of one or two),
# one loop of two spread, atomics on one address serialised, a loop on one thread.
KERNEL_UNCOALESCED = (0.3, 0.8)


KERNEL_COLLAPSE = (0.4, 0.75)


KERNEL_VECTOR = (0.6, 0.97)


KERNEL_ATOMIC = (0.3, 0.95)


KERNEL_SERIAL = (0.9, 0.99)


def _short_of_gangs(seen: Seen, d: Directive) -> tuple[KernelRun | None, int, int] | None:
    """(the kernel, its gangs, the gangs it should have) of a compute directive whose launch
    has too few: a num_gangs clause below the GPU's multiprocessors, or half the solution's
    gangs of the same kernel or fewer; None when it has enough."""
    asked = d.number("num_gangs")
    k = biggest(seen.kernels_at(d.line))
    fixed = seen.solution_kernel(k) if k is not None else None
    enough = seen.sms or FEW_GANGS
    gangs = k.gangs if k is not None else asked
    if gangs is None:
        return None
    if fixed is not None and k is not None and fixed.gangs >= 2 * k.gangs:
        return k, gangs, fixed.gangs
    if asked is not None and gangs < enough:
        return k, gangs, enough
    return None


def _gangs_evidence(seen: Seen, d: Directive, k: KernelRun | None) -> str:
    asked = d.number("num_gangs")
    where = f"a GPU of {seen.sms} multiprocessors" if seen.sms else \
        f"the course's GPUs ({FEW_GANGS} or more)"
    evidence = f"num_gangs({asked})" if asked is not None else "the launch"
    if k is None:
        return evidence + (f": fewer gangs than {where} has multiprocessors" if seen.sms else
                           f": fewer gangs than any of {where} has multiprocessors")
    evidence += (f": its kernel ran on {k.gangs} gangs of {k.lanes} threads "
                 f"({k.gangs * k.lanes} threads) on {where}, {fmt_ns(k.total_ns)} in "
                 f"{k.calls} launches")
    fixed = seen.solution_kernel(k)
    if fixed is not None:
        evidence += f" (the solution's: {fixed.gangs} gangs, {fmt_ns(fixed.total_ns)})"
    return evidence


def few_gangs(seen: Seen) -> list[Cause]:
    """Too few gangs for the GPU: a num_gangs clause below the GPU's multiprocessors, or a
    launch of fewer gangs than the solution's of the same kernel."""
    p = seen.program
    out = []
    for d in p.directives:
        c = p.compute_at(d.line)
        short = _short_of_gangs(seen, d) if d.compute and c is not None and c.line == d.line \
            and c.kind != "serial" else None
        if short is None:
            continue
        k, gangs, target = short
        asked = d.number("num_gangs")
        share = 1 - gangs / target
        out.append(Cause(
            "few_gangs", d.line, "too few gangs for the GPU", _gangs_evidence(seen, d, k),
            (f"drop num_gangs({asked}) and let the runtime choose, or give at least one gang per "
             "multiprocessor" if asked is not None else "let the runtime choose the gangs")
            + (f" ({seen.sms} here)" if seen.sms else ""),
            kernel_gain(seen, k, 0.8 * share, share, "what the idle multiprocessors leave")))
    return out


def few_lanes(seen: Seen) -> list[Cause]:
    """Fewer vector lanes than a warp on a parallel loop: vector_length below 32."""
    p = seen.program
    out = []
    for d in p.directives:
        asked = d.number("vector_length")
        c = p.compute_at(d.line)
        if asked is None or asked >= WARP or c is None or c.kind == "serial":
            continue
        k = biggest(seen.kernels_at(c.line))
        if k is not None and k.lanes >= WARP:
            continue  # the compiler did not use it (gcc runs 32 lanes whatever is asked)
        share = 1 - asked / WARP
        out.append(Cause(
            "few_lanes", d.line, "too few vector lanes",
            f"vector_length({asked}): fewer lanes than a warp ({WARP}) work on each gang" +
            (f"; its kernel ran {k.lanes} threads per gang, {fmt_ns(k.total_ns)}" if k else ""),
            "drop vector_length, or give 128 (a multiple of 32)",
            kernel_gain(seen, k, 0.6 * share, share, "what the idle lanes leave")))
    return out


def _function_header(p: Program, line: int) -> str:
    f = p.function_at(line)
    if f is None:
        return ""
    text = p.span(f.line, min(f.line + 4, f.end))
    return text[:text.find("{")] if "{" in text else text


def _aliasing(p: Program, c: Construct) -> list[str]:
    """The pointer parameters of the construct's C function that are not restrict, when two or
    more: the compiler cannot tell that they do not overlap."""
    if p.fortran:
        return []
    header = _function_header(p, c.line)
    params = header[header.find("(") + 1:header.rfind(")")] if "(" in header else ""
    pointers = [m.group(1) for part in params.split(",")
                if "*" in part and "restrict" not in part
                and (m := re.search(r"([A-Za-z_]\w*)\s*(?:\[\s*\])?\s*$", part)) is not None]
    return pointers if len(pointers) >= 2 else []


def serial_kernels(seen: Seen) -> list[Cause]:
    """A kernels region left serial: the compiler could not prove the loop's iterations
    independent (pointers that may alias), and the kernel ran on one gang."""
    p = seen.program
    out = []
    for c in p.constructs:
        if c.kind != "kernels":
            continue
        ks = seen.kernels_at(c.line)
        dependence = next((seen.said(lp.line, "dependence|prevents parallelization")
                           for lp in p.loops_in(c) if seen.said(lp.line, "dependence")), "")
        aliased = _aliasing(p, c)
        spread = seen.levels(c.line, c.directive.last)
        if ks and not all(k.gangs == 1 for k in ks):
            continue  # the compiler did spread it
        if not ks and not (dependence or (aliased and spread == frozenset({"seq"}))):
            continue
        k = biggest(ks)
        why = (f"the compiler: {dependence}" if dependence else
               f"{', '.join(aliased)} are pointers that may overlap (not restrict)" if aliased
               else "the compiler left its loop sequential")
        evidence = f"the kernels region runs its loop on one thread: {why}"
        if k is not None:
            evidence += f"; its kernel ran on {k.gangs} gang for {fmt_ns(k.total_ns)}"
        out.append(Cause(
            "serial_kernels", c.line, "a kernels region left serial", evidence,
            "say that the iterations are independent: `loop independent` on the loop, or "
            "parallel loop in place of kernels" + (", or restrict on the pointers" if aliased else ""),
            kernel_gain(seen, k, *KERNEL_SERIAL, "what one thread leaves")))
    return out


def serial_construct(seen: Seen) -> list[Cause]:
    """An independent loop on a serial construct: one GPU thread runs all its iterations."""
    p = seen.program
    out = []
    for c in p.constructs:
        if c.kind != "serial":
            continue
        loops = p.loops_in(c)
        top = [lp for lp in loops if not any(o.line < lp.line <= o.end for o in loops)]
        if not top or not independent(p, top[0], (c.directive, top[0].directive)):
            continue
        k = biggest(seen.kernels_at(c.line))
        evidence = f"the loop at {at_line(top[0].line)} has independent iterations, and serial runs " \
                   "them all on one thread of the GPU"
        if k is not None:
            evidence += f"; its kernel took {fmt_ns(k.total_ns)} in {k.calls} launches"
        out.append(Cause(
            "serial_construct", c.line, "an independent loop on a serial construct", evidence,
            "parallel loop in place of serial: its iterations can run side by side",
            kernel_gain(seen, k, *KERNEL_SERIAL, "what one thread leaves"),
            (top[0].line,)))
    return out


def serial_loop(seen: Seen) -> list[Cause]:
    """A loop left on one vector lane: the construct's loops got gangs only (no vector), and
    the inner loop, independent, runs on one thread of each gang."""
    p = seen.program
    out = []
    for c in p.constructs:
        if c.kind != "parallel":
            continue
        loops = p.loops_in(c)
        if any("vector" in levels(seen, lp, c) for lp in loops) or \
                any(lp.directive is not None and lp.directive.has("tile") for lp in loops):
            continue
        for g in loops:
            inner = inner_loop(p, g)
            if "gang" not in levels(seen, g, c) or inner is None or \
                    (inner.directive is not None and inner.directive.has("seq")) or \
                    not independent(p, inner, (inner.directive, g.directive, c.directive)):
                continue
            assert g.directive is not None
            k = biggest(seen.kernels_at(c.line))
            said = seen.said(g.directive.line, "loop parallelism", g.directive.last)
            evidence = (f"the loop at {at_line(g.line)} is spread over gangs only"
                        + (f" (the compiler: {said})" if said else "")
                        + f"; the loop at {at_line(inner.line)} inside, whose iterations are "
                          "independent, runs on one thread of each gang, the others idle")
            if k is not None:
                evidence += f"; the kernel took {fmt_ns(k.total_ns)}"
            out.append(Cause(
                "serial_loop", inner.line, "the inner loop runs on one thread of each gang", evidence,
                f"loop vector on the loop at {at_line(inner.line)}",
                kernel_gain(seen, k, *KERNEL_VECTOR, "what one lane of each gang leaves"),
                (g.directive.line,)))
    return out


def _missing_collapse(seen: Seen, c: Construct) -> list[tuple[Loop, Loop]]:
    p = seen.program
    found = []
    for lp in p.loops_in(c):
        d = lp.directive
        if d is None or d.has("collapse", "tile", "seq") or "vector" not in levels(seen, lp, c):
            continue
        inner = inner_loop(p, lp)
        if inner is None or not inner.perfect_parent or inner.directive is not None or \
                not independent(p, inner, (d, c.directive)):
            continue
        found.append((lp, inner))
    return found


def missing_collapse(seen: Seen) -> list[Cause]:
    """Only the outer loop of a tight nest is spread over the GPU: no collapse."""
    p = seen.program
    out = []
    for c in p.constructs:
        if not c.directive.compute:
            continue
        for outer, inner in _missing_collapse(seen, c):
            assert outer.directive is not None
            k = biggest(seen.kernels_at(c.line))
            strided = [a.array for a in p.accesses_in(inner.line, inner.end)
                       if stride(p, a.subscripts, outer.var) == "strided"]
            evidence = (f"the loop at {at_line(outer.line)} is spread over gangs and vector lanes, "
                        f"the loop at {at_line(inner.line)} inside runs sequentially in each thread")
            if strided:
                evidence += (f", and neighbouring threads read {listed(strided)} far apart "
                             f"(they step along {outer.var})")
            if k is not None:
                evidence += f"; the kernel took {fmt_ns(k.total_ns)}"
            out.append(Cause(
                "missing_collapse", outer.directive.line, "a missing collapse", evidence,
                "collapse(2) on the directive (or tile(32, 32)), so that the iterations of both "
                "loops are shared out",
                kernel_gain(seen, k, *KERNEL_COLLAPSE, "what the second loop spread brings"),
                (outer.line, inner.line)))
    return out


def _strided(seen: Seen, c: Construct) -> tuple[Loop, Loop, list[Access]] | None:
    """(the loop of the vector directive, the loop its lanes step along, the accesses that step
    far apart with it) of a construct whose 2-D accesses step more far apart than contiguous.
    What counts: the accesses that walk a 2-D array (subscripts with another of the nest's
    variables too: A[j*n + i]); a vector of the loop's own is small beside it."""
    p = seen.program
    found = vector_loop(seen, c)
    if found is None:
        return None
    vloop, along = found
    others = {lp.var for lp in p.loops_in(c) if lp.var and lp.var != along.var}
    defined = definitions(p, along)
    walks = [(a, subs) for a in p.accesses_in(along.line, along.end) if a.subscripts
             for subs in (expanded(a.subscripts, defined),)
             if any(mentions(s, v) for s in subs for v in others)]
    steps = [(a, stride(p, subs, along.var)) for a, subs in walks]
    strided = [a for a, step in steps if step == "strided"]
    if not strided or len(strided) < sum(step == "unit" for _, step in steps):
        return None
    return vloop, along, strided


def uncoalesced(seen: Seen) -> list[Cause]:
    """The vector lanes step along the array's slow index (the loop order against the array's
    layout: C row-major, Fortran column-major): neighbouring threads read memory far apart."""
    p = seen.program
    out = []
    for c in p.constructs:
        found = _strided(seen, c) if c.directive.compute and not _missing_collapse(seen, c) \
            else None
        if found is None:
            continue
        vloop, along, strided = found
        k = biggest(seen.kernels_at(c.line))
        layout = "column-major: the first subscript is contiguous" if p.fortran else \
            "row-major: the last subscript is contiguous"
        sample = strided[0]
        shown = f"{sample.array}({', '.join(sample.subscripts)})" if p.fortran else \
            sample.array + "".join(f"[{s}]" for s in sample.subscripts)
        evidence = (f"the vector lanes step along {along.var} (the loop at {at_line(along.line)}), "
                    f"and {shown} ({at_line(sample.line)}) puts neighbouring {along.var} far apart "
                    f"in memory ({layout}): each warp reads many cache lines where one would do")
        if k is not None:
            evidence += f"; the kernel took {fmt_ns(k.total_ns)}"
        out.append(Cause(
            "uncoalesced", vloop.directive.line if vloop.directive is not None else c.line,
            "memory read far apart by neighbouring threads", evidence,
            "make the vector loop run along the contiguous index: swap the loops (or the "
            "subscripts) so that " + ("the first subscript" if p.fortran else "the last subscript")
            + " steps with the vector loop's variable",
            kernel_gain(seen, k, *KERNEL_UNCOALESCED, "what coalesced reads save"),
            tuple(dict.fromkeys((vloop.line, along.line, sample.line)))))
    return out


def _statement_after(p: Program, d: Directive) -> str:
    text = ""
    for line in range(d.last + 1, min(d.last + 6, p.first_line + len(p.code))):
        text += " " + p.text(line)
        if p.fortran and text.strip() or not p.fortran and ";" in text:
            break
    return text.split(";")[0].strip() if not p.fortran else text.strip()


def _scalar_update(p: Program, statement: str) -> tuple[str, str]:
    """(the scalar an update statement accumulates into, the reduction's operator): `s += x`
    and `s = s + x` are (s, +); ("", "") for another (an array element: a histogram's bins are
    legitimately atomic)."""
    if p.fortran:
        m = re.match(r"([A-Za-z_]\w*)\s*=\s*(?:\1\s*(?P<op>[-+*])|.*(?P<op2>[-+*])\s*\1\s*$)",
                     statement, re.I)
    else:
        m = re.match(r"(?P<pre>\+\+|--)?\s*([A-Za-z_]\w*)\s*(?:(?P<post>\+\+|--)|(?P<op>[-+*|&^])="
                     r"|=\s*\2\s*(?P<op2>[-+*|&^])|(?(pre)$|(?!)))", statement)
    if m is None:
        return "", ""
    name = m.group(1) if p.fortran else m.group(2)
    said = m.group("op") or m.group("op2") or "+"  # (++ and --: a sum)
    return name, "+" if said == "-" else said


def atomic_reduction(seen: Seen) -> list[Cause]:
    """A reduction done with atomics: every iteration adds to one scalar in turn."""
    p = seen.program
    out = []
    for d in p.directives:
        c = p.compute_at(d.line)
        if d.name != "atomic" or c is None:
            continue
        name, op = _scalar_update(p, _statement_after(p, d))
        if not name or (not p.fortran and re.search(C_DECL.format(re.escape(name)),
                                                    p.span(c.line, d.line))):
            continue
        k = biggest(seen.kernels_at(c.line))
        evidence = (f"every iteration adds to {name} with an atomic update: the threads take "
                    "turns on one address")
        if k is not None:
            evidence += f"; the kernel took {fmt_ns(k.total_ns)}"
        elif seen.trace is not None and not seen.trace.complete:
            evidence += "; the run was stopped at its limit before the kernel ended"
        out.append(Cause(
            "atomic_reduction", d.line, "a reduction done with atomics", evidence,
            f"reduction({op}:{name}) on the loop in place of the atomic: "
            "each gang then sums its own part, and the parts are combined once",
            kernel_gain(seen, k, *KERNEL_ATOMIC, "what the atomics' turns cost"), (c.line,)))
    return out


# Complexity: one rule: a construct in a host loop whose variable indexes its arrays' rows, each
# fact a guard read in order.
def kernel_per_row(seen: Seen) -> list[Cause]:
    """A kernel launched per row: the compute construct sits in a host loop whose variable
    indexes the rows of its arrays."""
    p = seen.program
    out = []
    for c in p.constructs:
        row = time_loop(p, c.line) if c.directive.compute else None
        if row is None or not row.var:
            continue
        own = [lp.var for lp in p.loops_in(c) if lp.var]
        indexed = [a for a in p.accesses_in(c.line, c.end)
                   if any(mentions(s, row.var) for s in a.subscripts)
                   and any(mentions(s, v) for s in a.subscripts for v in own)]
        k = biggest(seen.kernels_at(c.line))
        calls = k.calls if k is not None else seen.counts.get(c.line, 0)
        if not indexed or (seen.measured and calls < ROWS):
            continue
        evidence = (f"the construct is inside the loop over {row.var} at {at_line(row.line)}, and "
                    f"{indexed[0].array} is indexed by both: one kernel per {row.var}")
        found: Gain | None = None
        if k is not None:
            phase = k.last - k.first
            evidence += (f"; the trace: {k.calls} launches over {fmt_ns(phase)}, the kernels "
                         f"{fmt_ns(k.total_ns)} of it")
            fixed = seen.solution_kernel(k)
            if fixed is not None and fixed.total_ns < phase:
                found = gain(seen, 0.85 * (phase - fixed.total_ns), phase - fixed.total_ns,
                             f"the launches' {fmt_ns(phase)} against the solution's one kernel "
                             f"({fmt_ns(fixed.total_ns)})")
            else:
                found = gain(seen, phase - k.total_ns, phase - k.total_ns / max(k.calls, 1),
                             f"the launches' {fmt_ns(phase)}, less one kernel's time")
        out.append(Cause(
            "kernel_per_row", c.line, f"a kernel launched per {row.var}", evidence,
            f"one kernel for all of them: the directive on the loop at {at_line(row.line)} (parallel "
            "loop gang), loop vector on the loop inside", found, (row.line,)))
    return out


# Complexity: one rule: the student's queues against the solution's, each condition a guard read in
# order.
def sync_queues(seen: Seen) -> list[Cause]:
    """Everything on one synchronous queue, where the solution's run uses several (the lesson
    is async): independent work waits for the work before it."""
    p = seen.program
    s = seen.solution
    if s is None or s.queues < 2 or not seen.measured or seen.trace is None or \
            len(queues(seen.trace)) != 1 or any(d.has("async") for d in p.directives):
        return []
    placed = sorted((k for k in seen.kernels if k.line is not None), key=lambda k: k.first)
    line = placed[0].line if placed else \
        next((c.line for c in p.constructs if c.directive.compute), None)
    if line is None:
        return []
    top = biggest(seen.kernels)
    before = [k for k in seen.trace.kernels if top is not None and k.end <= top.first]
    hidden = sum(k.ns for k in before) - max((k.ns for k in before), default=0)
    return [Cause(
        "sync_queues", line, "one synchronous queue where the lesson is async",
        f"all the work ran on one queue, one operation after the other ({len(before)} kernels "
        f"before the largest), where the solution's run uses {s.queues} queues",
        "put the independent pieces on queues of their own (async(1), async(2), ...) and wait "
        "where their results meet (wait(1, 2) on the construct that needs them)",
        gain(seen, 0.5 * hidden, hidden, "the independent kernels' time that could overlap"))]
