"""Settings and where they come from, written down once.

Precedence, lowest first (each layer overrides the ones before it):

    1. built-in defaults
    2. an IDRIS site file (JSON), when IDR_CONFIG_FILE names one
    3. the user file:    $XDG_CONFIG_HOME/idrrun/config.toml (~/.config/idrrun/config.toml)
    4. the project file: ./idrrun.toml in the working directory; for the grader (`idrrun grade`,
       `idrrun course check`) only the file given with --config: it never reads one from the
       folder it runs in, which may be the submissions' (load's `project`)
    5. the environment:  the file named by IDRRUN_CONFIG, then IDRRUN_* variables
    6. the magic line or the command line (options.py), applied by the front ends

A file that cannot be read stops idrrun with a ConfigError naming the file and the field.

The settings that back a flag (timeout, limits.memory, family, ...) are declared with the flag in
options.py (its `setting` key and `env` variable) and parsed by the flag's own parser; only the
settings without a flag (compilers, launcher, profiler, folders) are validated here.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..model import LauncherConfig, Settings
from ..run import sandbox
from ..toolchains import registry
from . import options

LAUNCHER_KINDS = ("none", "mpirun", "srun")
OFFLOAD_MODES = ("auto", "gpu", "host")
# Keys of [compilers.FAMILY]: a command per language, MPI wrappers, extra flags.
COMPILER_KEYS = ("c", "c++", "fortran", "cuda", "mpi_c", "mpi_c++", "mpi_fortran")
# Environment variables of the settings without a flag (the flags name their own).
_ENV_PLAIN = {"IDRRUN_CACHE_DIR": "cache_dir", "IDRRUN_EXAMPLES": "examples_dir",
              "IDRRUN_OFFLOAD": "offload"}
# ... and those of a table's field: variable -> (table, field)
_ENV_TABLES = {"IDRRUN_GRADING_SEED": ("grading", "seed")}


PROJECT_FILE = "idrrun.toml"


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "idrrun" / "config.toml"


def _flag_settings() -> dict[str, tuple[str, options.FlagSpec]]:
    """config key ("timeout", "limits.memory") -> (Options field, its spec)."""
    return {spec.setting: (name, spec) for name, spec in options.specs() if spec.setting}


# ---------------------------------------------------------------------------------------
# Validation: each layer is checked when read so the error names the file it came from.


def _field(origin: str, path: str) -> str:
    return f"{origin}: field '{path}'"


def _flag_value(spec: options.FlagSpec, value: Any, where: str) -> object:
    """A config value through the flag's own parser: `timeout = 300`, `memory = "2GiB"`."""
    if isinstance(value, bool) and spec.parse is options.on_off:
        value = "on" if value else "off"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: expected a value like on the line ({spec.names[-1]} "
                          f"{spec.metavar or 'VALUE'}), got {value!r}")
    assert spec.parse is not None
    try:
        parsed = spec.parse(str(value))
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if spec.choices is not None and parsed not in tuple(spec.choices()):
        raise ConfigError(f"{where}: expected one of {', '.join(spec.choices())}, got {value!r}")
    return parsed


def _check_layer(raw: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """Validated values: flag-backed ones under "values" (by Options field), the rest by name."""
    flags = _flag_settings()
    out: dict[str, Any] = {"values": {}}
    for key, value in raw.items():
        where = _field(origin, key)
        if key in flags:
            name, spec = flags[key]
            out["values"][name] = _flag_value(spec, value, where)
        elif any(k.startswith(f"{key}.") for k in flags):
            # A table of flag settings: [limits] memory = ..., [sandbox] mode = ...
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: expected a table [{key}]")
            for sub, item in value.items():
                if f"{key}.{sub}" not in flags:
                    known = ", ".join(k.split(".", 1)[1] for k in flags if k.startswith(f"{key}."))
                    raise ConfigError(f"{_field(origin, f'{key}.{sub}')}: unknown field (known: {known})")
                name, spec = flags[f"{key}.{sub}"]
                out["values"][name] = _flag_value(spec, item, _field(origin, f"{key}.{sub}"))
        elif key == "offload":
            out[key] = _choice(value, OFFLOAD_MODES, where)
        elif key in ("cache_dir", "examples_dir"):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}: expected a folder path (a string), got {value!r}")
            # Absolute (from the working folder, as before): a path idrrun puts on a tool's
            # command line never reads as an option, whatever its first character.
            out[key] = Path(os.path.expanduser(value)).absolute()
        elif key == "compilers":
            out[key] = _compilers(value, origin)
        elif key == "launcher":
            out[key] = _launcher(value, origin)
        elif key == "profiler":
            out[key] = _profiler(value, where)
        elif key == "grading":
            out["grading_seed"] = _grading(value, origin)
        else:
            raise ConfigError(f"{where}: unknown field")
    return out


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if not isinstance(value, str) or value.lower() not in choices:
        raise ConfigError(f"{where}: expected one of {', '.join(choices)}, got {value!r}")
    return value.lower()


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _compilers(value: Any, origin: str) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{_field(origin, 'compilers')}: expected a table [compilers.FAMILY]")
    out: dict[str, dict[str, Any]] = {}
    known = registry.names()
    for family, table in value.items():
        fwhere = f"compilers.{family}"
        if family not in known:
            raise ConfigError(f"{_field(origin, fwhere)}: unknown compiler family "
                              f"(known: {', '.join(known)})")
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


def _launcher(value: Any, origin: str) -> LauncherConfig:
    if not isinstance(value, dict):
        raise ConfigError(f"{_field(origin, 'launcher')}: expected a table [launcher]")
    kind = _choice(value.get("kind", "none"), LAUNCHER_KINDS, _field(origin, "launcher.kind"))
    fields: dict[str, Any] = {"kind": kind}
    for key in ("command", "tasks", "threads", "gpus", "nodes"):
        if key in value:
            if not isinstance(value[key], str):
                raise ConfigError(f"{_field(origin, f'launcher.{key}')}: expected a string, "
                                  f"got {value[key]!r}")
            fields[key] = value[key]
    if "options" in value:
        fields["options"] = _str_list(value["options"], _field(origin, "launcher.options"))
    if "builds" in value:
        if not isinstance(value["builds"], bool):
            raise ConfigError(f"{_field(origin, 'launcher.builds')}: expected true or false, "
                              f"got {value['builds']!r}")
        fields["builds"] = value["builds"]
    unknown = set(value) - {"kind", "command", "tasks", "threads", "gpus", "nodes", "options", "builds"}
    if unknown:
        raise ConfigError(f"{_field(origin, 'launcher.' + sorted(unknown)[0])}: unknown field")
    return LauncherConfig(**fields)


def _grading(value: Any, origin: str) -> str:
    """[grading] seed = "...": the seed of the hidden argument sets drawn when grading."""
    if not isinstance(value, dict):
        raise ConfigError(f"{_field(origin, 'grading')}: expected a table [grading]")
    unknown = sorted(set(value) - {"seed"})
    if unknown:
        raise ConfigError(f"{_field(origin, 'grading.' + unknown[0])}: unknown field (known: seed)")
    seed = value.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, (str, int)) or str(seed) == "":
        raise ConfigError(f"{_field(origin, 'grading.seed')}: expected a text or a whole number, "
                          f"got {seed!r}")
    return str(seed)


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


def _file_layer(path: Path) -> dict[str, Any]:
    """A TOML file's layer. One holding [grading] seed must not be readable by other users (it
    draws every hidden case of a class): refused, as a course others can read is refused where
    a box could read it (grading/grader.py sandbox_level), with the same test."""
    layer = _check_layer(_read_toml(path), str(path))
    if "grading_seed" in layer and sandbox.readable_by_others(path):
        raise ConfigError(f"{path}: holds [grading] seed and other users can read it (every "
                          f"local user, and at the uid sandbox level every program graded): "
                          f"chmod 600 {path}, or give the seed with --seed-file or "
                          f"IDRRUN_GRADING_SEED")
    return layer


def _site_commands(entry: Mapping[str, Any]) -> dict[str, str]:
    """A family's table of the site file: {"c": {"compiler": "nvc", ...}, ...} -> {"c": "nvc"}."""
    commands: dict[str, str] = {}
    for key in COMPILER_KEYS:
        item = entry.get(key)
        if isinstance(item, dict) and isinstance(item.get("compiler"), str):
            commands[key] = item["compiler"]
    return commands


def _site_compilers(data: Mapping[str, Any]) -> dict[str, Any]:
    compilers = {family: _site_commands(data[family]) for family in registry.names()
                 if isinstance(data.get(family), dict)}
    return {"compilers": compilers} if compilers else {}


def _site_launcher(data: Mapping[str, Any]) -> dict[str, Any]:
    launcher = data.get("launcher")
    if not isinstance(launcher, dict) or not launcher.get("command"):
        return {}
    command = str(launcher["command"])
    return {"launcher": {
        "kind": "srun" if os.path.basename(command.split()[0]) == "srun" else "mpirun",
        "command": command,
        "tasks": str(launcher.get("tasks", "")),
        "threads": str(launcher.get("threads", "")),
        "gpus": str(launcher.get("gpus", "")),
        "options": [str(o) for o in launcher.get("options", [])],
    }}


def _site_profiler(data: Mapping[str, Any]) -> dict[str, Any]:
    profiling = data.get("profiling")
    if not isinstance(profiling, dict) or not profiling.get("command"):
        return {}
    return {"profiler": str(profiling["command"]).split()
            + [str(o) for o in profiling.get("default_options", [])]}


def _site_defaults(data: Mapping[str, Any]) -> dict[str, Any]:
    defaults = data.get("default_settings")
    if not isinstance(defaults, dict):
        return {}
    out: dict[str, Any] = {}
    if defaults.get("compilers") in registry.names():
        out["family"] = defaults["compilers"]
    if isinstance(defaults.get("language"), str):
        out["language"] = defaults["language"]
    if isinstance(defaults.get("gpus"), int) and defaults["gpus"] > 0:
        out["gpus"] = defaults["gpus"]
    return out


# The parts of an IDRIS site file idrrun reads, each into our keys ({} when it is missing or
# not of the shape IDRIS writes: the file is written for IDRIS's own tool).
_SITE_PARTS = (_site_compilers, _site_launcher, _site_profiler, _site_defaults)


def read_idris_site_file(path: Path) -> dict[str, Any]:
    """Translate an IDRIS JSON site file (compiler families, launcher, profiling) to our keys."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{path} (IDR_CONFIG_FILE): cannot read the IDRIS site file: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} (IDR_CONFIG_FILE): expected a JSON object")
    out: dict[str, Any] = {}
    for part in _SITE_PARTS:
        out.update(part(data))
    return out


def _env_layers(environ: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """(origin, raw layer) for each IDRRUN_* variable that is set, so errors name the variable."""
    flags = {spec.env: key for key, (_, spec) in _flag_settings().items() if spec.env}
    plain = [(f"environment variable {var}", {key: environ[var]})
             for var, key in {**flags, **_ENV_PLAIN}.items() if environ.get(var)]
    return plain + [(f"environment variable {var}", {table: {key: environ[var]}})
                    for var, (table, key) in _ENV_TABLES.items() if environ.get(var)]


def project_file(workdir: Path) -> Path | None:
    """./idrrun.toml of `workdir`, when there is one."""
    path = workdir / PROJECT_FILE
    return path if path.is_file() else None


def _project_layer(workdir: Path, project: Path | bool) -> list[Path]:
    if project is True:
        found = project_file(workdir)
        return [found] if found is not None else []
    if project is False:
        return []
    if not project.is_file():
        raise ConfigError(f"{project} (--config): no such file")
    return [project]


def load(workdir: Path | None = None, environ: Mapping[str, str] | None = None,
         project: Path | bool = True) -> Settings:
    """Read every layer, in precedence order, into one Settings.

    project: the project layer. True: ./idrrun.toml of `workdir`, when there is one; a path:
    that file (--config; it must exist); False: none. The grader passes False or its --config:
    where it runs may be the submissions' folder, and a config handed in there names the
    commands it would run as root (compilers, launcher, profiler). The site and user files and
    the IDRRUN_* variables stay: they are the teacher's own."""
    environ = os.environ if environ is None else environ
    workdir = Path.cwd() if workdir is None else workdir
    merged: dict[str, Any] = {"values": {}}
    files: list[str] = []

    def apply(layer: dict[str, Any]) -> None:
        for key, value in layer.items():
            if key == "compilers":
                for family, table in value.items():
                    merged.setdefault("compilers", {}).setdefault(family, {}).update(table)
            elif key == "values":
                merged["values"].update(value)
            else:
                merged[key] = value

    site = environ.get("IDR_CONFIG_FILE")
    if site:
        path = Path(site)
        apply(_check_layer(read_idris_site_file(path), f"{path} (IDR_CONFIG_FILE)"))
        files.append(str(path))
    user = user_config_path()
    for path in ([user] if user.is_file() else []) + _project_layer(workdir, project):
        apply(_file_layer(path))
        files.append(str(path))
    env_file = environ.get("IDRRUN_CONFIG")
    if env_file:
        path = Path(env_file)
        if not path.is_file():
            raise ConfigError(f"IDRRUN_CONFIG={env_file}: no such file")
        apply(_file_layer(path))
        files.append(str(path))
    for origin, layer in _env_layers(environ):
        apply(_check_layer(layer, origin))
    return Settings(**merged, files=tuple(files))
