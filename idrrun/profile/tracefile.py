"""Reading the built-in tracer's files ("idrrun-trace" JSON lines, docs/profiling.md).

One JSON object per line, told apart by "type": header, kernel, memcpy, memset, sync, queue,
device, alloc, context_end, tick, dropped, error, end. Unknown types and fields are ignored (newer
tracers may add some); version 1 files (no queue or device records), version 2 files (no alloc
records), version 3 files (no context_end records) and version 4 files (no tick records) read
the same. A line that is
not JSON -- the last one when the program was killed while the tracer wrote -- is counted in
Trace.skipped and otherwise ignored. A file without its "end" record makes Trace.complete False.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import stat
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Protocol

from ..run.allowance import Ledger
from ..run.boundary import watching
from .model import Allocation, Copy, Device, Kernel, Memset, StreamQueue, Sync, Trace
from .perfetto import Prepared

FORMAT = "idrrun-trace"
VERSION = 4
# What is read of a run's trace files, all together. The files are the traced program's to
# write, and reading takes about 8 times a trace's size at its peak, 2.4 times once read
# (tracemalloc, a 1.5 MB trace): a program writing gigabytes of records would take the
# grader's memory. A Jacobi run of 1000 iterations writes 9000 lines (1.5 MB in the
# synthetic trace of that shape the figures above come from).
MAX_TRACE_BYTES = 256 << 20


def _int(record: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = record.get(key, default)
    if type(value) is int:  # the usual case first: a trace has 300 000 of these (bool is not int)
        return value
    return int(value) if isinstance(value, float) else default


def _dim3(record: Mapping[str, Any], key: str) -> tuple[int, int, int]:
    value = record.get(key)
    if isinstance(value, list) and len(value) == 3:
        a, b, c = value  # (no generator: two of these per kernel record)
        if isinstance(a, int) and isinstance(b, int) and isinstance(c, int):
            return (a, b, c)
    return (0, 0, 0)


def trace_files(path: Path) -> list[Path]:
    """The trace file and those of other processes of the run (FILE.<pid>), in that order."""
    others = sorted(p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit())
    return ([path] if path.is_file() else []) + others


def open_trace(path: Path) -> BinaryIO | None:
    """A trace file, for reading: a regular file reached without a symbolic link, else None.
    The run's folder is the traced program's to write: a FIFO put there would block its reader
    for good, a link could lead anywhere."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def _text_lines(data: bytes) -> list[str]:
    """Bytes of whole lines as text mode reads them: undecodable bytes replaced, \r\n and \r
    are line ends too."""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def _records(lines: Iterable[str]) -> list[object]:
    """The lines' JSON values, None for a line that is not JSON. The whole file is decoded as
    one array first (one call instead of one per line: a third of the reading time of a long
    trace); when that fails or gives another count of values, line by line. (Lines crafted to
    split and join values could still be read differently than one by one; the file is the
    traced program's own, so that gives it nothing it could not write plainly.)"""
    kept = [line for line in lines if line.strip()]
    try:
        values: list[object] = json.loads("[" + ",".join(kept) + "]")
        if len(values) == len(kept):  # a line holding "1,2" would make two
            return values
    except ValueError:
        pass
    out: list[object] = []
    for line in kept:
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append(None)
    return out


class _Parser:
    """One file's records, fed in order (all at once, or chunk by chunk while the program
    writes them: Follower) -> its trace; the same result either way."""

    def __init__(self, process: int) -> None:
        self.process = process  # the index of the file until its header gives the pid
        self.kernels: list[Kernel] = []
        self.copies: list[Copy] = []
        self.memsets: list[Memset] = []
        self.syncs: list[Sync] = []
        self.queue_records: list[dict[str, Any]] = []
        self.devices: list[Device] = []
        self.allocations: list[Allocation] = []
        self.errors: list[str] = []
        self.skipped = self.dropped = 0
        self.ended = False
        self.contexts_ended: set[int] = set()  # the contexts whose records are all read
        self.started = 0
        self.truncated = False  # the file was longer than what could be read of it
        self.kernel_records = 0  # kernel records seen, timed or not
        self.last_tick: tuple[int, int] = (0, 0)  # the last tick's (at, launched)

    def feed(self, records: Iterable[object]) -> None:
        bookkeeping, operations = self._BOOKKEEPING, _OPERATIONS
        for record in records:
            if not isinstance(record, dict):
                self.skipped += 1  # a line that is not JSON (None), or JSON that is no record
                continue
            kind = record.get("type")
            if not isinstance(kind, str):
                continue  # passed over, as types this reader does not know are
            note = bookkeeping.get(kind)
            if note is not None:
                note(self, record)
            elif kind in operations:
                self._operation(kind, record)

    def _operation(self, kind: str, record: dict[str, Any]) -> None:
        start, end = _int(record, "start"), _int(record, "end")
        if kind == "kernel":
            self.kernel_records += 1  # timed or not (CUPTI's 0): a launch that ended
        if start <= 0 or end < start:
            self.skipped += 1  # CUPTI gives 0 when it could not time an operation
            return
        stream, process = _int(record, "stream", -1), self.process
        if kind == "kernel":
            self.kernels.append(_kernel(record, start, end, stream, process))
        elif kind == "memcpy":
            self.copies.append(_copy(record, start, end, stream, process))
        elif kind == "memset":
            self.memsets.append(_memset(record, start, end, stream, process))
        else:
            self.syncs.append(_sync(record, start, end, stream, process))

    def _header(self, record: dict[str, Any]) -> None:
        self.process = _int(record, "pid", self.process)
        self.started = self.started or _int(record, "start")

    def _end(self, record: dict[str, Any]) -> None:
        self.ended = True

    def _context_end(self, record: dict[str, Any]) -> None:
        self.contexts_ended.add(_int(record, "context"))

    def _tick(self, record: dict[str, Any]) -> None:
        self.last_tick = (_int(record, "at"), _int(record, "launched"))

    @property
    def busy_after(self) -> int:
        """When the GPU still had work this file never recorded: the last tick, when fewer
        kernels are recorded than were launched before it (a run stopped in a kernel); 0
        otherwise, and where records are missing for another reason (CUPTI dropped some, the
        file was cut where idrrun stops reading)."""
        at, launched = self.last_tick
        missing = launched > self.kernel_records and not self.truncated and not self.dropped
        return at if at > 0 and missing else 0

    @property
    def whole(self) -> bool:
        """Whether the operations read are all the file will hold: its end record, or the mark
        of every context that has operations in it (the tracer writes it once the context's
        records are flushed, before CUDA destroys the context)."""
        if self.ended:
            return True
        ended = self.contexts_ended
        ops: Iterable[Kernel | Copy | Memset] = chain(self.kernels, self.copies, self.memsets)
        return bool(ended) and all(op.context in ended for op in ops)

    def _dropped(self, record: dict[str, Any]) -> None:
        self.dropped += _int(record, "count")

    def _error(self, record: dict[str, Any]) -> None:
        self.errors.append(f"{record.get('call', '?')}: {record.get('message', '?')}")

    def _queue(self, record: dict[str, Any]) -> None:
        self.queue_records.append(record)

    def _device(self, record: dict[str, Any]) -> None:
        self.devices.append(_device(record, self.process))

    def _alloc(self, record: dict[str, Any]) -> None:
        # Device memory only: a pinned host buffer the runtime takes is no device allocation.
        op, at = record.get("op"), _int(record, "at")
        if op in ("alloc", "free") and at > 0 and record.get("memory", "device") == "device":
            self.allocations.append(Allocation(kind=str(op), bytes=_int(record, "bytes"), at=at,
                                               device=_int(record, "device"), process=self.process))

    # The records that are not GPU operations, by type.
    _BOOKKEEPING: ClassVar[dict[str, Callable[[_Parser, dict[str, Any]], None]]] = {
        "header": _header, "end": _end, "dropped": _dropped, "error": _error, "queue": _queue,
        "device": _device, "alloc": _alloc, "context_end": _context_end, "tick": _tick}

    def trace(self) -> tuple[Trace, int]:
        kernels, copies, memsets = self.kernels, self.copies, self.memsets
        by_correlation: dict[int, int] = {}
        ops: list[Kernel | Copy | Memset] = [*kernels, *copies, *memsets]
        for op in ops:
            if op.correlation:
                by_correlation[op.correlation] = op.stream
        named = _stream_queues(self.queue_records, by_correlation, self.process)
        trace = Trace(kernels=tuple(kernels), copies=tuple(copies), memsets=tuple(memsets),
                      syncs=tuple(self.syncs), stream_queues=named, devices=tuple(self.devices),
                      complete=self.ended, dropped=self.dropped, errors=tuple(self.errors),
                      skipped=self.skipped, started=self.started, truncated=self.truncated,
                      allocations=tuple(self.allocations), busy_after=self.busy_after)
        return trace, self.process


# The records of GPU operations, by type (tracefile's docstring); the others are bookkeeping.
_OPERATIONS = frozenset(("kernel", "memcpy", "memset", "sync"))


def _kernel(record: Mapping[str, Any], start: int, end: int, stream: int, process: int) -> Kernel:
    return Kernel(name=str(record.get("name", "?")), stream=stream, device=_int(record, "device"),
                  context=_int(record, "context"), correlation=_int(record, "correlation"),
                  grid=_dim3(record, "grid"), block=_dim3(record, "block"), start=start, end=end,
                  process=process)


def _copy(record: Mapping[str, Any], start: int, end: int, stream: int, process: int) -> Copy:
    return Copy(direction=str(record.get("copy", "unknown")), bytes=_int(record, "bytes"),
                stream=stream, device=_int(record, "device"), context=_int(record, "context"),
                correlation=_int(record, "correlation"), src=str(record.get("src", "")),
                dst=str(record.get("dst", "")), asynchronous=bool(record.get("async", False)),
                start=start, end=end, process=process)


def _memset(record: Mapping[str, Any], start: int, end: int, stream: int, process: int) -> Memset:
    return Memset(bytes=_int(record, "bytes"), stream=stream, device=_int(record, "device"),
                  context=_int(record, "context"), correlation=_int(record, "correlation"),
                  start=start, end=end, process=process)


def _sync(record: Mapping[str, Any], start: int, end: int, stream: int, process: int) -> Sync:
    return Sync(kind=str(record.get("sync", "unknown")), stream=stream,
                context=_int(record, "context", -1), start=start, end=end, process=process)


def parse_lines(lines: Iterable[str], process: int = 0) -> tuple[Trace, int]:
    """One file's lines -> (its trace, its pid from the header)."""
    parser = _Parser(process)
    parser.feed(_records(lines))
    return parser.trace()


def _device(record: Mapping[str, Any], process: int) -> Device:
    cc = record.get("cc")
    capability = ((cc[0], cc[1]) if isinstance(cc, list) and len(cc) == 2
                  and all(isinstance(v, int) for v in cc) else (0, 0))
    return Device(id=_int(record, "device"), name=str(record.get("name", "")), process=process,
                  compute_capability=capability, sms=_int(record, "sms"),
                  memory=_int(record, "memory"),
                  memory_clock_khz=_int(record, "memory_clock_khz"),
                  memory_bus_bits=_int(record, "memory_bus_bits"))


def _stream_queues(records: Iterable[Mapping[str, Any]], by_correlation: Mapping[int, int],
                   process: int) -> tuple[StreamQueue, ...]:
    """Queue records -> one StreamQueue per stream. A record names its stream by CUPTI's id, or,
    when CUPTI could not give one (-1), by the correlation id of the call that first used the
    stream, which that call's kernel or copy record carries. The first record of a stream wins."""
    found: dict[int, StreamQueue] = {}
    for record in records:
        queue = record.get("queue")
        if not isinstance(queue, int) or isinstance(queue, bool) or queue < -2:
            continue
        stream = _int(record, "stream", -1)
        if stream < 0:
            stream = by_correlation.get(_int(record, "correlation"), -1)
        if stream < 0 or stream in found:
            continue
        found[stream] = StreamQueue(stream=stream, queue=queue, process=process,
                                    context=_int(record, "context"),
                                    runtime=str(record.get("runtime", "")))
    return tuple(found.values())


def _operations(parts: Sequence[Trace]) -> Trace:
    """What the GPU did in every process, one file's after the other's."""
    return Trace(
        kernels=tuple(chain.from_iterable(t.kernels for t in parts)),
        copies=tuple(chain.from_iterable(t.copies for t in parts)),
        memsets=tuple(chain.from_iterable(t.memsets for t in parts)),
        syncs=tuple(chain.from_iterable(t.syncs for t in parts)),
        stream_queues=tuple(chain.from_iterable(t.stream_queues for t in parts)),
        devices=tuple(chain.from_iterable(t.devices for t in parts)),
        allocations=tuple(chain.from_iterable(t.allocations for t in parts)),
    )


def merge(traces: Iterable[Trace], files: tuple[Path, ...] = ()) -> Trace:
    parts = list(traces)
    return dataclasses.replace(
        _operations(parts),
        complete=all(t.complete for t in parts),
        dropped=sum(t.dropped for t in parts),
        errors=tuple(dict.fromkeys(chain.from_iterable(t.errors for t in parts))),
        skipped=sum(t.skipped for t in parts),
        files=files,
        started=min((t.started for t in parts if t.started), default=0),
        truncated=any(t.truncated for t in parts),
        busy_after=max((t.busy_after for t in parts), default=0),
    )


def read_trace(path: Path, follower: Follower | None = None,
               limit: int = MAX_TRACE_BYTES, ledger: Ledger | None = None) -> Trace | None:
    """The trace of a run (all its processes), or None when no process wrote one -- the
    program never initialised CUDA, so the driver never loaded the tracer. A follower of
    `path` that read it while the program ran gives what it read (and the rest): the same
    trace, without reading the file again. At most `limit` bytes are read of all the files
    together; a trace cut there says so (Trace.truncated). A graded run's lines count against
    its `ledger` (run/allowance.py) as they are parsed: past its records, reading stops (the
    ledger says why, and the caller uses nothing of the trace)."""
    files = trace_files(path)
    if not files:
        return None
    parts, read = [], []
    left = limit
    for index, file in enumerate(files):
        if follower is not None and index == 0 and file == path:
            read_during_run = follower.finish()
            if read_during_run is not None:
                parts.append(read_during_run)
                read.append(file)
                left -= follower.read_bytes
                continue
        binary = open_trace(file)
        if binary is None:
            continue  # not a regular file of its own (a link, a FIFO): not the tracer's
        with binary:
            trace, used = _read_file(binary, index, left, ledger, file.name)
        left -= used
        parts.append(trace)
        read.append(file)
        if ledger is not None and ledger.refused:
            break
    if not parts:
        return None
    return merge(parts, tuple(read))


# How much of a trace file is read and parsed at a time, and the longest line parsed: the
# memory a file takes is then its parsed records', not a multiple of its size (reading a file
# whole took 8 times its size at the peak).
READ_CHUNK = 1 << 20
MAX_LINE = 64 << 10


def _read_file(binary: BinaryIO, process: int, limit: int, ledger: Ledger | None,
               name: str) -> tuple[Trace, int]:
    """One file's trace, read chunk by chunk, at most `limit` bytes (cut: Trace.truncated);
    and the bytes read. A line longer than MAX_LINE is skipped unread."""
    parser = _Parser(process)
    read, rest, skipping, cut = 0, b"", False, False
    while True:
        want = min(READ_CHUNK, limit - read)
        if want <= 0:
            cut = bool(binary.read(1))
            break
        data = binary.read(want)
        if not data:
            break
        read += len(data)
        if skipping:  # the rest of a line too long to read
            newline = data.find(b"\n")
            if newline < 0:
                continue
            data, skipping = data[newline + 1:], False
        data = rest + data
        end = data.rfind(b"\n") + 1
        rest = data[end:]
        if len(rest) > MAX_LINE:
            rest, skipping = b"", True
            parser.skipped += 1
        if end and not _feed(parser, _text_lines(data[:end]), ledger, name):
            break
    if rest and not cut and not skipping and (ledger is None or not ledger.refused):
        _feed(parser, _text_lines(rest), ledger, name)  # a last line without its end
    parser.truncated = cut
    return parser.trace()[0], read


def _feed(parser: _Parser, lines: list[str], ledger: Ledger | None, name: str) -> bool:
    """Parse whole lines, counted against the ledger first; False when it refuses them."""
    if ledger is not None and not ledger.records(f"the trace {name}", len(lines)):
        return False
    parser.feed(_records(lines))
    return True


class Ahead(Protocol):
    """What is made of a followed trace once it is whole, before the program's end
    (stages.Ahead: the report)."""

    def whole(self, trace: Trace) -> None: ...


class Follower:
    """Reads the trace file while the traced program writes it (the tracer hands CUPTI's
    records over every IDRRUN_TRACE_FLUSH_MS), on a thread of its own: after the run only the
    last records are left to read. Reading a 9000-line trace took a third of `--profile`'s
    time after the run (benchmarks/profile_cost.py).

        with Follower(path):   # the thread, until the run ends
            ... run the program ...
        read_trace(path, follower)

    Given a perfetto.Prepared, it formats the Perfetto events of what it read as it goes.
    Given an Ahead, it hands it the trace on its thread as soon as the file says the trace is
    whole (_Parser.whole), and again whenever more came after: the program's CUDA teardown
    (the H200: 120-165 ms after its last records) is time the report is made in, not time the
    student waits for it.
    A class, not a stage: it is the state of a file being read. Whatever makes what it read
    doubtful (the file replaced, truncated, unreadable) makes finish() give None, and the
    file is read again as a whole."""

    # The thread wakes when the folder is written to (an inotify watch): the mark of the
    # trace's end is read at once, and an idle run costs nothing (a timed wake every 10 ms cost
    # 1.6 % of a core here). Without a watch, or if it misses a write, it polls this often.
    POLL_SECONDS = 0.1
    # After a wake, the rest of the write (a flush is many 4 KiB writes) is waited for this long.
    SETTLE_SECONDS = 0.002
    CHUNK_LINES = 2000  # one JSON decode holds the GIL: the run's output must not wait long

    def __init__(self, path: Path, prepared: Prepared | None = None,
                 limit: int = MAX_TRACE_BYTES, ahead: Ahead | None = None) -> None:
        self.path = path
        self.limit = limit  # bytes read at most (read_trace's limit)
        self.prepared = prepared  # the Perfetto events, formatted as the operations come
        self.ahead = ahead  # given the whole trace on the thread (see the class)
        self.used = False  # finish() gave its trace
        self._handed = -1  # the bytes read when the ahead was last given the trace
        self._file: BinaryIO | None = None
        self._read = 0  # bytes consumed
        self._rest = b""  # an unfinished last line
        self._parser = _Parser(0)
        self._broken = False
        self._stop = threading.Event()
        self._done = threading.Event()  # the thread reads and hands over no more
        self._thread = threading.Thread(target=self._follow, name="idrrun trace follower",
                                        daemon=True)
        self._watch: int | None = None  # the folder's writes (watching.watch_written)
        self._wake: tuple[int, int] | None = None  # a pipe: __exit__ wakes the thread

    @property
    def read_bytes(self) -> int:
        """How much of the file was read so far."""
        return self._read

    def __enter__(self) -> Follower:
        self._watch = watching.watch_written(self.path.parent)
        if self._watch is not None:
            self._wake = os.pipe()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._wake is not None:
            # The write end is this side's own: the thread closes only its read end and the
            # watch, so that no write here can reach a descriptor number reused meanwhile; a
            # thread that already ended (a fault of ours) has closed its end: nothing to wake.
            with contextlib.suppress(BrokenPipeError):
                os.write(self._wake[1], b"x")
        self._stop.set()
        if self._wake is not None:
            os.close(self._wake[1])
        if self._thread.is_alive():
            self._done.wait()

    def _follow(self) -> None:
        try:
            while not self._stop.is_set():
                self.poll()
                self._hand_over()
                self._wait()
        finally:
            self._done.set()
            # Closing an inotify descriptor waits for the kernel (7-16 ms here, sometimes):
            # done is said first, so that nobody waits for it.
            for fd in (self._watch, self._wake[0] if self._wake is not None else None):
                if fd is not None:
                    os.close(fd)

    def _wait(self) -> None:
        """Until the folder is written to (or POLL_SECONDS), or the run ends."""
        watch, wake = self._watch, self._wake
        if watch is None or wake is None:
            self._stop.wait(self.POLL_SECONDS)
            return
        ready, _, _ = select.select([watch, wake[0]], [], [], self.POLL_SECONDS)
        if watch in ready:
            self._stop.wait(self.SETTLE_SECONDS)
            watching.drain(watch)

    def _hand_over(self) -> None:
        """The trace to the ahead, once whole, and again only when more was read since. It is
        the trace read_trace gives of this file alone (files: the path), so that collect() can
        tell what was made of it by equality."""
        if self.ahead is None or self._broken or self._read == self._handed or \
                not self._parser.whole:
            return
        self._handed = self._read
        trace = dataclasses.replace(self._parser.trace()[0], files=(self.path,))
        self.ahead.whole(trace)

    def poll(self) -> None:
        """Read and parse the whole lines written since the last call."""
        if self._broken:
            return
        try:
            if self._file is None:
                # None: not there yet (the program has not initialised CUDA), or not a regular
                # file (read_trace leaves it out)
                self._file = open_trace(self.path)
                if self._file is None:
                    return
            size = os.fstat(self._file.fileno()).st_size
            if size < self._read:
                self._broken = True  # truncated: read again at the end
                return
            if self._read >= self.limit:
                return  # as much as will be read: finish() says the trace is cut
            # (read(n) makes a buffer of n bytes first: ask for what the file holds)
            data = self._file.read(min(self.limit, size) - self._read)
        except OSError:
            self._broken = True
            return
        self._read += len(data)
        data = self._rest + data
        cut = data.rfind(b"\n") + 1
        self._rest = data[cut:]
        if cut:
            self._feed(data[:cut])

    def _feed(self, data: bytes) -> None:
        lines = _text_lines(data)
        parser = self._parser
        for at in range(0, len(lines), self.CHUNK_LINES):
            parser.feed(_records(lines[at:at + self.CHUNK_LINES]))
            if self.prepared is not None:
                self.prepared.add(parser.started, parser.kernels, parser.copies, parser.memsets,
                                  parser.syncs)

    def finish(self) -> Trace | None:
        """After the run (the thread stopped): the rest of the file, and the trace; None when
        what was read may not be the file as it is now."""
        self.poll()
        file = self._file
        if file is None or self._broken:
            return None
        try:
            now, ours = os.stat(self.path), os.fstat(file.fileno())
        except OSError:
            return None
        finally:
            file.close()
            self._file = None
            self._broken = True  # once
        cut = now.st_size > self._read and self._read >= self.limit
        if (now.st_dev, now.st_ino) != (ours.st_dev, ours.st_ino) or \
                (now.st_size != self._read and not cut):
            return None
        if self._rest and not cut:
            self._feed(self._rest)  # a last line without its end (a killed program)
        self._parser.truncated = cut
        self.used = True
        return self._parser.trace()[0]
