"""idrrun: compile, run and check OpenACC course code from Jupyter and the terminal."""

from __future__ import annotations

from typing import Any

from .version import __version__

__all__ = ["__version__", "load_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext idrrun` registers %%idrrun, %idrrunfile and %idrrun_doctor."""
    from .magic import IdrrunMagics

    ipython.register_magics(IdrrunMagics)
