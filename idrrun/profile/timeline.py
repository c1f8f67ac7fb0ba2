"""The timeline picture: one row per stream (queue), kernels and copies in colours, a time axis
and a legend; a PNG drawn with Pillow's ImageDraw and its default font.

Operations far shorter than a pixel still get one pixel, so that a thousand tiny kernels show
as a band rather than nothing. Each row is drawn as merged pixel spans per kind of operation,
which keeps the drawing time bounded by the picture's width, not by the trace's length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from .model import DTOD, DTOH, HTOD, Trace
from .summary import queues

WIDTH = 1000
LEFT = 120  # room for the row labels
RIGHT = 20
TOP = 30  # the title
ROW = 30  # per row: a 22-pixel bar and a gap
BAR = 22
AXIS = 34
LEGEND = 26
BOTTOM = 8

# Kinds of operation, in drawing order, with their colour and legend text (ASCII: the default
# bitmap font of older Pillow has no arrows).
KINDS: tuple[tuple[str, tuple[int, int, int], str], ...] = (
    ("kernel", (59, 125, 216), "kernel"),
    ("h2d", (44, 160, 44), "copy host->device"),
    ("d2h", (214, 39, 40), "copy device->host"),
    ("d2d", (148, 103, 189), "copy device->device"),
    ("memset", (255, 127, 14), "memset"),
    ("sync", (160, 160, 160), "host waits for GPU"),
)
COLOURS = {kind: colour for kind, colour, _ in KINDS}
BACKGROUND = (255, 255, 255)
ROW_SHADE = (242, 242, 242)
GRID = (215, 215, 215)
INK = (30, 30, 30)

Span = tuple[int, int, str]  # start ns, end ns, kind


def _rows(trace: Trace) -> list[tuple[str, list[Span]]]:
    """(label, operations) per stream in order of first use, then the host's waits."""
    keys = queues(trace)
    several = len({p for p, _ in keys}) > 1
    spans: dict[tuple[int, int], list[Span]] = {k: [] for k in keys}
    copy_kind = {HTOD: "h2d", DTOH: "d2h", DTOD: "d2d"}
    for k in trace.kernels:
        spans[(k.process, k.stream)].append((k.start, k.end, "kernel"))
    for c in trace.copies:
        spans[(c.process, c.stream)].append((c.start, c.end, copy_kind.get(c.direction, "d2d")))
    for m in trace.memsets:
        spans[(m.process, m.stream)].append((m.start, m.end, "memset"))
    rows = [((f"pid {p} stream {s}" if several else f"stream {s}"), spans[(p, s)]) for p, s in keys]
    if trace.syncs:
        rows.append(("host waits", [(s.start, s.end, "sync") for s in trace.syncs]))
    return rows


def image_size(rows: int) -> tuple[int, int]:
    """Width and height of the picture for this many rows."""
    return WIDTH, TOP + max(rows, 1) * ROW + AXIS + LEGEND + BOTTOM


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


def _pixel_spans(ops: Iterable[Span], origin: int, scale: float, x0: int) -> dict[str, list[tuple[int, int]]]:
    """Per kind, the merged pixel columns [a, b] its operations cover (at least one each)."""
    columns: dict[str, list[tuple[int, int]]] = {}
    for start, end, kind in ops:
        a = x0 + int((start - origin) * scale)
        b = max(a, x0 + math.ceil((end - origin) * scale) - 1)
        columns.setdefault(kind, []).append((a, b))
    merged: dict[str, list[tuple[int, int]]] = {}
    for kind, spans in columns.items():
        out: list[tuple[int, int]] = []
        for a, b in sorted(spans):
            if out and a <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        merged[kind] = out
    return merged


def draw(trace: Trace, path: Path, title: str = "GPU timeline") -> Path | str:
    """Write the timeline PNG; its path, or why it could not be drawn."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        return "no timeline picture: Pillow is not installed (pip install pillow)"
    rows = _rows(trace)
    if not rows:
        return "no timeline picture: no GPU activity"
    every = [(start, end) for _, ops in rows for start, end, _ in ops]
    origin = min(start for start, _ in every)
    finish = max(end for _, end in every)
    span = max(finish - origin, 1)
    plot_w = WIDTH - LEFT - RIGHT
    scale = (plot_w - 1) / span
    size = image_size(len(rows))
    image = Image.new("RGB", size, BACKGROUND)
    pen = ImageDraw.Draw(image)
    font = ImageFont.load_default()

    pen.text((8, 8), title, fill=INK, font=font)
    axis_y = TOP + len(rows) * ROW
    for i in range(0, len(rows), 2):
        pen.rectangle([LEFT, TOP + i * ROW, LEFT + plot_w - 1, TOP + i * ROW + BAR], fill=ROW_SHADE)
    step = _nice_step(span)
    tick = 0.0
    while tick <= span + 1e-9:
        x = LEFT + int(tick * scale)
        pen.line([(x, TOP - 2), (x, axis_y + 4)], fill=GRID)
        pen.text((x - 10, axis_y + 8), _time_label(tick, step), fill=INK, font=font)
        tick += step
    pen.line([(LEFT, axis_y), (LEFT + plot_w - 1, axis_y)], fill=INK)

    for i, (label, ops) in enumerate(rows):
        y = TOP + i * ROW
        pen.text((8, y + BAR // 2 - 5), label, fill=INK, font=font)
        spans = _pixel_spans(ops, origin, scale, LEFT)
        for kind, _, _ in KINDS:
            for a, b in spans.get(kind, ()):
                pen.rectangle([a, y + 2, b, y + BAR - 2], fill=COLOURS[kind])

    x = 8
    legend_y = axis_y + AXIS
    used = {kind for _, ops in rows for _, _, kind in ops}
    for kind, colour, text in KINDS:
        if kind not in used:
            continue
        pen.rectangle([x, legend_y, x + 12, legend_y + 12], fill=colour)
        pen.text((x + 16, legend_y + 1), text, fill=INK, font=font)
        x += 16 + int(pen.textlength(text, font=font)) + 18
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    image.save(tmp, format="PNG")
    tmp.replace(path)
    return path


def row_labels(trace: Trace) -> Sequence[str]:
    """The rows the picture has, top to bottom (for tests and the text report)."""
    return [label for label, _ in _rows(trace)]
