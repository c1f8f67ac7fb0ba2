"""What the compilers' OpenACC remarks mean, one line each, for the annotated source.

A table of the compilers' own wordings: gcc's -fopt-info-optimized-omp (and the warnings it
gives on OpenACC constructs), and nvhpc's -Minfo=accel, as they print them (tests/test_remarks.py
holds real gcc output made there and recorded nvc/nvfortran output in tests/data/minfo/). Each
entry is a pattern and the sentence a student reads; the first that matches wins. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..model import RemarkKind

_LEVELS = {"gang": "gangs", "worker": "workers", "vector": "vectors"}
# What gcc's dumps say of each compute construct it made.
REGION_MADE = "gcc made a compute region of this construct: its code runs on the device"


def _spread(levels: list[str], width: str = "") -> str:
    named = [_LEVELS[w] for w in levels if w in _LEVELS]
    if not named:
        return ("this loop runs sequentially: one thread of the device runs all its iterations, "
                "one after the other")
    joined = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    size = f" ({width} wide)" if width else ""
    return f"this loop runs in parallel on the device, its iterations spread over {joined}{size}"


def _gcc_levels(m: re.Match[str]) -> str:
    return _spread(m.group("levels").split())


def _nv_levels(m: re.Match[str]) -> str:
    clauses = m.group("levels")
    width = re.search(r"vector\((\d+)\)", clauses)
    words = re.findall(r"\b(gang|worker|vector|seq)\b", clauses)
    return _spread(words, width.group(1) if width else "")


_CLAUSES = {
    "copy": "{v}: copied to the device when the region starts, and back when it ends",
    "copyin": "{v}: copied to the device when the region starts (not back)",
    "copyout": "{v}: made on the device, copied back to the host when the region ends",
    "create": "{v}: made on the device, never copied",
    "present": "{v}: must already be on the device (nothing is copied)",
    "delete": "{v}: removed from the device",
    "attach": "{v}: the device's pointer is set to the device's copy of the data",
    "detach": "{v}: the device's pointer is set back",
    "deviceptr": "{v}: already device addresses, used as they are",
    "firstprivate": "{v}: each thread gets its own copy, starting from the host's value",
    "private": "{v}: each thread gets its own copy",
    "no_create": "{v}: used on the device when present there, else the host's",
    "update device": "{v}: the device's copy is refreshed from the host here",
    "update self": "{v}: the host's copy is refreshed from the device here",
}
# After enter data and exit data, the clause's effect lasts beyond a region.
_UNSTRUCTURED = {
    "enter data": "{v}: put on the device here ({c}), kept there until an exit data",
    "exit data": "{v}: {back}removed from the device here",
}


def clause_meaning(clause: str, variables: str, implicit: bool = False, directive: str = "") -> str:
    """What a data clause does to its variables, in one line (directive: "enter data" or "exit
    data" when it is on one of those)."""
    if directive in _UNSTRUCTURED:
        back = "copied back to the host and " if clause == "copyout" else ""
        return _UNSTRUCTURED[directive].format(v=variables, c=clause, back=back)
    text = _CLAUSES.get(clause, "{v}: " + clause).format(v=variables)
    if implicit:
        return text + ", because no data clause names it (the compiler adds " + clause + ")"
    return text


def _nv_data(m: re.Match[str]) -> str:
    clause = m.group("clause")
    what = ", ".join(_names(m.group("args")))
    return clause_meaning(clause, what, bool(m.group("implicit")), (m.group("action") or "").strip())


def _names(args: str) -> list[str]:
    """`a[:n],d[:][:]` -> a, d; `b(:)` -> b; `l->bias[:l->out_depth]` -> l->bias."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(args + ","):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            part = args[start:i].strip()
            cut = min((k for k in (part.find("["), part.find("(")) if k > 0), default=len(part))
            if part:
                names.append(part[:cut].strip())
            start = i + 1
    return names


def _nv_update(m: re.Match[str]) -> str:
    what = ", ".join(_names(m.group("args")))
    if m.group("to") == "device":
        return f"{what}: the device's copy is refreshed from the host here"
    return f"{what}: the host's copy is refreshed from the device here"


def _reduction(m: re.Match[str]) -> str:
    return (f"{m.group('var')} is combined over all the iterations with {m.group('op')} "
            "(a reduction): each thread works on its own copy, the copies are combined at the end")


def _dependence(m: re.Match[str]) -> str:
    what = ", ".join(w.strip().removesuffix("->").removesuffix("%") for w in m.group("what").split(","))
    return (f"an iteration may use what another one writes ({what}): the "
            "compiler keeps this loop sequential; if the iterations really are independent, "
            "say so (loop independent, or restrict pointers in C)")


@dataclass(frozen=True)
class _Meaning:
    pattern: re.Pattern[str]
    meaning: Callable[[re.Match[str]], str]
    kind: RemarkKind


def _entry(pattern: str, meaning: str | Callable[[re.Match[str]], str],
           kind: RemarkKind = "remark") -> _Meaning:
    if callable(meaning):
        return _Meaning(re.compile(pattern), meaning, kind)
    text = meaning

    def say(m: re.Match[str]) -> str:
        return text

    return _Meaning(re.compile(pattern), say, kind)


# The first entry that matches a remark gives its meaning.
MEANINGS: tuple[_Meaning, ...] = (
    # gcc -fopt-info-optimized-omp
    _entry(r"assigned OpenACC (?P<levels>(?:gang|worker|vector|seq)(?: (?:gang|worker|vector))*) "
           r"loop parallelism", _gcc_levels, "loop"),
    _entry(r"using ['‘]vector_length \((?P<n>\d+)\)['’], ignoring",
           lambda m: f"gcc runs this region's vector loops {m.group('n')} wide on NVIDIA GPUs "
                     "(one warp): the vector_length asked for is not used", "loop"),
    _entry(r"using ['‘]num_workers \((?P<n>\d+)\)['’], ignoring",
           lambda m: f"gcc runs this region with {m.group('n')} workers: the num_workers asked "
                     "for is not used", "loop"),
    _entry(r"region contains (?:gang|worker|vector) partitioned code but is not (?:gang|worker|vector)"
           r" partitioned", "the region's loops ask for a level of parallelism the region does "
                            "not have: that part runs on fewer threads", "loop"),
    # nvhpc -Minfo=accel
    _entry(r"^Generating (?:NVIDIA GPU|Tesla|Radeon|AMD GPU) code",
           "the compiler made GPU code of this region: it runs on the GPU", "region"),
    _entry(r"^Generating Multicore code",
           "the compiler made multicore CPU code of this region: it runs on the host's cores",
           "region"),
    _entry(r"^Accelerator serial kernel generated",
           "this region runs on the GPU as one thread (a serial region)", "region"),
    _entry(r"^Accelerator kernel generated", "the compiler made a GPU kernel of this loop", "region"),
    _entry(r"(?:#pragma acc|!\$acc) loop (?P<levels>(?:gang|worker|vector|seq)[^/!]*)",
           _nv_levels, "loop"),
    _entry(r"^/\* \w+\.\w collapsed \*/|^! \w+%\w collapsed",
           "this loop is collapsed into the one above: their iterations are shared out as one",
           "loop"),
    _entry(r"^Loop is parallelizable",
           "the compiler found no dependence between the iterations: they may run in parallel",
           "loop"),
    _entry(r"^(?:Complex )?[Ll]oop carried (?:backward )?dependence of (?P<what>.*?) prevents "
           r"(?:parallelization|vectorization)", _dependence, "loop"),
    _entry(r"^Inner sequential loop scheduled on accelerator",
           "this inner loop runs sequentially inside each GPU thread", "loop"),
    _entry(r"^Loop without integer trip count will be executed in sequential mode",
           "the compiler cannot count this loop's iterations: it runs sequentially", "loop"),
    _entry(r"Accelerator restriction: size of the GPU copy of (?P<var>\S+) is unknown",
           lambda m: f"the compiler cannot tell how much of {m.group('var').rstrip('-').rstrip('>')} "
                     "to copy: give a section, e.g. copyin(a[0:n])", "implicit"),
    _entry(r"induction variable live-out from loop: (?P<var>\w+)",
           lambda m: f"{m.group('var')} is used after the loop: the loop cannot run in parallel "
                     "as written", "loop"),
    _entry(r"^Generating (?:implicit )?reduction\((?P<op>[^:]+):(?P<var>[^)]+)\)", _reduction, "loop"),
    _entry(r"^Generating (?P<implicit>implicit )?acc routine seq",
           "a device version of this function is made, run by one thread where it is called "
           "(routine seq)", "region"),
    _entry(r"^Generating (?:implicit )?acc routine (?P<level>gang|worker|vector)",
           lambda m: f"a device version of this function is made, called from {m.group('level')}-"
                     "parallel code", "region"),
    _entry(r"^Generating update (?P<to>self|host|device)\((?P<args>.*)\)", _nv_update, "data"),
    _entry(r"^Generating (?P<implicit>implicit )?(?P<action>enter data |exit data )?"
           r"(?P<clause>copy|copyin|copyout|create|present|delete|attach|detach|deviceptr"
           r"|firstprivate|private|no_create)\((?P<args>.*)\)", _nv_data, "data"),
)


def explain(text: str) -> tuple[str, RemarkKind]:
    """The meaning of a remark, and what it is about; ("", "remark") when the table has none."""
    words = text.strip()
    for entry in MEANINGS:
        m = entry.pattern.search(words)
        if m is not None:
            found = m.groupdict()
            moved = found.get("clause") in ("copy", "copyin", "copyout", "create")
            kind: RemarkKind = "implicit" if found.get("implicit") and moved else entry.kind
            return entry.meaning(m), kind
    return "", "remark"
