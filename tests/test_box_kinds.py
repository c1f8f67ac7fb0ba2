"""One box constructor (issue 46.4): every box idrrun makes, a compile's, a run's and the export
of a graded run's profile, is made by sandbox.box, which decides what each kind sees (its
folder, what it reads, what is hidden, its environment and temporary folder, its caps, its
guard) from one declared table; nothing else of the package calls Box(...)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from conftest import ROOT
from idrrun.model import Protections, SandboxSupport
from idrrun.run import sandbox

KINDS: tuple[sandbox.BoxKind, ...] = ("compile", "run", "export")
NAMESPACES = SandboxSupport("namespaces", "/usr/bin/bwrap", True, "")
UID_LEVEL = SandboxSupport("uid", None, True, "")


def box_makers(package: Path) -> list[str]:
    """Where a module of `package` calls Box(...) or sandbox.Box(...): file and line."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func
                name = called.id if isinstance(called, ast.Name) else \
                    called.attr if isinstance(called, ast.Attribute) else ""
                if name == "Box":
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return found


def test_every_box_is_made_by_one_constructor(tmp_path: Path) -> None:
    makers = box_makers(ROOT / "idrrun")
    assert [m.split(":")[0] for m in makers] == ["idrrun/run/sandbox.py"], makers
    # The rule finds a second constructor where there is one (STYLE.md 20).
    scratch = tmp_path / "idrrun"
    scratch.mkdir()
    (scratch / "elsewhere.py").write_text("from idrrun.run import sandbox\n"
                                          "box = sandbox.Box(workdir=w, writable=(w,))\n")
    assert box_makers(scratch) == ["idrrun/elsewhere.py:2"]


def test_box_tmp_is_defined_once() -> None:
    defined = [f"{p.relative_to(ROOT)}" for p in sorted((ROOT / "idrrun").rglob("*.py"))
               for node in ast.parse(p.read_text()).body
               if isinstance(node, ast.Assign) and any(
                   isinstance(t, ast.Name) and t.id == "BOX_TMP" for t in node.targets)]
    assert defined == ["idrrun/run/sandbox.py"]
    assert sandbox.own_tmp(UID_LEVEL) == sandbox.BOX_TMP
    assert sandbox.own_tmp(NAMESPACES) == "" and sandbox.own_tmp(None) == ""


def _libraries(tmp_path: Path) -> dict[str, str]:
    lib = tmp_path / "opt" / "lib"
    lib.mkdir(parents=True)
    return {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": f"{lib}:/usr/lib", "HOME": "/root",
            "IDRRUN_SECRET": "x"}


def test_what_each_kind_of_box_sees(tmp_path: Path) -> None:
    environ = _libraries(tmp_path)
    lib = tmp_path / "opt" / "lib"
    folder, src, prefix = tmp_path / "box", tmp_path / "src", tmp_path / "sdk"
    room, cache, hide = tmp_path / "room", tmp_path / "cache", tmp_path / "course"
    made = {kind: sandbox.box(kind, folder, NAMESPACES, -1, environ=environ,
                              extra_env={"OMP_NUM_THREADS": "2"}, readable=(src,),
                              installations=(prefix, Path("/usr")), hidden=(hide,), cache=cache,
                              room=room)
            for kind in KINDS}
    for kind, box in made.items():
        assert box.workdir == folder and box.writable == (folder,), kind
        # what lies in the system's folders is there already: never bound again
        assert Path("/usr") not in box.readable, kind
        assert box.hidden == (hide, *sandbox.package_dirs(), cache), kind
        assert "IDRRUN_SECRET" not in box.env and box.env["HOME"] == "/tmp", kind
        assert box.env["OMP_NUM_THREADS"] == "2" and box.uid == box.gid == -1, kind
        assert box.inner_guard is None, kind  # no guard given, and idrrun's own user
    # A program needs its libraries outside the system's folders to start: a run's box only.
    assert made["run"].readable == (src, lib, prefix)
    assert made["compile"].readable == made["export"].readable == (src, prefix)
    # Caps on what it leaves, in a room: a run's and an export's box (a compile has its limits).
    assert [made[k].disk_caps for k in KINDS] == [False, True, True]
    assert not sandbox.box("run", folder, NAMESPACES, -1, environ=environ).disk_caps
    # A run's box without a GPU has no /sys: hwloc is told so; with one it has /sys.
    assert made["run"].env["HWLOC_COMPONENTS"] == "-linux"
    assert "HWLOC_COMPONENTS" not in made["compile"].env
    assert "HWLOC_COMPONENTS" not in sandbox.box("run", folder, NAMESPACES, -1, environ=environ,
                                                  gpu=True).env


def test_a_uid_level_box_gets_its_own_tmp_and_its_guard(tmp_path: Path) -> None:
    folder, room = tmp_path / "box", tmp_path / "room"
    room.mkdir(mode=0o711)
    guard = tmp_path / "guard"
    guard.write_text("#!/bin/sh\n")
    protections = Protections(guard=guard, cgroups=None, root=True)
    uid = sandbox.fresh_uid()
    for kind in KINDS:
        box = sandbox.box(kind, folder, UID_LEVEL, uid, environ=dict(os.environ), room=room,
                          protections=protections)
        assert box.env["HOME"] == box.env["TMPDIR"] == str(folder / sandbox.BOX_TMP), kind
        assert box.uid == box.gid == uid, kind
        # idrrun's cache (0700) is not the box uid's to read: the guard is placed in the room
        assert box.inner_guard is not None and box.inner_guard.parent == room / "tools", kind
    assert sandbox.box("run", folder, UID_LEVEL, -1, environ={}, room=room,
                       protections=protections).inner_guard is None  # idrrun's own user
    assert sandbox.box("run", folder, UID_LEVEL, uid, environ={},
                       protections=protections).inner_guard is None  # not graded: no room
