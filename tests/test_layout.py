"""The package's shape: no import circles, imports at the top of modules (but for the optional,
heavy or lazy ones named here, each by the exact module), layers that only import downwards in
every form of import, no private name imported from another module, no function that only the
tests use, every package folder says what it owns, family names decide behaviour only in their
own modules, no function above the complexity the code allows itself, every module of
maintainability rank A or B (radon's MI) or saying why not at its top, and mypy clean.

The import rules read the syntax trees, so no comment silences them; the others read their
tool's real output and check the tool's own exit status: a pattern that never matches checks
nothing (STYLE.md 20). Each rule is seen failing once on a scratch change: see the tests at the
end, which make such changes in a copy of the package.
"""

from __future__ import annotations

import ast
import graphlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from conftest import ROOT

PACKAGE = ROOT / "idrrun"
# Imported where used on purpose, (module path, exactly what: the module, or M.name for
# `from M import name`):
# - IPython only inside IPython (not for `idrrun --version`);
# - argparse and the resident caller only once `idrrun run` needs them: the caller must start in
#   a millisecond (resident.py), and `idrrun --version` in 40 ms;
# - subprocess only when a resident server must be started;
# - the server's warm-up imports what a run will import, once for all its workers (server.py);
# - Pillow only when a picture is drawn or compared (the timeline, the image check kind);
# - nbformat only for a notebook older than format 4 (request/notebook.py: it costs more than
#   grading a few submissions).
ALLOWED_LATE_IMPORTS = {
    ("idrrun/__init__.py", "idrrun.magic.load_ipython_extension"),
    ("idrrun/cli.py", "argparse"), ("idrrun/cli.py", "idrrun.resident"),
    ("idrrun/resident.py", "subprocess"),
    ("idrrun/server.py", "idrrun.cli.run_in_process"), ("idrrun/server.py", "idrrun.commands.run"),
    ("idrrun/server.py", "idrrun.request.options"), ("idrrun/server.py", "idrrun.toolchains.registry"),
    ("idrrun/server.py", "idrrun.request.config"), ("idrrun/server.py", "idrrun.toolchains.probe"),
    ("idrrun/server.py", "PIL.Image"), ("idrrun/server.py", "PIL.ImageDraw"),
    ("idrrun/server.py", "idrrun.profile.timeline"),
    ("idrrun/profile/timeline.py", "PIL.ImageFont"), ("idrrun/profile/timeline.py", "PIL.Image"),
    ("idrrun/profile/timeline.py", "PIL.ImageDraw"),
    ("idrrun/checks/output_kinds.py", "idrrun.images.image_check"),
    ("idrrun/magic.py", "idrrun.images"),  # what became of a failed cell's pictures (--get)
    # difflib, for "did you mean": only a typo pays for it (the front ends import errors.py)
    ("idrrun/errors.py", "difflib"),
    ("idrrun/request/notebook.py", "nbformat"),
    # jupyterhub is in the hub's environment only: the receiver asks the hub about tokens
    # there, and runs without it on a Unix socket
    ("idrrun/grading/receiver.py", "jupyterhub.services.auth.HubAuth"),
}


# The rooms of the package, bottom first: a module may import from its own layer and the ones
# below it, never from above (docs/architecture.md draws the same picture).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"model", "errors", "version", "files", "escape"}),  # values, stdlib only
    frozenset({"run"}),                                    # processes, boxes, the boundary
    frozenset({"profile", "images", "pictures", "toolchains"}),  # what runs know and draw
    frozenset({"checks", "annotate"}),                     # specs, check kinds, the annotated source (pure)
    frozenset({"request"}),                                # options, settings, the resolver
    frozenset({"build"}),
    frozenset({"pipeline", "failures"}),                    # the ladder, and what its failures say
    frozenset({"checking"}),                               # a run checked against its exercise
    frozenset({"grading", "authoring"}),                   # a class; the course's own files
    frozenset({"display", "doctor", "highlight", "resident"}),  # what the front ends use
    frozenset({"magic", "commands", "cli", "server", "lab", "__main__", "__init__"}),
)


# --- the imports of the package, every form, read from its syntax trees ---

class Import(NamedTuple):
    where: str  # "idrrun/run/proc.py:12"
    module: str  # the importing module, "idrrun.run.proc"
    target: str  # exactly what is imported: the module, or for `from M import n` (M not a
    # package of ours) "M.n"; ours resolved to absolute names ("idrrun.grading.grader")
    name: str | None  # n of `from M import n` when n is not a module of ours (a function, a class)
    ours: bool  # target is a module of the package
    late: bool  # inside a function: imported when it is called
    bound: str  # the name it binds in the importing module
    typing_only: bool = False  # under `if TYPE_CHECKING:`: read by the type checker, never run


def modules(package: Path) -> dict[str, Path]:
    """{dotted module name: its file} of every module of `package`."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        found[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    return found


def _typing_only(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): a block only the type checker reads."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement, whether it is inside a function, whatever its comments say, and
    whether it is under `if TYPE_CHECKING:`."""
    def walk(node: ast.AST, late: bool, typing: bool
             ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, late, typing
            inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from walk(child, late or inner, typing or _typing_only(child))
    yield from walk(tree, False, False)


def _absolute(here: str, node: ast.ImportFrom) -> str:
    """The module `from M import ...` names, absolute (`..grading` in idrrun.run: idrrun.grading)."""
    if not node.level:
        return node.module or ""
    parts = here.split(".")
    base = parts[:len(parts) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def imports(package: Path) -> list[Import]:
    """Every import of every module of `package`: relative (`from ..grading import x`), absolute
    (`from idrrun.grading import x`) and plain (`import idrrun.grading.grader`)."""
    known = modules(package)
    root = package.name
    found = []
    for module, path in known.items():
        here = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node, late, typing in _statements(ast.parse(path.read_text())):
            where = f"{path.relative_to(package.parent)}:{node.lineno}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    ours = alias.name == root or alias.name.startswith(root + ".")
                    bound = alias.asname or alias.name.split(".")[0]
                    found.append(Import(where, module, alias.name, None, ours, late, bound, typing))
                continue
            base = _absolute(here, node)
            ours = base == root or base.startswith(root + ".")
            for alias in node.names:
                sub, bound = f"{base}.{alias.name}", alias.asname or alias.name
                if ours and sub in known:
                    found.append(Import(where, module, sub, None, True, late, bound, typing))
                elif ours:
                    found.append(Import(where, module, base, alias.name, True, late, bound, typing))
                else:
                    found.append(Import(where, module, sub, None, False, late, bound, typing))
    return found


def cycles(package: Path) -> list[str]:
    """An import cycle among the modules of `package` (the modules around it, the first one
    again at the end), or [] when there is none. Its top-level imports count, those under `if
    TYPE_CHECKING:` too (modules that name each other's types cannot be read apart), not those
    inside functions (run when called).
    The graph is the one the layer rule reads; the stdlib's graphlib finds the cycle. (pylint's
    cyclic-import said the same in 35 s per package, as long as every other rule here together.)"""
    graph: dict[str, set[str]] = {}
    for i in imports(package):
        if i.ours and not i.late and i.target != i.module:
            graph.setdefault(i.module, set()).add(i.target)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as cycle:
        return list(cycle.args[1])
    return []


def late_imports(package: Path) -> set[tuple[str, str]]:
    """(module path, exactly what) of every import inside a function, whatever its comments."""
    return {(i.where.split(":")[0], f"{i.target}.{i.name}" if i.name else i.target)
            for i in imports(package) if i.late}


def test_no_import_cycle() -> None:
    assert cycles(PACKAGE) == []


def test_imports_at_the_top() -> None:
    late = late_imports(PACKAGE)
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
    """Every import (late ones too, in any form) of a module of `package` from a higher layer."""
    found = []
    for i in imports(package):
        a, b = _room(i.module), _room(i.target)
        if i.ours and a != b and _layer(b) > _layer(a):
            found.append(f"{i.where}: {i.module} ({a}) imports {i.target} ({b})")
    return found


def test_layers_import_only_downwards() -> None:
    assert imports_up(PACKAGE) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def private_imports(package: Path) -> list[str]:
    """Private names (`_read`) one module of `package` takes from another: by import, or as an
    attribute of a module of ours it imported (`discover._read`)."""
    every = imports(package)
    found = [f"{i.where}: {i.module} imports {i.target}.{i.name}"
             for i in every if i.ours and i.name and _private(i.name)]
    for module, path in modules(package).items():
        bound = {i.bound for i in every if i.module == module and i.ours and i.name is None}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in bound and _private(node.attr):
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {module} uses "
                             f"{node.value.id}.{node.attr}")
    return found


def test_no_private_name_imported_across_modules() -> None:
    assert private_imports(PACKAGE) == []


# Called by name by IPython or Jupyter, never by our code: the rich displays, the traceback a
# failed cell shows, the server extension's hooks.
PROTOCOL = re.compile(r"_repr_\w+_|_render_traceback_|_jupyter_server_extension_points|"
                      r"_load_jupyter_server_extension|"
                      r"do_[A-Z]+|log_message|address_string|"  # http.server's handler hooks
                      r"get|post")  # tornado's (jupyter_server's handlers: idrrun/lab.py)
# Functions no module of the package calls, and why they stay.
UNCALLED_ON_PURPOSE: dict[str, str] = {
    "idrrun/magic.py:IdrrunMagics.idrrun_doctor": "the %idrrun_doctor line magic: IPython calls "
                                                  "it by the name its decorator registers",
    # Came with other branches: their owners decide (issue 35.4) whether the package uses them
    # or the tests keep them.
    "idrrun/profile/tracefile.py:parse_lines": "a trace's lines without a file: the tests "
                                               "feed lines to the parser the package feeds files",
    "idrrun/run/allowance.py:Ledger.bytes_left": "what is left of an evidence budget, for its tests",
    "idrrun/run/allowance.py:Ledger.records_left": "what is left of an evidence budget",
}


def _definitions(package: Path) -> Iterator[tuple[str, str]]:
    """("idrrun/images.py:137", "idrrun/images.py:Image.rows") of every function and method
    of the package's modules (nested ones are their function's business)."""
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{rel}:{node.lineno}", f"{rel}:{node.name}"
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield f"{rel}:{item.lineno}", f"{rel}:{node.name}.{item.name}"


def _names_used(paths: list[Path]) -> set[str]:
    """Every name the files refer to: variables, attributes, what they import; in other files
    (pyproject.toml's entry points) every word."""
    used = set()
    for path in paths:
        if path.suffix != ".py":
            used |= set(re.findall(r"\w+", path.read_text()))
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.alias):
                used.add(node.name.rsplit(".", 1)[-1])
    return used


def uncalled(package: Path) -> list[str]:
    """Functions whose name no module of the package (nor pyproject.toml) uses: used only by the
    tests, or by nobody. By name: a method that shares its name with one in use passes."""
    used = _names_used([*package.rglob("*.py"), ROOT / "pyproject.toml"])
    by_tests = _names_used(list((ROOT / "tests").rglob("*.py")))
    found = []
    for where, name in _definitions(package):
        short = _short(name)
        if short in used or (short.startswith("__") and short.endswith("__")) or \
                PROTOCOL.fullmatch(short) or name in UNCALLED_ON_PURPOSE:
            continue
        who = "only the tests use it" if short in by_tests else "nobody uses it"
        found.append(f"{where}: {name} ({who})")
    return found


def _short(name: str) -> str:
    """"idrrun/run/allowance.py:Ledger.bytes_left" -> "bytes_left"."""
    return name.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def test_no_function_only_the_tests_use() -> None:
    assert uncalled(PACKAGE) == []
    # The list says what the code really does: no reason kept for a function now in use.
    defined = {name for _, name in _definitions(PACKAGE)}
    used = _names_used([*PACKAGE.rglob("*.py"), ROOT / "pyproject.toml"])
    assert [n for n in UNCALLED_ON_PURPOSE if n not in defined or _short(n) in used] == []


def mypy_errors(package: Path, cache: Path | None = None) -> list[str]:
    """mypy's errors on `package`, under the project's configuration (strict)."""
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                        *(["--cache-dir", str(cache)] if cache else []), package.name],
                       cwd=package.parent, capture_output=True, text=True, timeout=600)
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 2: mypy itself failed
    assert (r.returncode == 0) == (errors == []) == r.stdout.startswith("Success:"), r.stdout
    return errors


def test_mypy_clean() -> None:
    assert mypy_errors(PACKAGE) == []


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


# A function above complexity 18 says why in the comment block right above its `def` (or its
# decorators): "# Complexity: <why>". Near the bar a function is a stage waiting to be named;
# one that stays there says what keeps it whole.
COMPLEXITY_REASON = "# Complexity:"


def complex_without_reason(package: Path, bar: int = 18) -> list[str]:
    """radon's functions of `package` above `bar` whose `def` has no "# Complexity:" line above."""
    radon = Path(sys.executable).with_name("radon")
    r = subprocess.run([str(radon) if radon.exists() else "radon", "cc", "--json",
                        "--min", "C", package.name], cwd=package.parent, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    found = []
    for path, blocks in json.loads(r.stdout).items():
        lines = (package.parent / path).read_text().splitlines()
        for block in blocks:
            if block["complexity"] <= bar:
                continue
            above = block["lineno"] - 2  # the line above the def, 0-based
            while above >= 0 and lines[above].lstrip().startswith("@"):
                above -= 1
            comments = []  # the comment block right above it
            while above >= 0 and lines[above].lstrip().startswith("#"):
                comments.append(lines[above].lstrip())
                above -= 1
            if not any(c.startswith(COMPLEXITY_REASON) for c in comments):
                found.append(f"{path}:{block['lineno']} {block['name']} ({block['complexity']})")
    return found


def test_a_function_above_complexity_18_says_why() -> None:
    assert complex_without_reason(PACKAGE) == []


# Processes are started in one module (STYLE.md 3): run/proc.py. Besides it, the resident
# caller starts its server (resident.py, subprocess.Popen: the server must outlive the call)
# and the server forks its workers (server.py, os.fork: a warm interpreter's copy), as
# docs/architecture.md says.
PROCESS_STARTERS = {"idrrun/run/proc.py": "*", "idrrun/resident.py": "subprocess.Popen",
                    "idrrun/server.py": "os.fork"}
_STARTING_MODULES = ("subprocess", "multiprocessing", "pexpect", "pty", "concurrent.futures.process")
_OS_STARTERS = re.compile(r"(fork|forkpty|exec\w*|spawn\w*|posix_spawn\w*|system|popen)")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def process_starts(package: Path) -> list[str]:
    """Where a module of `package` outside PROCESS_STARTERS starts a process, or imports a module
    that does: a call of os.fork/exec*/spawn*/system/popen, of subprocess, pty or asyncio's
    create_subprocess_*; an import of subprocess, multiprocessing, pexpect or pty."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = str(path.relative_to(package.parent))
        allowed = PROCESS_STARTERS.get(rel, "")
        for node in ast.walk(ast.parse(path.read_text())):
            what = ""
            if isinstance(node, ast.Call):
                name = _dotted(node.func)
                head, _, tail = name.rpartition(".")
                if (head == "os" and _OS_STARTERS.fullmatch(tail)) or \
                        head in ("subprocess", "pty") or tail.startswith("create_subprocess_"):
                    what = name
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                    else [node.module or ""]
                what = next((n for n in names if n.split(".")[0] in _STARTING_MODULES
                             or n in _STARTING_MODULES), "")
            if what and allowed != "*" and not (what == allowed or what.split(".")[0] == allowed.split(".")[0]):
                found.append(f"{rel}:{getattr(node, 'lineno', 0)}: {what}")
    return found


def test_processes_are_started_only_in_run_proc() -> None:
    assert process_starts(PACKAGE) == []


# A check kind decides its own behaviour (STYLE.md 26): its record says what it needs and shows,
# so no module outside the kind modules compares a kind with a registered kind's name.
KIND_MODULES = {"idrrun/checks/registry.py", "idrrun/checks/output_kinds.py",
                "idrrun/checks/program_kinds.py", "idrrun/checks/trace_kinds.py",
                "idrrun/checks/relative.py"}  # (the speed kind's and the ratio bounds' runs)


def _is_kind(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "kind") or \
        (isinstance(node, ast.Name) and node.id == "kind")


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def kind_names_compared(package: Path, kinds: set[str]) -> list[str]:
    """Where a module outside KIND_MODULES compares a `kind` with a registered kind's name."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = str(path.relative_to(package.parent))
        if rel in KIND_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(_is_kind(n) for n in sides):
                named = set().union(*(_strings(n) for n in sides)) & kinds
                if named:
                    found.append(f"{rel}:{node.lineno}: {', '.join(sorted(named))}")
    return found


def _kind_names() -> set[str]:
    from idrrun.checks import registry
    return set(registry.names())


def test_no_kind_name_compared_outside_the_kind_modules() -> None:
    assert kind_names_compared(PACKAGE, _kind_names()) == []


# A module below maintainability rank B (radon's MI under 10) says why at its top: a line of
# its docstring that starts with this word.
MAINTAINABILITY_REASON = "Maintainability:"


def hard_to_maintain(package: Path) -> list[str]:
    """radon's modules of `package` below maintainability rank B (rank C: MI under 10) whose
    docstring has no line starting "Maintainability:" to say why."""
    radon = Path(sys.executable).with_name("radon")
    r = subprocess.run([str(radon) if radon.exists() else "radon", "mi", "--json", package.name],
                       cwd=package.parent, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ranked = json.loads(r.stdout)
    # radon read every module, each into a rank: a module it could not parse is no pass.
    assert set(ranked) == {str(path.relative_to(package.parent)) for path in package.rglob("*.py")}
    assert all(result.get("rank") in ("A", "B", "C") for result in ranked.values()), ranked
    found = []
    for path, result in sorted(ranked.items()):
        doc = ast.get_docstring(ast.parse((package.parent / path).read_text())) or ""
        said = any(line.startswith(MAINTAINABILITY_REASON) for line in doc.splitlines())
        if result["rank"] not in ("A", "B") and not said:
            found.append(f"{path} (rank {result['rank']}, MI {result['mi']:.2f})")
    return found


def test_every_module_maintainable_or_says_why() -> None:
    assert hard_to_maintain(PACKAGE) == []


# --- each rule seen failing: the same checks on a copy of the package with one rule broken ---

@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "idrrun"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "course"))
    return target


def test_a_late_import_added_is_found(copy: Path) -> None:
    build = copy / "build.py"
    build.write_text(build.read_text() + "\n\ndef _scratch() -> None:\n    import argparse  # noqa\n")
    assert ("idrrun/build.py", "argparse") in late_imports(copy) - ALLOWED_LATE_IMPORTS


def test_an_import_cycle_is_found(copy: Path) -> None:
    files = copy / "files.py"
    files.write_text(files.read_text() + "\nfrom . import build  # noqa\n")
    found = cycles(copy)
    assert "idrrun.files" in found and "idrrun.build" in found, found


def test_an_import_only_the_type_checker_reads_makes_a_cycle_too(copy: Path) -> None:
    # A circle the type checker reads is still one: the modules cannot be read apart (the
    # spec values sat beside their loader, above the kinds that name them).
    files = copy / "files.py"
    files.write_text(files.read_text() + "\nif TYPE_CHECKING:\n    from . import build  # noqa\n")
    found = cycles(copy)
    assert "idrrun.files" in found and "idrrun.build" in found, found


def test_a_function_too_complex_is_found(copy: Path) -> None:
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(21))
    (copy / "files.py").write_text((copy / "files.py").read_text() +
                                   f"\n\ndef _scratch(x: int) -> int:\n{branches}\n    return -1\n")
    assert any("_scratch (22)" in f for f in too_complex(copy))


def test_a_late_import_silenced_by_a_comment_is_found(copy: Path) -> None:
    build = copy / "build.py"
    build.write_text(build.read_text() + "\n\ndef _scratch() -> None:\n"
                     "    import argparse  # pylint: disable=import-outside-toplevel  # noqa\n")
    assert ("idrrun/build.py", "argparse") in late_imports(copy) - ALLOWED_LATE_IMPORTS


def test_a_late_import_beside_an_allowed_one_is_found(copy: Path) -> None:
    # server.py may import idrrun.request.options late: not the policy beside it.
    server = copy / "server.py"
    server.write_text(server.read_text() + "\n\ndef _scratch() -> None:\n"
                      "    from .request import policy  # noqa\n")
    assert late_imports(copy) - ALLOWED_LATE_IMPORTS == {("idrrun/server.py", "idrrun.request.policy")}


@pytest.mark.parametrize("line", ["from ..grading import grader",
                                  "from idrrun.grading import grader",
                                  "from idrrun.grading.grader import grade_all",
                                  "import idrrun.grading.grader"])
def test_an_import_from_above_is_found_in_every_form(copy: Path, line: str) -> None:
    proc = copy / "run" / "proc.py"
    proc.write_text(proc.read_text() + f"\n{line}  # noqa  # pylint: disable=all\n")
    assert [f for f in imports_up(copy) if "run/proc.py" in f and "(grading)" in f] != []


@pytest.mark.parametrize("line", ["from .discover import _scratch  # noqa",
                                  "from . import discover  # noqa\ndiscover._scratch()"])
def test_a_private_name_taken_from_another_module_is_found(copy: Path, line: str) -> None:
    report = copy / "grading" / "report.py"
    report.write_text(report.read_text() + f"\n{line}\n")
    assert [f for f in private_imports(copy) if "grading/report.py" in f and "_scratch" in f] != []


def test_a_function_only_the_tests_use_is_found(copy: Path) -> None:
    files = copy / "files.py"
    files.write_text(files.read_text() + "\n\ndef scratch_for_nobody() -> None:\n    pass\n")
    assert [f for f in uncalled(copy) if "files.py" in f and "scratch_for_nobody (nobody" in f] != []


def test_a_type_error_is_found(tmp_path: Path) -> None:
    scratch = tmp_path / "idrrun"
    scratch.mkdir()
    (scratch / "__init__.py").write_text('"""A scratch package."""\n')
    (scratch / "bad.py").write_text('def f() -> int:\n    return "not a number"\n')
    errors = mypy_errors(scratch, cache=tmp_path / "cache")
    assert len(errors) == 1 and "bad.py:2: error: Incompatible return value" in errors[0], errors


def test_a_module_hard_to_maintain_is_found(copy: Path) -> None:
    # The copy cut to files.py alone (`radon mi` on it: 3.4 s here, on the package 7.5 s).
    for path in copy.rglob("*.py"):
        if path != copy / "files.py":
            path.unlink()
    # Twenty uncommented functions of ten branches each take files.py (rank A) to rank C.
    branches = "\n".join(f"    if x == {i}:\n        y = y * {i} + x ** {i % 3} - {i}" for i in range(10))
    files = copy / "files.py"
    files.write_text(files.read_text() + "".join(
        f"\n\ndef _scratch_{n}(x: int) -> int:\n    y = x\n{branches}\n    return y\n" for n in range(20)))
    assert [f for f in hard_to_maintain(copy) if f.startswith("idrrun/files.py (rank C")] != []
    # Its reason written at its top, the rule lets it be.
    files.write_text(files.read_text().replace('"""', '"""Maintainability: a scratch module.\n\n', 1))
    assert hard_to_maintain(copy) == []


def test_a_process_started_outside_run_proc_is_found(copy: Path) -> None:
    build = copy / "build.py"
    build.write_text(build.read_text() + "\n\nimport subprocess\n\n\ndef _scratch() -> None:\n"
                     "    subprocess.run(['true'])\n    os.system('true')\n")
    found = process_starts(copy)
    assert [f for f in found if f.startswith("idrrun/build.py")] == [
        f"idrrun/build.py:{n}: {w}" for n, w in _scratch_lines(build, ("import subprocess", "subprocess.run", "os.system"))]


def _scratch_lines(path: Path, needles: tuple[str, ...]) -> list[tuple[int, str]]:
    lines = path.read_text().splitlines()
    out = []
    for needle in needles:
        n = max(i for i, line in enumerate(lines, 1) if needle in line)
        out.append((n, needle.replace("import ", "")))
    return sorted(out)


def test_a_function_above_18_without_its_reason_is_found(copy: Path) -> None:
    branches = "\n".join(f"    if x == {i}:\n        x += {i}" for i in range(19))
    files = copy / "files.py"
    files.write_text(files.read_text() + f"\n\ndef _scratch(x: int) -> int:\n{branches}\n    return x\n")
    assert [f for f in complex_without_reason(copy) if "_scratch" in f] != []
    files.write_text(files.read_text().replace("\n\ndef _scratch(", "\n\n# Complexity: a scratch.\ndef _scratch("))
    assert [f for f in complex_without_reason(copy) if "_scratch" in f] == []


def test_a_kind_name_compared_outside_the_kind_modules_is_found(copy: Path) -> None:
    build = copy / "build.py"
    build.write_text(build.read_text() + "\n\ndef _scratch(check: object) -> bool:\n"
                     "    return getattr(check, 'kind') == 'gpu_busy' or check.kind in ('queues', 'x')\n")
    found = [f for f in kind_names_compared(copy, _kind_names()) if f.startswith("idrrun/build.py")]
    assert len(found) == 1 and found[0].endswith(": queues"), found
