"""The few exceptions idrrun raises: misconfiguration, not course outcomes.

A compile error, a crash, a timeout or a wrong answer are *results* (see model.py). These
exceptions are for things that stop idrrun from trying at all: bad flags, a compiler that is
not installed, an exercise that does not exist, a broken config file.
"""

from __future__ import annotations

# collections costs ~4 ms of the resident caller's start (cli.py imports this module), for a
# name only the annotations read
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


class IdrrunError(Exception):
    """Base class: a one-line message meant for the user, no traceback."""

    exit_code = 2


class UsageError(IdrrunError):
    """Bad flags or arguments."""


class ConfigError(IdrrunError):
    """A config or site file that cannot be read; the message names the file and the field."""


class ToolNotFound(IdrrunError):
    """A compiler or launcher is not installed; the message says how to get it."""


# What a cell with `-m N` says when Open MPI is missing (its compiler wrapper or its mpirun).
MPI_MISSING = ("-m N runs the program on N MPI ranks, with Open MPI: apt-get install openmpi-bin "
               "libopenmpi-dev (`idrrun doctor` lists the notebooks that need it)")


class SpecError(IdrrunError):
    """An exercise spec that is missing or malformed; the message names the file and field."""


def closest(word: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The one of `known` that `word` is most likely a typo of; None when none is close."""
    # Late: only a typo pays for difflib (2 ms), not `idrrun --version` nor the resident caller,
    # which import this module.
    import difflib

    found = difflib.get_close_matches(word, sorted(set(known)), n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """" (did you mean --cliopts?)" when `word` is a typo of one of `known`, else "": for the
    message of an unknown flag, command or exercise."""
    found = closest(word, known, cutoff)
    return f" (did you mean {found}?)" if found is not None else ""
