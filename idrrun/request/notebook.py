"""`%%idrrun` cells as a notebook holds them: the one reader of the magic line outside IPython,
and the one writer of the course's notebooks.

The magic, `idrrun grade` (notebook submissions) and `idrrun course` all split a cell here and
parse its flags with options.parse_line, so a notebook's flags mean the same everywhere.
`idrrun course init` and `course strip` write notebooks here, in the form JupyterLab 4 saves.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

MAGIC = "%%idrrun"

# What JupyterLab 4 and Notebook 7 write into a notebook's metadata as soon as an IPython kernel
# has started (NotebookPanel sets `kernelspec` from the kernel's spec and `language_info` from
# its kernel_info reply): ipykernel's own spec, and its IPythonKernel.language_info, whose
# version is the kernel's Python. A notebook holding anything else opens as modified.
# tests/test_notebook_form.py compares these with ipykernel's and with what JupyterLab saves.
KERNELSPEC: dict[str, str] = {"display_name": "Python 3 (ipykernel)", "language": "python",
                              "name": "python3"}
_LANGUAGE_INFO: dict[str, Any] = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}
NBFORMAT_MINOR = 5  # JupyterLab 4 saves format 4.5: every cell has an id


def python_version() -> str:
    """The Python version an IPython kernel of this environment reports (ipykernel's words)."""
    return sys.version.split()[0]


def language_info(version: str) -> dict[str, Any]:
    """The language_info of an IPython kernel that runs Python `version`."""
    return {**_LANGUAGE_INFO, "codemirror_mode": dict(_LANGUAGE_INFO["codemirror_mode"]),
            "version": version}


@dataclass(frozen=True)
class MagicCell:
    index: int  # position among the notebook's cells
    line: str  # what follows %%idrrun on the first line: the flags
    body: str  # the code, from the second line on
    tags: tuple[str, ...]


def split_cell(text: str) -> tuple[str, str] | None:
    """(flags, body) when the cell starts with %%idrrun, else None."""
    first, _, body = text.partition("\n")
    stripped = first.strip()
    if stripped != MAGIC and not stripped.startswith(MAGIC + " ") and not stripped.startswith(MAGIC + "\t"):
        return None
    return stripped[len(MAGIC):].strip(), body


def cell_source(cell: Any) -> str:
    """A cell's source as one string (nbformat allows a string or a list of strings)."""
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


def read(path: Path) -> dict[str, Any]:
    """The notebook in the file `path` (parse)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path.name}: not a readable notebook ({exc.strerror})") from None
    return parse(raw, path.name)


def parse(raw: bytes, name: str) -> dict[str, Any]:
    """A notebook as its JSON, in nbformat 4 (older ones converted); UsageError with the reason
    when it is not one. A notebook that does not follow the schema is still read (a student's
    notebook edited by hand): what idrrun needs of it, the cells, is checked here.

    Format 4 files are read as the JSON they are: importing nbformat costs 2.4 s on a machine
    where JupyterLab is installed (its jsonschema loads rfc3987-syntax, which builds 38 Lark
    grammars), more than grading a few submissions. nbformat, imported then, converts the rare
    older file."""
    try:
        data = json.loads(raw.decode("utf-8"))
        if isinstance(data, dict) and data.get("nbformat") != 4 and "worksheets" in data:
            import nbformat  # pylint: disable=import-outside-toplevel
            data = nbformat.reads(json.dumps(data), as_version=4,  # type: ignore[no-untyped-call]
                                  capture_validation_error={})
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # A student's file: reading raises what json and nbformat's parts raise on bad input
        # (ValueError, UnicodeDecodeError, RecursionError, KeyError...), and any of them means
        # the same thing here.
        raise UsageError(f"{name}: not a readable notebook ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise UsageError(f"{name}: not a notebook (no list of cells)")
    return dict(data)


def as_jupyterlab_saves(data: dict[str, Any], version: str) -> dict[str, Any]:
    """The notebook with the metadata JupyterLab 4 gives it once a Python kernel of `version`
    has started, so that it opens unmodified there; in place, and returned. A notebook for
    another kernel (its kernelspec names another) keeps its own."""
    metadata = data.setdefault("metadata", {})
    spec = metadata.get("kernelspec")
    if isinstance(spec, dict) and spec.get("name", KERNELSPEC["name"]) != KERNELSPEC["name"]:
        return data
    metadata["kernelspec"] = dict(KERNELSPEC)
    metadata["language_info"] = language_info(version)
    return data


def dumps(data: dict[str, Any]) -> str:
    """A notebook's text as nbformat and Jupyter's server write it: sorted keys, a one-space
    indent, UTF-8 as it is, a final newline."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write(data: dict[str, Any], dest: Path, version: str | None = None) -> None:
    """Write the notebook to `dest` in the form JupyterLab 4 saves for a kernel of Python
    `version` (this Python's by default: the kernel a copy made here will run)."""
    as_jupyterlab_saves(data, version or python_version())
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(dumps(data), encoding="utf-8")


def magic_cells(data: dict[str, Any]) -> list[MagicCell]:
    found = []
    for i, cell in enumerate(data.get("cells", [])):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        split = split_cell(cell_source(cell))
        if split is None:
            continue
        tags = cell.get("metadata", {}).get("tags", []) if isinstance(cell.get("metadata"), dict) else []
        found.append(MagicCell(i, split[0], split[1],
                               tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()))
    return found


# A cell a students' copy leaves out (course init --students, classroom release).
SOLUTION_TAG = "solution"


def strip_solution_cells(nb: dict[str, Any]) -> int:
    """Remove the cells tagged "solution" and every code cell's outputs, in place; returns how
    many cells were removed."""
    cells = [c for c in nb.get("cells", []) if isinstance(c, dict)]
    kept = [c for c in cells if not is_solution(c)]
    for cell in kept:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["cells"] = kept
    return len(cells) - len(kept)


def is_solution(cell: Any) -> bool:
    """A cell a students' copy leaves out (strip_solution_cells): one tagged "solution"."""
    return isinstance(cell, dict) and SOLUTION_TAG in tags(cell)


def tags(cell: dict[str, Any]) -> list[Any]:
    metadata = cell.get("metadata")
    found = metadata.get("tags") if isinstance(metadata, dict) else None
    return found if isinstance(found, list) else []
