"""Build hook run before hatch-jupyter-builder: the students' course into the wheel, and a clear
stop when npm is missing.

The course. `pip install idrrun` reaches every student: the wheel carries the students' copy of
the course (as idrrun/course/), made here by the code of `idrrun course init --students`
(idrrun/authoring/copies.py, imported from this source tree): the notebooks without their solution
cells, the examples without the solutions (but those the notebooks show), the specs without
hidden argument sets, draw ranges or grading-only checks, and in the solutions' place their
reference values for the public arguments (examples/reference/, made beforehand by `idrrun course
references`: nothing is run here, the build stays fast). The teacher's course stays in the
repository and the sdist (`idrrun course init DIR --from CHECKOUT`). An editable install
(`pip install -e .`) carries nothing: idrrun finds the checkout's whole course beside itself.

npm. The wheel carries idrrun's JupyterLab extension, built from labextension/ with npm. Without
npm, hatch-jupyter-builder stops with "Could not find cmd (npm) in path", which says neither what
needs it nor what to do; this says both. SKIP_JUPYTER_BUILDER is hatch-jupyter-builder's own
switch, honoured here too.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NO_NPM = """\
idrrun's JupyterLab extension (labextension/) is built with Node.js and npm while the wheel is \
built, and npm is not on PATH.
  Install them first, e.g. `apt-get install nodejs npm` (Node.js >= 18), or Node.js from \
https://nodejs.org/, then run pip again.
  Without the extension, %%idrrun cells show as Python in JupyterLab: \
SKIP_JUPYTER_BUILDER=1 pip install -e . installs idrrun that way."""
# Where the course goes in the wheel (checks/specs.py INSTALLED_COURSE).
COURSE_IN_WHEEL = "idrrun/course"


def students_course(root: Path, dest: Path) -> str:
    """The students' copy of the course in root, written to the new folder dest by idrrun's own
    `course init --students`; returns what was left out, in words."""
    sys.path.insert(0, str(root))
    try:
        course = importlib.import_module("idrrun.authoring.copies")
    finally:
        sys.path.remove(str(root))
    if not Path(course.__file__).resolve().is_relative_to(root.resolve()):
        raise RuntimeError(f"the students' course must be made by this tree's idrrun, not by "
                           f"{course.__file__}")
    done = course.init_course(root, dest, students=True)
    return (f"{done.notebooks} notebooks, {done.solution_cells_removed} solution cells removed, "
            f"{len(done.solutions_left_out)} solution sources left out")


class CourseAndNpmHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if not os.environ.get("SKIP_JUPYTER_BUILDER") and shutil.which("npm") is None:
            raise RuntimeError(NO_NPM)
        if version == "editable":
            return
        self._scratch = Path(tempfile.mkdtemp(prefix="idrrun-wheel-course-"))
        said = students_course(Path(self.root), self._scratch / "course")
        build_data["force_include"][str(self._scratch / "course")] = COURSE_IN_WHEEL
        self.app.display_info(f"{COURSE_IN_WHEEL}: the students' course ({said})")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
