"""A spec's fields read one by one: each TOML value checked for its type and its range, and a
SpecError that names the file, the line of the field (FILE:LINE:, as compilers do) and the field.
checks/specs.py assembles them into an Exercise.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..errors import SpecError, did_you_mean
from . import regex

from .spec_values import CheckSpec, Visibility





VISIBILITIES: tuple[Visibility, ...] = ("shown", "summary", "hidden")


def spec_error(path: Path, where: str, message: str) -> SpecError:
    """A SpecError naming the file, the line of the field where it can be found (as compilers
    do: FILE:LINE:, which editors follow), and the field."""
    try:
        line = field_line(path.read_text(encoding="utf-8"), where)
    except (OSError, UnicodeDecodeError):
        line = None
    return SpecError(f"{path}:{line}: field '{where}': {message}" if line is not None else
                     f"{path}: field '{where}': {message}")


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\s\"']+?)\s*\]\]?\s*(#.*)?$")


_KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")


def _parts(name: str) -> list[str]:
    return [part.strip().strip("\"'") for part in name.split(".")]


def field_line(text: str, where: str) -> int | None:
    """The line (1-based) of a spec's field as SpecErrors name it (`check[2].points`,
    `args.draw.ranges[1]`, `sources.c.solution`), or of the closest table or key above it that
    the text has (a missing field: its table); None when nothing matches."""
    target: list[str | int] = []
    for name, index in re.findall(r"([A-Za-z0-9_\-]+)(?:\[(\d+)\])?", where):
        target.append(name)
        if index:
            target.append(int(index))
    places: list[tuple[list[str | int], int]] = []
    table: list[str | int] = []
    arrays: dict[tuple[str | int, ...], int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header is not None:
            table = list(_parts(header.group(2)))
            if header.group(1) == "[[":
                key = tuple(table)
                arrays[key] = arrays.get(key, -1) + 1
                table.append(arrays[key])
            places.append((table, number))
            continue
        key_match = _KEY.match(line)
        if key_match is not None:
            places.append(([*table, *_parts(key_match.group(1))], number))
    while target:
        for path, number in places:
            if path == target:
                return number
        target.pop()
    return None


def read_string(data: Mapping[str, Any], key: str, path: Path, where: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or (default is None and not value):
        raise spec_error(path, where, f"expected a string, got {value!r}")
    return value


def read_number(data: Mapping[str, Any], key: str, path: Path, where: str, default: float | None) -> float | None:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise spec_error(path, where, f"expected a number, got {value!r}")
    return float(value)


def read_args(value: Any, path: Path, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise spec_error(path, where, f"expected a list of arguments, got {value!r}")
    return tuple(str(v) for v in value)


def read_regex(value: str, path: Path, where: str) -> str:
    try:
        regex.compile(value)
    except regex.PatternError as exc:
        raise spec_error(path, where, f"not a valid regular expression (RE2 syntax: no backreferences "
                                f"nor lookarounds): {exc}") from None
    return value


@dataclass(frozen=True)
class Table:
    """A table of a spec being read, and where it is, for the error messages."""

    raw: Mapping[str, Any]
    path: Path
    where: str

    def err(self, field: str, message: str) -> SpecError:
        return spec_error(self.path, f"{self.where}.{field}" if field else self.where, message)

    def string(self, key: str) -> str:
        return read_string(self.raw, key, self.path, f"{self.where}.{key}")

    def number(self, key: str, default: float | None = None) -> float | None:
        return read_number(self.raw, key, self.path, f"{self.where}.{key}", default)

    def pattern(self, key: str, group: str = "") -> str:
        """A regular expression; group: what its group ( ) must capture, when it needs one."""
        value = read_regex(self.string(key), self.path, f"{self.where}.{key}")
        if group and regex.groups(value) < 1:
            raise self.err(key, f"needs a group ( ) around the {group}")
        return value


def read_points(t: Table, key: str, default: float | None) -> float | None:
    value = t.number(key, default)
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise t.err(key, f"expected a number of points ≥ 0, got {t.raw.get(key)!r}")
    return value


def read_visibility(raw: Mapping[str, Any], path: Path, where: str) -> Visibility | None:
    value = raw.get("visibility")
    if value is not None and value not in VISIBILITIES:
        raise spec_error(path, where, f"expected one of {', '.join(VISIBILITIES)}, got {value!r}")
    return cast("Visibility | None", value)


def read_model(data: Mapping[str, Any], path: Path) -> str:
    model = data.get("model", "openacc")
    if model not in ("openacc", "openmp"):
        raise spec_error(path, "model", f"expected openacc or openmp, got {model!r}")
    return str(model)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such exercise spec") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None


def read_flag(data: Mapping[str, Any], key: str, path: Path) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise spec_error(path, key, f"expected true or false, got {value!r}")
    return value


def read_options(data: Mapping[str, Any], path: Path) -> tuple[str, ...]:
    options = data.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise spec_error(path, "options", "expected a list of compiler flags")
    return tuple(options)


def read_ranks(data: Mapping[str, Any], path: Path) -> int | None:
    ranks = data.get("ranks")
    if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1):
        raise spec_error(path, "ranks", f"expected a number of MPI ranks >= 1, got {ranks!r}")
    return ranks


def read_data_files(data: Mapping[str, Any], path: Path) -> tuple[Path, ...]:
    files = data.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise spec_error(path, "files", "expected a list of data files (relative to the spec)")
    for f in files:
        if not (path.parent / f).is_file():
            raise spec_error(path, "files", f"no such file {f} (relative to {path.parent})")
    return tuple(path.parent / f for f in files)


def read_source_file(pair: Mapping[str, Any], role: str, path: Path, where: str) -> Path:
    rel = read_string(pair, role, path, f"{where}.{role}")
    file = path.parent / rel
    if not file.is_file():
        raise spec_error(path, f"{where}.{role}", f"no such file {rel} (relative to {path.parent})")
    return file


def read_arg_table(data: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise spec_error(path, "args", "expected a table with 'host' and 'gpu' lists")
    unknown = sorted(set(args) - {"host", "gpu", "hidden", "draw", "start"})
    if unknown:
        raise spec_error(path, f"args.{unknown[0]}", "unknown field (known: host, gpu, hidden, draw, start)")
    return args


def read_start_args(args: Mapping[str, Any], path: Path) -> str | tuple[str, ...]:
    start = args.get("start", "host")
    if isinstance(start, list) and all(isinstance(a, (str, int, float)) for a in start):
        return tuple(str(a) for a in start)
    if start not in ("host", "gpu"):
        raise spec_error(path, "args.start", f"expected \"host\", \"gpu\" or a list of arguments (those "
                                       f"the course check runs the start file with), got {start!r}")
    return str(start)


def read_hidden_args(args: Mapping[str, Any], path: Path) -> tuple[tuple[str, ...], ...]:
    hidden = args.get("hidden", [])
    if not isinstance(hidden, list) or not all(isinstance(h, list) for h in hidden):
        raise spec_error(path, "args.hidden", "expected a list of argument lists, e.g. [[\"317\"], [\"50\"]]")
    return tuple(read_args(h, path, f"args.hidden[{i}]") for i, h in enumerate(hidden))


def read_counts_when(raw: Mapping[str, Any], check: CheckSpec, checks: Sequence[CheckSpec],
                     path: Path, key: str = "counts_when") -> tuple[int, ...]:
    """counts_when = [labels] (or counts_in_part): the checks this one's points wait for, by
    their labels."""
    where = f"check[{check.index}].{key}"
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise spec_error(path, where, f"expected a list of check labels, got {value!r}")
    out: list[int] = []
    for label in value:
        found = [c.index for c in checks if c.label == label]
        if not found:
            known = ", ".join(repr(c.label) for c in checks if c is not check)
            raise spec_error(path, where, f"no check is labelled {label!r}{did_you_mean(label, [c.label for c in checks])}"
                                    f" (labels: {known}): its points would wait for a check that never runs")
        if len(found) > 1:
            raise spec_error(path, where, f"{len(found)} checks are labelled {label!r}: give them "
                                    "labels of their own (label = ...)")
        if found[0] == check.index:
            raise spec_error(path, where, f"a check cannot wait for itself ({label!r})")
        out.append(found[0])
    return tuple(dict.fromkeys(out))


def check_no_cycle(needs: Mapping[int, tuple[int, ...]], checks: Sequence[CheckSpec], path: Path) -> None:
    """No check waits, through others, for itself: its points could never count."""
    def reaches(start: int, index: int, seen: frozenset[int]) -> bool:
        return any(d == start or (d not in seen and reaches(start, d, seen | {d}))
                   for d in needs[index])

    for c in checks:
        if reaches(c.index, c.index, frozenset()):
            raise spec_error(path, f"check[{c.index}].counts_when",
                       f"{c.label!r} waits, through the checks it counts on, for itself: its "
                       "points could never count")
