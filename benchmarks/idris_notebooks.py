"""The IDRIS course's own notebooks, run unchanged through idrrun (issue 50).

    python3 benchmarks/idris_notebooks.py CHECKOUT [--only C|Fortran] [--timeout S] [--json FILE]

CHECKOUT: a checkout of idriscnrs/GPU_directive_training (its C/ and Fortran/ notebooks and
examples/). Every notebook is executed in a real kernel (nbclient, the kernel of this Python),
in its own folder as the course runs it, with `%load_ext idrrun` as its first cell in place of
IDRIS's startup file; its other cells are its own, unchanged. The checkout's `idrcomp` is on the
kernel's path for its picture helpers (show_gray, compare_rgb), never for its magic. A cell of
`%%idrrun`/`%idrrunfile` passes when it raises nothing; each failure is printed with the first
line of its error, so that what fails for idrrun's reasons can be told from what fails for the
machine's (no GPU, no nvc, no MPI launcher of the course's kind).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

MAGIC = ("%%idrrun", "%idrrunfile")


def _first_error(cell: nbformat.NotebookNode) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename')}: {str(out.get('evalue', '')).splitlines()[0][:160] if out.get('evalue') else ''}"
    return ""


def _text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "".join(parts)


def run_notebook(path: Path, timeout: int, idrcomp: Path) -> list[dict[str, object]]:
    nb = nbformat.read(path, as_version=4)
    setup = nbformat.v4.new_code_cell(
        f"import sys; sys.path.insert(0, {str(idrcomp)!r})\n%load_ext idrrun")
    nb.cells.insert(0, setup)
    client = NotebookClient(nb, timeout=timeout, allow_errors=True, interrupt_on_timeout=True,
                            kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.monotonic()
    try:
        client.execute()
    except Exception as exc:  # a dead kernel or a timeout ends the notebook, not the benchmark
        print(f"  {path.name}: stopped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
    rows: list[dict[str, object]] = []
    for index, cell in enumerate(nb.cells[1:], start=1):
        source = "".join(cell.source) if isinstance(cell.source, list) else cell.source
        if cell.cell_type != "code" or not source.lstrip().startswith(MAGIC):
            continue
        ran = "execution_count" in cell and cell.execution_count is not None
        error = _first_error(cell) if ran else "not run (the notebook stopped before it)"
        rows.append({"notebook": str(path), "cell": index, "line": source.splitlines()[0],
                     "passed": ran and not error, "error": error, "output": _text(cell)[-1500:]})
    print(f"  {path.name}: {sum(bool(r['passed']) for r in rows)}/{len(rows)} "
          f"in {time.monotonic() - started:.0f} s")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--only", choices=("C", "Fortran"))
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for language in (args.only,) if args.only else ("C", "Fortran"):
        for path in sorted((args.checkout / language).glob("*/*.ipynb")):
            rows.extend(run_notebook(path, args.timeout, args.checkout / "idrcomp"))
    for row in rows:
        if not row["passed"]:
            print(f"FAIL {Path(str(row['notebook'])).relative_to(args.checkout)} cell {row['cell']}: "
                  f"{row['line']}\n     {row['error']}")
    passed = sum(bool(r["passed"]) for r in rows)
    print(f"{passed} of {len(rows)} cells passed")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
