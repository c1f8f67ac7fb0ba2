"""The families idrrun knows, by name: the built-in ones, those registered at run time
(`registry.register(family)`) and those installed plugins declare under the entry-point group
`idrrun.families` (an object implementing family.Family).

Family names, CLI choices, config validation and doctor all come from here.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from ..errors import UsageError
from ..model import Toolchain
from . import gcc, nvhpc, onpath
from .family import Family

ENTRY_POINT_GROUP = "idrrun.families"
_BUILTIN: tuple[Family, ...] = (nvhpc.NVHPC, gcc.GCC, nvhpc.PGI)

_families: dict[str, Family] = {}
_loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for family in _BUILTIN:
        _families.setdefault(family.name, family)
    # Plugins are looked up once, on first use: reading entry points costs a few milliseconds.
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            family = ep.load()
        except Exception:  # noqa: BLE001 - a broken plugin must not stop the course
            continue
        _families.setdefault(getattr(family, "name", ep.name), family)


def register(family: Family) -> None:
    """Add (or replace) a family: `-c NAME`, `[compilers.NAME]` and doctor accept it at once."""
    _load()
    _families[family.name] = family


def unregister(name: str) -> None:
    _load()
    _families.pop(name, None)


def names() -> tuple[str, ...]:
    _load()
    return tuple(_families)


def get(name: str) -> Family:
    _load()
    try:
        return _families[name]
    except KeyError:
        raise UsageError(f"unknown compiler family {name!r} (known: {', '.join(_families)})") from None


def family_of(toolchain: Toolchain) -> Family:
    """The family that made `toolchain` (its run environment, its hints, its feedback)."""
    return get(toolchain.family)


def families() -> tuple[Family, ...]:
    _load()
    return tuple(_families.values())


def detect(view: onpath.View | None = None) -> str:
    """The family to use when none is configured: see Family.detect. view: PATH as the caller
    looks at it (onpath.py), else as it is now."""
    ranked = sorted((f.detect[0], f.name, f.detect[1]) for f in families() if f.detect is not None)
    if not ranked:
        raise UsageError("no compiler family can be detected: give one with -c")
    view = onpath.view() if view is None else view
    for _, name, command in ranked:
        if view.which(command):
            return name
    return ranked[-1][1]
