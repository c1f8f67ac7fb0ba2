"""The course's notebooks are kept in the form JupyterLab 4 saves, so that they open unmodified:
the metadata an IPython kernel gives them (kernelspec, language_info), format 4.5 with cell ids,
sorted keys, a one-space indent, a final newline. `idrrun course init` and `course strip` write
that form, with the Python of the environment they run in (the kernel's version is part of it).

tests/test_labextension.py opens a students' copy in JupyterLab and finds it unmodified; this
file holds every notebook of the checkout and of the copies to the same form without a browser.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ROOT
from idrrun.authoring import copies
from idrrun.request import notebook

NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
VERSION = re.compile(r"^3\.\d+\.\d+\S*$")


def form_problems(path: Path, version: str | None = None) -> list[str]:
    """How the notebook file differs from what JupyterLab 4 saves (none: it opens unmodified);
    version: the kernel's Python it must name (None: any Python 3)."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    problems = []
    if text != notebook.dumps(nb):
        problems.append("not written as Jupyter writes it (sorted keys, indent 1, UTF-8, final "
                        "newline)")
    if (nb.get("nbformat"), nb.get("nbformat_minor")) != (4, notebook.NBFORMAT_MINOR):
        problems.append(f"format {nb.get('nbformat')}.{nb.get('nbformat_minor')}, not 4.5")
    ids = [cell.get("id") for cell in nb["cells"]]
    if None in ids or len(set(ids)) != len(ids):
        problems.append("a cell without an id, or two with the same")
    metadata = nb.get("metadata", {})
    if metadata.get("kernelspec") != notebook.KERNELSPEC:
        problems.append(f"kernelspec {metadata.get('kernelspec')}")
    info = metadata.get("language_info", {})
    saved = str(info.get("version", ""))
    if info != notebook.language_info(saved) or not VERSION.match(saved):
        problems.append(f"language_info {info}")
    elif version is not None and saved != version:
        problems.append(f"language_info names Python {saved}, this kernel runs {version}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(ROOT)) for p in NOTEBOOKS])
def test_course_notebook_is_as_jupyterlab_saves_it(path: Path) -> None:
    assert form_problems(path) == [], (
        f"{path.relative_to(ROOT)}: open it in JupyterLab 4 and save it, or rewrite it with "
        "idrrun.request.notebook.write(notebook.read(path), path)")


def test_the_form_is_what_ipykernel_reports() -> None:
    """The metadata JupyterLab copies from the kernel: ipykernel's own spec and language_info."""
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    spec = get_kernel_dict()
    assert notebook.KERNELSPEC == {"name": KERNEL_NAME, "display_name": spec["display_name"],
                                   "language": spec["language"]}
    assert notebook.language_info(notebook.python_version()) == IPythonKernel.language_info


def test_course_strip_writes_the_form_for_this_python(tmp_path: Path) -> None:
    source = ROOT / "notebooks" / "C" / "01_intro.ipynb"
    stale = json.loads(source.read_text(encoding="utf-8"))
    stale["metadata"] = {"kernelspec": {"display_name": "Python 3", "language": "python",
                                        "name": "python3"}, "language_info": {"name": "python"}}
    (tmp_path / "old.ipynb").write_text(json.dumps(stale, indent=2), encoding="utf-8")
    removed = copies.strip_solutions(tmp_path / "old.ipynb", tmp_path / "out" / "new.ipynb")
    assert removed > 0
    assert form_problems(tmp_path / "out" / "new.ipynb", notebook.python_version()) == []


def test_a_notebook_of_another_kernel_keeps_its_metadata(tmp_path: Path) -> None:
    metadata = {"kernelspec": {"display_name": "C++17", "language": "C++17", "name": "xcpp17"},
                "language_info": {"name": "c++", "version": "17"}}
    nb = {"cells": [], "metadata": json.loads(json.dumps(metadata)), "nbformat": 4,
          "nbformat_minor": 5}
    notebook.write(nb, tmp_path / "cpp.ipynb")
    assert json.loads((tmp_path / "cpp.ipynb").read_text())["metadata"] == metadata
