#!/usr/bin/env python3
"""Report every run of N words (default 8) that a course text shares with the seed documents.

    python scripts/seed_overlap.py ../shared/seeds notebooks examples docs

The course must be written fresh: its facts may come from the seed documents, never their
sentences or code. Words are compared lower-cased, punctuation and markup dropped; notebooks are
read cell by cell, their text cells only unless --code is given. Exit status 1 when a shared run is found.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

WORD = re.compile(r"[A-Za-z0-9_]+")
TEXT_SUFFIXES = {".md", ".txt", ".ipynb"}
CODE_SUFFIXES = {".c", ".h", ".f90", ".F90", ".toml", ".py"}
CODE = False  # --code: code cells and source files too (loop headers match by nature)


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def text_of(path: Path) -> str:
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(raw).get("cells", [])
        except ValueError:
            return raw
        parts = []
        for cell in cells:
            if cell.get("cell_type") != "markdown" and not CODE:
                continue
            src = cell.get("source", "")
            parts.append("".join(src) if isinstance(src, list) else str(src))
        return "\n".join(parts)
    return raw


def main(argv: list[str]) -> int:
    global CODE
    n = 8
    if argv and argv[0] == "--code":
        CODE, argv = True, argv[1:]
        TEXT_SUFFIXES.update(CODE_SUFFIXES)
    if argv and argv[0].startswith("-n"):
        n, argv = int(argv[0][2:] or argv[1]), argv[1:] if argv[0][2:] else argv[2:]
    if len(argv) < 2:
        print(__doc__)
        return 2
    seeds = Path(argv[0])
    grams: set[tuple[str, ...]] = set()
    for seed in sorted(seeds.glob("*")):
        if seed.is_file() and seed.name != "README.md":
            w = words(seed.read_text(encoding="utf-8", errors="replace"))
            grams.update(tuple(w[i:i + n]) for i in range(len(w) - n + 1))
    found = 0
    for root in map(Path, argv[1:]):
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in TEXT_SUFFIXES)
        for path in files:
            w = words(text_of(path))
            for i in range(len(w) - n + 1):
                if tuple(w[i:i + n]) in grams:
                    print(f"{path}: {' '.join(w[i:i + n])}")
                    found += 1
    print(f"{found} shared {n}-word runs")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
