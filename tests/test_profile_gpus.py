"""A profile of a run on several GPUs (forged tracer files: there is no GPU here): the summary,
the busy figure a check reads and the timeline are per GPU, not the GPUs summed as one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from idrrun.checks import registry
from idrrun.checks.specs import CheckSpec
from idrrun.profile import timeline
from idrrun.profile.model import ProfilePlan
from idrrun.profile.render import ProfileView
from idrrun.profile.stages import collect
from idrrun.profile.summary import summarize, trace_values

MS = 1_000_000
T0 = 5_000_000_000


def _records(pid: int, device: int, ops: list[tuple[str, int, int]]) -> str:
    """One process's tracer file: a header, its operations on `device`, a device record, the end."""
    lines: list[dict[str, object]] = [{"type": "header", "format": "idrrun-trace", "version": 1,
                                       "pid": pid, "cupti_api": 130001, "start": T0 - 10 * MS}]
    for i, (kind, start, end) in enumerate(ops):
        common = {"start": T0 + start, "end": T0 + end, "device": device, "context": 1,
                  "stream": 13, "correlation": 100 + i}
        if kind == "kernel":
            lines.append({"type": "kernel", **common, "grid": [1, 1, 1], "block": [128, 1, 1],
                          "name": "main_40_gpu"})
        else:
            lines.append({"type": "memcpy", **common, "bytes": 8, "copy": kind, "src": "pageable",
                          "dst": "device"} if kind == "HtoD" else
                         {"type": "memcpy", **common, "bytes": 8, "copy": kind, "src": "device",
                          "dst": "pageable"})
    lines.append({"type": "device", "device": device, "name": "NVIDIA H100 80GB HBM3",
                  "cc": [9, 0], "sms": 132, "memory": 85 << 30})
    lines.append({"type": "end", "records": len(ops), "dropped": 0})
    return "".join(json.dumps(r) + "\n" for r in lines)


# Rank 0 on GPU 0: 12.2 ms of work in its 13.2 ms; rank 1 on GPU 1: 11 ms of kernels in 13 ms.
# Together: 23 ms of kernels in 14.1 ms from the first operation to the last, "busy 85.8 %".
RANK0 = [("HtoD", int(0.9 * MS), 1 * MS), ("kernel", 1 * MS, 13 * MS),
         ("DtoH", 14 * MS, int(14.1 * MS))]
RANK1 = [("kernel", 2 * MS, 8 * MS), ("kernel", 10 * MS, 15 * MS)]


@pytest.fixture
def two_gpus(tmp_path: Path) -> ProfilePlan:
    run = tmp_path / "run"
    run.mkdir()
    (run / "trace.jsonl").write_text(_records(5000, 0, RANK0))
    (run / "trace.jsonl.5001").write_text(_records(5001, 1, RANK1))
    return ProfilePlan(kind="builtin", argv_prefix=(), env={}, run_dir=run,
                       output=run / "trace.jsonl")


def test_each_gpu_has_its_own_figures(two_gpus: ProfilePlan) -> None:
    report = collect(two_gpus)
    assert report.trace is not None and report.trace.gpus == (0, 1)
    s = summarize(report.trace)
    assert [(g.device, g.processes, g.span_ns, g.busy_ns, g.kernel_ns, g.kernel_count,
             g.bytes_h2d, g.bytes_d2h, g.queues) for g in s.gpus] == [
        (0, (5000,), int(13.2 * MS), int(12.2 * MS), 12 * MS, 1, 8, 8, 1),
        (1, (5001,), 13 * MS, 11 * MS, 11 * MS, 2, 0, 0, 1)]
    assert s.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert s.gpus[1].busy == pytest.approx(11 / 13)
    # One GPU: no per-GPU part.
    assert summarize(report.trace.on_gpu(0)).gpus == ()


def test_the_summary_says_each_gpu_s_busy_share(two_gpus: ProfilePlan) -> None:
    text = str(ProfileView(collect(two_gpus)))
    head = text.splitlines()[0]
    assert head == ("GPU profile (built-in CUPTI tracer): 2 GPUs, 2 queues, GPU 0 busy 92.4% of "
                    "its 13.200 ms, GPU 1 busy 84.6% of its 13.000 ms"), head
    assert "85.8" not in text  # the GPUs' union over both spans, which says nothing
    rows = text.splitlines()[text.splitlines().index("per GPU:") + 1:][:3]
    assert rows[1].split() == ["GPU", "0", "(NVIDIA", "H100", "80GB", "HBM3)", "92.4%", "13.200",
                               "ms", "12.000", "ms", "1", "8", "B", "8", "B", "1", "pid", "5000"]
    assert rows[2].split()[:3] == ["GPU", "1", "(NVIDIA"] and "84.6%" in rows[2]
    page = ProfileView(collect(two_gpus))._repr_html_()
    assert "<td class='l'>pid 5001</td>" in page and "84.6%" in page


def test_a_gpu_busy_check_reads_the_least_busy_gpu(two_gpus: ProfilePlan) -> None:
    trace = collect(two_gpus).trace
    values = trace_values(trace)
    assert values["gpu_busy"] == pytest.approx(11 / 13) and values["gpus"] == 2.0
    assert values["least_busy_gpu"] == 1.0
    assert values["kernel_ns"] == 23 * MS and values["bytes_moved"] == 16.0  # the run's totals
    gpu_busy = registry.get("gpu_busy")
    assert gpu_busy is not None and gpu_busy.trace is not None
    checked = gpu_busy.trace(CheckSpec(kind="gpu_busy", label="busy", min_share=0.9), values)
    assert checked.status == "fail" and checked.got == "85 %"
    assert checked.reason.startswith("the least busy of the 2 GPUs (GPU 1) is busy 85 % of the run")
    assert gpu_busy.trace(CheckSpec(kind="gpu_busy", label="busy", min_share=0.8), values).status == "pass"

def test_the_timeline_has_one_row_per_gpu(two_gpus: ProfilePlan) -> None:
    trace = collect(two_gpus).trace
    assert trace is not None
    rows = timeline.rows(trace)
    assert [(r.name, r.small) for r in rows] == [("GPU 0", "pid 5000"), ("GPU 1", "pid 5001")]
    assert [len(r.ops) for r in rows] == [3, 2] and rows[0].kinds == ("kernel", "h2d", "d2h")
    one = trace.on_gpu(1)
    assert [r.name for r in timeline.rows(one)] == ["stream 13"]  # one GPU: a row per stream
