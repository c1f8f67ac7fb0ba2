"""Reference values: the solutions' outputs for an exercise's public arguments, made once by
`idrrun course references` into `examples/reference/` (checks/reference.py reads them), so that a
students' course, which has no solutions, compares with them.

    make_references(exercises, languages, settings, probe, jobs, targets, ...) -> [(ReferenceRow, SolutionRun)]
    reference_checks(exercise, language, settings, output) -> the solution's output held to them
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from ..checking import SolutionRun, solution_output
from ..checks import reference, registry
from ..checks.evidence import Evidence
from ..checks.specs import Exercise
from ..checks.verdict import evaluate_one
from ..errors import IdrrunError
from ..pipeline import Job, prepare
from ..model import BuildResult, CheckResult, Probe, ProcResult, RunResult, Settings, Toolchain
from ..request import resolve
from ..request import source as source_mod
from ..request.options import Options


# Reference values: the solutions' outputs for the public arguments (checks/reference.py)

# A reference for the GPU arguments made on a host: each run may take this many times the
# exercise's timeout (a GPU-size run on one core is long), unless --gpu-timeout says.
GPU_ON_HOST_FACTOR = 1.0
# The course (and the wheel) carries no picture larger than this, once gzip-compressed (a larger
# one is kept as NAME.gz: mandelbrot_rows' 13.4 MB at the GPU arguments is 0.6 MB so): its image
# check is then incomplete for those arguments.
MAX_REFERENCE_FILE = 4 << 20
REFERENCE_NOTE = ("The solutions' outputs for the exercise's public arguments (idrrun course",
                  "references): a students' course, which has no solutions, compares with them.")


@dataclass(frozen=True)
class ReferenceRow:
    """What `idrrun course references` did for one exercise, language and argument set."""

    exercise: str
    language: str
    target: str  # "host" or "gpu"
    args: tuple[str, ...]
    made: str = ""  # how it was made, when it was
    missing: str = ""  # why it was not
    seconds: float = 0.0


def _solution_job(exercise: Exercise, language: str, settings: Settings, probe: Probe) -> Job:
    """The solution's Job as a student's check would compare with it (OpenACC or OpenMP as
    the exercise asks), run where solution_output runs it (a scratch folder)."""
    pair = exercise.sources[language]
    assert pair.solution is not None
    src = source_mod.from_file(pair.solution, language, str(pair.solution))  # type: ignore[arg-type]
    model = Options(acc=True) if exercise.model == "openacc" else Options()
    request, toolchain = resolve.resolve(model, src, pair.solution.parent, settings, probe,
                                         exercise)
    return prepare(request, toolchain, probe, settings)


def _made(toolchain: Toolchain) -> str:
    return f"{toolchain.compiler.version}, built for the {toolchain.target}"


def make_reference(exercise: Exercise, language: str, target: str, settings: Settings,
                   probe: Probe, gpu_timeout: float | None = None) -> tuple[ReferenceRow, SolutionRun | None]:
    """The solution run with the target's public arguments (a GPU-size run on a host within
    gpu_timeout seconds); the row says how, or why not."""
    args = reference.target_args(exercise)[target]
    try:
        job = _solution_job(exercise, language, settings, probe).with_args(args)
    except IdrrunError as exc:
        return ReferenceRow(exercise.name, language, target, args, missing=str(exc)), None
    toolchain = job.toolchain
    if target == "gpu" and toolchain.target != "gpu":
        limit = gpu_timeout if gpu_timeout is not None else exercise.timeout * GPU_ON_HOST_FACTOR
        job = job.with_timeout(limit)
    run = solution_output(job, exercise)
    if run.output is None:
        where = "on a host without a GPU" if toolchain.target != "gpu" else "here"
        return ReferenceRow(exercise.name, language, target, args,
                            missing=f"not made {where}: {run.problem}"), None
    return ReferenceRow(exercise.name, language, target, args, made=_made(toolchain)), run


def _keep_file(files: Path, name: str, folder: Path) -> str:
    """The solution's file `name` (a picture, in `files`) kept in the reference folder: as it
    is, or as NAME.gz over MAX_REFERENCE_FILE; "" when kept (or not written), else why not."""
    picture = files / name
    if not picture.is_file():
        return ""
    size = picture.stat().st_size
    if size <= MAX_REFERENCE_FILE:
        shutil.copyfile(picture, folder / name)
        return ""
    # mtime 0: the same picture makes the same bytes (the course is under git).
    packed = gzip.compress(picture.read_bytes(), compresslevel=9, mtime=0)
    if len(packed) <= MAX_REFERENCE_FILE:
        (folder / (name + reference.PACKED)).write_bytes(packed)
        return ""
    return (f"{name} ({size / 1e6:.1f} MB, {len(packed) / 1e6:.1f} MB compressed: larger "
            f"than the {MAX_REFERENCE_FILE >> 20} MiB a reference keeps)")


def write_references(exercise: Exercise, made: Sequence[tuple[ReferenceRow, SolutionRun | None]]) -> Path:
    """The exercise's reference folder from what make_reference returned: every entry given
    replaced (an entry not made keeps the one already there, when it was made for the same
    arguments: a host without a GPU does not forget what a GPU made)."""
    base = reference.folder(exercise)
    base.mkdir(parents=True, exist_ok=True)
    index = reference.read_index(exercise) or {}
    for row, run in made:
        old = index.get(row.language, {}).get(row.target)
        kept = isinstance(old, dict) and "missing" not in old and \
            tuple(str(a) for a in old.get("args", ())) == row.args
        if run is None and kept:
            continue
        entry: dict[str, object] = {"args": list(row.args)}
        folder = reference.entry_folder(exercise, row.language, row.target)
        shutil.rmtree(folder, ignore_errors=True)
        if run is None or run.output is None:
            entry["missing"] = row.missing
        else:
            entry["made"] = row.made
            folder.mkdir(parents=True)
            (folder / reference.OUTPUT).write_text(run.output, encoding="utf-8")
            left_out = [why for name in exercise.solution_files
                        if run.files is not None and (why := _keep_file(run.files, name, folder))]
            if left_out:
                entry["left_out"] = left_out
        index.setdefault(row.language, {})[row.target] = entry
    doc = tomlkit.document()
    for line in REFERENCE_NOTE:
        doc.add(tomlkit.comment(line))
    for language in sorted(index):
        table = tomlkit.table(is_super_table=True)
        for target in reference.TARGETS:
            if target in index[language]:
                table.add(target, index[language][target])
        doc.add(language, table)
    (base / reference.INDEX).write_text(tomlkit.dumps(doc), encoding="utf-8")
    return base


def make_references(exercises: Sequence[Exercise], languages: Sequence[str] | None,
                    settings: Settings, probe: Probe, jobs: int, targets: Sequence[str],
                    gpu_timeout: float | None = None,
                    on_done: Callable[[ReferenceRow], None] | None = None) -> list[ReferenceRow]:
    """Every exercise that compares with its solution: the solution run with each of the
    targets' public arguments, its output (and pictures) written as the exercise's references."""
    work = [(ex, language, target) for ex in exercises if ex.needs_solution
            for language, pair in ex.sources.items()
            if pair.solution is not None and (not languages or language in languages)
            for target in reference.target_args(ex) if target in targets]
    done: dict[int, tuple[ReferenceRow, SolutionRun | None]] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(make_reference, ex, language, target, settings, probe,
                               gpu_timeout): i for i, (ex, language, target) in enumerate(work)}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            if on_done is not None:
                on_done(done[futures[future]][0])
    for ex in exercises:
        mine = [done[i] for i, w in enumerate(work) if w[0] is ex]
        if mine:
            write_references(ex, mine)
    return [done[i][0] for i in range(len(work))]


def reference_checks(exercise: Exercise, language: str, settings: Settings,
                     probe: Probe) -> tuple[CheckResult, ...]:
    """The exercise's checks that compare with the solution, evaluated on the solution's own run
    here against its reference for the same arguments: a solution that no longer prints what
    its reference says fails them (make the references again)."""
    if not exercise.needs_solution or exercise.sources[language].solution is None:
        return ()
    try:
        job = _solution_job(exercise, language, settings, probe)
    except IdrrunError as exc:
        return (CheckResult("reference", "fail", reason=str(exc)),)
    ref = reference.lookup(exercise, language, job.request.program_args)
    if ref is None:
        return (CheckResult("reference", "fail", "reference values", "none", NO_REFERENCE),)
    ran = solution_output(job, exercise)
    if ran.output is None:
        return (CheckResult("reference", "incomplete",
                            reason=f"the solution did not run: {ran.problem}"),)
    built = BuildResult(ok=True, command=(), proc=None, output="", cached=True, key="",
                        build_dir=None)
    run = RunResult(("solution",), ProcResult(("solution",), 0, output=ran.output))
    evidence = Evidence(source_text="", language=language, build=built, run=run, acc=None,
                        solution_output=ref.output, solution_problem=ref.problem,
                        from_reference=True, run_dir=ran.files, solution_dir=ref.folder,
                        solution_left_out=ref.left_out)
    solution_kinds = {k.name for k in registry.all_kinds() if k.needs_solution}
    return tuple(dataclasses.replace(evaluate_one(c, evidence), name=f"{c.label} (reference)")
                 for c in exercise.checks if c.kind in solution_kinds)


NO_REFERENCE = ("no reference values: run `idrrun course references` (the students' course "
                "compares with them)")


# ---------------------------------------------------------------------------------------
# Students' notebooks
