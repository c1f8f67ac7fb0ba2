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


# (-gno-as-loc-support: gcc writes the line program itself, with DW_LNE_set_address for each
# row; -gdwarf64 then gives 64-bit DWARF, 64-bit offsets and lengths.)
@pytest.mark.parametrize("flags", [("-g1",), ("-g1", "-gdwarf-4"), ("-g1", "-gdwarf-3"),
                                   ("-g1", "-gz=zlib"), ("-g",), ("-g1", "-no-pie"),
                                   ("-g1", "-gno-as-loc-support"),
                                   ("-g1", "-gdwarf64", "-gno-as-loc-support")])
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


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def test_every_opcode_of_a_line_program() -> None:
    """A DWARF 4 line program written by hand with the opcodes gcc and gas rarely emit
    (const_add_pc, fixed_advance_pc, set_file, an extended opcode not read, operands skipped by
    their declared count); a file index past the table gives no file."""
    lengths = bytes([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])
    files = b"a.c\0\0\0\0" + b"b.h\0\0\0\0" + b"\0"
    header = bytes([1, 1, 1, (-5) & 0xFF, 14, 13]) + lengths + b"\0" + files
    program = b"".join([
        b"\0\x09\x02" + (0x1000).to_bytes(8, "little"),  # set_address
        b"\x01",  # copy: 0x1000 a.c:1
        b"\x03" + _sleb(9), b"\x02" + _uleb(4), b"\x01",  # 0x1004 a.c:10
        b"\x04" + _uleb(2),  # set_file b.h
        b"\x08",  # const_add_pc: (255 - 13) // 14 = 17 -> 0x1015, no row
        bytes([(1 + 5) + 14 * 2 + 13]),  # special: address +2, line +1 -> 0x1017 b.h:11
        b"\x09" + (0x10).to_bytes(2, "little"),  # fixed_advance_pc -> 0x1027
        b"\x05" + _uleb(7), b"\x06",  # set_column, negate_stmt
        b"\x03" + _sleb(-8),  # line 3
        b"\0\x02\x04\x05",  # set_discriminator: not read
        b"\x01",  # 0x1027 b.h:3
        b"\x02" + _uleb(2), b"\0\x01\x01",  # end_sequence at 0x1029
        b"\0\x09\x02" + (0x2000).to_bytes(8, "little"), b"\x04" + _uleb(9), b"\x01",
        b"\x02" + _uleb(4), b"\0\x01\x01",
    ])
    after_length = (4).to_bytes(2, "little") + len(header).to_bytes(4, "little") + header + program
    section = len(after_length).to_bytes(4, "little") + after_length
    wanted = [0x0FFF, 0x1000, 0x1003, 0x1004, 0x1016, 0x1017, 0x1028, 0x1029, 0x2001]
    assert elflines._lines({".debug_line": section}, wanted) == {
        0x1000: ("a.c", 1), 0x1003: ("a.c", 1), 0x1004: ("a.c", 10), 0x1016: ("a.c", 10),
        0x1017: ("b.h", 11), 0x1028: ("b.h", 3), 0x2001: ("", 1)}
