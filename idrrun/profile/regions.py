"""Which OpenACC compute constructs a checked run executed: the regions library (regions.c).

    counting(request, cache_dir, folder, tools_dir) -> Counting: the run's variables and files
    collect(counting, folder, uid, executable)     -> RegionsRan, after the run
    parse_record(data)                             -> one process's record (pure, bounded)

A checked OpenACC run (an exercise's --check, grading) loads regions.c's library through the
OpenACC profiling interface (ACC_PROFLIB): the runtime, GCC's libgomp or NVIDIA's, reports every
compute construct that starts, on the GPU or on the host; a construct in a function never called
reports nothing. The library is one of idrrun's tools (run/tools.py), as the GPU tracer is:
built once per source into the cache, checked before every use, placed in the request's room
for a box's own uid.

Its records are files in the run's folder, which the program can write: they are read only
through run/boundary.py (beneath the folder's descriptor, no link followed, regular files only,
capped), then removed. A program can forge or delete its own record, as it can print anything:
the record tells what an honest run did, and a missing one is never a pass (`regions_ran` is
incomplete; `uses_openacc` falls back to the compiler's report of reachable code only when the
library never loaded).

gcc's runtime gives no line: a construct is its call site, an address of the executable, mapped
here to a function and a line (elflines.py) in the executable the grader built or sealed, not
a copy the box could change. Checked gcc builds carry line tables (-g1) for this.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..model import ConstructRan, RegionsRan, RunRequest
from ..run import boundary, proc, tools
from ..run.allowance import Ledger
from . import elflines

LIBRARY_SOURCE = Path(__file__).with_name("regions.c")
RECORD_VAR = "IDRRUN_ACC_REGIONS"  # regions.c reads the same name
PROFLIB_VAR = "ACC_PROFLIB"  # OpenACC 2.6, section 5.3.1
LIBRARY_VAR = "IDRRUN_REGIONS_LIB"  # the library, for the shim under a profiler
# Between a profiler and the program: a profiler that sets ACC_PROFLIB to a library of its own
# (nsys's OpenACC trace) would leave the regions uncounted, and an OpenACC runtime loads one
# library (libgomp takes a ";" list, NVIDIA's runtime says one path): the shim moves the
# profiler's to IDRRUN_ACC_PROFLIB_NEXT, which regions.c registers in turn, and puts the regions
# library in its place. exec keeps the program's pid, which the profiler follows.
SHIM = ("/bin/sh", "-c",
        'if [ "${ACC_PROFLIB-}" != "$IDRRUN_REGIONS_LIB" ]; then '
        'IDRRUN_ACC_PROFLIB_NEXT=${ACC_PROFLIB-}; export IDRRUN_ACC_PROFLIB_NEXT; fi; '
        'ACC_PROFLIB=$IDRRUN_REGIONS_LIB; export ACC_PROFLIB; exec "$0" "$@"')
RECORD_PREFIX = ".idrrun-regions-"
RECORD_CAP = 1 << 20  # bytes of one process's record: 256 constructs of at most 1.2 kB
MAX_CONSTRUCTS = 256  # regions.c's table
MAX_PROCESSES = 1024  # record files read (one per process: MPI ranks)

NOT_BUILT = "the regions library could not be built"
NOT_LOADED = ("the OpenACC runtime did not load the regions library (ACC_PROFLIB): no record of "
              "the regions that ran")
UNFINISHED = ("the program did not end through exit() (it was killed, crashed, or called _exit): "
              "its record of the regions that ran was never written")
UNREADABLE = "the record of the regions that ran was not read: {why}"


@dataclass(frozen=True)
class Counting:
    """What a checked run needs for its constructs to be counted; Counting() when they are not."""

    env: Mapping[str, str] = field(default_factory=dict)  # ACC_PROFLIB and RECORD_VAR
    readable: tuple[Path, ...] = ()  # the library, bound read-only into a box
    prefix: str = ""  # the records are PREFIX.<pid> in the run's folder; "": not counted
    problem: str = ""  # why nothing will be counted although it was asked (no library)


def library_key() -> str:
    return hashlib.sha256(LIBRARY_SOURCE.read_bytes()).hexdigest()[:16]


def build_command(compiler: str, output: Path) -> tuple[str, ...]:
    return (compiler, "-O2", "-shared", "-fPIC", "-o", str(output), str(LIBRARY_SOURCE),
            "-lpthread", "-ldl")


def build_library(cache_dir: Path, cc: str | None = None,
                  environ: Mapping[str, str] | None = None,
                  timeout: float = 60.0) -> tuple[Path | None, str]:
    """regions.c compiled once per content, checked at every use (run/tools.py); (None, why)
    when it cannot be built."""
    env = os.environ if environ is None else environ
    target = cache_dir / "regions" / f"idrrun-regions-{library_key()}.so"
    if tools.checked(target):
        return target, ""
    compiler = tools.c_compiler(env, cc)
    if compiler is None:
        return None, f"{NOT_BUILT}: no C compiler (cc or gcc)"
    return tools.build(target, lambda tmp: proc.run(build_command(compiler, tmp),
                                                    what="build regions library", timeout=timeout),
                       NOT_BUILT)


def counting(request: RunRequest, cache_dir: Path, folder: Path,
             tools_dir: Path | None = None) -> Counting:
    """A checked OpenACC run counts its constructs (not an OpenMP one: the OpenACC profiling
    interface reports OpenACC constructs only); its records go in `folder`, where it runs.
    tools_dir: where a box's own uid loads the library from (a folder of the request's room),
    as the GPU tracer; None: from the cache."""
    if request.check is None or not request.acc:
        return Counting()
    library, why = build_library(cache_dir)
    if library is None:
        return Counting(prefix=RECORD_PREFIX, problem=why)
    if tools_dir is not None:
        library = tools.place(library, tools_dir)
    # A name of its own per run: a record left by an earlier run (or made in advance by the
    # program) is never taken for this run's.
    prefix = RECORD_PREFIX + secrets.token_hex(8)
    return Counting(env={PROFLIB_VAR: str(library), LIBRARY_VAR: str(library),
                         RECORD_VAR: str(folder / prefix)},
                    readable=(library,), prefix=prefix)


def under_profiler(counting: Counting, profiler_prefix: tuple[str, ...]) -> tuple[str, ...]:
    """What runs before the program: the profiler, then (when regions are counted) SHIM."""
    if not profiler_prefix or not counting.env:
        return profiler_prefix
    return (*profiler_prefix, *SHIM)


# ---------------------------------------------------------------------------------------------
# Reading a record

@dataclass(frozen=True)
class Record:
    """One process's record."""

    constructs: tuple[ConstructRan, ...]
    lost: int
    finished: bool  # its closing line is there: the program ended through exit()
    # The constructs it saw start while it ran (count 1: at least once), in a record of
    # version 2: what a program stopped before its exit is known to have run.
    seen: tuple[ConstructRan, ...] = ()


_HEADERS = ("idrrun-regions 1", "idrrun-regions 2")
_CONSTRUCT = re.compile(r"C (?P<site>-|[0-9a-f]{1,16}) (?P<line>\d{1,9}) (?P<count>\d{1,20}) "
                        r"(?P<func>\S{1,2000}) (?P<file>\S{1,2000})")
_SEEN = re.compile(r"S (?P<site>-|[0-9a-f]{1,16}) (?P<line>\d{1,9}) "
                   r"(?P<func>\S{1,2000}) (?P<file>\S{1,2000})")
_CUT_SEEN = re.compile(r"S [!-~ ]{0,4200}")  # the start of a seen line, printable
_END = re.compile(r"E (?P<constructs>\d{1,9}) (?P<lost>\d{1,20})")
_ESCAPE = re.compile(r"%([0-9A-F]{2})")


def _unescape(text: str) -> str:
    if text == "-":
        return ""
    raw = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    return raw.encode("latin-1", errors="replace").decode("utf-8", errors="replace")


def parse_record(data: bytes) -> Record | None:
    """A record as regions.c writes it (its header comment), or None when it is not one."""
    if len(data) > RECORD_CAP:
        return None
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if lines[0] not in _HEADERS:
        return None
    cut = lines[-1] != ""  # no newline at its end: a line cut by a kill, or garbled
    if not cut:
        lines.pop()
    return _record(lines[1:], cut)


def _record(lines: Sequence[str], cut: bool) -> Record | None:
    """The lines after the header (the last one without its newline when `cut`)."""
    constructs: list[ConstructRan] = []
    seen: list[ConstructRan] = []
    for i, line in enumerate(lines):
        end = _END.fullmatch(line)
        if end is not None:
            if i != len(lines) - 1 or int(end.group("constructs")) != len(constructs):
                return None
            return Record(tuple(constructs), int(end.group("lost")), True)
        first = _SEEN.fullmatch(line)
        if first is not None and not constructs and len(seen) < MAX_CONSTRUCTS:
            seen.append(_construct_of(first, 1))
            continue
        m = _CONSTRUCT.fullmatch(line)
        if m is None and cut and i == len(lines) - 1 and not constructs and _CUT_SEEN.fullmatch(line):
            break  # the stopped program's last line, cut as it wrote it
        if m is None or len(constructs) >= MAX_CONSTRUCTS or int(m.group("count")) < 1:
            return None
        constructs.append(_construct_of(m, int(m.group("count"))))
    # No closing line: the program never reached exit(). What was read is whole (a line cut
    # at the end of what it saw aside), but not the whole story.
    return Record(tuple(constructs), 0, False, tuple(seen))


def _construct_of(m: re.Match[str], count: int) -> ConstructRan:
    site = None if m.group("site") == "-" else int(m.group("site"), 16)
    return ConstructRan(count=count, line=int(m.group("line")) or None,
                        function=_unescape(m.group("func")), file=_unescape(m.group("file")),
                        site=site)


def _identity(c: ConstructRan) -> tuple[str, int | str]:
    """One construct, however its code was duplicated (inlined in two callers, a loop
    versioned): its source line when known, else its call site, else its function."""
    if c.line is not None:
        return os.path.basename(c.file), c.line
    if c.site is not None:
        return "site", c.site
    return "function", c.function


def _merge(constructs: Sequence[ConstructRan]) -> tuple[ConstructRan, ...]:
    merged: dict[tuple[str, int | str], ConstructRan] = {}
    for c in constructs:
        key = _identity(c)
        seen = merged.get(key)
        merged[key] = c if seen is None else replace(seen, count=seen.count + c.count)
    return tuple(sorted(merged.values(), key=lambda c: (c.line or 0, c.function, c.site or 0)))


def _placed(constructs: Sequence[ConstructRan], executable: Path | None) -> list[ConstructRan]:
    """gcc's constructs (a call site, no line) with the function and line the executable's
    symbols and line table give the call instruction (the return address less one)."""
    sites = [c.site - 1 for c in constructs if c.line is None and c.site]
    places = elflines.locate(executable, sites) if executable is not None and sites else {}
    out: list[ConstructRan] = []
    for c in constructs:
        place = places.get(c.site - 1) if c.line is None and c.site else None
        if place is not None:
            c = replace(c, function=c.function or place.function, line=place.line,
                        file=c.file or place.file)
        out.append(c)
    return out


def summarise(records: Sequence[Record | None], executable: Path | None) -> RegionsRan:
    """The processes' records as one RegionsRan (pure but for reading the executable)."""
    if not records:
        return RegionsRan("not_loaded", why=NOT_LOADED)
    if any(r is None for r in records):
        return RegionsRan("unreadable", why=UNREADABLE.format(why="it is not a record (garbled)"))
    whole = [r for r in records if r is not None]
    if not all(r.finished for r in whole):
        # What each process saw start before it was stopped (checks/verdict: a check these
        # already pass stands for a run stopped at its time limit).
        seen = _placed([c for r in whole for c in (r.constructs if r.finished else r.seen)],
                       executable)
        return RegionsRan("unfinished", _merge(seen), why=UNFINISHED)
    constructs = _placed([c for r in whole for c in r.constructs], executable)
    return RegionsRan("counted", _merge(constructs), lost=sum(r.lost for r in whole))


def collect(counting: Counting, folder: Path, uid: int = -1,
            executable: Path | None = None, ledger: Ledger | None = None) -> RegionsRan | None:
    """After the run: its records, read out of the folder it ran in through the boundary and
    removed; None when the run was not counted. Each record counts against the row's `ledger`
    (its file and bytes, then its constructs) and is parsed as soon as it is read: only the
    parsed records are kept, never a thousand files' bytes at once."""
    if not counting.prefix:
        return None
    if counting.problem:
        return RegionsRan("not_loaded", why=counting.problem)
    owners = (uid, os.geteuid()) if uid >= 0 else (os.geteuid(),)
    try:
        dirfd = boundary.open_dir(folder)
    except OSError as exc:
        return RegionsRan("unreadable", why=UNREADABLE.format(why=f"its folder ({exc.strerror})"))
    records: list[Record | None] = []
    refused: str | None = None
    try:
        names = sorted(n for n in boundary.names(dirfd) if n.startswith(counting.prefix + "."))
        for name in names:
            if refused is None and len(records) < MAX_PROCESSES:
                taken = boundary.take(dirfd, name, RECORD_CAP, owners, ledger)
                if taken.data is None:
                    refused = taken.why
                else:
                    record = parse_record(taken.data)
                    if ledger is not None and record is not None and \
                            not ledger.records(name, len(record.constructs)):
                        refused = ledger.refused
                    records.append(record)
            boundary.discard(dirfd, name)
    finally:
        os.close(dirfd)
    if refused is not None:
        return RegionsRan("unreadable", why=UNREADABLE.format(why=refused))
    return summarise(records, executable)
