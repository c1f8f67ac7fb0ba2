"""What the profiler shows of a trace (issue 13): the pixel-share timeline and its zoom, the
OpenACC queue names, the Chrome/Perfetto export, the hints and the achieved rates.

Traces come from tests/data (the H200 recording of the async matrix product) and from builders
below whose shapes follow the H200 measurements of the data-management exercise (Jacobi 4096²:
the solution's many short device→host copies between long kernels, the start file's arrays sent
at every region). Pictures are checked by counting their pixels' colours.
"""

from __future__ import annotations

import itertools
import json
import random
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from idrrun.profile import perfetto, timeline
from idrrun.profile.hints import find_hints
from idrrun.profile.model import (EMPTY_SUMMARY, NO_GPU_ACTIVITY, Copy, CopyRate, Hint, Kernel,
                                  KernelRate, KernelStat, Memset, MemoryRate, Peak,
                                  ProfilePlan, ProfileReport, Rates, Summary, Sync, Table,
                                  Trace, TransferStat)
from idrrun.profile.rates import achieved_rates
from idrrun.profile.render import ProfileView
from idrrun.profile.stages import collect
from idrrun.profile.summary import summarize, trace_values
from idrrun.profile.tracefile import read_trace
from idrrun.run import proc
from idrrun.profile import hints as hints_mod
from idrrun.profile import nsysdb
from idrrun.profile import rates as rates_mod
from idrrun.profile.model import DTOH, HTOD, Device
from idrrun.profile.tracefile import parse_lines

import perfetto_oracle


def _labels(trace: Trace) -> list[str]:
    """The timeline's rows, top to bottom."""
    return [r.name for r in timeline.rows(trace)]


def _size(trace: Trace) -> tuple[int, int]:
    return timeline.layout(trace).size


def _coverage(ops: list[tuple[int, int, str]], start: int, end: int,
              width: int) -> dict[str, list[float]]:
    return timeline.columns(ops, start, end, width)[0]


def _presence(ops: list[tuple[int, int, str]], start: int, end: int,
              width: int) -> dict[str, list[bool]]:
    return timeline.columns(ops, start, end, width)[1]


ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
REAL = DATA / "async_trace_h200.jsonl"  # recorded on an H200 by the version-1 tracer
BLOCK = 4096 * 4096 * 8  # one Jacobi array of 4096² doubles: 134.2 MB


# ---------------------------------------------------------------------------------------
# Builders


class Recorder:
    """Lays GPU operations one after the other on a clock, as one stream would run them."""

    def __init__(self, stream: int = 7) -> None:
        self.t = 1_000_000_000
        self.stream = stream
        self.kernels: list[Kernel] = []
        self.copies: list[Copy] = []
        self.syncs: list[Sync] = []
        self._ids: Iterator[int] = itertools.count(1)

    def copy(self, direction: str, size: int, ns: int, memory: str = "pageable") -> None:
        src, dst = (memory, "device") if direction == HTOD else ("device", memory)
        self.copies.append(Copy(direction=direction, bytes=size, start=self.t, end=self.t + ns,
                                stream=self.stream, src=src, dst=dst,
                                correlation=next(self._ids)))
        self.t += ns

    def kernel(self, name: str, ns: int, waited: bool = False) -> None:
        self.kernels.append(Kernel(name=name, start=self.t, end=self.t + ns, stream=self.stream,
                                   correlation=next(self._ids)))
        if waited:  # the host waits for it: GCC's synchronous compute regions
            self.syncs.append(Sync("stream", self.t, self.t + ns + 1_000, stream=self.stream))
        self.t += ns

    def gap(self, ns: int) -> None:
        self.t += ns

    def trace(self) -> Trace:
        return Trace(kernels=tuple(self.kernels), copies=tuple(self.copies),
                     syncs=tuple(self.syncs))


def jacobi_solution(iterations: int = 1000) -> Trace:
    """The data-management solution, 4096² x 1000 on an H200 with GCC (the issue's figures):
    kernels 89 %, device→host 3.5 % of GPU time. A goes in once and comes back once; each
    iteration adds the runtime's small argument copies, the reduction's 8-byte result, and a
    host wait after each kernel."""
    r = Recorder()
    r.copy(HTOD, BLOCK, 16_500_000)
    r.gap(20_000)
    for _ in range(iterations):
        for _ in range(4):
            r.copy(HTOD, 24, 500)
            r.gap(8_000)
        r.kernel("main$_omp_fn$0", 110_500, waited=True)
        r.gap(10_000)
        r.copy(DTOH, 8, 2_800)
        r.gap(8_000)
        r.kernel("main$_omp_fn$1", 110_500, waited=True)
        r.gap(10_000)
    r.copy(DTOH, BLOCK, 5_900_000)
    return r.trace()


def jacobi_exercise(iterations: int = 20) -> Trace:
    """The start file: A and Anew go in before and come back after every compute region."""
    r = Recorder()
    for _ in range(iterations):
        for name in ("main$_omp_fn$0", "main$_omp_fn$1"):
            r.copy(HTOD, BLOCK, 16_500_000)
            r.copy(HTOD, BLOCK, 16_500_000)
            r.kernel(name, 110_000, waited=True)
            r.copy(DTOH, BLOCK, 9_000_000)
            r.copy(DTOH, BLOCK, 9_000_000)
    return r.trace()


def shares_trace(periods: int = 100, period: int = 100_000) -> Trace:
    """Known shares of the span: kernel 60 %, host→device 25 %, device→host 10 %, idle 5 %."""
    r = Recorder()
    for _ in range(periods):
        r.kernel("k", period * 60 // 100)
        r.copy(HTOD, 10**6, period * 25 // 100)
        r.copy(DTOH, 10**6, period * 10 // 100)
        r.gap(period * 5 // 100)
    return r.trace()


def tiny_kernels_trace() -> Trace:
    r = Recorder()
    for _ in range(200):
        r.kernel("main$_omp_fn$0", 3_000)
        r.gap(5_000)
    return r.trace()


def idle_trace() -> Trace:
    r = Recorder()
    for _ in range(20):
        r.kernel("main$_omp_fn$0", 100_000)
        r.gap(150_000)
    return r.trace()


def one_queue_trace() -> Trace:
    """Blocks copied in, computed and copied out, all on one queue, from pinned memory."""
    r = Recorder()
    for _ in range(10):
        r.copy(HTOD, 16 * 10**6, 600_000, memory="pinned")
        r.kernel("main$_omp_fn$0", 2_000_000)
        r.copy(DTOH, 16 * 10**6, 600_000, memory="pinned")
    return r.trace()


def real() -> Trace:
    trace = read_trace(REAL)
    assert trace is not None
    return trace


# The queue records the version-2 tracer adds to the recorded run (written here: the H200 run
# of benchmarks/profile_cost.py timelines records real ones). Streams 13, 14, 15 served async(1..3);
# the product ran without async on the default stream, named by the correlation id of its launch
# (cuLaunchKernel, correlation 120) because CUPTI may not give the default stream's id.
QUEUE_RECORDS = (
    '{"type":"queue","context":1,"stream":13,"correlation":56,"queue":1,"runtime":"libgomp"}\n'
    '{"type":"queue","context":1,"stream":14,"correlation":70,"queue":2,"runtime":"libgomp"}\n'
    '{"type":"queue","context":1,"stream":15,"correlation":84,"queue":3,"runtime":"libgomp"}\n'
    '{"type":"queue","context":1,"stream":-1,"correlation":120,"queue":-2,"runtime":"libgomp"}\n'
)
DEVICE_RECORD = ('{"type":"device","device":0,"name":"NVIDIA H200","cc":[9,0],"sms":132,'
                 '"memory":150754820096,"memory_clock_khz":3201000,"memory_bus_bits":6144,'
                 '"integrated":0}\n')


def real_v2_text() -> str:
    lines = REAL.read_text().splitlines(keepends=True)
    header = lines[0].replace('"version":1', '"version":2')
    return header + DEVICE_RECORD + "".join(lines[1:-1]) + QUEUE_RECORDS + lines[-1]


def real_v2() -> Trace:
    trace, _ = parse_lines(real_v2_text().splitlines())
    return trace


def _plan(tmp_path: Path, text: str) -> ProfilePlan:
    run = tmp_path / "run"
    run.mkdir()
    (run / "trace.jsonl").write_text(text)
    return ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=run,
                       output=run / "trace.jsonl")


# ---------------------------------------------------------------------------------------
# Pixel shares


def _bar_colours(png: Path, layout: timeline.Layout, panel: int, row: int) -> Counter[tuple[int, int, int]]:
    from PIL import Image

    x0, y0, x1, y1 = layout.bar_box(panel, row)
    with Image.open(png) as image:
        box = image.convert("RGB").crop((x0, y0, x1 + 1, y1 + 1))
        return Counter({colour: n for n, colour in box.getcolors(maxcolors=1 << 16) or []})


def test_heights_keep_each_kinds_area_and_stay_where_it_runs() -> None:
    width = 400
    shares = {"kernel": [0.6] * width, "d2h": [0.013] * 200 + [0.0] * 200}
    tall = timeline.heights(shares, bar=22)
    assert sum(tall["kernel"]) == pytest.approx(0.6 * 22 * width, abs=1)
    assert sum(tall["d2h"]) == pytest.approx(0.013 * 22 * 200, abs=1)  # 57 px, never 1 per column
    assert max(tall["d2h"]) == 1 and sum(tall["d2h"][200:]) == 0
    assert all(a + b <= 22 for a, b in zip(tall["kernel"], tall["d2h"]))


def _heights_as_written(shares: dict[str, list[float]], bar: int) -> dict[str, list[int]]:
    """heights()'s rule written plainly (as it was before it was made fast): the oracle."""
    kinds = [k for k, _, _ in timeline.KINDS if k in shares]
    width = len(next(iter(shares.values())))
    out = {k: [0] * width for k in kinds}
    carry = dict.fromkeys(kinds, 0.0)
    for c, values in enumerate(zip(*(shares[k] for k in kinds))):
        total = sum(values)
        scale = 1.0 / total if total > 1.0 else 1.0
        column: dict[str, int] = {}
        for k, value in zip(kinds, values):
            if value * scale <= 0.0:
                carry[k] = 0.0
                continue
            want = value * scale * bar + carry[k]
            column[k] = max(0, round(want))
            carry[k] = want - column[k]
        while sum(column.values()) > bar:
            k = min(column, key=lambda x: (carry[x], x))
            column[k] -= 1
            carry[k] += 1.0
        for k, h in column.items():
            out[k][c] = h
    return out


def test_heights_are_those_of_the_rule_written_plainly() -> None:
    """One kind or several, idle columns, full ones, over-full sums, tiny shares."""
    rng = random.Random(23)
    kinds = [k for k, _, _ in timeline.KINDS]
    for _ in range(400):
        width = rng.choice((1, 5, 40))
        shares = {k: [rng.choice((0.0, 0.0, 1.0, rng.random(), 0.03 * rng.random()))
                      for _ in range(width)] for k in rng.sample(kinds, rng.randrange(1, 4))}
        bar = rng.choice((1, 3, 22))
        assert timeline.heights(shares, bar=bar) == _heights_as_written(shares, bar), (shares, bar)


def test_pixel_colours_match_known_shares(tmp_path: Path) -> None:
    # 137 periods do not line up with the 870 columns: error diffusion must keep the areas. (The
    # picture does not depend on the time unit: only the number of periods per column matters.)
    for periods in (100, 137, 2000):
        trace = shares_trace(periods=periods)
        png = timeline.draw(trace, tmp_path / f"shares{periods}.png")
        assert isinstance(png, Path)
        lay = timeline.layout(trace)
        colours = _bar_colours(png, lay, 0, 0)
        total = sum(colours.values())
        assert total == timeline.PLOT * timeline.BAR
        got = {kind: colours[timeline.COLOURS[kind]] / total for kind in ("kernel", "h2d", "d2h")}
        got["idle"] = colours[timeline.IDLE] / total
        for kind, share in (("kernel", 0.60), ("h2d", 0.25), ("d2h", 0.10), ("idle", 0.05)):
            assert got[kind] == pytest.approx(share, abs=0.01), (periods, kind, got)


def test_h200_data_management_shape_red_area_is_its_share(tmp_path: Path) -> None:
    trace = jacobi_solution()
    s = summarize(trace)
    assert s.kernel_ns / s.gpu_ns == pytest.approx(0.89, abs=0.002)
    assert s.d2h.total_ns / s.gpu_ns == pytest.approx(0.035, abs=0.001)
    png = timeline.draw(trace, tmp_path / "jacobi.png")
    assert isinstance(png, Path)
    lay = timeline.layout(trace)
    assert [r.name for r in lay.rows] == ["stream 7", "host waits"]
    colours = _bar_colours(png, lay, 0, 0)
    work = {k: colours[timeline.COLOURS[k]] for k in ("kernel", "h2d", "d2h")}
    painted = sum(work.values())
    red, blue = work["d2h"] / painted, work["kernel"] / painted
    print(f"\njacobi 4096² x 1000 shape: red {100 * red:.2f} % of the coloured bar (summary "
          f"{100 * s.d2h.total_ns / s.gpu_ns:.2f} %), blue {100 * blue:.2f} % (summary "
          f"{100 * s.kernel_ns / s.gpu_ns:.2f} %)")
    assert red == pytest.approx(s.d2h.total_ns / s.gpu_ns, abs=0.01)
    assert blue == pytest.approx(s.kernel_ns / s.gpu_ns, abs=0.01)
    # Idle in the picture is idle in the trace: 1 - busy of the span.
    assert colours[timeline.IDLE] / sum(colours.values()) == pytest.approx(
        1 - s.busy_ns / s.span_ns, abs=0.01)


def test_short_operations_show_in_their_lane_not_in_the_bar(tmp_path: Path) -> None:
    from PIL import Image

    r = Recorder()
    r.kernel("long", 50_000_000)
    r.gap(10_000_000)
    r.copy(DTOH, 8, 1_000)  # 1 us in a 60 ms run: a fiftieth of a pixel
    r.gap(10_000)
    r.kernel("long", 50_000_000)
    trace = r.trace()
    png = timeline.draw(trace, tmp_path / "t.png")
    assert isinstance(png, Path)
    lay = timeline.layout(trace)
    assert lay.rows[0].kinds == ("kernel", "d2h")
    assert _bar_colours(png, lay, 0, 0)[timeline.COLOURS["d2h"]] == 0
    x0, y0, x1, y1 = lay.lane_box(0, 0, "d2h")
    with Image.open(png) as image:
        lane = image.convert("RGB").crop((x0, y0, x1 + 1, y1 + 1))
        found = Counter({c: n for n, c in lane.getcolors(maxcolors=1 << 16) or []})
    assert found[timeline.COLOURS["d2h"]] == timeline.LANE  # one column, the lane's height


def test_zoom_shows_three_iterations_of_the_loop() -> None:
    trace = jacobi_solution()
    window = timeline.zoom_window(trace)
    assert window is not None
    period = 4 * 8_500 + 110_500 + 10_000 + 10_800 + 110_500 + 10_000  # one iteration, ns
    assert window.end - window.start == pytest.approx(3 * period * (1 + 2 * timeline.ZOOM_PAD),
                                                      rel=0.01)
    assert "3 loop iterations" in window.caption and "2 kernels" in window.caption
    loop = (trace.kernels[0].start + trace.kernels[-1].end) / 2  # the middle of the iterations
    assert abs((window.start + window.end) / 2 - loop) < 0.01 * (trace.finish - trace.origin)


def test_zoom_without_a_loop_goes_where_the_operations_are() -> None:
    trace = real()
    window = timeline.zoom_window(trace)
    assert window is not None
    inside = [k for k in trace.kernels if window.start <= k.start and k.end <= window.end]
    assert sorted(k.name for k in inside) == ["init_mat$_omp_fn$0"] * 3  # the three queues
    assert window.end - window.start < 0.02 * (trace.finish - trace.origin)
    assert timeline.zoom_window(shares_trace(periods=3)) is None  # too few to be a loop, and dense


def test_the_picture_has_two_panels_when_zoomed(tmp_path: Path) -> None:
    from PIL import Image

    trace = jacobi_solution(iterations=200)
    png = timeline.draw(trace, tmp_path / "t.png")
    assert isinstance(png, Path)
    lay = timeline.layout(trace)
    assert len(lay.panels) == 2
    with Image.open(png) as image:
        assert image.size == lay.size
    zoom = _bar_colours(png, lay, 1, 0)
    # Zoomed on 3 iterations, each of the 4 kinds of the row is visible in the bar itself.
    assert zoom[timeline.COLOURS["d2h"]] > 0 and zoom[timeline.COLOURS["h2d"]] > 0
    assert zoom[timeline.COLOURS["kernel"]] > 0.5 * sum(zoom.values())


# ---------------------------------------------------------------------------------------
# Queue names


def test_queue_records_name_the_rows_with_the_stream_in_small_print(tmp_path: Path) -> None:
    trace = real_v2()
    assert {(q.stream, q.queue) for q in trace.stream_queues} == {(13, 1), (14, 2), (15, 3), (7, -2)}
    rows = timeline.rows(trace)
    assert [(r.name, r.small) for r in rows] == [
        ("async(1)", "stream 13"), ("async(2)", "stream 14"), ("async(3)", "stream 15"),
        ("synchronous", "stream 7"), ("host waits", "")]
    report = collect(_plan(tmp_path, real_v2_text()))
    assert report.timeline_png is not None and report.timeline_png.is_file()


def test_traces_without_queue_records_keep_the_stream_numbers() -> None:
    assert list(_labels(real())) == ["stream 13", "stream 14", "stream 15", "stream 7",
                                                 "host waits"]


def test_bad_or_unresolvable_queue_records_are_ignored() -> None:
    text = REAL.read_text().replace(
        '{"type":"end"',
        '{"type":"queue","stream":13,"queue":"one"}\n'
        '{"type":"queue","stream":-1,"correlation":999999,"queue":2}\n'
        '{"type":"queue","stream":14,"queue":-7}\n'
        '{"type":"queue","stream":15,"queue":3}\n'
        '{"type":"queue","stream":15,"queue":4}\n{"type":"end"')
    trace, _ = parse_lines(text.splitlines())
    assert trace.skipped == 0
    assert [(q.stream, q.queue) for q in trace.stream_queues] == [(15, 3)]  # the first one wins
    assert list(_labels(trace))[:3] == ["stream 13", "stream 14", "async(3)"]


def test_queue_names_with_several_processes(tmp_path: Path) -> None:
    plan = _plan(tmp_path, real_v2_text())
    assert plan.output is not None
    plan.output.with_name("trace.jsonl.491").write_text(real_v2_text().replace('"pid":490', '"pid":491'))
    trace = read_trace(plan.output)
    assert trace is not None
    labels = list(_labels(trace))
    assert labels[:2] == ["pid 490 async(1)", "pid 491 async(1)"]
    assert "pid 491 synchronous" in labels


def test_device_records_are_read() -> None:
    trace = real_v2()
    assert trace.devices == (Device(id=0, name="NVIDIA H200", process=490, compute_capability=(9, 0),
                                    sms=132, memory=150754820096, memory_clock_khz=3201000,
                                    memory_bus_bits=6144),)
    assert trace.devices[0].memory_bandwidth == pytest.approx(4.9172e12, rel=1e-4)


# ---------------------------------------------------------------------------------------
# Perfetto / Chrome trace events


def test_perfetto_export_is_valid_and_sums_to_the_trace(tmp_path: Path) -> None:
    trace = real_v2()
    path = perfetto.write(trace, tmp_path / "trace.json")
    assert isinstance(path, Path)
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == len(trace.kernels) + len(trace.copies) + len(trace.memsets) + len(trace.syncs)
    for e in spans:
        assert {"name", "cat", "ts", "dur", "pid", "tid"} <= e.keys()
        assert e["ts"] >= 0 and e["dur"] >= 0 and e["pid"] == 490
    whole_ns = sum(e.ns for e in (*trace.operations, *trace.syncs))
    assert sum(e["dur"] for e in spans) * 1000 == pytest.approx(whole_ns, rel=1e-9)
    kernel_us = sum(e["dur"] for e in spans if e["cat"] == "kernel")
    assert kernel_us * 1000 == pytest.approx(sum(k.ns for k in trace.kernels), rel=1e-9)
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(threads.values()) == sorted(["async(1) (stream 13)", "async(2) (stream 14)",
                                               "async(3) (stream 15)", "synchronous (stream 7)",
                                               "host waits"])
    assert {e["tid"] for e in spans} <= set(threads)
    product = next(e for e in spans if e["name"] == "main$_omp_fn$0")
    assert threads[product["tid"]] == "synchronous (stream 7)"
    assert product["dur"] == pytest.approx(11_301.551)  # µs


def test_perfetto_text_is_the_event_document_encoded() -> None:
    """write() formats the JSON itself (speed): byte for byte what json.dumps makes of
    events(), on a recorded trace and on one with odd names, a memset, a zero-length copy and two
    processes."""
    odd = Trace(
        kernels=(Kernel(name='k"quote\\é\u2028', start=10, end=2_500, stream=3, grid=(1, 2, 3),
                        block=(32, 1, 1), correlation=7, process=1),
                 Kernel(name="plain", start=11, end=11, stream=4, process=2)),
        copies=(Copy(direction=HTOD, bytes=1 << 20, start=5, end=5, stream=3, src="pinned",
                     dst="device", asynchronous=True, process=1),
                Copy(direction=DTOH, bytes=3, start=20, end=1_021, stream=4, src="device",
                     dst="pageable", process=2)),
        memsets=(Memset(bytes=64, start=30, end=33, stream=3, process=1),),
        syncs=(Sync(kind="stream", start=40, end=99, stream=3, process=1),))
    for trace in (real_v2(), odd):
        assert perfetto.text(trace) == json.dumps(perfetto_oracle.events(trace), separators=(",", ":"))


def test_collect_writes_trace_json_beside_the_png(tmp_path: Path) -> None:
    report = collect(_plan(tmp_path, REAL.read_text()))
    assert report.trace_json == tmp_path / "run" / "trace.json"
    assert json.loads(report.trace_json.read_text())["traceEvents"]
    assert f"ui.perfetto.dev or chrome://tracing: {report.trace_json}" in str(ProfileView(report))
    assert "ui.perfetto.dev" in ProfileView(report)._repr_html_()


# ---------------------------------------------------------------------------------------
# Hints


def _rules(trace: Trace, gpu: str = "") -> dict[str, hints_mod.Hint]:
    s = summarize(trace)
    return {h.rule: h for h in find_hints(trace, s, achieved_rates(trace, s, gpu=gpu))}


def test_data_region_fires_on_the_start_file_shape_only() -> None:
    found = _rules(jacobi_exercise())
    hint = found["data_region"]
    assert hint.severity == "warning" and "data region" in hint.message
    assert "a block of 134.2 MB went host→device 80 times" in hint.figure
    assert hint.figure.startswith("copies take 99.8 % of GPU time (21.5 GB in 160 copies)")
    assert "copies_dominate" not in found  # said once, by the more precise rule
    assert "pageable_copies" not in found  # the data region removes those copies
    assert "data_region" not in _rules(jacobi_solution())
    assert "data_region" not in _rules(real())


def test_copies_dominate_names_the_direction() -> None:
    hint = _rules(real())["copies_dominate"]
    assert hint.figure == ("device→host copies take 71 % of GPU time (32.0 MB in 1 copy), "
                           "kernels 29 %")
    assert "copyin" in hint.message and "copyout" in hint.message
    assert "copies_dominate" not in _rules(jacobi_solution())


def test_pageable_copies_fire_until_the_memory_is_pinned() -> None:
    hint = _rules(real(), gpu="NVIDIA H200")["pageable_copies"]
    assert hint.figure.startswith("27.276 ms of copies (71 % of GPU time) from or to pageable "
                                  "host memory, at 1.2 GB/s")
    assert "PCIe 5.0 x16 link: 64 GB/s each way" in hint.figure
    assert "--accopts pinned" in hint.message and "cudaMallocHost" in hint.message
    pinned = replace(real(), copies=tuple(replace(c, src="pinned") if c.direction == HTOD
                                          else replace(c, dst="pinned") for c in real().copies))
    assert "pageable_copies" not in _rules(pinned)
    assert "pageable_copies" not in _rules(jacobi_solution())  # 2 % of GPU time: not worth it


def test_tiny_kernels_fire_on_launch_bound_runs_only() -> None:
    hint = _rules(tiny_kernels_trace())["tiny_kernels"]
    assert hint.figure == ("200 of 200 kernels run for less than 10.0 µs (median 3.0 µs), "
                           "about what launching one costs")
    assert "collapse" in hint.message
    assert "tiny_kernels" not in _rules(jacobi_solution())
    assert "tiny_kernels" not in _rules(real())  # 3 short kernels are not a pattern


def test_gpu_idle_fires_when_the_gpu_waits_for_the_host() -> None:
    hint = _rules(idle_trace())["gpu_idle"]
    assert hint.severity == "warning"
    assert hint.figure == ("the GPU is idle 59 % of the 4.850 ms between its first and last "
                           "operation (19 gaps, median 150.0 µs)")
    assert "gpu_idle" not in _rules(jacobi_solution())  # idle 19 %
    assert "gpu_idle" not in _rules(real())  # busy 93 %


def test_host_waits_fire_on_synchronous_regions_in_a_loop() -> None:
    trace = jacobi_solution()
    hint = _rules(trace)["host_waits"]
    s = summarize(trace)
    assert hint.figure.startswith("the host waited for the GPU 2000 times for 2000 kernels")
    assert f"idle {round(100 * (1 - s.busy_ns / s.span_ns))} %" in hint.figure
    assert "async(1)" in hint.message and "acc wait" in hint.message
    assert "host_waits" not in _rules(real())  # 4 kernels
    no_waits = replace(trace, syncs=())
    assert "host_waits" not in _rules(no_waits)


def test_the_compilers_share_of_the_launches_is_named_as_the_compilers() -> None:
    """A GCC 12 build on a GPU (Family.launch_cost, read from its release) whose GPU idles
    between many kernels: part of that is GCC 12's runtime at each launch, said as the
    compiler's, not the student's; nothing is said for another compiler, or a busy GPU."""
    from idrrun.model import CompilerInfo, Toolchain
    from idrrun.toolchains import registry

    gcc = registry.get("gcc")
    assert gcc is not None

    def cost(version: str, target: str = "gpu") -> str:
        toolchain = Toolchain("gcc", "c", CompilerInfo("gcc", "/usr/bin/gcc", version), (), (),
                              target)  # type: ignore[arg-type]
        return gcc.launch_cost(toolchain)

    said = cost("gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
    assert said.startswith("GCC 12's OpenACC runtime allocates, copies and frees each launch's "
                           "argument table around the launch"), said
    assert cost("gcc (Debian 14.2.0-19) 14.2.0") == "" and cost("gcc 12.2.0", "host") == ""
    trace = idle_trace()
    s = summarize(trace)
    [hint] = [h for h in find_hints(trace, s, launch_cost=said) if h.rule == "compiler_launches"]
    assert hint.message.startswith("part of the GPU's idle time between kernels is the "
                                   "compiler's, not your code's: GCC 12's OpenACC runtime"), hint
    assert hint.figure == ("20 kernels, the GPU idle 59 % of the time between its first and last "
                           "operation (median gap 150.0 µs)")
    assert "compiler_launches" not in _rules(trace)  # no launch cost known: nothing said
    busy = find_hints(jacobi_solution(), summarize(jacobi_solution()), launch_cost=said)
    assert "compiler_launches" not in {h.rule for h in busy}  # idle 19 %


def test_one_queue_fires_when_copies_and_kernels_could_overlap() -> None:
    found = _rules(one_queue_trace())
    hint = found["one_queue"]
    assert hint.figure == ("all 10 kernels and 20 copies ran one after the other on one queue "
                           "(stream 7): copies 38 %, kernels 62 % of GPU time")
    assert "async(2)" in hint.message
    assert set(found) == {"one_queue"}
    assert "one_queue" not in _rules(real())  # four queues
    assert "one_queue" not in _rules(jacobi_exercise())  # kernels 0.1 %: nothing to overlap
    assert "one_queue" not in _rules(jacobi_solution())  # one large copy each way


def test_no_hints_on_a_healthy_run() -> None:
    r = Recorder()
    r.copy(HTOD, BLOCK, 3_000_000, memory="pinned")
    for _ in range(100):
        r.kernel("main$_omp_fn$0", 500_000)
        r.gap(2_000)
    r.copy(DTOH, BLOCK, 3_000_000, memory="pinned")
    assert _rules(r.trace()) == {}


def test_hints_are_rendered_in_text_and_html(tmp_path: Path) -> None:
    report = collect(_plan(tmp_path, real_v2_text()))
    assert [h.rule for h in report.hints] == ["copies_dominate", "pageable_copies"]
    text = str(ProfileView(report))
    assert "hints:\n  · device→host copies take 71 % of GPU time" in text
    assert "    → pageable host memory is copied through a staging buffer" in text
    page = ProfileView(report)._repr_html_()
    assert "<li class='info'><b>device→host copies take 71 % of GPU time" in page
    assert "--accopts pinned" in page


def full_report(folder: Path) -> ProfileReport:
    """A report with every part filled in, as no single run gives one."""
    summary = Summary(
        span_ns=2_000_000, busy_ns=1_500_000, kernel_ns=1_000_000, kernel_count=10,
        h2d=TransferStat("host → device", 2, 8_000_000, 400_000, "pageable"),
        d2h=TransferStat("device → host", 1, 4_000_000, 100_000, "pinned"),
        d2d=TransferStat("device → device"), memset_ns=1_000, memset_count=1, memset_bytes=4096,
        sync_ns=50_000, sync_count=3, queues=2,
        top_kernels=(KernelStat("main_42_gpu", "main, line 42", 10, 1_000_000, 200_000, 1.0),))
    link = Peak(64e9, "PCIe 5.0 x16", "table: NVIDIA H200 datasheet")
    rates = Rates("NVIDIA H200", 2_000_000, 1_500_000,
                  kernels=(KernelRate("main_42_gpu", "main, line 42", 10, 1_000_000, 0.666),),
                  copies=(CopyRate("host → device", HTOD, 2, 8_000_000, 400_000, 0.266, "pageable",
                                   link),),
                  memory=MemoryRate(1e6, 10, 1_000_000, Peak(4.8e12, "HBM3e", "table")))
    table = Table("cuda_gpu_kern_sum", "CUDA kernels", ("Time (ns)", "Name"),
                  tuple((str(100 * i), f"k{i}") for i in range(17)))
    png = folder / "timeline.png"
    png.write_bytes(b"\x89PNG not really")
    return ProfileReport(
        kind="nsys", trace=None, summary=summary, tables=(table,), timeline_png=png,
        report_file=folder / "report.nsys-rep", message="the run was cut", notes=("a note",),
        hints=(Hint("pageable_copies", "warning", "pin the memory", "2 copies from pageable memory"),),
        rates=rates, trace_json=folder / "trace.json")


def test_every_part_of_a_report_in_text(tmp_path: Path) -> None:
    report = full_report(tmp_path)
    rows = [f"  {100 * i:<9}  k{i}" for i in range(15)]
    assert str(ProfileView(report)).split("\n") == [
        "GPU profile (Nsight Systems): 2 queues, 2.000 ms from the first to the last GPU "
        "operation, GPU busy 75.0% of it",
        "the run was cut",
        "                     time  share  count    data  bandwidth",
        "  kernels        1.000 ms  66.6%     10",
        "  host → device  400.0 µs  26.6%      2  8.0 MB  20.0 GB/s (pageable)",
        "  device → host  100.0 µs   6.7%      1  4.0 MB  40.0 GB/s (pinned)",
        "  memsets          1.0 µs   0.1%      1  4.1 kB",
        "  the host waited for the GPU 50.0 µs in 3 synchronisations",
        "hints:",
        "  ! 2 copies from pageable memory",
        "    → pin the memory",
        "achieved rates (NVIDIA H200):",
        "  GPU busy 75.0% of the 2.000 ms from its first operation to its last",
        "  host → device: 20.0 GB/s (pageable), 31.2% of 64.0 GB/s (PCIe 5.0 x16, table: NVIDIA "
        "H200 datasheet)",
        "  kernels: 10.0 GB/s in device memory (1.0 MB per iteration × 10), 0.2% of 4.80 TB/s "
        "(HBM3e, table)",
        "top kernels (time, of kernel time, of GPU time, calls, average):",
        "  1.000 ms  100.0%  66.6%  10×  100.0 µs  main_42_gpu  main, line 42",
        "CUDA kernels (cuda_gpu_kern_sum):",
        "  Time (ns)  Name",
        *rows,
        "  … 2 more rows",
        "note: a note",
        f"timeline: {tmp_path / 'timeline.png'}",
        f"to zoom in, open in ui.perfetto.dev or chrome://tracing: {tmp_path / 'trace.json'}",
        f"report: {tmp_path / 'report.nsys-rep'}",
    ]


def test_the_text_form_of_the_view_is_its_summary(tmp_path: Path) -> None:
    """What IPython shows as text/plain (a notebook's text view, an export to text), and the
    object's repr: the summary, never `<ProfileView at 0x…>`."""
    from IPython.core.formatters import PlainTextFormatter

    view = ProfileView(full_report(tmp_path))
    assert PlainTextFormatter()(view) == str(view)
    assert repr(view) == ("<ProfileView: GPU profile (Nsight Systems): 2 queues, 2.000 ms from the "
                          "first to the last GPU operation, GPU busy 75.0% of it>")


def test_every_part_of_a_report_in_html(tmp_path: Path) -> None:
    report = full_report(tmp_path)
    page = ProfileView(report)._repr_html_()
    parts = ["<b>GPU profile (Nsight Systems): 2 queues", "<p>the run was cut</p>",
             "<td class='l'>host → device</td>", "<p>the host waited for the GPU 50.0 µs",
             "<li class='warning'><b>2 copies from pageable memory</b><br/><span class='fix'>→ pin",
             "<i>achieved rates (NVIDIA H200)</i><ul><li>GPU busy 75.0%",
             "<th class='l'>in the source</th>", "<img alt='GPU timeline' src='data:image/png;base64,",
             "<i>CUDA kernels</i> <code>cuda_gpu_kern_sum</code>", "<td class='l'>k14</td>",
             "<div>note: a note</div>", f"ui.perfetto.dev</a>: <code>{tmp_path / 'trace.json'}</code>",
             f"<div>report: <code>{tmp_path / 'report.nsys-rep'}</code></div></div>"]
    at = [page.find(part) for part in parts]
    assert -1 not in at and at == sorted(at), list(zip(parts, at))
    assert "k15" not in page and page.endswith("</div></div>")
    (tmp_path / "timeline.png").unlink()  # a picture that could not be drawn is not shown
    assert "<img" not in ProfileView(report)._repr_html_()


def test_a_report_without_gpu_work_shows_no_figures(tmp_path: Path) -> None:
    report = replace(full_report(tmp_path), summary=EMPTY_SUMMARY, message=NO_GPU_ACTIVITY,
                     tables=(), timeline_png=None, trace_json=None)
    assert str(ProfileView(report)).split("\n") == [
        "GPU profile (Nsight Systems)", NO_GPU_ACTIVITY, "note: a note",
        f"report: {tmp_path / 'report.nsys-rep'}"]
    assert ProfileView(report)._repr_html_().endswith(
        f"<b>GPU profile (Nsight Systems)</b><p>{NO_GPU_ACTIVITY}</p><div>note: a note</div>"
        f"<div>report: <code>{tmp_path / 'report.nsys-rep'}</code></div></div>")


# ---------------------------------------------------------------------------------------
# Rates


@pytest.mark.parametrize(("name", "memory", "link"), [
    ("NVIDIA H200", 4.8e12, "PCIe 5.0 x16"),
    ("NVIDIA H100 80GB HBM3", 3.35e12, "PCIe 5.0 x16"),
    ("NVIDIA H100 PCIe", 2.0e12, "PCIe 5.0 x16"),
    ("NVIDIA H100 NVL", 3.9e12, "PCIe 5.0 x16"),
    ("NVIDIA GH200 480GB", 4.0e12, "NVLink-C2C"),
    ("NVIDIA A100-SXM4-80GB", 2.039e12, "PCIe 4.0 x16"),
    ("NVIDIA A100 80GB PCIe", 1.935e12, "PCIe 4.0 x16"),
    ("NVIDIA A100-SXM4-40GB", 1.555e12, "PCIe 4.0 x16"),
    ("Tesla V100-SXM2-32GB", 0.9e12, "PCIe 3.0 x16"),
])
def test_peak_table(name: str, memory: float, link: str) -> None:
    peaks = rates_mod.gpu_peaks(name)
    assert peaks is not None and peaks.memory == pytest.approx(memory) and peaks.link_kind == link
    assert rates_mod.gpu_peaks("NVIDIA GeForce RTX 4090") is None


def test_copy_rates_against_the_link_from_the_table() -> None:
    trace = real()
    r = achieved_rates(trace, summarize(trace), gpu="NVIDIA H200")
    d2h = next(c for c in r.copies if c.direction == DTOH)
    assert d2h.bytes_per_s == pytest.approx(32e6 / 27_266_854e-9)  # 1.17 GB/s
    assert d2h.peak is not None and d2h.peak.bytes_per_s == 64e9
    assert d2h.peak.source == "table: NVIDIA H200 datasheet"
    assert d2h.of_peak == pytest.approx(0.0183, abs=1e-4)
    assert d2h.share == pytest.approx(0.706, abs=0.001)
    assert r.busy == pytest.approx(0.933, abs=0.001)
    assert r.gpu == "NVIDIA H200"


def test_the_gpu_name_comes_from_the_device_record_when_not_given() -> None:
    r = achieved_rates(real_v2(), summarize(real_v2()))
    assert r.gpu == "NVIDIA H200" and r.copies[0].peak is not None


def test_copy_peak_without_a_table_entry_is_the_best_copy_of_the_run() -> None:
    trace = one_queue_trace()  # 20 copies of 16 MB in 0.6 ms: 26.7 GB/s
    r = achieved_rates(trace, summarize(trace), gpu="Some Future GPU")
    for c in r.copies:
        assert c.peak is not None and c.peak.source == "the best single copy of this run"
        assert c.peak.bytes_per_s == pytest.approx(16e6 / 600e-6)
        assert c.of_peak == pytest.approx(1.0)
    single = real()  # one large copy: nothing to compare it with
    assert all(c.peak is None for c in achieved_rates(single, summarize(single)).copies)


def test_kernel_memory_bandwidth_against_the_device_peak() -> None:
    trace = jacobi_solution()
    moved = 4 * 8 * 4094**2  # per iteration: each kernel reads one array and writes the other
    r = achieved_rates(trace, summarize(trace), gpu="NVIDIA H200", bytes_per_iteration=moved,
              iterations=1000)
    m = r.memory
    assert m is not None and m.peak is not None and m.practical is not None
    assert m.bytes_per_s == pytest.approx(moved * 1000 / 221e-3)  # 2.43 TB/s
    assert m.of_peak == pytest.approx(2.4268e12 / 4.8e12, rel=1e-3)
    assert m.practical.bytes_per_s == 4.3e12
    # Unknown to the table: the device record's clock x bus width.
    unknown = replace(trace, devices=(Device(0, "NVIDIA Future", memory_clock_khz=2619000,
                                             memory_bus_bits=5120),))
    m2 = achieved_rates(unknown, summarize(unknown), bytes_per_iteration=moved, iterations=1000).memory
    assert m2 is not None and m2.peak is not None and m2.practical is None
    assert m2.peak.bytes_per_s == pytest.approx(3.352e12, rel=1e-3)
    assert m2.peak.source == "the driver's memory clock x bus width"
    assert achieved_rates(trace, summarize(trace)).memory is None  # no bytes per iteration: no figure


def test_rates_and_kernel_shares_in_the_report(tmp_path: Path) -> None:
    plan = _plan(tmp_path, real_v2_text())
    report = collect(plan, gpu="NVIDIA H200", iterations=1, bytes_per_iteration=3 * 32e6)
    text = str(ProfileView(report))
    assert "achieved rates (NVIDIA H200):" in text
    assert "  GPU busy 93.3% of the 41.382 ms from its first operation to its last" in text
    assert ("  device → host: 1.2 GB/s (pageable), 1.8% of 64.0 GB/s (PCIe 5.0 x16, "
            "table: NVIDIA H200 datasheet)") in text
    assert ("  host → device: 0.0 GB/s (pageable), 11 small copies (13 B and 850 ns each on "
            "average): their fixed cost, not the link, sets this rate") in text
    assert "kernels: 8.5 GB/s in device memory (96.0 MB per iteration × 1)" in text
    assert "11.302 ms  99.8%  29.3%  1×  11.302 ms  main$_omp_fn$0" in text
    assert "achieved rates (NVIDIA H200)" in ProfileView(report)._repr_html_()


def test_gpu_busy_in_trace_values() -> None:
    assert trace_values(real())["gpu_busy"] == pytest.approx(0.93291, abs=1e-5)
    s = summarize(jacobi_solution())
    assert trace_values(jacobi_solution())["gpu_busy"] == pytest.approx(s.busy_ns / s.span_ns)


def test_nsys_export_names_the_device(tmp_path: Path) -> None:
    export = tmp_path / "report.sqlite"
    with closing(sqlite3.connect(export)) as db:
        db.executescript((DATA / "nsys" / "report.sql").read_text())
    trace = nsysdb.read_trace(export)
    assert isinstance(trace, Trace)
    assert [d.name for d in trace.devices] == ["NVIDIA H100 80GB HBM3"]
    r = achieved_rates(trace, summarize(trace))
    assert r.copies[0].peak is not None and r.copies[0].peak.what == "PCIe 5.0 x16"


# ---------------------------------------------------------------------------------------
# The tracer's new parts are built in


@pytest.mark.skipif(not Path("/usr/local/cuda/include/cupti.h").is_file(),
                    reason="no CUDA toolkit with CUPTI here")
def test_tracer_links_the_queue_and_device_lookups(tmp_path: Path) -> None:
    from idrrun.profile import tracer

    lib, why = tracer.build_tracer(tmp_path)
    assert lib is not None, why
    symbols = proc.run(["nm", "-D", "--undefined-only", str(lib)], what="probe", timeout=30)
    assert symbols.ok, symbols.output
    needed = {line.split()[-1].split("@")[0] for line in symbols.output.splitlines() if line.strip()}
    assert {"cuptiGetStreamIdEx", "cuptiGetDeviceId", "cuptiEnableCallback", "dlsym",
            "dladdr"} <= needed


def test_a_window_s_columns_do_not_depend_on_the_order_of_the_operations() -> None:
    """coverage() and presence() look only at the operations that can reach their window (found
    by bisection over the operations sorted by start): the same columns, in any order, as a
    count over every operation gives; a long operation that began before the window counts."""
    ops = [(0, 10_000, "kernel")] + [(s, s + 300, "h2d") for s in range(100, 10_000, 1_000)]
    window = (4_000, 6_000)
    for order in (ops, ops[::-1], ops[3:] + ops[:3]):
        cover = _coverage(order, *window, width=20)
        assert cover["kernel"] == [1.0] * 20  # the long kernel, started before the window
        # columns of 100 ns: the copies at 4100-4400 and 5100-5400
        assert [round(x, 6) for x in cover["h2d"]] == [
            0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        # presence also marks the column where an operation ends
        assert [c for c, on in enumerate(_presence(order, *window, width=20)["h2d"])
                if on] == [1, 2, 3, 4, 11, 12, 13, 14]



def test_a_window_s_columns_agree_with_a_count_by_hand() -> None:
    """coverage() and presence() against their definitions, computed exactly for random
    operations (overlapping, instants, touching the window's edges, outside it) and windows
    whose columns are not whole nanoseconds."""
    import random
    from fractions import Fraction

    rng = random.Random(17)
    for _ in range(300):
        start = rng.randrange(0, 50)
        end = start + rng.randrange(1, 120)
        width = rng.choice((1, 3, 7, 20))
        ops = [(s, s + rng.choice((0, 0, 1, 2, 5, 13, 40, 200)), rng.choice(("kernel", "h2d")))
               for s in (rng.randrange(-60, 200) for _ in range(rng.randrange(0, 9)))]
        col = Fraction(end - start, width)
        want_cover: dict[str, list[Fraction]] = {}
        want_where: dict[str, list[bool]] = {}
        for s, e, kind in ops:
            if s >= end or e < start or (e == start and s < e):
                continue  # outside, or ending where the window starts
            first = min(int((max(s, start) - start) / col), width - 1)
            last = min(int((min(e, end) - start) / col), width - 1)
            flags = want_where.setdefault(kind, [False] * width)
            for c in range(first, last + 1):
                flags[c] = True
            if e > s and e > start:
                shares = want_cover.setdefault(kind, [Fraction(0)] * width)
                for c in range(width):
                    lo, hi = start + c * col, start + (c + 1) * col
                    shares[c] += max(Fraction(0), min(hi, e) - max(lo, s)) / col
        cover, where = timeline.columns(ops, start, end, width)
        assert where == want_where, (ops, start, end, width)
        assert set(cover) == set(want_cover), (ops, start, end, width)
        for kind, shares in want_cover.items():
            assert cover[kind] == pytest.approx([float(min(x, 1)) for x in shares], abs=1e-9), \
                (ops, start, end, width)

def test_busy_intervals_is_the_union_of_the_intervals() -> None:
    """Against a brute-force union over every nanosecond of random intervals (overlapping,
    nested, touching, empty, out of order)."""
    import random

    from idrrun.profile.model import busy_intervals

    rng = random.Random(13)
    assert busy_intervals([]) == []
    for _ in range(200):
        spans = [(a, a + rng.choice([0, 1, 2, 5, 9])) for a in
                 (rng.randrange(60) for _ in range(rng.randrange(1, 12)))]
        merged = busy_intervals(spans)
        covered = {t for a, b in spans for t in range(a, b)}
        assert {t for a, b in merged for t in range(a, b)} == covered
        assert all(b1 < a2 for (_, b1), (a2, _) in zip(merged, merged[1:]))  # disjoint, apart
        assert merged == sorted(merged)


def test_the_timeline_s_texts_drawn_from_their_kept_masks_are_pillow_s_own_pixels() -> None:
    """timeline._write pastes a text's mask rendered once (_lettering): the pixels must be
    those ImageDraw.text draws, on a background and over a bar, for both fonts and both inks,
    the first time and from the cache."""
    from PIL import Image, ImageDraw

    font, small = timeline.fonts()
    texts = [("GPU 0, async(1)", font, timeline.INK), ("1.25 ms", small, timeline.INK),
             (timeline.FOOTNOTE, small, timeline.FAINT), ("gjpqy ÅÉ -> |", font, timeline.FAINT)]
    for _ in range(2):  # rendered, then from the cache
        for text, face, ink in texts:
            drawn, pasted = (Image.new("RGB", (900, 40), timeline.BACKGROUND) for _ in range(2))
            for image in (drawn, pasted):
                image.paste(timeline.COLOURS["kernel"], (300, 0, 500, 40))  # a bar under the text
            ImageDraw.Draw(drawn).text((7, 9), text, fill=ink, font=face)
            timeline._write(pasted, (7, 9), text, ink, face)
            assert drawn.tobytes() == pasted.tobytes(), text
