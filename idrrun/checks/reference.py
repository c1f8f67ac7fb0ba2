"""Reference values: what an exercise's solution prints (and the pictures it writes) for the
spec's public arguments, kept in the course so that a students' copy, which carries no
solution, still evaluates the checks that compare with it (`matches_solution`, `image`).

    examples/reference/NAME/reference.toml       one entry per language and target
    examples/reference/NAME/LANG-TARGET/output.txt  the solution's output for those arguments
    examples/reference/NAME/LANG-TARGET/FILE         the files its image checks compare
                                                     (FILE.gz where FILE is over 4 MiB)

`idrrun course references` runs each solution and writes them (authoring/references.py); `idrrun
course check` holds each solution to its reference. Nothing is kept for hidden argument sets:
a reference is looked up by the exact public arguments, host or GPU, and an entry the command
could not make (the GPU arguments take too long on a host) says why instead:

    [c.host]
    args = ["1000000"]
    made = "gcc 12.2.0, built for the host"

    [c.gpu]
    args = ["100000000"]
    missing = "the solution ran past 60 s on a host without a GPU"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .specs import Exercise

FOLDER = "reference"  # beside the specs
INDEX = "reference.toml"
OUTPUT = "output.txt"
PACKED = ".gz"  # a picture kept gzip-compressed (authoring/references.py: over MAX_REFERENCE_FILE)
TARGETS = ("host", "gpu")
# Why a check that compares with the solution cannot be evaluated from the references.
NO_TARGET_REFERENCE = "no reference for the {target} arguments"
# Whose each number is, said: the run's own arguments, then the exercise's.
OTHER_ARGUMENTS = ("no reference for your arguments ({args}): the course carries the solution's "
                   "output for the exercise's own arguments only ({own})")


@dataclass(frozen=True)
class Reference:
    """The solution's output for some arguments, from the course's references."""

    output: str | None  # None: no reference for them (problem says why)
    folder: Path | None = None  # where its files are (the pictures image checks compare)
    problem: str = ""
    # The files it does not keep, with why ("mandelbrot.pgm (13.4 MB: larger than …)").
    left_out: tuple[str, ...] = ()


def kept_file(where: Path, name: str) -> Path:
    """A solution's file in a folder of its files: NAME, or NAME.gz where a reference keeps it
    compressed (images read either); NAME when neither is there."""
    plain = where / name
    packed = where / (name + PACKED)
    return packed if not plain.is_file() and packed.is_file() else plain


def folder(exercise: Exercise) -> Path:
    """The exercise's references: examples/reference/NAME."""
    return exercise.path.parent / FOLDER / exercise.name


def entry_folder(exercise: Exercise, language: str, target: str) -> Path:
    return folder(exercise) / f"{language}-{target}"


def read_index(exercise: Exercise) -> dict[str, Any] | None:
    """reference.toml as it is; None when the exercise has none (or it cannot be read)."""
    try:
        with (folder(exercise) / INDEX).open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return None


def target_args(exercise: Exercise) -> dict[str, tuple[str, ...]]:
    """The public argument sets a reference is kept for: host, and gpu when it differs."""
    out = {"host": exercise.host_args}
    if exercise.gpu_args != exercise.host_args:
        out["gpu"] = exercise.gpu_args
    return out


def describe(target: str) -> str:
    return "GPU" if target == "gpu" else target


def lookup(exercise: Exercise, language: str, args: tuple[str, ...]) -> Reference | None:
    """The reference for a run of `language` with `args`: only the exercise's public arguments
    have one, and only while they are the ones it was made with. None: the exercise has no
    references at all."""
    index = read_index(exercise)
    if index is None:
        return None
    entries = index.get(language)
    for target, public in target_args(exercise).items():
        if tuple(args) != public:
            continue
        found = entries.get(target) if isinstance(entries, dict) else None
        entry: dict[str, Any] = found if isinstance(found, dict) else {}
        made = "args" in entry and tuple(str(a) for a in entry["args"]) == public
        if not made or "missing" in entry:
            why = str(entry.get("missing", "")) if made else "not made for them"
            return Reference(None, problem=NO_TARGET_REFERENCE.format(target=describe(target))
                             + (f" ({why})" if why else ""))
        where = entry_folder(exercise, language, target)
        try:
            output = (where / OUTPUT).read_text(encoding="utf-8")
        except OSError as exc:
            return Reference(None, problem=f"{NO_TARGET_REFERENCE.format(target=describe(target))} "
                                           f"({where / OUTPUT}: {exc.strerror})")
        return Reference(output, where,
                         left_out=tuple(str(f) for f in entry.get("left_out", ()) or ()))
    own = "; ".join(f"{describe(target)}: {' '.join(public) or 'none'}"
                    for target, public in target_args(exercise).items())
    return Reference(None, problem=OTHER_ARGUMENTS.format(args=" ".join(args) or "none", own=own))
