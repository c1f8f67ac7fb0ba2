"""A ProfileReport as plain text (terminal) and HTML (notebook). No decisions here."""

from __future__ import annotations

import base64
import html as _html
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from .model import (Cause, Gain, GpuShare, Hint, Peak, ProfileReport, Rates, Summary, Table,
                    TransferStat)

_KIND_TITLE = {
    "nsys": "Nsight Systems",
    "builtin": "built-in CUPTI tracer",
    "command": "configured profiler",
    "none": "no profiler",
}
MAX_TABLE_ROWS = 15


def fmt_ns(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else ""


def _bandwidth(t: TransferStat) -> str:
    bw = t.gb_per_s
    if bw is None:
        return ""
    return f"{bw:.1f} GB/s" + (f" ({t.host_memory})" if t.host_memory else "")


def summary_rows(s: Summary) -> list[tuple[str, str, str, str, str, str]]:
    """(what, time, share, count, data, bandwidth) lines of the totals table."""
    whole = s.gpu_ns
    rows = [("kernels", fmt_ns(s.kernel_ns), _share(s.kernel_ns, whole), str(s.kernel_count), "", "")]
    for t in (s.h2d, s.d2h, s.d2d):
        if t.count or t.label != "device → device":
            rows.append((t.label, fmt_ns(t.total_ns), _share(t.total_ns, whole), str(t.count),
                         fmt_bytes(t.bytes) if t.count else "", _bandwidth(t)))
    if s.memset_count:
        rows.append(("memsets", fmt_ns(s.memset_ns), _share(s.memset_ns, whole),
                     str(s.memset_count), fmt_bytes(s.memset_bytes), ""))
    return rows


def _gpu_name(g: GpuShare) -> str:
    return f"GPU {g.device}"


def _processes(g: GpuShare) -> str:
    return ", ".join(f"pid {p}" for p in g.processes)


def gpu_rows(s: Summary) -> list[tuple[str, str, str, str, str, str, str, str, str]]:
    """(GPU, busy, of its span, kernels, launches, host → device, device → host, queues,
    processes) lines of the per-GPU table of a run on several GPUs."""
    return [(_gpu_name(g) + (f" ({g.name})" if g.name else ""), _pct(g.busy), fmt_ns(g.span_ns),
             fmt_ns(g.kernel_ns), str(g.kernel_count), fmt_bytes(g.bytes_h2d),
             fmt_bytes(g.bytes_d2h), str(g.queues), _processes(g)) for g in s.gpus]


_GPU_HEADER = ("", "busy", "of its span", "kernels", "launches", "host → device",
               "device → host", "queues", "processes")


def _headline(report: ProfileReport) -> str:
    s = report.summary
    head = f"GPU profile ({_KIND_TITLE[report.kind]})"
    if s is None or not s.kernel_count and not s.h2d.count and not s.d2h.count:
        return head
    parts = []
    if s.gpus:
        parts.append(f"{len(s.gpus)} GPUs")
    if s.queues:
        parts.append(f"{s.queues} queue{'s' if s.queues != 1 else ''}")
    if s.gpus:
        # Each GPU's busy share over its own span: the union of several GPUs' work says little.
        parts.append(", ".join(f"{_gpu_name(g)} busy {_pct(g.busy)} of its {fmt_ns(g.span_ns)}"
                               for g in s.gpus))
    elif s.span_ns:
        parts.append(f"{fmt_ns(s.span_ns)} from the first to the last GPU operation, "
                     f"GPU busy {_share(s.busy_ns, s.span_ns)} of it")
    return head + (": " + ", ".join(parts) if parts else "")


def _waits(s: Summary) -> str:
    if not s.sync_count:
        return ""
    return f"the host waited for the GPU {fmt_ns(s.sync_ns)} in {s.sync_count} synchronisations"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def fmt_rate(bytes_per_s: float) -> str:
    if bytes_per_s >= 1e12:
        return f"{bytes_per_s / 1e12:.2f} TB/s"
    return f"{bytes_per_s / 1e9:.1f} GB/s"


def _peak(p: Peak) -> str:
    """ "64.0 GB/s (PCIe 5.0 x16, table: NVIDIA H200 datasheet)" """
    return f"{fmt_rate(p.bytes_per_s)} ({', '.join(x for x in (p.what, p.source) if x)})"


_MARK = {"warning": "!", "info": "·"}


def hint_lines(h: Hint, width: int = 100) -> list[str]:
    """The figure that triggered the hint, then what to do, wrapped."""
    lines = textwrap.wrap(h.figure, width, initial_indent=f"  {_MARK[h.severity]} ",
                          subsequent_indent="    ")
    lines += textwrap.wrap(h.message, width, initial_indent="    → ",
                           subsequent_indent="      ")
    return lines


# A gain below this share of the run's GPU span is small at this size (the timings of a run
# spread by a few percent: less is not a figure to promise).
SMALL_GAIN = 0.05


def _range(low: float, high: float) -> str:
    """"1.2–1.6 s": both ends in the unit of the larger."""
    unit, scale = next(((u, v) for u, v in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)) if high >= v),
                       ("ns", 1.0))
    digits = 1 if high / scale >= 10 else 2
    lo, hi = f"{low / scale:.{digits}f}", f"{high / scale:.{digits}f}"
    return f"{hi} {unit}" if lo == hi else f"{lo}–{hi} {unit}"


def gain_text(g: Gain | None, matters: str = "") -> str:
    """What a fix would save, as the student reads it: "the fix would save 1.2–1.6 s of the
    run's 2.0 s on the GPU (1.9–2.8× faster), from the copies' time"."""
    if g is None:
        return "not measured here (no GPU trace of it)"
    span = g.span_ns
    if span and g.high_ns < SMALL_GAIN * span:
        text = (f"small at this size: {_range(g.low_ns, g.high_ns)} of the run's "
                f"{fmt_ns(span)} on the GPU")
        return text + (f"; it grows {matters}" if matters else "")
    text = f"the fix would save {_range(g.low_ns, g.high_ns)}"
    if span:
        faster = [span / max(span - x, 1) for x in (g.low_ns, g.high_ns)]
        text += (f" of the run's {fmt_ns(span)} on the GPU ({faster[0]:.1f}–{faster[1]:.1f}× "
                 "faster)" if f"{faster[0]:.1f}" != f"{faster[1]:.1f}" else
                 f" of the run's {fmt_ns(span)} on the GPU ({faster[1]:.1f}× faster)")
    text += f", from {g.basis}"
    return text + (f" ({g.solution})" if g.solution else "")


def cause_lines(c: Cause, width: int = 100) -> list[str]:
    """A cause under the profile: its line and title, what shows it, the fix and its gain."""
    lines = textwrap.wrap(f"line {c.line}: {c.title}", width, initial_indent="  ! ",
                          subsequent_indent="    ")
    lines += textwrap.wrap(c.evidence, width, initial_indent="    ", subsequent_indent="    ")
    lines += textwrap.wrap(f"{c.fix}; {gain_text(c.gain, c.matters)}", width,
                           initial_indent="    → ", subsequent_indent="      ")
    return lines


def rate_lines(r: Rates) -> list[str]:
    """Achieved rates, one sentence per line (the kernels' share is in the top-kernels table)."""
    lines = [f"GPU busy {_pct(r.busy)} of the {fmt_ns(r.span_ns)} from its first operation to "
             f"its last"] if r.span_ns else []
    for c in r.copies:
        line = f"{c.label}: {fmt_rate(c.bytes_per_s)}"
        if c.host_memory:
            line += f" ({c.host_memory})"
        if c.latency_bound:
            line += (f", {c.count} small copies ({fmt_bytes(c.bytes / c.count)} and "
                     f"{fmt_ns(c.total_ns / c.count)} each on average): their fixed cost, not "
                     f"the link, sets this rate")
        elif c.peak is not None and c.of_peak is not None:
            line += f", {_pct(c.of_peak)} of {_peak(c.peak)}"
        lines.append(line)
    m = r.memory
    if m is not None:
        line = (f"kernels: {fmt_rate(m.bytes_per_s)} in device memory ({fmt_bytes(m.bytes_per_iteration)} "
                f"per iteration × {m.iterations})")
        if m.peak is not None and m.of_peak is not None:
            line += f", {_pct(m.of_peak)} of {_peak(m.peak)}"
        if m.practical is not None:
            line += (f", {_pct(m.bytes_per_s / m.practical.bytes_per_s)} of the "
                     f"{fmt_rate(m.practical.bytes_per_s)} of a {m.practical.source}")
        lines.append(line)
    return lines


def _kernel_rows(report: ProfileReport) -> list[tuple[str, str, str, str, str, str, str]]:
    """(time, share of kernel time, share of GPU time, calls, average, name, where)."""
    s = report.summary
    if s is None:
        return []
    of_gpu = {k.name: k.share for k in report.rates.kernels} if report.rates else {}
    return [(fmt_ns(k.total_ns), f"{100 * k.share:.1f}%",
             _pct(of_gpu[k.name]) if k.name in of_gpu else "", f"{k.calls}×",
             fmt_ns(k.avg_ns), k.name, k.where) for k in s.top_kernels]


def _columns(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if right[i] else c.ljust(w)
                      for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]


def _shown(report: ProfileReport) -> Summary | None:
    """The summary, when the GPU did something to show in it."""
    s = report.summary
    if s is not None and (s.kernel_count or s.h2d.count or s.d2h.count or s.memset_count):
        return s
    return None


# A part of the figures of the GPU's work: (the report, its summary) -> lines or HTML.
_GpuPart = Callable[[ProfileReport, Summary], list[str]]


def _gpu_figures(report: ProfileReport, parts: Sequence[_GpuPart]) -> list[str]:
    """The totals, hints, rates and top kernels, none when the GPU did nothing to show."""
    s = _shown(report)
    return [line for part in parts for line in part(report, s)] if s is not None else []


def _indented(lines: Sequence[str]) -> list[str]:
    return ["  " + line for line in lines]


def _rates_title(rates: Rates) -> str:
    return f"achieved rates{f' ({rates.gpu})' if rates.gpu else ''}"


def _text_message(report: ProfileReport) -> list[str]:
    return [report.message] if report.message else []


def _text_totals(report: ProfileReport, s: Summary) -> list[str]:
    table = [("", "time", "share", "count", "data", "bandwidth"), *summary_rows(s)]
    waits = _waits(s)
    return _indented([*_columns(table, (False, True, True, True, True, False)),
                      *([waits] if waits else [])])


def _text_gpus(report: ProfileReport, s: Summary) -> list[str]:
    if not s.gpus:
        return []
    return ["per GPU:", *_indented(_columns([_GPU_HEADER, *gpu_rows(s)],
                                            (False, *[True] * 7, False)))]


def _text_hints(report: ProfileReport, s: Summary) -> list[str]:
    return ["hints:", *(line for h in report.hints for line in hint_lines(h))] if report.hints else []


def _text_causes(report: ProfileReport, s: Summary) -> list[str]:
    if not report.causes:
        return []
    return ["why it is slow:", *(line for c in report.causes for line in cause_lines(c))]


def _text_rates(report: ProfileReport, s: Summary) -> list[str]:
    rates = report.rates
    return [f"{_rates_title(rates)}:", *_indented(rate_lines(rates))] if rates is not None else []


def _text_kernels(report: ProfileReport, s: Summary) -> list[str]:
    if not s.top_kernels:
        return []
    return ["top kernels (time, of kernel time, of GPU time, calls, average):",
            *_indented(_columns(_kernel_rows(report), (True, True, True, True, True, False, False)))]


def _text_gpu(report: ProfileReport) -> list[str]:
    return _gpu_figures(report, (_text_gpus, _text_totals, _text_causes, _text_hints, _text_rates,
                                 _text_kernels))


def _text_table(t: Table) -> list[str]:
    shown = [t.header, *t.rows[:MAX_TABLE_ROWS]]
    more = len(t.rows) - MAX_TABLE_ROWS
    return [f"{t.title} ({t.report}):", *_indented(_columns(shown, [False] * len(t.header))),
            *([f"  … {more} more rows"] if more > 0 else [])]


def _text_tables(report: ProfileReport) -> list[str]:
    return [line for t in report.tables for line in _text_table(t)]


def _text_notes(report: ProfileReport) -> list[str]:
    return [f"note: {n}" for n in report.notes]


def _text_files(report: ProfileReport) -> list[str]:
    named = (("timeline: ", report.timeline_png),
             ("to zoom in, open in ui.perfetto.dev or chrome://tracing: ", report.trace_json),
             ("report: ", report.report_file))
    return [f"{label}{path}" for label, path in named if path is not None]


# The text's parts after the headline, top to bottom; each gives no line when it has nothing.
_TEXT_PARTS: tuple[Callable[[ProfileReport], list[str]], ...] = (
    _text_message, _text_gpu, _text_tables, _text_notes, _text_files)


def text(report: ProfileReport) -> str:
    lines = [_headline(report)]
    for part in _TEXT_PARTS:
        lines += part(report)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# HTML

_STYLE = ("<style>.idrrun-prof table{border-collapse:collapse;margin:4px 0 10px 0;font-size:90%}"
          ".idrrun-prof td,.idrrun-prof th{padding:1px 8px;text-align:right}"
          ".idrrun-prof td.l,.idrrun-prof th.l{text-align:left}"
          ".idrrun-prof th{border-bottom:1px solid #999}"
          ".idrrun-prof li.warning{color:#a40000}.idrrun-prof li .fix{color:#222}</style>")


def _e(value: object) -> str:
    return _html.escape(str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[bool]) -> str:
    head = "".join(f"<th class='{'l' if left[i] else ''}'>{_e(h)}</th>" for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f"<td class='{'l' if left[i] else ''}'>{_e(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _html_message(report: ProfileReport) -> list[str]:
    return [f"<p>{_e(report.message)}</p>"] if report.message else []


def _html_totals(report: ProfileReport, s: Summary) -> list[str]:
    waits = _waits(s)
    return [_table(("", "time", "share", "count", "data", "bandwidth"), summary_rows(s),
                   (True, False, False, False, False, True)),
            *([f"<p>{_e(waits)}</p>"] if waits else [])]


def _html_gpus(report: ProfileReport, s: Summary) -> list[str]:
    if not s.gpus:
        return []
    return [_table(_GPU_HEADER, gpu_rows(s), (True, *[False] * 7, True))]


def _html_hints(report: ProfileReport, s: Summary) -> list[str]:
    if not report.hints:
        return []
    items = "".join(f"<li class='{h.severity}'><b>{_e(h.figure)}</b><br/>"
                    f"<span class='fix'>→ {_e(h.message)}</span></li>" for h in report.hints)
    return [f"<div><i>hints</i><ul>{items}</ul></div>"]


def _html_causes(report: ProfileReport, s: Summary) -> list[str]:
    if not report.causes:
        return []
    items = "".join(f"<li class='warning'><b>line {c.line}: {_e(c.title)}</b><br/>{_e(c.evidence)}"
                    f"<br/><span class='fix'>→ {_e(c.fix)}; {_e(gain_text(c.gain, c.matters))}"
                    "</span></li>" for c in report.causes)
    return [f"<div><i>why it is slow</i><ul>{items}</ul></div>"]


def _html_rates(report: ProfileReport, s: Summary) -> list[str]:
    rates = report.rates
    if rates is None:
        return []
    items = "".join(f"<li>{_e(line)}</li>" for line in rate_lines(rates))
    return [f"<div><i>{_e(_rates_title(rates))}</i><ul>{items}</ul></div>"]


def _html_kernels(report: ProfileReport, s: Summary) -> list[str]:
    if not s.top_kernels:
        return []
    return [_table(("time", "of kernels", "of GPU", "calls", "average", "kernel", "in the source"),
                   _kernel_rows(report), (False, False, False, False, False, True, True))]


def _html_gpu(report: ProfileReport) -> list[str]:
    return _gpu_figures(report, (_html_gpus, _html_totals, _html_causes, _html_hints, _html_rates,
                                 _html_kernels))


def _html_timeline(report: ProfileReport) -> list[str]:
    if report.timeline_png is None or not report.timeline_png.is_file():
        return []
    data = base64.b64encode(report.timeline_png.read_bytes()).decode("ascii")
    return [f"<img alt='GPU timeline' src='data:image/png;base64,{data}'/>"]


def _html_tables(report: ProfileReport) -> list[str]:
    return [part for t in report.tables for part in (
        f"<div><i>{_e(t.title)}</i> <code>{_e(t.report)}</code></div>",
        _table(t.header, t.rows[:MAX_TABLE_ROWS], [i == len(t.header) - 1 for i in range(len(t.header))]))]


def _html_notes(report: ProfileReport) -> list[str]:
    return [f"<div>note: {_e(n)}</div>" for n in report.notes]


def _html_files(report: ProfileReport) -> list[str]:
    parts = []
    if report.trace_json is not None:
        parts.append(f"<div>to zoom in, open in <a href='https://ui.perfetto.dev' target='_blank'>"
                     f"ui.perfetto.dev</a>: <code>{_e(report.trace_json)}</code></div>")
    if report.report_file is not None:
        parts.append(f"<div>report: <code>{_e(report.report_file)}</code></div>")
    return parts


# The page's parts after the headline, top to bottom (the timeline, drawn, goes before the
# tables); each gives nothing when it has nothing.
_HTML_PARTS: tuple[Callable[[ProfileReport], list[str]], ...] = (
    _html_message, _html_gpu, _html_timeline, _html_tables, _html_notes, _html_files)


def html(report: ProfileReport) -> str:
    parts = [_STYLE, "<div class='idrrun-prof'>", f"<b>{_e(_headline(report))}</b>"]
    for part in _HTML_PARTS:
        parts += part(report)
    parts.append("</div>")
    return "".join(parts)


class ProfileView:
    """A ProfileReport as a notebook display (HTML with the timeline) and as terminal text."""

    def __init__(self, report: ProfileReport) -> None:
        self.report = report

    def __str__(self) -> str:
        return text(self.report)

    def __repr__(self) -> str:
        return f"<ProfileView: {_headline(self.report)}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        # IPython's text/plain (a notebook's text view, an export to text or Markdown, a
        # terminal): the summary, as idrrun run prints it, not the object's address.
        p.text(str(self))

    def _repr_html_(self) -> str:
        return html(self.report)
