"""The rows of `idrrun course check --json`, shown, and two of them compared: the same verdicts
and marks under two toolchains (the Debian 12 image's GCC 12 and the Debian 13 image's GCC 14,
in CI; the host's GCC 12 and a Debian 13 root's GCC 14 on the GPU machine).

    python3 docker/same_rows.py ROWS.json                # the rows, one line each
    python3 docker/same_rows.py A.json B.json [--name-a GCC12 --name-b GCC14]

A row is an exercise and a language: its solution's and its start file's verdict, score and
points (those evaluated and those this machine could not evaluate), each check's status by its
name, and whether the row is right (the solution passes, the start file fails). What a check
printed (`got`) and the times are left out: two compilers may print the last digit of a float
differently or run faster, the same work gets the same mark. Exit 0 when every row is right
and, for two files, the same in both; 1 otherwise, each difference named. Stdlib only: it runs
with the machine's python3, outside the images.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

Row = dict[str, Any]


def _side(row: Row, side: str) -> tuple[Any, ...]:
    """What decides a side's mark: its verdict, score, points, and each check's status."""
    found = row.get(side) or {}
    checks = tuple((c.get("name"), c.get("status")) for c in found.get("checks") or ())
    return (found.get("verdict"), found.get("score"), found.get("points"),
            found.get("not_evaluated"), checks)


def rows(path: Path) -> dict[tuple[str, str], Row]:
    data = json.loads(path.read_text())
    return {(r["exercise"], r["language"]): r for r in data.get("rows", [])}


def _line(key: tuple[str, str], row: Row) -> str:
    def said(side: str) -> str:
        verdict, score, points, missing, _ = _side(row, side)
        mark = f"{score:g}/{points:g}" if isinstance(score, (int, float)) and points else "-"
        return f"{verdict or '?'} {mark}" + (f" ({missing:g} n/a)" if missing else "")
    right = "ok" if row.get("ok") else "WRONG"
    return f"  {key[0]:20s} {key[1]:8s} {right:6s} solution {said('solution'):24s} start {said('start')}"


def differences(a: dict[tuple[str, str], Row], b: dict[tuple[str, str], Row],
                name_a: str, name_b: str) -> list[str]:
    """Each row that differs, and how: missing on one side, another verdict, mark or status."""
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            out.append(f"{key[0]} {key[1]}: only under {name_a if key in a else name_b}")
            continue
        for side in ("solution", "start"):
            mine, theirs = _side(a[key], side), _side(b[key], side)
            if mine[:4] != theirs[:4]:
                out.append(f"{key[0]} {key[1]} {side}: {name_a} {mine[:4]}, {name_b} {theirs[:4]}")
            for (check, s1), (_, s2) in zip(mine[4], theirs[4]):
                if s1 != s2:
                    out.append(f"{key[0]} {key[1]} {side} check {check!r}: {name_a} {s1}, {name_b} {s2}")
            if [c for c, _ in mine[4]] != [c for c, _ in theirs[4]]:
                out.append(f"{key[0]} {key[1]} {side}: the checks differ ({len(mine[4])} against "
                           f"{len(theirs[4])})")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, metavar="ROWS.json")
    p.add_argument("--name-a", default="A")
    p.add_argument("--name-b", default="B")
    args = p.parse_args(argv)
    if len(args.files) > 2:
        p.error("one file to show, two to compare")
    found = [rows(f) for f in args.files]
    for path, table in zip(args.files, found):
        print(f"{path}: {len(table)} rows, {sum(1 for r in table.values() if r.get('ok'))} right")
        for key in sorted(table):
            print(_line(key, table[key]))
    wrong = [f"{path}: {k[0]} {k[1]} is not right" for path, table in zip(args.files, found)
             for k, r in sorted(table.items()) if not r.get("ok")]
    diffs = differences(found[0], found[1], args.name_a, args.name_b) if len(found) == 2 else []
    for line in wrong + diffs:
        print(f"same_rows: {line}", file=sys.stderr)
    if len(found) == 2 and not diffs:
        print(f"same_rows: {len(found[0])} rows, the same verdicts and marks under {args.name_a} "
              f"and {args.name_b}")
    return 1 if wrong or diffs else 0


if __name__ == "__main__":
    sys.exit(main())
