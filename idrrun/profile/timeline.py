"""The timeline picture: where the GPU's time went, true at every scale. A PNG drawn with Pillow.

One row per stream -- named by the OpenACC queue it served when the runtime told (async(1),
with "stream 13" in small print), else by CUDA's stream -- and a row for the host's waits. A run
on several GPUs has one row per GPU instead ("GPU 1", its processes in small print): each GPU's
busy share reads from its row.

Each pixel column of a row is a slice of time, and its bar is a stacked column: the height of
each colour is the share of that slice spent in that kind of operation (kernel, host->device,
device->host, ...), the rest (light grey) is idle. So the area of each colour is proportional to
its time, and the picture agrees with the summary's percentages: a thousand 5-microsecond copies
between 200-microsecond kernels are a thin red line, not a red picture. Fractional heights are
carried from one column to the next (error diffusion), so that even a kind that never fills a
whole pixel in any column keeps its total area.

Operations too short to show in the bar stay visible in thin lanes under it, one per kind the
row has: a lane is coloured in every column where at least one operation of its kind runs,
however short. The lanes say where things happen, the bars how long they take.

A second panel zooms on a few representative iterations: the repeating pattern of kernel
launches (the loop's period) is found and three periods around the median one are shown. A run
without such a pattern gets a zoom on the stretch where most of its operations are, when that
stretch is a small part of the run.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import operator
import statistics
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model import DTOD, DTOH, HTOD, Trace
from .summary import queues, stream_names

WIDTH = 1000
LEFT = 130  # room for the row names
RIGHT = 20
PLOT = WIDTH - LEFT - RIGHT  # pixel columns of time
TITLE = 28
CAPTION = 18  # a panel's caption line
BAR = 22  # the stacked bar of a row
LANE = 3  # one presence lane per kind of the row
LANE_GAP = 2  # between the bar and the lanes
ROW_GAP = 7
AXIS = 30
LEGEND = 42
BOTTOM = 6

# Kinds of operation, in stacking order (bottom up), with their colour and legend text (ASCII:
# the default fonts of Pillow may lack arrows).
KINDS: tuple[tuple[str, tuple[int, int, int], str], ...] = (
    ("kernel", (59, 125, 216), "kernel"),
    ("h2d", (44, 160, 44), "copy host->device"),
    ("d2h", (214, 39, 40), "copy device->host"),
    ("d2d", (148, 103, 189), "copy device->device"),
    ("memset", (255, 127, 14), "memset"),
    ("sync", (120, 120, 120), "host waits for GPU"),
)
COLOURS = {kind: colour for kind, colour, _ in KINDS}
IDLE = (236, 236, 236)
BACKGROUND = (255, 255, 255)
GRID = (215, 215, 215)
INK = (30, 30, 30)
FAINT = (110, 110, 110)
ZOOM_MARK = (60, 60, 60)

# The zoom: a repeating pattern of kernel launches needs at least this many repetitions to be
# a loop; patterns up to this many kernels long are looked for; 90 % of the launches must follow
# the pattern (the first and last iterations may differ).
MIN_REPEATS = 5
MAX_PERIOD = 16
PATTERN_MATCH = 0.9
ZOOM_PERIODS = 3
# Without a pattern: the shortest stretch that holds this share of the operations, shown only
# when it is at most this part of the run (else the first panel already shows it).
ZOOM_OPERATIONS = 0.6
ZOOM_MAX_PART = 0.25
ZOOM_PAD = 0.03  # a margin on each side, as a part of the window

Span = tuple[int, int, str]  # start ns, end ns, kind


@dataclass(frozen=True)
class Row:
    name: str  # "async(1)", "stream 7", "host waits"
    small: str  # "stream 13", or ""
    ops: tuple[Span, ...]
    kinds: tuple[str, ...]  # the kinds it has, in KINDS order: its lanes, top to bottom

    @property
    def height(self) -> int:
        return BAR + LANE_GAP + LANE * len(self.kinds) + ROW_GAP


@dataclass(frozen=True)
class Window:
    start: int
    end: int
    caption: str


@dataclass(frozen=True)
class Layout:
    """Where everything goes; draw() and the tests read the same one."""

    rows: tuple[Row, ...]
    panels: tuple[Window, ...]  # the whole run, then the zoom when there is one
    panel_tops: tuple[int, ...]  # y of each panel's first row
    size: tuple[int, int]

    def bar_box(self, panel: int, row: int) -> tuple[int, int, int, int]:
        """(x0, y0, x1, y1), inclusive, of a row's bar in a panel."""
        y = self.panel_tops[panel] + sum(r.height for r in self.rows[:row])
        return LEFT, y, LEFT + PLOT - 1, y + BAR - 1

    def lane_box(self, panel: int, row: int, kind: str) -> tuple[int, int, int, int]:
        x0, y0, x1, _ = self.bar_box(panel, row)
        i = self.rows[row].kinds.index(kind)
        y = y0 + BAR + LANE_GAP + i * LANE
        return x0, y, x1, y + LANE - 1


_COPY_KINDS = {HTOD: "h2d", DTOH: "d2h", DTOD: "d2d"}


def _copy_kind(direction: str) -> str:
    return _COPY_KINDS.get(direction, "d2d")


def _gpu_names(trace: Trace) -> dict[int, tuple[str, str]]:
    """device -> ("GPU 1", "pid 4242" or "2 queues, pid 4242") for a run on several GPUs."""
    names = {}
    for device in trace.gpus:
        mine = trace.on_gpu(device)
        pids = sorted({e.process for e in mine.operations})
        streams = len(mine.streams)
        small = (f"{streams} queues, " if streams > 1 else "") + \
            ("pid " if len(pids) == 1 else "pids ") + ", ".join(map(str, pids))
        names[device] = (f"GPU {device}", small)
    return names


def rows(trace: Trace) -> tuple[Row, ...]:
    """One row per stream in order of first use -- one per GPU, its streams together, when the
    run used several -- then the host's waits."""
    several = len(trace.gpus) > 1
    names: dict[Any, tuple[str, str]] = dict(_gpu_names(trace)) if several else dict(stream_names(trace))
    spans: dict[Any, list[Span]] = {k: [] for k in (trace.gpus if several else queues(trace))}
    for k in trace.kernels:
        spans[k.device if several else (k.process, k.stream)].append((k.start, k.end, "kernel"))
    for c in trace.copies:
        spans[c.device if several else (c.process, c.stream)].append(
            (c.start, c.end, _copy_kind(c.direction)))
    for m in trace.memsets:
        spans[m.device if several else (m.process, m.stream)].append((m.start, m.end, "memset"))
    out = []
    for key, ops in spans.items():
        name, small = names[key]
        present = {kind for _, _, kind in ops}
        ops.sort()  # by start: a panel finds its window's operations by bisection (_within)
        out.append(Row(name, small, tuple(ops), tuple(k for k, _, _ in KINDS if k in present)))
    if trace.syncs:
        out.append(Row("host waits", "", tuple(sorted((s.start, s.end, "sync") for s in trace.syncs)),
                       ("sync",)))
    return tuple(out)


# ---------------------------------------------------------------------------------------
# Time per pixel column


def _within(ops: Iterable[Span], start: int, end: int) -> Sequence[Span]:
    """The operations that may touch [start, end]: sorted by start (linear for rows(), which
    sorts them already), those starting before `end`, from the first whose end, or an earlier
    one's, reaches `start`. A zoom on a few iterations then looks at those only."""
    ordered = sorted(ops)
    if ordered and ordered[0][0] >= start and ordered[-1][0] <= end:
        # Every operation starts inside: a panel of the whole run (or of one that ends there).
        return ordered
    hi = bisect.bisect_right([s for s, _, _ in ordered], end)
    reach = list(itertools.accumulate((e for _, e, _ in ordered[:hi]), max))
    return ordered[bisect.bisect_left(reach, start):hi]


def _spread(ops: Iterable[Span], start: int, end: int,
            width: int) -> tuple[dict[str, list[float]], dict[str, list[int]], dict[str, list[int]]]:
    """Each operation spread over the window's columns, per kind: the time of the columns it
    covers in part, and difference arrays of the columns it covers whole and of those it
    touches (a long operation costs two entries, not one per column)."""
    col = (end - start) / width
    last = width - 1
    partial: defaultdict[str, list[float]] = defaultdict(lambda: [0.0] * width)
    runs: defaultdict[str, list[int]] = defaultdict(lambda: [0] * (width + 1))
    marks: defaultdict[str, list[int]] = defaultdict(lambda: [0] * (width + 1))
    for s, e, kind in ops:
        if e < start or s >= end or (e == start and s < e):
            continue
        # (conditional expressions, not min/max: this loop runs once per operation and panel)
        a_ns = (s if s > start else start) - start
        b_ns = (e if e < end else end) - start
        a = int(a_ns / col)
        b = int(b_ns / col)
        a = a if a < last else last
        b = b if b < last else last
        mark = marks[kind]
        mark[a] += 1
        mark[b + 1] -= 1
        if e <= start or e <= s:
            continue  # present (an instant, or ending where the window starts) but no time
        part = partial[kind]
        if a == b:
            part[a] += b_ns - a_ns
            continue
        part[a] += (a + 1) * col - a_ns
        part[b] += b_ns - b * col
        if b > a + 1:
            run = runs[kind]
            run[a + 1] += 1
            run[b] -= 1
    return partial, runs, marks


def _shares(part: list[float], full: list[int] | None, col: float) -> list[float]:
    """A kind's share of each column's time, at most 1: the time of the columns it covers in
    part, and the whole columns it covers (full, a difference array) as one column each."""
    if full is None:
        return [p / col if p < col else 1.0 for p in part]
    out = []
    for p, level in zip(part, itertools.accumulate(full)):
        share = (p + level * col) / col
        out.append(share if share < 1.0 else 1.0)
    return out


def columns(ops: Iterable[Span], start: int, end: int,
            width: int = PLOT) -> tuple[dict[str, list[float]], dict[str, list[bool]]]:
    """Per kind, the share (0..1) of each column's time that its operations cover (columns split
    [start, end) evenly; overlapping operations of one kind count once per operation, capped at 1
    by shares()), and the columns where at least one of them runs, however short: one pass over
    the operations (a panel's row needs both)."""
    partial, runs, marks = _spread(_within(ops, start, end), start, end, width)
    col = (end - start) / width
    shares = {kind: _shares(part, runs.get(kind), col) for kind, part in partial.items()}
    where = {kind: [level > 0 for level in itertools.accumulate(mark[:width])]
             for kind, mark in marks.items()}
    return shares, where


def heights(shares: dict[str, list[float]], bar: int = BAR) -> dict[str, list[int]]:
    """Whole-pixel heights per kind and column whose totals keep the shares' areas: what a
    column cannot show of a kind is carried to the next column where that kind runs (error
    diffusion); the carry is dropped where the kind stops, so no colour lands where its kind
    never ran. Columns over-full by rounding give back from the kind that rounded up most."""
    kinds = [k for k, _, _ in KINDS if k in shares]
    if len(kinds) == 1:
        return {kinds[0]: _heights_one(shares[kinds[0]], bar)}
    width = len(next(iter(shares.values()))) if shares else 0
    # Per kind by its place in `kinds` (lists, not dicts: this loop runs per column and row; with
    # idle columns skipped and _heights_one, 5.5 -> 1.7 ms for a 9000-line trace's whole run)
    out = [[0] * width for _ in kinds]
    carry = [0.0] * len(kinds)
    places = range(len(kinds))
    for c, values in enumerate(zip(*(shares[k] for k in kinds))):
        total_share = sum(values)
        if total_share <= 0.0:  # an idle column: every kind stops here
            carry = [0.0] * len(kinds)
            continue
        scale = 1.0 / total_share if total_share > 1.0 else 1.0
        column: list[int] = []  # the places of the kinds that run in this column
        used = 0  # their pixels
        for i in places:
            share = values[i] * scale
            if share <= 0.0:
                carry[i] = 0.0
                continue
            want = share * bar + carry[i]
            got = round(want)
            got = got if got > 0 else 0
            out[i][c] = got
            carry[i] = want - got
            column.append(i)
            used += got
        while used > bar:
            i = min(column, key=lambda j: (carry[j], kinds[j]))
            out[i][c] -= 1
            carry[i] += 1.0
            used -= 1
    return dict(zip(kinds, out))


def _heights_one(shares: list[float], bar: int) -> list[int]:
    """heights() of a row with one kind (the host's waits, a queue of kernels only): the same
    heights without the bookkeeping of several kinds sharing a column (a share is at most 1)."""
    out = [0] * len(shares)
    carry = 0.0
    for c, share in enumerate(shares):
        if share <= 0.0:
            carry = 0.0
            continue
        want = share * bar + carry
        got = round(want)
        if got < 0:
            got = 0
        elif got > bar:
            got = bar
        carry = want - got
        out[c] = got
    return out


# ---------------------------------------------------------------------------------------
# The zoom


def _pattern(names: Sequence[str]) -> int | None:
    """The shortest period of the kernel-name sequence, if the sequence repeats enough."""
    n = len(names)
    for p in range(1, MAX_PERIOD + 1):
        if n // p < MIN_REPEATS:
            break
        same = sum(map(operator.eq, names, names[p:]))  # names[i] == names[i + p], in C
        if same >= PATTERN_MATCH * (n - p):
            return p
    return None


def _fmt(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def _padded(start: int, end: int, caption: str) -> Window:
    pad = int((end - start) * ZOOM_PAD)
    return Window(start - pad, end + pad, caption)


def _periodic_window(trace: Trace) -> Window | None:
    kernels = sorted(trace.kernels, key=lambda k: k.start)
    p = _pattern([k.name for k in kernels])
    if p is None:
        return None
    starts = [kernels[i].start for i in range(0, len(kernels), p)]
    periods = [b - a for a, b in zip(starts, starts[1:])]
    if len(periods) < ZOOM_PERIODS:
        return None
    median = statistics.median(periods)
    middle = len(periods) / 2
    # The period nearest the median, and among those within 10 % of it the one nearest the
    # middle of the run (neither the warm-up nor the last iteration).
    j = min(range(len(periods)),
            key=lambda i: (abs(periods[i] - median) > 0.1 * median, abs(i - middle)))
    first = max(0, min(j - 1, len(periods) - ZOOM_PERIODS))
    start, end = starts[first], starts[first + ZOOM_PERIODS]
    each = f"{p} kernels" if p > 1 else "1 kernel"
    return _padded(start, end, f"zoom: {ZOOM_PERIODS} loop iterations around the median one "
                               f"(a repeating pattern of {each}, {_fmt(median)} per iteration)")


def _densest_window(trace: Trace) -> Window | None:
    ops = sorted((e.start, e.end) for e in trace.operations)
    n = len(ops)
    h = math.ceil(ZOOM_OPERATIONS * n)
    if n < 4 or h < 2:
        return None
    best: tuple[int, int] | None = None
    window: deque[int] = deque()  # indexes of ops in the window, by decreasing end
    for i in range(n):
        while window and ops[window[-1]][1] <= ops[i][1]:
            window.pop()
        window.append(i)
        first = i - h + 1
        if first < 0:
            continue
        while window[0] < first:
            window.popleft()
        candidate = (ops[first][0], ops[window[0]][1])
        if best is None or candidate[1] - candidate[0] < best[1] - best[0]:
            best = candidate
    if best is None:
        return None
    return _padded(best[0], best[1], f"zoom: the {_fmt(best[1] - best[0])} that hold {h} of "
                                     f"the {n} GPU operations")


def zoom_window(trace: Trace) -> Window | None:
    """The stretch the second panel shows, or None when zooming would show nothing new."""
    span = trace.finish - trace.origin
    if span <= 0:
        return None
    window = _periodic_window(trace) or _densest_window(trace)
    if window is None or window.end - window.start > ZOOM_MAX_PART * span:
        return None
    return window


# ---------------------------------------------------------------------------------------
# Drawing


def layout(trace: Trace, zoom: bool = True) -> Layout:
    all_rows = rows(trace)
    # The rows hold the GPU's operations and the host's waits, each row sorted by start.
    origin = min((r.ops[0][0] for r in all_rows if r.ops), default=0)
    ends = [s.end for s in trace.syncs] + ([trace.finish] if trace.operations else [])
    finish = max(ends, default=1)
    whole = Window(origin, max(finish, origin + 1), f"whole run: {_fmt(finish - origin)}")
    panels = [whole]
    if zoom:
        window = zoom_window(trace)
        if window is not None:
            panels.append(window)
    rows_h = sum(r.height for r in all_rows)
    tops = []
    y = TITLE
    for _ in panels:
        tops.append(y + CAPTION)
        y += CAPTION + rows_h + AXIS
    return Layout(rows=all_rows, panels=tuple(panels), panel_tops=tuple(tops),
                  size=(WIDTH, y + LEGEND + BOTTOM))


def _nice_step(span_ns: float, ticks: int = 8) -> float:
    raw = span_ns / ticks
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def _time_label(ns: float, step: float) -> str:
    """A tick's label in the unit that suits the tick step: "0", "5 ms", "0.2 ms", "150 us"."""
    if ns == 0:
        return "0"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0)):
        if step >= scale / 10 or unit == "ns":
            decimals = max(0, math.ceil(-math.log10(step / scale) - 1e-9))
            return f"{ns / scale:.{decimals}f} {unit}"
    return f"{ns:.0f} ns"


FOOTNOTE = ("bar height: share of each pixel's time; thin lines under a bar: where operations "
            "of each kind run, however short")


@functools.lru_cache(maxsize=4096)
def _lettering(text: str, font: Any) -> tuple[Any, tuple[int, int]]:
    """`text` in `font` as an 8-bit mask, and where its box starts from the point it is drawn
    at: rendered by FreeType once per process and text, pasted after (a text cost ~0.9 ms to
    render on the H200 machine's cores, 27 of them 24 ms of one picture; the title, the legend
    and the footnote are the same in every picture: warm() renders them in the resident server,
    before its workers fork)."""
    from PIL import Image, ImageDraw

    left, top, right, bottom = font.getbbox(text)
    mask = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
    ImageDraw.Draw(mask).text((-left, -top), text, fill=255, font=font)
    return mask, (left, top)


def _write(image: Any, xy: tuple[int, int], text: str, colour: tuple[int, int, int],
           font: Any) -> None:
    """ImageDraw.text's pixels, through _lettering's mask."""
    mask, (left, top) = _lettering(text, font)
    image.paste(colour, (xy[0] + left, xy[1] + top), mask)


def warm() -> None:
    """The fonts and the texts every picture has (its default title, the legend, the footnote),
    made once, and the image formats Pillow imports on a first save (Image.preinit: PNG, and
    BMP, GIF, JPEG, PPM beside it, with subprocess and logging: a worker's first picture took
    66.7 ms here without them, 42.3 ms with them): the resident server calls it before it
    forks its workers."""
    from PIL import Image

    Image.preinit()
    font, small = fonts()
    for text in ("GPU timeline", *(label for _, _, label in KINDS), "idle"):
        _lettering(text, font)
    _lettering(FOOTNOTE, small)


@functools.cache
def fonts() -> tuple[Any, Any]:
    """The two fonts, made once per process (the resident server makes them before its first
    call)."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=12), ImageFont.load_default(size=10)
    except TypeError:  # Pillow before 10.1: one bitmap font
        font = ImageFont.load_default()
        return font, font


def _bar(tall: dict[str, list[int]], width: int = PLOT, bar: int = BAR) -> Any:
    """A row's stacked bar: in each column, from the bottom, each kind's height in KINDS order,
    idle above. Made as bytes, one column after another, then turned on its side: 0.18 ms a
    bar, against 1.6 ms for one line drawn per column and kind (a 9000-line trace)."""
    from PIL import Image

    kinds = [(k, bytes(COLOURS[k])) for k, _, _ in reversed(KINDS) if k in tall]
    idle = bytes(IDLE)
    made: dict[tuple[int, ...], bytes] = {}
    out = []
    for key in zip(*(tall[k] for k, _ in kinds)) if kinds else [()] * width:
        column = made.get(key)
        if column is None:
            column = made[key] = idle * (bar - sum(key)) + b"".join(
                colour * h for (_, colour), h in zip(kinds, key))
        out.append(column)
    return Image.frombytes("RGB", (bar, width), b"".join(out)).transpose(Image.Transpose.TRANSPOSE)


def _draw_panel(image: Any, pen: Any, lay: Layout, panel: int, origin: int, font: Any,
                small: Any) -> None:
    window = lay.panels[panel]
    top = lay.panel_tops[panel]
    caption = window.caption + (" -- the dark mark on the axis above" if panel else "")
    _write(image, (8, top - CAPTION + 2), caption, INK, font)
    span = window.end - window.start
    scale = PLOT / span
    axis_y = top + sum(r.height for r in lay.rows)
    step = _nice_step(span)
    # Ticks at multiples of the step from the run's start, so that both panels share a clock.
    tick = math.ceil((window.start - origin) / step) * step
    while tick <= window.end - origin + 1e-9:
        x = LEFT + int((tick - (window.start - origin)) * scale)
        if LEFT <= x < LEFT + PLOT:
            pen.line([(x, top - 2), (x, axis_y + 4)], fill=GRID)
            _write(image, (x - 10, axis_y + 7), _time_label(tick, step), INK, small)
        tick += step
    pen.line([(LEFT, axis_y), (LEFT + PLOT - 1, axis_y)], fill=INK)
    for i, row in enumerate(lay.rows):
        x0, y0, x1, y1 = lay.bar_box(panel, i)
        _write(image, (8, y0 + 1), row.name, INK, font)
        if row.small:
            _write(image, (8, y0 + 15), row.small, FAINT, small)
        shares, where = columns(row.ops, window.start, window.end)
        image.paste(_bar(heights(shares)), (x0, y0))
        for kind in row.kinds:
            lx0, ly0, _, ly1 = lay.lane_box(panel, i, kind)
            flags = where.get(kind, [])
            c = 0
            while c < len(flags):
                if flags[c]:
                    run = c
                    while run + 1 < len(flags) and flags[run + 1]:
                        run += 1
                    pen.rectangle([lx0 + c, ly0, lx0 + run, ly1], fill=COLOURS[kind])
                    c = run + 1
                else:
                    c += 1
    if panel == 0 and len(lay.panels) > 1:
        zoom = lay.panels[1]
        a = LEFT + int((zoom.start - window.start) * scale)
        b = max(a + 2, LEFT + int((zoom.end - window.start) * scale))
        pen.rectangle([a, axis_y - 3, b, axis_y + 1], fill=ZOOM_MARK)


def draw(trace: Trace, path: Path, title: str = "GPU timeline") -> Path | str:
    """Write the timeline PNG; its path, or why it could not be drawn."""
    try:
        from PIL import Image, ImageDraw
    except ImportError:
        return "no timeline picture: Pillow is not installed (pip install pillow)"
    lay = layout(trace)
    if not lay.rows:
        return "no timeline picture: no GPU activity"
    image = Image.new("RGB", lay.size, BACKGROUND)
    pen = ImageDraw.Draw(image)
    font, small = fonts()
    _write(image, (8, 8), title, INK, font)
    origin = lay.panels[0].start
    for panel in range(len(lay.panels)):
        _draw_panel(image, pen, lay, panel, origin, font, small)

    x = 8
    legend_y = lay.size[1] - LEGEND - BOTTOM + 6
    used = {kind for r in lay.rows for kind in r.kinds}
    for kind, colour, text in (*KINDS, ("idle", IDLE, "idle")):
        if kind not in used and kind != "idle":
            continue
        pen.rectangle([x, legend_y, x + 12, legend_y + 12], fill=colour)
        _write(image, (x + 16, legend_y), text, INK, font)
        x += 16 + int(pen.textlength(text, font=font)) + 18
    _write(image, (8, legend_y + 19), FOOTNOTE, FAINT, small)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    # zlib's fastest level: half the time of its default (6.2 against 12.0 ms for a 9000-line
    # trace's picture) for ~20 % more bytes
    image.save(tmp, format="PNG", compress_level=1)
    tmp.replace(path)
    return path
