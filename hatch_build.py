"""Build hook run before hatch-jupyter-builder: a clear stop when npm is missing.

The wheel carries idrrun's JupyterLab extension, built from labextension/ with npm. Without npm,
hatch-jupyter-builder stops with "Could not find cmd (npm) in path", which says neither what
needs it nor what to do; this says both. SKIP_JUPYTER_BUILDER is hatch-jupyter-builder's own
switch, honoured here too.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NO_NPM = """\
idrrun's JupyterLab extension (labextension/) is built with Node.js and npm while the wheel is \
built, and npm is not on PATH.
  Install them first, e.g. `apt-get install nodejs npm` (Node.js >= 18), or Node.js from \
https://nodejs.org/, then run pip again.
  Without the extension, %%idrrun cells show as Python in JupyterLab: \
SKIP_JUPYTER_BUILDER=1 pip install -e . installs idrrun that way."""


class NpmCheckHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("SKIP_JUPYTER_BUILDER"):
            return
        if shutil.which("npm") is None:
            raise RuntimeError(NO_NPM)
