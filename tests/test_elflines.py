"""profile/elflines: functions and lines of real gcc executables, as binutils' addr2line gives
them (the oracle here), in every DWARF version and compression gcc writes; crafted files give
fewer answers, never an exception."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from idrrun.profile import elflines
from idrrun.profile.elflines import Place, locate

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("addr2line") is None,
                                reason="needs gcc and addr2line")

SOURCE = """\
#include <stdio.h>
__attribute__((noinline)) static int triple(int x)
{
    return 3 * x;
}
__attribute__((noinline)) static double half(double x)
{
    return x / 2;
}
int main(int argc, char **argv)
{
    int t = triple(argc);
    printf("%d\\n", t);
    printf("%f\\n", half(t));
    return 0;
}
"""


def build(tmp_path: Path, *flags: str) -> Path:
    (tmp_path / "prog.c").write_text(SOURCE)
    subprocess.run(["gcc", "-O2", *flags, "-o", "prog", "prog.c"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    return tmp_path / "prog"


def functions(exe: Path) -> dict[str, tuple[int, int]]:
    """name -> (start, size) from nm."""
    out = subprocess.run(["nm", "-S", "--defined-only", str(exe)], capture_output=True,
                         text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT":
            found[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return found


def addr2line(exe: Path, addresses: list[int]) -> list[tuple[str, int | None]]:
    out = subprocess.run(["addr2line", "-e", str(exe), *(hex(a) for a in addresses)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    answers: list[tuple[str, int | None]] = []
    for line in out:
        file, _, number = line.rpartition(":")
        number = number.split()[0]
        answers.append((Path(file).name, int(number) if number.isdigit() and number != "0" else None))
    return answers


@pytest.mark.parametrize("flags", [("-g1",), ("-g1", "-gdwarf-4"), ("-g1", "-gdwarf-3"),
                                   ("-g1", "-gz=zlib"), ("-g",), ("-g1", "-no-pie")])
def test_lines_and_functions_agree_with_addr2line(tmp_path: Path, flags: tuple[str, ...]) -> None:
    exe = build(tmp_path, *flags)
    spans = {name: span for name, span in functions(exe).items()
             if name in ("main", "triple", "half")}
    assert set(spans) == {"main", "triple", "half"}
    addresses = [start + k for start, size in spans.values() for k in range(0, size, 3)]
    places = locate(exe, addresses)
    want = addr2line(exe, addresses)
    for address, (file, line) in zip(addresses, want):
        got = places[address]
        assert (Path(got.file).name if got.line else "", got.line) == \
            ((file, line) if line else ("", None)), hex(address)
    for name, (start, size) in spans.items():
        assert {places[a].function for a in addresses if start <= a < start + size} == {name}
    assert any(p.line == 12 for p in places.values())  # the call of triple in main


def test_without_line_tables_functions_only(tmp_path: Path) -> None:
    exe = build(tmp_path)
    start, _ = functions(exe)["main"]
    assert locate(exe, [start + 1]) == {start + 1: Place("main", "", None)}


def test_unreadable_or_foreign_files_give_no_answer(tmp_path: Path) -> None:
    assert locate(tmp_path / "missing", [1]) == {}
    (tmp_path / "text").write_text("not an executable\n")
    assert locate(tmp_path / "text", [1]) == {}
    assert locate(tmp_path / "text", []) == {}


def test_mutated_executables_never_raise(tmp_path: Path) -> None:
    exe = build(tmp_path, "-g1")
    data = bytearray(exe.read_bytes())
    start, size = functions(exe)["main"]
    addresses = list(range(start, start + size, 5))
    out = subprocess.run(["readelf", "-S", "-W", str(exe)], capture_output=True, text=True,
                         check=True).stdout
    fields = next(line for line in out.splitlines() if " .debug_line " in line).split()
    at = fields.index(".debug_line")
    line_table = range(int(fields[at + 3], 16), int(fields[at + 3], 16) + int(fields[at + 4], 16))
    rng = random.Random(7)
    mutant = tmp_path / "mutant"
    for _ in range(300):
        copy = bytearray(data)
        where = line_table if rng.random() < 0.7 else range(len(copy))  # mostly the line table
        for _ in range(rng.choice((1, 8, 64))):
            copy[rng.choice(where)] = rng.randrange(256)
        if rng.random() < 0.2:
            del copy[rng.randrange(len(copy)):]
        mutant.write_bytes(bytes(copy))
        places = locate(mutant, addresses)
        assert all(isinstance(p, Place) for p in places.values())


def test_work_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = build(tmp_path, "-g1")
    start, _ = functions(exe)["main"]
    monkeypatch.setattr(elflines, "MAX_ROWS", 3)
    assert locate(exe, [start + 1])[start + 1].line is None  # gave up on the line table
    monkeypatch.setattr(elflines, "MAX_FILE", 100)
    assert locate(exe, [start + 1]) == {}
