"""Finding a class's submissions: one per student, each read once, through a descriptor of its
folder, bounded, never following a link, into the grader's own copy; what cannot be graded is a
Submission that says why.

    discover(paths, exercise, language, into) -> [Submission]
    take_in(submission, into) -> Submission      (one made by hand: read now, as discover reads)

Read once (STYLE.md 21): a student's folder is hers to change at any moment (inotify tells her
when the grader reads). What is digested (the resume key), compared (similarity) and compiled
is one copy, read once by descriptor into a folder only the grader can write; nothing reads her
files again after that.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import posixpath
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import build
from ..checks.specs import Exercise
from ..errors import IdrrunError, UsageError
from ..model import Language, Source
from ..request import notebook, options
from ..request import source as source_mod
from ..request.options import Options
from ..run import boundary, rooms, sandbox
from . import names



SOURCE_SUFFIXES = {".c", ".cpp", ".cc", ".cxx", ".cu", ".f90", ".f95", ".f03", ".f08", ".f", ".F90"}
# What a source may include besides other sources: headers and Fortran include files.
INCLUDABLE_SUFFIXES = SOURCE_SUFFIXES | {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".fi", ".fh"}


# A submission bigger than this is refused (one error row), not read into the grader's memory.
MAX_SOURCE_BYTES = 2 << 20


# The most of a folder a student may hand in (its walk at discovery, its copy into the box).
SUBMISSION_BUDGET = boundary.Budget()


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path  # what was handed in: a file, a notebook or a folder
    source: Source | None  # None when it could not be read
    problem: str = ""  # why source is None
    options: Options = Options()  # a notebook's magic line (the grader's policy keeps what it allows)
    chosen: Path | None = None  # in a folder handed in, the file that is graded
    # sha256 of what was handed in (the file's bytes; a folder's files, names and bytes), as
    # read into `copy`: a resumed grading keeps a row only for the same content (report.resume).
    digest: str = ""
    # The grader's copy of what was handed in (a folder only the grader can write, holding the
    # file, or the folder's regular files): the one read of the student's files, which the digest,
    # the source and the compile are made of. None: not read yet (take_in reads it).
    copy: Path | None = None

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        """In a folder handed in, the files the graded source includes from it, transitively, as
        the compiler finds them (build.local_includes): (name beside the source, text). They are
        the student's code as much as the source is: the checks read them (Source.headers),
        similarity compares them."""
        return self.source.headers if self.source is not None else ()


def notebook_cell(nb: dict[str, Any], name: str, exercise: str) -> tuple[Options, str]:
    """The %%idrrun cell of a notebook to grade: the one with --check NAME, else the only one.

    Each line is parsed as the magic parses it, but nothing is ever printed: a line that asks
    for the help or cannot be read is never the cell graded. Returns (the line's options, cell
    body). Raises UsageError with the reason otherwise."""
    cells = notebook.magic_cells(nb)
    if not cells:
        raise UsageError(f"{name}: no %%idrrun cell")
    parsed: list[tuple[notebook.MagicCell, Options]] = []
    broken: list[tuple[notebook.MagicCell, str]] = []
    for cell in cells:
        try:
            opts = options.parse_line(cell.line, show_help=False)
        except IdrrunError as exc:
            broken.append((cell, str(exc)))
            continue
        assert opts is not None  # show_help=False: help raises
        parsed.append((cell, opts))
    # A line naming the exercise that cannot be read is the cell the student meant: its
    # reason is the row's, rather than another cell graded in its place.
    meant = [(cell, why) for cell, why in broken if exercise in cell.line.replace("=", " ").split()]
    if meant:
        raise UsageError(f"{name}: cell {meant[0][0].index + 1}: {meant[0][1]}")
    for cell, opts in parsed:
        if opts.check == exercise:
            return opts, cell.body
    if len(cells) == 1:
        if broken:
            raise UsageError(f"{name}: {broken[0][1]}")
        return parsed[0][1], parsed[0][0].body
    unread = "".join(f"; cell {cell.index + 1}: {why}" for cell, why in broken[:3])
    raise UsageError(f"{name}: {len(cells)} %%idrrun cells and none with --check {exercise}{unread}")


def _parse(raw: bytes, path: Path, student: str, exercise: Exercise,
           language: Language | None) -> Submission:
    """A submission from the bytes of its file (`path` names it in the report)."""
    try:
        if path.suffix == ".ipynb":
            opts, body = notebook_cell(notebook.parse(raw, path.name), path.name, exercise.name)
            src = source_mod.from_cell(body, f"{path.name}:cell", language or opts.language, None,
                                       path.parent)
            return Submission(student, path, src, options=opts)
        src = source_mod.from_bytes(raw, path, language, path.name, path.parent)
    except IdrrunError as exc:
        return Submission(student, path, None, str(exc))
    return Submission(student, path, src)


def _read(dirfd: int, rel: str, path: Path, student: str, exercise: Exercise,
          language: Language | None) -> Submission:
    """The file `rel` of the grader's copy `dirfd` (shown as `path`), parsed, with its digest."""
    taken = boundary.take(dirfd, rel, MAX_SOURCE_BYTES)
    if taken.data is None:
        return Submission(student, path, None, _refused_file(path, taken.why))
    return dataclasses.replace(_parse(taken.data, path, student, exercise, language),
                               digest=hashlib.sha256(taken.data).hexdigest())


def _refused_file(path: Path, why: str) -> str:
    return (f"refused: {path.name}: {why} (a submission is a regular file of at most "
            f"{MAX_SOURCE_BYTES >> 20} MiB)")


def _folder_digest(dirfd: int, files: Sequence[str]) -> str:
    """sha256 of a folder's files, names and bytes, read from the grader's copy `dirfd`."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        fd = boundary.open_beneath(dirfd, rel)
        try:
            part = hashlib.sha256()
            while chunk := os.read(fd, 1 << 20):
                part.update(chunk)
        finally:
            os.close(fd)
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(part.digest())
    return digest.hexdigest()


def _is_candidate(rel: str, language: Language | None) -> bool:
    parts = rel.split("/")
    suffix = Path(parts[-1]).suffix
    if ".ipynb_checkpoints" in parts or (suffix not in SOURCE_SUFFIXES and suffix != ".ipynb"):
        return False
    return language is None or suffix == ".ipynb" or source_mod.language_of_path(rel) == language


def _pick(files: Sequence[str], exercise: Exercise, language: Language | None) -> str | None:
    """Which of a folder's files (relative paths) is graded: a source or a notebook whose name
    holds the exercise's, else the first source or notebook."""
    candidates = sorted((rel for rel in files if _is_candidate(rel, language)),
                        key=lambda rel: rel.split("/"))
    named = [rel for rel in candidates if exercise.name in rel.rsplit("/", 1)[-1]]
    chosen = named or candidates
    return chosen[0] if chosen else None


def _copied_folder(path: Path, copy_fd: int, budget: boundary.Budget) -> list[str] | str:
    """The regular files of a handed-in folder, copied once into the grader's folder `copy_fd`
    (relative paths), or why it is refused: walked through descriptors, links never followed,
    each file copied through a descriptor of its own and no further than the size the walk
    saw (a file swapped for a bigger one in between is cut there), within the budget."""
    copied = boundary.copy_tree(path, copy_fd, budget, single_link=True)
    if copied.refused:
        return f"refused: {copied.refused} ({_bounds(budget)})"
    return list(copied.files)


def _bounds(budget: boundary.Budget) -> str:
    return (f"a submission folder may hold {budget.entries} files and folders, "
            f"{budget.depth} levels deep, {budget.size >> 20} MiB")


def _discover_one(path: Path, exercise: Exercise, language: Language | None,
                  budget: boundary.Budget, into: Path) -> Submission:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return Submission(path.stem, path, None, "no such file or folder"
                          if exc.errno == errno.ENOENT else f"cannot read it: {exc.strerror}")
    if stat.S_ISLNK(st.st_mode):
        return Submission(path.stem, path, None, "refused: a link, not followed (hand in the "
                                                 "file or the folder itself)")
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        return Submission(path.stem, path, None, "refused: not a regular file or a folder")
    student = path.stem if stat.S_ISREG(st.st_mode) else path.name
    try:
        copy = boundary.fresh(into, "sub-", 0o700)
        copy_fd = boundary.open_dir(copy)
    except OSError as exc:
        return Submission(student, path, None, f"cannot copy it: {exc.strerror or exc}")
    try:
        sub = _file_once(path, copy_fd, student, exercise, language) if stat.S_ISREG(st.st_mode) \
            else _folder_once(path, copy_fd, student, exercise, language, budget)
        # Its includes are looked up in the copy, never in the student's folder.
        return dataclasses.replace(sub, copy=copy, source=dataclasses.replace(
            sub.source, origin_dir=copy) if sub.source is not None else None)
    except OSError as exc:
        return Submission(student, path, None, f"cannot read it: {exc.strerror or exc}")
    finally:
        os.close(copy_fd)


def _file_once(path: Path, copy_fd: int, student: str, exercise: Exercise,
               language: Language | None) -> Submission:
    """One handed-in file: read once through its folder's descriptor (a regular file with one
    name and at most MAX_SOURCE_BYTES, or refused before a byte of it is parsed: a link could
    make the grader read a file the student cannot, a FIFO would block it, a 400 MB notebook
    would fill its memory); those bytes are parsed, digested and written into the copy."""
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return Submission(student, path, None, f"cannot read it: {exc.strerror}")
    try:
        taken = boundary.take(parent, path.name, MAX_SOURCE_BYTES)
    finally:
        os.close(parent)
    if taken.data is None:
        return Submission(student, path, None, _refused_file(path, taken.why))
    boundary.put(copy_fd, path.name, taken.data)
    return dataclasses.replace(_parse(taken.data, path, student, exercise, language),
                               digest=hashlib.sha256(taken.data).hexdigest())


def _folder_once(path: Path, copy_fd: int, student: str, exercise: Exercise,
                 language: Language | None, budget: boundary.Budget) -> Submission:
    """One handed-in folder: copied once (_copied_folder); the file graded is chosen, read and
    digested from that copy."""
    try:
        top = boundary.open_dir(path)
    except OSError as exc:
        return Submission(student, path, None, f"cannot read the folder: {exc.strerror}")
    os.close(top)
    files = _copied_folder(path, copy_fd, budget)
    if isinstance(files, str):
        return Submission(student, path, None, files)
    choice = _pick(files, exercise, language)
    if choice is None:
        return Submission(student, path, None, "no source file or notebook in the folder")
    sub = _read(copy_fd, choice, path / choice, student, exercise, language)
    source = sub.source if sub.source is None else dataclasses.replace(
        sub.source, headers=_headers(copy_fd, files, choice, sub.source))
    return dataclasses.replace(sub, path=path, chosen=path / choice, source=source,
                               digest=_folder_digest(copy_fd, files))


def take_in(sub: Submission, exercise: Exercise, into: Path) -> Submission:
    """`sub` read once into the grader's folder `into`, as discover reads (its digest, its source
    from that copy), when it has no copy yet (a Submission made by hand: the course's own files,
    tests); its student name is kept, and its options when it has some."""
    if sub.copy is not None:
        return sub
    language = sub.source.language if sub.source is not None else None
    read = _discover_one(sub.path, exercise, language, SUBMISSION_BUDGET, into)
    return dataclasses.replace(read, student=sub.student,
                               options=sub.options if sub.options != Options() else read.options)


def _headers(dirfd: int, files: Sequence[str], chosen: str,
             source: Source | None) -> tuple[tuple[str, str], ...]:
    """The folder's files the source `chosen` includes (build.local_includes), read through
    the folder's descriptor as the source was: regular files of the listing, bounded."""
    if source is None:
        return ()
    listed, beside = set(files), posixpath.dirname(chosen)

    def read(rel: str) -> str | None:
        name = posixpath.join(beside, rel)
        taken = boundary.take(dirfd, name, MAX_SOURCE_BYTES) if name in listed else None
        if taken is None or taken.data is None:
            return None
        return taken.data.decode("utf-8", "surrogateescape")

    found = build.local_includes(source.text, read)
    if not any(build.computed_include(text) for text in (source.text, *(t for _, t in found))):
        return tuple(found)
    # A macro names an included file: which one, only the compiler knows. Every file of the
    # folder that a source could include is then the student's code, whichever it opens.
    named = {rel for rel, _ in found}
    prefix = beside + "/" if beside else ""
    for name in sorted(files):
        rel = name[len(prefix):]
        if name.startswith(prefix) and name != chosen and rel not in named and \
                posixpath.splitext(name)[1] in INCLUDABLE_SUFFIXES:
            text = read(rel)
            if text is not None:
                found.append((rel, text))
    return tuple(found)


def _one_each(subs: Sequence[Submission]) -> list[Submission]:
    """Submissions that resolve to one student name (alice.c and alice.ipynb, or a folder
    alice/) make one error row naming them all, in the place of the first: which of them
    counts is the teacher's call, and one row, one feedback file per student stays true."""
    by_student: dict[str, list[Submission]] = {}
    for sub in subs:
        by_student.setdefault(sub.student, []).append(sub)
    out = []
    for sub in subs:
        same = by_student[sub.student]
        if len(same) == 1:
            out.append(sub)
        elif sub is same[0]:
            paths = [str(s.path) for s in same]
            named = f"{', '.join(paths[:-1])} and {paths[-1]}"
            which = "neither" if len(same) == 2 else "none"
            out.append(Submission(sub.student, sub.path, None,
                                  f"{len(same)} submissions for one student, {sub.student}: "
                                  f"{named}; {which} graded (keep one)"))
    return out


def discover(paths: Sequence[Path], exercise: Exercise, language: Language | None,
             budget: boundary.Budget = SUBMISSION_BUDGET,
             into: Path | None = None) -> list[Submission]:
    """One Submission per student, in the order given, each read once into a folder of its own
    in `into` (the grader's own; None: a private folder made now, removed when this process
    ends); what cannot be graded (unreadable, refused, two for one student) is a Submission
    without a source, saying why."""
    into = into if into is not None else intake_folder()
    seen: set[str] = set()
    subs = []
    for path in paths:
        if os.path.abspath(path) not in seen:  # the same path given twice is one submission
            seen.add(os.path.abspath(path))
            sub = _discover_one(path, exercise, language, budget, into)
            # The name every report, roster and feedback file knows the student by: made here,
            # once (names.py: a byte that is not UTF-8, a control character, escaped).
            subs.append(dataclasses.replace(sub, student=names.student_name(sub.student)))
    return _one_each(subs)


def intake_folder() -> Path:
    """A private folder of this process (0700, a name nobody can guess) for the copies of what
    is handed in, removed when it ends."""
    return rooms.remember(Path(tempfile.mkdtemp(prefix="idrrun-intake-")))


def exposed(exercise: Exercise, submissions: Sequence[Path]) -> list[Path]:
    """What a box could read without namespaces (the "uid" level: it sees every file other users
    can read) and must not: the exercise's solutions, its spec and folders (the notebooks'
    solution cells), and the class's submissions."""
    secrets = [exercise.path, *exercise.folders, *submissions,
               *(p.solution for p in exercise.sources.values() if p.solution is not None)]
    return [p for p in dict.fromkeys(secrets) if sandbox.readable_by_others(p)]


def outside_includes(source: Source) -> list[str]:
    """Files a source or one of its own headers includes from outside the source's folder
    (absolute paths, or `..` out of it): refused in grading, where only what was handed in may
    be compiled. A header is the student's code as much as the source (Source.headers): what it
    includes is compiled too. Linear: one pattern per line."""
    found = []
    for name in build.included(source.text[:MAX_SOURCE_BYTES]):
        if name.startswith("/") or ".." in Path(name).parts or name.startswith("~"):
            found.append(name)
    own = {rel for rel, _ in source.headers}
    for rel, text in source.headers:
        # The compiler looks beside the including file first: a header's `../x.h` is one of
        # the folder's own when the header is in a sub-folder and x.h was handed in (else it
        # is looked up further, maybe outside).
        for name in build.included(text[:MAX_SOURCE_BYTES]):
            beside = posixpath.normpath(posixpath.join(posixpath.dirname(rel), name))
            if name.startswith(("/", "~")) or (".." in Path(name).parts and beside not in own):
                found.append(name)
    return found
