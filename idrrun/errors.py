"""The few exceptions idrrun raises: misconfiguration, not course outcomes.

A compile error, a crash, a timeout or a wrong answer are *results* (see model.py). These
exceptions are for things that stop idrrun from trying at all: bad flags, a compiler that is
not installed, an exercise that does not exist, a broken config file.
"""

from __future__ import annotations


class IdrrunError(Exception):
    """Base class: a one-line message meant for the user, no traceback."""

    exit_code = 2


class UsageError(IdrrunError):
    """Bad flags or arguments."""


class ConfigError(IdrrunError):
    """A config or site file that cannot be read; the message names the file and the field."""


class ToolNotFound(IdrrunError):
    """A compiler or launcher is not installed; the message says how to get it."""


class SpecError(IdrrunError):
    """An exercise spec that is missing or malformed; the message names the file and field."""
