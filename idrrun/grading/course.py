"""The course's own check (every solution passes, every start file builds and fails) and the
students' copies of the notebooks (without the cells tagged "solution")."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from .. import build as build_mod
from ..checks.specs import Exercise
from ..model import FailureKind, Probe, Settings
from ..request import notebook
from ..request import source as source_mod
from .classroom import GradeRow, Submission, grade_one

_COMPILE_FAILURES = (FailureKind.COMPILE_ERROR, FailureKind.COMPILE_TIMEOUT)
SANDBOX = "none (the course's own files)"


@dataclass(frozen=True)
class CourseRow:
    exercise: str
    language: str
    solution: GradeRow
    start: GradeRow

    @property
    def ok(self) -> bool:
        """The solution passes (or could not be judged fully here), the start file builds and
        fails."""
        return (self.solution.status in ("pass", "incomplete") and self.start.status == "fail"
                and self.start.failure not in _COMPILE_FAILURES)

    @property
    def incomplete(self) -> bool:
        """OK as far as this machine can tell: some of the solution's checks need a GPU."""
        return self.ok and self.solution.status == "incomplete"


def course_check(exercises: Sequence[Exercise], languages: Sequence[str] | None, settings: Settings,
                 probe: Probe, jobs: int,
                 on_done: Callable[[GradeRow], None] | None = None) -> list[CourseRow]:
    subs: list[tuple[Exercise, str, str, Submission]] = []
    for ex in exercises:
        for language, pair in ex.sources.items():
            if languages and language not in languages:
                continue
            for role, path in (("solution", pair.solution), ("start", pair.exercise)):
                src = source_mod.from_file(path, language, path.name)  # type: ignore[arg-type]
                subs.append((ex, language, role, Submission(f"{ex.name}/{language}/{role}", path, src)))
    results: dict[int, GradeRow] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        # The course's own files: nothing hostile to wall off, so no sandbox.
        futures = {pool.submit(grade_one, s[3], s[0], settings, probe, None, SANDBOX): i
                   for i, s in enumerate(subs)}
        for future in as_completed(futures):
            i = futures[future]
            results[i] = future.result()
            if on_done is not None:
                on_done(results[i])
    rows: list[CourseRow] = []
    for i in range(0, len(subs), 2):
        ex, language = subs[i][0], subs[i][1]
        rows.append(CourseRow(ex.name, language, solution=results[i], start=results[i + 1]))
    return rows


def strip_solutions(path: Path, dest: Path) -> int:
    """Copy a notebook without the cells tagged "solution"; returns how many were removed."""
    data = notebook.read(path)
    cells = data.get("cells", [])
    kept = [c for c in cells if "solution" not in c.get("metadata", {}).get("tags", [])]
    for cell in kept:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    data["cells"] = kept
    build_mod.write_atomic(dest, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return len(cells) - len(kept)
