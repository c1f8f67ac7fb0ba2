"""Evidence with a budget (issue 33, part 3): what the grader reads of a box counts against one
allowance per row (run/allowance.py), by apparent size, and past it the row fails, never the
grader. Each hostile submission of benchmarks/evidence_cost.py (a forged trace on a line that
keeps `--profiler builtin`, 1024 sparse regions records, a sparse 16000x16000 picture) is
graded beside an honest classmate, by a grader that reports its own peak memory."""

from __future__ import annotations

import csv
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ROOT
from idrrun.images import image_check
from idrrun.profile import regions, tracefile
from idrrun.run import boundary, isolation
from idrrun.run.allowance import Allowance, Ledger

sys.path.insert(0, str(ROOT / "benchmarks"))
import evidence_cost  # noqa: E402

HAS_CUPTI = Path("/usr/local/cuda/include/cupti.h").is_file()
# The grader's peak memory grading a row, whatever the box writes (issue 33: under 256 MiB);
# an honest row takes about 40 MiB here.
PEAK_BOUND_MIB = 256

KERNEL = ('{"type":"kernel","start":%d,"end":%d,"device":0,"context":1,"stream":13,'
          '"correlation":%d,"grid":[1,1,1],"block":[32,1,1],"name":"k"}\n')


def test_the_ledger_counts_apparent_sizes_files_and_records() -> None:
    ledger = Ledger(Allowance(bytes=1000, records=10, files=3))
    assert ledger.file("a", 600) and ledger.file("b", 400)
    assert ledger.bytes_left == 0 and ledger.refused == ""
    assert not ledger.file("c", 1)
    assert "c: 1 bytes, past the 0 MiB" in ledger.refused
    assert not ledger.file("d", 0)  # once refused, nothing more
    files = Ledger(Allowance(bytes=1 << 30, records=10, files=2))
    assert files.file("a", 0) and files.file("b", 0) and not files.file("c", 0)
    assert files.refused.startswith("more than 2 files of evidence")
    records = Ledger(Allowance(records=10))
    assert records.records("t", 10) and not records.records("t", 1)
    assert "more than the 10 records" in records.refused


def test_a_trace_past_its_records_stops_being_read(tmp_path: Path) -> None:
    """The trace is parsed chunk by chunk as its lines are counted: past the ledger's records
    reading stops (the ledger says why); without a ledger the whole trace is read."""
    path = tmp_path / "trace.jsonl"
    lines = [KERNEL % (1000 + 10 * i, 1005 + 10 * i, i) for i in range(30_000)]
    path.write_text('{"type":"header","format":"idrrun-trace","version":2,"pid":1}\n'
                    + "".join(lines))
    whole = tracefile.read_trace(path)
    assert whole is not None and len(whole.kernels) == 30_000
    ledger = Ledger(Allowance(records=10_000))
    cut = tracefile.read_trace(path, ledger=ledger)
    assert "more than the 10000 records" in ledger.refused
    assert cut is not None and len(cut.kernels) <= 10_000
    roomy = Ledger(Allowance(records=40_000))
    again = tracefile.read_trace(path, ledger=roomy)
    assert roomy.refused == "" and again is not None and again.kernels == whole.kernels


def test_a_line_longer_than_the_longest_read_is_skipped_unread(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(KERNEL % (1000, 1005, 1) + '{"type":"kernel","name":"' + "x" * (3 << 20)
                    + '"}\n' + KERNEL % (2000, 2005, 2))
    trace = tracefile.read_trace(path)
    assert trace is not None and len(trace.kernels) == 2 and trace.skipped == 1


def test_regions_records_count_as_files_and_bytes(tmp_path: Path) -> None:
    """1024 sparse records of 1 MiB each: past the ledger's files, the run's regions are
    unreadable, and every record is removed all the same."""
    counting = regions.Counting(env={}, prefix=".idrrun-regions-x")
    for k in range(40):
        with open(tmp_path / f".idrrun-regions-x.{k}", "wb") as f:
            f.truncate(1 << 20)
    ledger = Ledger(Allowance(files=8))
    ran = regions.collect(counting, tmp_path, ledger=ledger)
    assert ran is not None and ran.state == "unreadable"
    assert "more than 8 files of evidence" in ran.why
    assert not list(tmp_path.iterdir())


def test_a_taken_file_counts_by_its_apparent_size(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    with open(box / "sparse", "wb") as f:
        f.truncate(100 << 20)  # no block used: 100 MiB as it claims
    fd = boundary.open_dir(box)
    try:
        ledger = Ledger(Allowance(bytes=64 << 20))
        why = boundary.take_to(fd, "sparse", tmp_path / "out", 1 << 30, ledger=ledger)
    finally:
        os.close(fd)
    assert "past the 64 MiB of evidence" in why and not (tmp_path / "out").exists()


def test_a_picture_larger_than_the_solutions_is_judged_from_its_header(tmp_path: Path) -> None:
    reference = ROOT / "tests" / "data" / "integrity" / "reference" / "secret_image" / "c-host" / "picture.pgm"
    got = tmp_path / "picture.pgm"
    with open(got, "wb") as f:
        header = b"P5\n16000 16000\n255\n"
        f.write(header)
        f.truncate(len(header) + 16000 * 16000)
    result = image_check(got, reference, "picture", max_diff=0)
    assert result.status == "fail"
    assert "the sizes differ: got 16000×16000 gray, expected 16×12 gray" in result.reason
    assert "pixels were not read" in result.reason
    # the header the solution's size, the file far larger: refused before its pixels too
    with open(got, "wb") as f:
        f.write(b"P5\n16 12\n255\n")
        f.truncate(200 << 20)
    result = image_check(got, reference, "picture", max_diff=0)
    assert result.status == "fail" and "where the header says 16×12 8-bit gray" in result.reason
    # an honest copy of the solution's picture still passes
    shutil.copyfile(reference, got)
    assert image_check(got, reference, "picture", max_diff=0).status == "pass"


@pytest.fixture(scope="module")
def no_bwrap() -> Iterator[str]:
    """A PATH with everything of /usr/bin and /usr/sbin but bubblewrap: the "uid" level."""
    folder = Path(tempfile.mkdtemp(prefix="idrrun-no-bwrap-"))
    os.chmod(folder, 0o755)
    for d in ("/usr/local/bin", "/usr/bin", "/usr/sbin"):
        for entry in os.scandir(d):
            if entry.name != "bwrap" and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry.path)
    yield str(folder)
    shutil.rmtree(folder)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="graded boxes of their own uid need root")
@pytest.mark.parametrize("level", ["namespaces", "uid"])
@pytest.mark.parametrize("hostile,honest", [("trace", "honest"), ("regions", "honest"),
                                            ("picture", "honest_picture")])
def test_hostile_evidence_fails_its_row_and_costs_the_grader_little(
        tmp_path: Path, hostile: str, honest: str, level: str, no_bwrap: str) -> None:
    if hostile == "trace" and not HAS_CUPTI:
        pytest.skip("the built-in tracer needs CUPTI to be planned")
    if level == "namespaces" and isolation.sandbox_support().level != "namespaces":
        pytest.skip("this machine cannot make namespaces (bubblewrap)")
    course = tmp_path / "course"
    shutil.copytree(evidence_cost.COURSE, course)
    subs = evidence_cost.submissions(tmp_path, trace_mib=48, regions=1024)
    exercise = subs[hostile][0]
    rows, peak, _ = evidence_cost.grade(exercise, [subs[honest][1], subs[hostile][1]],
                                        tmp_path, course,
                                        path=no_bwrap if level == "uid" else None)
    assert rows[honest] == ("pass", ""), rows
    verdict, reasons = rows[hostile]
    assert verdict == "fail" and "evidence limit reached" in reasons, rows
    assert 0 < peak < PEAK_BOUND_MIB, f"the grader took {peak:.0f} MiB"
    with open(tmp_path / f"{honest}.csv", newline="") as f:
        assert {row["sandbox"].split()[0] for row in csv.DictReader(f)} == {level}
