"""idrrun: compile, run and check OpenACC course code from Jupyter and the terminal."""

from __future__ import annotations

from .version import __version__

__all__ = ["__version__", "load_ipython_extension"]


def __getattr__(name: str) -> object:
    # `%load_ext idrrun` looks up load_ipython_extension: the magics are imported then, and
    # `import idrrun` alone (the idrrun command's start) stays free of typing and IPython.
    if name == "load_ipython_extension":
        from .magic import load_ipython_extension

        return load_ipython_extension
    raise AttributeError(f"module 'idrrun' has no attribute {name!r}")
