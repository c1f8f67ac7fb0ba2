"""A ProfileReport as plain text (terminal) and HTML (notebook). No decisions here."""

from __future__ import annotations

import base64
import html as _html
from collections.abc import Sequence

from .model import ProfileReport, Summary, TransferStat

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


def _headline(report: ProfileReport) -> str:
    s = report.summary
    head = f"GPU profile ({_KIND_TITLE[report.kind]})"
    if s is None or not s.kernel_count and not s.h2d.count and not s.d2h.count:
        return head
    parts = []
    if s.queues:
        parts.append(f"{s.queues} queue{'s' if s.queues != 1 else ''}")
    if s.span_ns:
        parts.append(f"{fmt_ns(s.span_ns)} from the first to the last GPU operation, "
                     f"GPU busy {_share(s.busy_ns, s.span_ns)} of it")
    return head + (": " + ", ".join(parts) if parts else "")


def _waits(s: Summary) -> str:
    if not s.sync_count:
        return ""
    return f"the host waited for the GPU {fmt_ns(s.sync_ns)} in {s.sync_count} synchronisations"


def _columns(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if right[i] else c.ljust(w)
                      for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]


def text(report: ProfileReport) -> str:
    lines = [_headline(report)]
    if report.message:
        lines.append(report.message)
    s = report.summary
    if s is not None and (s.kernel_count or s.h2d.count or s.d2h.count or s.memset_count):
        table = [("", "time", "share", "count", "data", "bandwidth"), *summary_rows(s)]
        lines += ["  " + line for line in _columns(table, (False, True, True, True, True, False))]
        if _waits(s):
            lines.append("  " + _waits(s))
        if s.top_kernels:
            lines.append("top kernels:")
            rows = [(fmt_ns(k.total_ns), f"{100 * k.share:.1f}%", f"{k.calls}×", k.name, k.where)
                    for k in s.top_kernels]
            lines += ["  " + line for line in _columns(rows, (True, True, True, False, False))]
    for t in report.tables:
        lines.append(f"{t.title} ({t.report}):")
        shown = [t.header, *t.rows[:MAX_TABLE_ROWS]]
        lines += ["  " + line for line in _columns(shown, [False] * len(t.header))]
        if len(t.rows) > MAX_TABLE_ROWS:
            lines.append(f"  … {len(t.rows) - MAX_TABLE_ROWS} more rows")
    lines += [f"note: {n}" for n in report.notes]
    if report.timeline_png is not None:
        lines.append(f"timeline: {report.timeline_png}")
    if report.report_file is not None:
        lines.append(f"report: {report.report_file}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# HTML

_STYLE = ("<style>.idrrun-prof table{border-collapse:collapse;margin:4px 0 10px 0;font-size:90%}"
          ".idrrun-prof td,.idrrun-prof th{padding:1px 8px;text-align:right}"
          ".idrrun-prof td.l,.idrrun-prof th.l{text-align:left}"
          ".idrrun-prof th{border-bottom:1px solid #999}</style>")


def _e(value: object) -> str:
    return _html.escape(str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[bool]) -> str:
    head = "".join(f"<th class='{'l' if left[i] else ''}'>{_e(h)}</th>" for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f"<td class='{'l' if left[i] else ''}'>{_e(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def html(report: ProfileReport) -> str:
    parts = [_STYLE, "<div class='idrrun-prof'>", f"<b>{_e(_headline(report))}</b>"]
    if report.message:
        parts.append(f"<p>{_e(report.message)}</p>")
    s = report.summary
    if s is not None and (s.kernel_count or s.h2d.count or s.d2h.count or s.memset_count):
        parts.append(_table(("", "time", "share", "count", "data", "bandwidth"), summary_rows(s),
                            (True, False, False, False, False, True)))
        if _waits(s):
            parts.append(f"<p>{_e(_waits(s))}</p>")
        if s.top_kernels:
            parts.append(_table(("time", "share", "calls", "kernel", "in the source"),
                                [(fmt_ns(k.total_ns), f"{100 * k.share:.1f}%", str(k.calls), k.name,
                                  k.where) for k in s.top_kernels],
                                (False, False, False, True, True)))
    if report.timeline_png is not None and report.timeline_png.is_file():
        data = base64.b64encode(report.timeline_png.read_bytes()).decode("ascii")
        parts.append(f"<img alt='GPU timeline' src='data:image/png;base64,{data}'/>")
    for t in report.tables:
        parts.append(f"<div><i>{_e(t.title)}</i> <code>{_e(t.report)}</code></div>")
        parts.append(_table(t.header, t.rows[:MAX_TABLE_ROWS], [i == len(t.header) - 1
                                                                  for i in range(len(t.header))]))
    for n in report.notes:
        parts.append(f"<div>note: {_e(n)}</div>")
    if report.report_file is not None:
        parts.append(f"<div>report: <code>{_e(report.report_file)}</code></div>")
    parts.append("</div>")
    return "".join(parts)


class ProfileView:
    """A ProfileReport as a notebook display (HTML with the timeline) and as terminal text."""

    def __init__(self, report: ProfileReport) -> None:
        self.report = report

    def __str__(self) -> str:
        return text(self.report)

    def _repr_html_(self) -> str:
        return html(self.report)
