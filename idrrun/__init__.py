"""idrrun: compile, run and check OpenACC course code from Jupyter and the terminal."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext idrrun` registers %%idrrun, %idrrunfile and %idrrun_doctor."""
    from .magic import IdrrunMagics

    ipython.register_magics(IdrrunMagics)
