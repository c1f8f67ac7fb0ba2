"""Settings and where they come from, written down once.

Precedence, lowest first (each layer overrides the ones before it):

    1. built-in defaults
    2. an IDRIS site file (JSON), when IDR_CONFIG_FILE names one
    3. the user file:    $XDG_CONFIG_HOME/idrrun/config.toml (~/.config/idrrun/config.toml)
    4. the project file: ./idrrun.toml in the working directory
    5. the environment:  the file named by IDRRUN_CONFIG, then IDRRUN_* variables
    6. the magic line or the command line (options.py), applied by the front ends

A file that cannot be read stops idrrun with a ConfigError naming the file and the field.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .model import FAMILY_NAMES, LANGUAGES, Limits

LAUNCHER_KINDS = ("none", "mpirun", "srun")
OFFLOAD_MODES = ("auto", "gpu", "host")
# Keys of [compilers.FAMILY]: a command per language, MPI wrappers, extra flags.
COMPILER_KEYS = ("c", "c++", "fortran", "cuda", "mpi_c", "mpi_c++", "mpi_fortran")


@dataclass(frozen=True)
class LauncherConfig:
    kind: str = "none"  # none: run the program directly; -m N then uses mpirun
    command: str = ""
    tasks: str = ""  # flag for the number of tasks; a flag ending in "=" is glued to its value
    threads: str = ""
    gpus: str = ""
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    family: str | None = None
    language: str | None = None
    timeout: float = 300.0
    compile_timeout: float = 120.0
    max_output: int = 1 << 20
    cache_dir: Path = field(default_factory=lambda: _default_cache_dir())
    examples_dir: Path | None = None
    offload: str = "auto"
    gpus: int | None = None
    # family -> key -> value; values are commands (str) or, for "flags", tuple[str, ...]
    compilers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    profiler: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    files: tuple[str, ...] = ()  # the config files that were read, in order

    def compiler_command(self, family: str, key: str) -> str | None:
        value = self.compilers.get(family, {}).get(key)
        return value if isinstance(value, str) else None

    def extra_flags(self, family: str) -> tuple[str, ...]:
        value = self.compilers.get(family, {}).get("flags", ())
        return tuple(value)


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "idrrun"


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "idrrun" / "config.toml"


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: object) -> int | None:
    """"2GiB", "512 MiB", "1g", 1048576 -> bytes; "none", "unlimited" or 0 -> None.

    Raises ValueError with a readable message otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 2GiB, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a size >= 0, got {value}")
        return value or None
    if isinstance(value, str):
        if value.strip().lower() in ("none", "unlimited", "0"):
            return None
        m = _SIZE.match(value)
        if m:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    raise ValueError(f"expected a size such as 2GiB or 512MiB, got {value!r}")


# ---------------------------------------------------------------------------------------
# Validation: one function per field kind; each layer is checked when read so the error
# names the file it came from.


def _check_layer(raw: Mapping[str, Any], origin: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        where = _field(origin, key)
        if key in ("family",):
            out[key] = _choice(value, FAMILY_NAMES, where)
        elif key == "language":
            out[key] = _choice(value, LANGUAGES, where)
        elif key == "offload":
            out[key] = _choice(value, OFFLOAD_MODES, where)
        elif key in ("timeout", "compile_timeout"):
            out[key] = _positive_number(value, where)
        elif key == "gpus":
            out[key] = int(_positive_number(value, where, integer=True))
        elif key == "max_output":
            try:
                size = parse_size(value)
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            if size is None:
                raise ConfigError(f"{where}: the output cap cannot be unlimited")
            out[key] = size
        elif key == "limits":
            out[key] = _limits(value, origin)
        elif key in ("cache_dir", "examples_dir"):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}: expected a folder path (a string), got {value!r}")
            out[key] = Path(os.path.expanduser(value))
        elif key == "compilers":
            out[key] = _compilers(value, origin)
        elif key == "launcher":
            out[key] = _launcher(value, origin)
        elif key == "profiler":
            out[key] = _profiler(value, where)
        else:
            raise ConfigError(f"{_field(origin, key)}: unknown field")
    return out


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if not isinstance(value, str) or value.lower() not in choices:
        raise ConfigError(f"{where}: expected one of {', '.join(choices)}, got {value!r}")
    return value.lower()


def _positive_number(value: Any, where: str, integer: bool = False) -> float:
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise ConfigError(f"{where}: expected {kind}, got {value!r}")
    return float(value)


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        import shlex

        return tuple(shlex.split(value))
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _field(origin: str, path: str) -> str:
    return f"{origin}: field '{path}'"


def _compilers(value: Any, origin: str) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{_field(origin, 'compilers')}: expected a table [compilers.FAMILY]")
    out: dict[str, dict[str, Any]] = {}
    for family, table in value.items():
        fwhere = f"compilers.{family}"
        if family not in FAMILY_NAMES:
            raise ConfigError(f"{_field(origin, fwhere)}: unknown compiler family "
                              f"(known: {', '.join(FAMILY_NAMES)})")
        if not isinstance(table, dict):
            raise ConfigError(f"{_field(origin, fwhere)}: expected a table")
        entry: dict[str, Any] = {}
        for key, item in table.items():
            if key == "flags":
                entry[key] = _str_list(item, _field(origin, f"{fwhere}.flags"))
            elif key in COMPILER_KEYS:
                if not isinstance(item, str) or not item:
                    raise ConfigError(f"{_field(origin, f'{fwhere}.{key}')}: expected a command "
                                      f"name, got {item!r}")
                entry[key] = item
            else:
                raise ConfigError(f"{_field(origin, f'{fwhere}.{key}')}: unknown field "
                                  f"(known: {', '.join(COMPILER_KEYS)}, flags)")
        out[family] = entry
    return out


def _limits(value: Any, origin: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{_field(origin, 'limits')}: expected a table [limits]")
    out: dict[str, Any] = {}
    for key, item in value.items():
        where = _field(origin, f"limits.{key}")
        if key in ("memory", "file_size"):
            try:
                out[key] = parse_size(item)
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        elif key == "tasks":
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise ConfigError(f"{where}: expected a number of tasks (0: no limit), got {item!r}")
            out[key] = item or None
        else:
            raise ConfigError(f"{where}: unknown field (known: memory, tasks, file_size)")
    return out


def _launcher(value: Any, origin: str) -> LauncherConfig:
    if not isinstance(value, dict):
        raise ConfigError(f"{_field(origin, 'launcher')}: expected a table [launcher]")
    kind = _choice(value.get("kind", "none"), LAUNCHER_KINDS, _field(origin, "launcher.kind"))
    fields: dict[str, Any] = {"kind": kind}
    for key in ("command", "tasks", "threads", "gpus"):
        if key in value:
            if not isinstance(value[key], str):
                raise ConfigError(f"{_field(origin, f'launcher.{key}')}: expected a string, "
                                  f"got {value[key]!r}")
            fields[key] = value[key]
    if "options" in value:
        fields["options"] = _str_list(value["options"], _field(origin, "launcher.options"))
    unknown = set(value) - {"kind", "command", "tasks", "threads", "gpus", "options"}
    if unknown:
        raise ConfigError(f"{_field(origin, 'launcher.' + sorted(unknown)[0])}: unknown field")
    return LauncherConfig(**fields)


def _profiler(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, dict):
        if "command" not in value:
            raise ConfigError(f"{where}: expected a field 'command'")
        return _str_list(value["command"], f"{where}.command") + _str_list(
            value.get("options", []), f"{where}.options"
        )
    return _str_list(value, where)


# ---------------------------------------------------------------------------------------
# Readers


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def read_idris_site_file(path: Path) -> dict[str, Any]:
    """Translate an IDRIS JSON site file (compiler families, launcher, profiling) to our keys."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} (IDR_CONFIG_FILE): cannot read the IDRIS site file: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} (IDR_CONFIG_FILE): expected a JSON object")
    out: dict[str, Any] = {}
    compilers: dict[str, dict[str, Any]] = {}
    for family in FAMILY_NAMES:
        entry = data.get(family)
        if not isinstance(entry, dict):
            continue
        table: dict[str, Any] = {}
        for key in COMPILER_KEYS:
            item = entry.get(key)
            if isinstance(item, dict) and isinstance(item.get("compiler"), str):
                table[key] = item["compiler"]
        compilers[family] = table
    if compilers:
        out["compilers"] = compilers
    launcher = data.get("launcher")
    if isinstance(launcher, dict) and launcher.get("command"):
        command = str(launcher["command"])
        out["launcher"] = {
            "kind": "srun" if os.path.basename(command.split()[0]) == "srun" else "mpirun",
            "command": command,
            "tasks": str(launcher.get("tasks", "")),
            "threads": str(launcher.get("threads", "")),
            "gpus": str(launcher.get("gpus", "")),
            "options": [str(o) for o in launcher.get("options", [])],
        }
    profiling = data.get("profiling")
    if isinstance(profiling, dict) and profiling.get("command"):
        out["profiler"] = str(profiling["command"]).split() + [
            str(o) for o in profiling.get("default_options", [])
        ]
    defaults = data.get("default_settings")
    if isinstance(defaults, dict):
        if defaults.get("compilers") in FAMILY_NAMES:
            out["family"] = defaults["compilers"]
        if defaults.get("language") in LANGUAGES:
            out["language"] = defaults["language"]
        if isinstance(defaults.get("gpus"), int) and defaults["gpus"] > 0:
            out["gpus"] = defaults["gpus"]
    return out


_ENV_KEYS = {
    "IDRRUN_FAMILY": "family",
    "IDRRUN_LANGUAGE": "language",
    "IDRRUN_TIMEOUT": "timeout",
    "IDRRUN_COMPILE_TIMEOUT": "compile_timeout",
    "IDRRUN_CACHE_DIR": "cache_dir",
    "IDRRUN_EXAMPLES": "examples_dir",
    "IDRRUN_OFFLOAD": "offload",
}


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for var, key in _ENV_KEYS.items():
        value = environ.get(var)
        if not value:
            continue
        if key in ("timeout", "compile_timeout"):
            try:
                raw[key] = float(value)
            except ValueError:
                raise ConfigError(f"environment variable {var}: expected a number, got {value!r}") from None
        else:
            raw[key] = value
    return raw


def load(workdir: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read every layer, in precedence order, into one Settings."""
    environ = os.environ if environ is None else environ
    workdir = Path.cwd() if workdir is None else workdir
    merged: dict[str, Any] = {}
    files: list[str] = []

    def apply(layer: dict[str, Any]) -> None:
        for key, value in layer.items():
            if key == "compilers":
                for family, table in value.items():
                    merged.setdefault("compilers", {}).setdefault(family, {}).update(table)
            elif key == "limits":
                merged.setdefault("limits", {}).update(value)
            else:
                merged[key] = value

    site = environ.get("IDR_CONFIG_FILE")
    if site:
        path = Path(site)
        raw = read_idris_site_file(path)
        apply(_check_layer(raw, f"{path} (IDR_CONFIG_FILE)"))
        files.append(str(path))
    for path in (user_config_path(), workdir / "idrrun.toml"):
        if path.is_file():
            apply(_check_layer(_read_toml(path), str(path)))
            files.append(str(path))
    env_file = environ.get("IDRRUN_CONFIG")
    if env_file:
        path = Path(env_file)
        if not path.is_file():
            raise ConfigError(f"IDRRUN_CONFIG={env_file}: no such file")
        apply(_check_layer(_read_toml(path), str(path)))
        files.append(str(path))
    apply(_check_layer(_env_layer(environ), "environment"))
    if "limits" in merged:
        merged["limits"] = replace(Limits(), **merged["limits"])
    return Settings(**merged, files=tuple(files))
