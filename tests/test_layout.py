"""The package's shape: no import circles, imports at the top of modules (but for the optional,
heavy or lazy ones named here), layers that only import downwards, every package folder says
what it owns, family names decide behaviour only in their own modules, and no function above
the complexity the code allows itself.

Each rule reads its tool's real output and checks the tool's own exit status: a pattern that
never matches checks nothing (STYLE.md 20). Each was seen failing once on a scratch change (a
late import of argparse in build.py, an import of grading from run/proc.py, a function of
complexity 21): see the tests at the end, which make such changes in a copy of the package.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "idrrun"
# Imported where used on purpose, (module, what):
# - IPython only inside IPython (not for `idrrun --version`);
# - argparse and the resident caller only once `idrrun run` needs them: the caller must start in
#   a millisecond (resident.py), and `idrrun --version` in 40 ms;
# - subprocess only when a resident server must be started;
# - the server's warm-up imports what a run will import, once for all its workers (server.py);
# - Pillow only when a picture is drawn or compared (the timeline, the image check kind).
ALLOWED_LATE_IMPORTS = {
    ("idrrun/__init__.py", "magic"),
    ("idrrun/cli.py", "argparse"), ("idrrun/cli.py", ".resident"),
    ("idrrun/resident.py", "subprocess"),
    ("idrrun/server.py", "cli"), ("idrrun/server.py", "commands"), ("idrrun/server.py", "request"),
    ("idrrun/server.py", "toolchains"), ("idrrun/server.py", "PIL"), ("idrrun/server.py", "profile"),
    ("idrrun/profile/timeline.py", "PIL"),
    ("idrrun/checks/kinds.py", "images"),
    ("idrrun/magic.py", ".images"),  # what became of a failed cell's pictures (--get)
    # difflib, for "did you mean": only a typo pays for it (the front ends import errors.py)
    ("idrrun/errors.py", "difflib"),
}

# The rooms of the package, bottom first: a module may import from its own layer and the ones
# below it, never from above (docs/architecture.md draws the same picture).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"model", "errors", "version", "files", "escape"}),  # values, stdlib only
    frozenset({"run"}),                                    # processes, boxes, the boundary
    frozenset({"profile", "images", "toolchains"}),        # what runs know and draw
    frozenset({"checks", "annotate"}),                     # specs, check kinds, the annotated source (pure)
    frozenset({"request"}),                                # options, settings, the resolver
    frozenset({"build"}),
    frozenset({"pipeline"}),
    frozenset({"checking"}),                               # a run checked against its exercise
    frozenset({"grading"}),                                # a class
    frozenset({"display", "doctor", "highlight", "resident"}),  # what the front ends use
    frozenset({"magic", "commands", "cli", "server", "__main__", "__init__"}),
)


def pylint(package: Path, *checks: str) -> tuple[int, list[dict[str, str]]]:
    """pylint's exit status and messages (its JSON output), on `package`."""
    r = subprocess.run([sys.executable, "-m", "pylint", "--disable=all",
                        f"--enable={','.join(checks)}", "--output-format=json", "--score=n",
                        package.name], cwd=package.parent, capture_output=True, text=True,
                       timeout=300)
    messages = json.loads(r.stdout or "[]")
    assert r.returncode == 0 or messages, f"pylint failed without a message: {r.stderr}"
    return r.returncode, messages


def late_imports(package: Path) -> tuple[set[tuple[str, str]], list[dict[str, str]]]:
    """((module path, first word of what it imports late), the messages of any cycle)."""
    status, messages = pylint(package, "cyclic-import", "import-outside-toplevel")
    late = set()
    for m in messages:
        if m["message-id"] == "C0415":
            what = re.fullmatch(r"Import outside toplevel \((\.?\w+)[^)]*\)", m["message"])
            assert what is not None, m["message"]  # pylint's wording changed: read it again
            late.add((f"idrrun/{Path(m['path']).relative_to(package.name)}", what.group(1)))
    cycles = [m for m in messages if m["message-id"] == "R0401"]
    assert (status == 0) == (not messages)  # pylint's status agrees with what it said
    return late, cycles


def test_no_import_cycle_and_imports_at_the_top() -> None:
    late, cycles = late_imports(PACKAGE)
    assert cycles == [], cycles
    assert late <= ALLOWED_LATE_IMPORTS, sorted(late - ALLOWED_LATE_IMPORTS)
    # The list says what the code really does: nothing allowed that is not there.
    assert late == ALLOWED_LATE_IMPORTS, sorted(ALLOWED_LATE_IMPORTS - late)


def _room(module: str) -> str:
    """A module's room: its folder under idrrun/, or its own name at the top."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(room: str) -> int:
    for i, rooms in enumerate(LAYERS):
        if room in rooms:
            return i
    raise AssertionError(f"idrrun/{room} is in no layer of tests/test_layout.py: place it")


def imports_up(package: Path) -> list[str]:
    """Every import (late ones too) of a module of `package` from a higher layer."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        here = module.rsplit(".", 1)[0] if rel.name != "__init__" else module
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = here.split(".")[:len(here.split(".")) - node.level + 1]
            targets = [".".join([*base, node.module])] if node.module else \
                [".".join([*base, a.name]) for a in node.names]
            for target in targets:
                a, b = _room(module), _room(target)
                if a != b and _layer(b) > _layer(a):
                    found.append(f"{rel}.py:{node.lineno}: {module} ({a}) imports {target} ({b})")
    return found


def test_layers_import_only_downwards() -> None:
    assert imports_up(PACKAGE) == []


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


# Functions allowed above complexity 20, and why (none today).
COMPLEX_ON_PURPOSE: dict[str, str] = {}


def too_complex(package: Path) -> list[str]:
    """radon's functions of `package` above complexity 20 (rank D and worse)."""
    radon = Path(sys.executable).with_name("radon")
    r = subprocess.run([str(radon) if radon.exists() else "radon", "cc", "--json",
                        "--min", "D", package.name], cwd=package.parent, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    found = []
    for path, blocks in json.loads(r.stdout).items():
        for block in blocks:
            name = f"{path}:{block['name']}"
            if block["complexity"] > 20 and name not in COMPLEX_ON_PURPOSE:
                found.append(f"{name} ({block['complexity']})")
    return found


def test_no_function_above_complexity_20() -> None:
    assert too_complex(PACKAGE) == []


# --- each rule seen failing: the same checks on a copy of the package with one rule broken ---

@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "idrrun"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "course"))
    return target


def test_a_late_import_added_is_found(copy: Path) -> None:
    build = copy / "build.py"
    build.write_text(build.read_text() + "\n\ndef _scratch() -> None:\n    import argparse  # noqa\n")
    late, _ = late_imports(copy)
    assert ("idrrun/build.py", "argparse") in late - ALLOWED_LATE_IMPORTS


def test_an_import_from_above_is_found(copy: Path) -> None:
    proc = copy / "run" / "proc.py"
    proc.write_text(proc.read_text() + "\nfrom ..grading import classroom  # noqa\n")
    assert any("run/proc.py" in f and "(grading)" in f for f in imports_up(copy))


def test_a_function_too_complex_is_found(copy: Path) -> None:
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(21))
    (copy / "files.py").write_text((copy / "files.py").read_text() +
                                   f"\n\ndef _scratch(x: int) -> int:\n{branches}\n    return -1\n")
    assert any("_scratch (22)" in f for f in too_complex(copy))
