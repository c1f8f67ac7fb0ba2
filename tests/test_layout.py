"""The package's shape: no import circles, imports at the top of modules (but for the optional,
heavy ones named here), every package folder says what it owns, and family names decide
behaviour only in their own modules."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "idrrun"
# Imported where used on purpose: IPython only inside IPython (not for `idrrun --version`),
# Pillow only when a picture is drawn or compared (the timeline, the image check kind), nbformat
# only to convert a notebook older than format 4 (its import costs seconds: request/notebook.py).
ALLOWED_LATE_IMPORTS = {("idrrun/__init__.py", "magic"), ("idrrun/profile/timeline.py", "PIL"),
                        ("idrrun/checks/kinds.py", "images"), ("idrrun/request/notebook.py", "nbformat")}


def test_no_import_cycle_and_imports_at_the_top() -> None:
    # pylint's cyclic-import (R0401) follows every import of the package, and
    # import-outside-toplevel (C0415) finds imports inside functions.
    r = subprocess.run([sys.executable, "-m", "pylint", "--disable=all",
                        "--enable=cyclic-import,import-outside-toplevel",
                        "--output-format=parseable", "--score=n", "idrrun"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "R0401" not in r.stdout, r.stdout
    late = re.findall(r"^(idrrun/\S+?):\d+: \[C0415\S*\] Import outside toplevel \((\S+?)[.,) ]",
                      r.stdout, re.MULTILINE)
    assert set(late) <= ALLOWED_LATE_IMPORTS, r.stdout


def test_every_package_folder_says_what_it_owns() -> None:
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, f"{init.relative_to(ROOT)} needs a docstring"


def test_family_names_decide_nothing_outside_their_modules() -> None:
    # A family is one module: no other module compares with "gcc" / "nvhpc" / "pgi".
    family_modules = {"gcc.py", "nvhpc.py", "registry.py"}
    pattern = re.compile(r"""(==|!=|\bin\b|\bis\b)\s*\(?\s*["'](gcc|nvhpc|pgi)["']|["'](gcc|nvhpc|pgi)["']\s*(==|!=)""")
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "toolchains" and path.name in family_modules:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
