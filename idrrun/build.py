"""Source file, compile command, content-addressed build directory.

A build lives in CACHE/builds/KEY/, KEY hashing everything that changes the binary: the source,
its local headers, the compiler's path and version and every flag. It is compiled in a private
temporary folder and renamed into place only when it succeeded, so a failed build never leaves
an executable that could run, and two notebooks building at once never clobber each other.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import hashlib
import json
import os
import posixpath
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .model import (BuildResult, DependencyList, Preprocessing, ProcResult, Protections, RunRequest,
                    SandboxSupport, Source, StackFrame, Toolchain)
from .files import read_whole, temp_beside, write_atomic
from .run import boundary, isolation, proc, sandbox
from .run.sandbox import Box
from .toolchains import diagnostics

EXECUTABLE = "prog"
OBJECT = "prog.o"
SOURCE_STEM = "source"
PREPROCESSED = "source.pre"  # what the compiler read, for the source checks (C, C++)
_MARKER = "build.json"
# What build.json keeps of the compile's output: the compiler's own words, naming the temporary
# source file; a cached build shows them with the name of the cell that runs it now ("cell[7]",
# not the "cell[3]" that first built it).
_COMPILER_OUTPUT = "compiler_output"
# ... and the largest stack frames the compile measured (read_frames), read back with it.
_FRAMES = "frames"

# An include line: C's `#include "x.h"` and `#include <x.h>` (the compile's -I is the source's
# own folder, so a <x.h> found there is the student's file), Fortran's `include 'x'`. One
# pattern per line, anchored: linear in the text.
_INCLUDE = re.compile(r'^[ \t]*(?:#[ \t]*include(?:_next)?[ \t]*["<]([^">\n]+)[">]'
                      r'|include[ \t]*[\'"]([^\'"\n]+)[\'"])', re.MULTILINE | re.IGNORECASE)
# An include whose file a macro names (`#include IMPL`, `#define IMPL "impl.h"`): which file it
# opens is known once the compiler has expanded the macros, not from the text.
_COMPUTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include(?:_next)?[ \t]+[A-Za-z_]', re.MULTILINE)


def source_file_name(source: Source) -> str:
    return SOURCE_STEM + source.suffix


def padded_text(source: Source) -> str:
    """The text as written to disk: blank lines first, so the compiler's line N is the cell's."""
    return "\n" * (source.first_line - 1) + source.text


MAX_HEADER_BYTES = 4 << 20


def included(text: str) -> list[str]:
    """The names of the files `text` includes, as written."""
    return [m.group(1) or m.group(2) for m in _INCLUDE.finditer(text)]


def computed_include(text: str) -> bool:
    """Whether `text` includes a file that a macro names."""
    return _COMPUTED_INCLUDE.search(text) is not None


def local_includes(text: str, read: Callable[[str], str | None]) -> list[tuple[str, str]]:
    """The files `text` includes from its own folder, transitively, each once, in the order
    first included: (its name in the folder, its text). A name is looked for beside the file
    that includes it, then in the folder itself (the compile's -I), as the compiler does;
    read(name) gives a file's text, or None where the compile would find none of the folder's
    (absent, not a regular file, too big). A name leading out of the folder is never read."""
    found: dict[str, str] = {}
    todo = [("", text)]  # (the folder of the including file, its text)
    while todo:
        here, body = todo.pop(0)
        for name in included(body):
            for rel in dict.fromkeys((posixpath.normpath(posixpath.join(here, name)),
                                      posixpath.normpath(name))):
                if rel in found:
                    break
                if rel.startswith(("/", "..")):
                    continue
                got = read(rel)
                if got is not None:
                    found[rel] = got
                    todo.append((posixpath.dirname(rel), got))
                    break
    return list(found.items())


def local_headers(source: Source) -> list[Path]:
    """Headers and Fortran include files the source pulls from its own folder, transitively:
    regular files of a sensible size only (a header that is a link to /dev/zero must not hang
    idrrun, which reads them to key the build)."""
    paths: dict[str, Path] = {}

    def read(rel: str) -> str | None:
        # Most names a source includes are the system's (<stdio.h>), not in its folder: one
        # stat says so, before the folder and the name are resolved (what stat does not find
        # there, by any link, the compile does not find either).
        try:
            os.stat(source.origin_dir / rel)
        except OSError:
            return None
        path = (source.origin_dir / rel).resolve()
        if source.origin_dir.resolve() not in path.parents:
            return None
        try:
            if not path.is_file() or path.stat().st_size > MAX_HEADER_BYTES:
                return None
            text = path.read_text(errors="replace")
        except OSError:
            return None
        paths[rel] = path
        return text

    return [paths[rel] for rel, _ in local_includes(source.text, read)]


LINKABLE = (".o", ".a")


def linked_files(request: RunRequest, toolchain: Toolchain) -> dict[str, Path]:
    """Objects and libraries the flags name relative to the working directory: a cell's
    `--options "saxpy.cu.o"` links what an earlier `--object --keep saxpy.cu` cell wrote. The
    compiler runs in a build folder of its own, so they are passed by absolute path, and their
    content is part of the build's key (a rebuilt object relinks)."""
    found: dict[str, Path] = {}
    for word in toolchain.flags:
        if word.endswith(LINKABLE) and not word.startswith("-") and not Path(word).is_absolute():
            path = request.workdir / word
            if path.is_file():
                found[word] = path
    return found


def compile_argv(request: RunRequest, toolchain: Toolchain,
                 include: Path | None = None) -> tuple[str, ...]:
    """The compile command (its key and what is shown). include: where the source's own
    headers are for this compile, when not in its origin folder (a graded build's copy)."""
    assert toolchain.compiler.path is not None
    out = ("-c", "-o", OBJECT) if request.object_only else ("-o", EXECUTABLE)
    linked = linked_files(request, toolchain)
    return (
        toolchain.compiler.path,
        *(str(linked[w]) if w in linked else w for w in toolchain.flags),
        "-I", str(include or request.source.origin_dir),
        *out,
        source_file_name(request.source),
        *(() if request.object_only else toolchain.link_flags),
    )


def product_name(request: RunRequest) -> str:
    """What the compile writes in its folder: the object file or the executable."""
    return OBJECT if request.object_only else EXECUTABLE


def object_name(request: RunRequest) -> str:
    """Where --object puts the object file, in the working directory. After --keep NAME it is
    NAME.o, NAME whole (`--keep saxpy.cu` gives saxpy.cu.o), as IDRIS's magic names it and its
    notebooks' next cells link it; a file's object is its stem's (`gcc -c f.c` gives f.o); a
    cell's without --keep, cell.o."""
    if request.keep:
        return f"{request.keep}.o"
    stem = Path(request.source.name).stem
    return f"{stem if stem and '[' not in stem else 'cell'}.o"


# Flags that build for the processor the compiler runs on (-fast on gcc: -march=native): the
# same cache seen from two nodes of a cluster must not hand one's program to the other.
_NATIVE = re.compile(r"-m(?:arch|tune|cpu)=native")


@functools.cache
def processor() -> str:
    """This machine's processor: its model and its instruction sets (/proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", errors="replace") as f:
            text = f.read(1 << 16)
    except OSError:
        return os.uname().machine
    wanted = ("model name", "flags", "Features", "CPU part")
    seen = dict(line.split(":", 1) for line in text.splitlines()
                if ":" in line and line.split(":", 1)[0].strip() in wanted)
    return "\0".join(f"{k.strip()}={v.strip()}" for k, v in sorted(seen.items()))


def _command_parts(request: RunRequest, toolchain: Toolchain, placed: bool) -> tuple[str, ...]:
    """The source's text, the compiler and its command (with the source's folder, or, not
    `placed`, without it): what a build's key hashes first."""
    native = any(_NATIVE.fullmatch(f) for f in toolchain.flags)
    where = str(request.source.origin_dir)
    argv = compile_argv(request, toolchain)[1:]
    return (padded_text(request.source), request.source.suffix, toolchain.compiler.path or "",
            toolchain.compiler.version,
            "\0".join(argv if placed else tuple(a.replace(where, ".") for a in argv)),
            *((processor(),) if native else ()))


def _feed(update: Callable[[bytes], None], parts: Sequence[str]) -> None:
    for part in parts:
        update(part.encode("utf-8", errors="surrogateescape"))
        update(b"\0")


def content_key(request: RunRequest, toolchain: Toolchain) -> str:
    """What decides the build but where its source lies: build_key without the source's
    folder (a graded build's is its room's, one per student), so that two identical
    submissions compiled the same way have one. The files beside the source (its headers,
    the objects it links) are the caller's to key by their content (checking's work key)."""
    h = hashlib.sha256()
    _feed(h.update, _command_parts(request, toolchain, placed=False))
    return h.hexdigest()[:20]


def build_key(request: RunRequest, toolchain: Toolchain) -> str:
    h = hashlib.sha256()
    _feed(h.update, _command_parts(request, toolchain, placed=True))
    for header in local_headers(request.source):
        h.update(str(header).encode())
        h.update(header.read_bytes())
    for linked in linked_files(request, toolchain).values():
        h.update(str(linked).encode())
        h.update(linked.read_bytes())
    return h.hexdigest()[:20]


def shown_command(argv: Sequence[str], source: Source) -> tuple[str, ...]:
    """A command as the student knows its files: the build's source file (`source.c`, in any
    folder) by the cell's or file's name, the executable (`prog`) and the object file by that
    name's stem (`saxpy`; a cell's name, which has no suffix, in word characters: `cell3`)."""
    stem = Path(source.name).stem if Path(source.name).suffix else re.sub(r"\W", "", source.name)
    stem = stem or EXECUTABLE
    names = {source_file_name(source): source.name, EXECUTABLE: stem, OBJECT: stem + ".o"}
    return tuple(names.get(token.rsplit("/", 1)[-1], token) for token in argv)


def rename_paths(output: str, source: Source) -> str:
    """Compiler diagnostics, linker errors and the program's runtime messages name the cell
    ("cell[3]:5:3: error") or the file instead of the build's temporary one, in all the forms
    diagnostics.rename_temporary lists."""
    return diagnostics.rename_temporary(output, source_file_name(source), source.name)


_MAX_HELD = 4096  # the longest path a piece of output may end with and be held for


class Renamed:
    """The program's output as shown, the build's name of the source renamed (gfortran's "At
    line 7 of file source.f90", an assert's "prog: source.c:3"): a piece at the end of what
    came that may be the start of that name waits for what follows (finish() lets it go)."""

    def __init__(self, sink: Callable[[str], None], source: Source) -> None:
        self._sink = sink
        self._source = source
        self._temporary = source_file_name(source)
        self._held = ""

    def __call__(self, text: str) -> None:
        text = self._held + text
        keep = self._unfinished(text)
        self._held = text[len(text) - keep:] if keep else ""
        if len(text) > keep:
            self._sink(rename_paths(text[:len(text) - keep], self._source))

    def _unfinished(self, text: str) -> int:
        """How many characters at the end of `text` may be the start of the temporary name, or
        of a path to it (a folder and maybe the name's start: `/b/.k.tmp-x/sou`)."""
        token = re.split(r"[\s'\"`(]", text[-_MAX_HELD:])[-1]
        last = token.rsplit("/", 1)[-1]
        if "/" in token and self._temporary.startswith(last) and len(last) < len(self._temporary):
            return len(token)
        return len(last) if last and self._temporary.startswith(last) and \
            len(last) < len(self._temporary) else 0

    def finish(self) -> None:
        if self._held:
            self._sink(rename_paths(self._held, self._source))
            self._held = ""



def box_for(request: RunRequest, toolchain: Toolchain, folder: Path, cache_dir: Path, uid: int,
            support: SandboxSupport, protections: Protections | None, *,
            readable: Sequence[Path] = ()) -> Box:
    """A compile's box (sandbox.box, which decides what every box sees): `folder` read-write;
    `readable` (the source's folder, for its headers) and the toolchain's compilers'
    prefixes read-only; the request's hidden folders and idrrun's cache hidden; our
    environment; in a graded request's room, the guard placed for the box's own uid."""
    return sandbox.box("compile", folder, support, uid, environ=os.environ, readable=readable,
                       installations=[Path(p) for p in toolchain.prefixes],
                       hidden=request.hide, cache=cache_dir, room=request.room,
                       protections=protections)


def _compile_spec(request: RunRequest, work: Path, env: Mapping[str, str] | None,
                 protections: Protections | None, box: Box | None,
                 launcher: tuple[str, ...]) -> proc.ProcSpec:
    """How a compiler runs: in its build folder, through the guard and the compile's limits
    (a kernel killed mid-build takes the compiler along; a source that makes the compiler eat
    memory or write a huge file is stopped), without cgroups (jail.open_jail), in its box, behind
    the launcher when builds are job steps."""
    return proc.ProcSpec(cwd=work, env=env, max_output=request.max_output,
                         protections=protections, limits=request.compile_limits, cgroups=False,
                         box=box, outer=launcher)


# A compiler's dump files (gcc: prog-source.c.005t.original): the feedback reads them.
_DUMP = re.compile(r"\.\d{3}[a-z]\.[\w-]+$")
# A line marker of the preprocessor's output: `# 12 "source.c" 2`.
_LINE_MARKER = re.compile(r'^# \d+ "[^\n]*$', re.MULTILINE)


def keep_preprocessed(work: Path, before: set[str], product: str, saved: str) -> bool:
    """After a compile with Preprocessing.compile_flags: the preprocessor output it saved, without
    line markers, as PREPROCESSED; the other temporary files it kept (assembly, objects, the
    offload compiler's) removed, its dumps kept. False: it saved none."""
    try:
        text = (work / saved).read_text(errors="replace")
    except OSError:
        return False
    write_atomic(work / PREPROCESSED, _LINE_MARKER.sub("", text))
    for name in set(os.listdir(work)) - before - {product, PREPROCESSED}:
        path = work / name
        if not _DUMP.search(name) and path.is_file() and not path.is_symlink():
            path.unlink()
    return True


@dataclass(frozen=True)
class _Job:
    """One build, decided before it starts: the request, its command and its place in the
    cache, and how it runs (build()'s arguments)."""

    request: RunRequest
    toolchain: Toolchain
    cache_dir: Path
    argv: tuple[str, ...]  # the command shown and keyed: the compiler's own
    key: str
    final: Path  # where the build is kept
    product: str
    protections: Protections | None
    preprocess: Preprocessing
    uid: int
    launcher: tuple[str, ...]
    env: Mapping[str, str] | None
    dependencies: DependencyList
    feedback_files: tuple[str, ...]
    stack_usage: tuple[str, ...] = ()

    @property
    def hidden_flags(self) -> tuple[str, ...]:
        """Added to the compile, not to the command shown nor the key: what the build also
        leaves for idrrun (the preprocessed source, the frame sizes)."""
        return (*self.preprocess.compile_flags, *self.stack_usage)

    def result(self, proc_result: ProcResult | None, output: str, start: float,
               ok: bool = True, refused: str = "",
               frames: tuple[StackFrame, ...] | None = None) -> BuildResult:
        """The build's result; output: the compiler's words, naming the temporary source file
        (the result names the request's source instead); frames: its largest stack frames
        when known (its marker's), else read from its folder."""
        output = rename_paths(output, self.request.source)
        if not ok:
            return BuildResult(ok=False, command=self.argv, proc=proc_result, output=output,
                               cached=False, key=self.key, build_dir=None,
                               seconds=time.monotonic() - start, refused=refused)
        request = self.request
        return BuildResult(
            ok=True, command=self.argv, proc=proc_result, output=output,
            cached=proc_result is None, key=self.key, build_dir=self.final,
            executable=None if request.object_only else self.final / EXECUTABLE,
            object_file=self.final / OBJECT if request.object_only else None,
            seconds=time.monotonic() - start if proc_result is not None else 0.0,
            frames=() if not self.stack_usage else
            frames if frames is not None else read_frames(self.final, request.source))


# What -fstack-usage writes (gcc and clang): one NAME.su per compiled source, a line per
# function: "source.c:12:5:main<TAB>3200000016<TAB>static" (or dynamic, dynamic,bounded).
FRAMES = "*.su"
FRAMES_CAP = 4 << 20
FRAMES_KEPT = 5


def parse_frames(text: str, source: Source) -> list[StackFrame]:
    out = []
    for line in text.splitlines():
        parts = line.rsplit("\t", 2)
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        where = parts[0].split(":", 3)
        if len(where) != 4:
            continue
        at = int(where[1]) if where[1].isdigit() else None
        mine = where[0] == source_file_name(source)
        out.append(StackFrame(function=where[3], line=at if mine else None, size=int(parts[1]),
                              dynamic=parts[2].startswith("dynamic")))
    return out


def read_frames(folder: Path, source: Source) -> tuple[StackFrame, ...]:
    """The largest stack frames the compile measured, largest first (none when it left no
    FRAMES file: a build cached before they were asked for)."""
    frames: list[StackFrame] = []
    for path in sorted(folder.glob(FRAMES)):
        try:
            with open(path, errors="replace") as f:
                frames += parse_frames(f.read(FRAMES_CAP), source)
        except OSError:
            continue
    return tuple(sorted(frames, key=lambda f: (-f.size, f.function))[:FRAMES_KEPT])


def build(request: RunRequest, toolchain: Toolchain, cache_dir: Path,
          protections: Protections | None = None, preprocess: Preprocessing = Preprocessing(),
          uid: int = -1, launcher: tuple[str, ...] = (),
          env: Mapping[str, str] | None = None,
          dependencies: DependencyList = DependencyList(),
          feedback_files: tuple[str, ...] = (),
          stack_usage: tuple[str, ...] = ()) -> BuildResult:
    """Compile (or take from the cache) the request's source.

    preprocess: how the build also leaves PREPROCESSED (the source as the compiler read it:
    comments and disabled blocks gone): flags that make the compile keep it.
    uid: the sandbox's user for this request (-1: idrrun's own).
    launcher, env: run the compiler behind this prefix (a job step: launch.compile_launch),
    with this environment; the command shown and the build's key stay the compiler's own.
    dependencies: how a graded build (request.room) lists the files it read, judged after it;
    feedback_files: what else it takes out of its folder (the family's feedback files);
    stack_usage: flags that make the compile measure each function's stack frame (FRAMES)."""
    key = build_key(request, toolchain)
    builds = boundary.own_dir(request.room / "builds", 0o700) if request.room is not None \
        else cache_dir / "builds"
    job = _Job(request, toolchain, cache_dir, compile_argv(request, toolchain), key, builds / key,
               product_name(request), protections, preprocess, uid, launcher, env, dependencies,
               (*feedback_files, FRAMES) if stack_usage else feedback_files, stack_usage)
    cached = None if request.force else _cached(job)
    if cached is not None:
        return cached
    return _build_in_room(job) if request.room is not None else _build_here(job)


def _read_marker(final: Path) -> object:
    """The build's marker as written (None when there is none, or it cannot be read: a folder
    in its place does not read either)."""
    data = read_whole(final / _MARKER)
    try:
        return json.loads(data) if data is not None else None
    except ValueError:
        return None


def _marker_frames(recorded: dict[str, object]) -> tuple[StackFrame, ...] | None:
    """The frames a marker kept (None: a marker written before it kept them)."""
    kept = recorded.get(_FRAMES)
    if not isinstance(kept, list):
        return None
    try:
        return tuple(StackFrame(**f) for f in kept)
    except TypeError:
        return None


def _cached(job: _Job) -> BuildResult | None:
    final = job.final
    recorded = _read_marker(final)
    if not isinstance(recorded, dict) or not isinstance(recorded.get(_COMPILER_OUTPUT), str):
        return None  # none, unreadable, or older, with the output naming the first cell
    if not (final / job.product).is_file() or \
            (job.preprocess.saved and not (final / PREPROCESSED).is_file()):
        return None
    return job.result(None, recorded[_COMPILER_OUTPUT], 0.0,
                      frames=_marker_frames(recorded) if job.stack_usage else ())


def _compile(job: _Job, argv: tuple[str, ...], work: Path, box: Box | None,
             extra: tuple[str, ...]) -> ProcResult:
    # The compiler's temporary files in the build folder, which goes: with -save-temps (the
    # checks' preprocessed source) gcc keeps them, and its offload list files (ccXXXXXX.ofldlist)
    # went to /tmp, two per checked build, never removed. A box has its own /tmp.
    env = job.env if box is not None else \
        {**(job.env if job.env is not None else os.environ), "TMPDIR": str(work)}
    return proc.run((argv[0], *extra, *argv[1:]), what="compile",
                    timeout=job.request.compile_timeout,
                    spec=_compile_spec(job.request, work, env, job.protections, box,
                                       job.launcher))


def _keep(job: _Job, folder: Path, output: str) -> tuple[StackFrame, ...]:
    """The finished build folder into the cache, under its key; its largest stack frames, which
    its marker keeps too (a cached build's result reads them there, not from its FRAMES)."""
    frames = read_frames(folder, job.request.source) if job.stack_usage else ()
    (folder / _MARKER).write_text(json.dumps({
        "command": list(job.argv), _COMPILER_OUTPUT: output,
        _FRAMES: [dataclasses.asdict(f) for f in frames]}))
    if job.request.force and job.final.exists():
        _replace_dir(folder, job.final)
    else:
        _publish(folder, job.final)
    return frames


def _build_here(job: _Job) -> BuildResult:
    """A notebook's or `idrrun run`'s build: in a temporary folder of the cache, renamed into
    place when it succeeded."""
    request = job.request
    # The student's code is saved before anything can go wrong: a kernel killed while compiling
    # loses nothing (the cell's name and the key say which one it was; the key holds its text,
    # so a copy already saved under it, written whole, is this one).
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(request.source.name).stem) or "cell"
    saved = job.cache_dir / "sources" / f"{safe}-{job.key}{request.source.suffix}"
    if not saved.is_file():
        write_atomic(saved, request.source.text)
    job.final.parent.mkdir(parents=True, exist_ok=True)
    # A sandboxed build (a notebook's, [sandbox] mode = "on") compiles in the request's working
    # folder, which its box may write: the cache is hidden from it.
    work = Path(tempfile.mkdtemp(dir=request.workdir if request.sandbox else job.final.parent,
                                 prefix=f".{job.key}.tmp-"))
    box = box_for(request, job.toolchain, work, job.cache_dir, job.uid,
                  isolation.sandbox_support(), job.protections,
                  readable=(request.source.origin_dir,)) if request.sandbox else None
    start = time.monotonic()
    try:
        # (a folder just made, ours alone (0700): written in place, no rename needed)
        (work / source_file_name(request.source)).write_text(
            padded_text(request.source), encoding="utf-8", errors="surrogateescape")
        before = set(os.listdir(work))
        result = _compile(job, job.argv, work, box, job.hidden_flags)
        output = result.output
        ok = result.ok and (work / job.product).is_file()
        if ok and job.preprocess.saved:
            ok = keep_preprocessed(work, before, job.product, job.preprocess.saved)
            if not ok:
                output += (f"idrrun: the compiler left no {job.preprocess.saved} (its "
                           "preprocessed source, for the source checks)\n")
        frames = _keep(job, work, output) if ok else ()
        return job.result(result, output, start, ok, frames=frames)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _publish(work: Path, final: Path) -> None:
    try:
        os.rename(work, final)
    except OSError:
        if not final.exists():  # another file system (a sandboxed build's working folder)
            shutil.copytree(work, final)
        # else another kernel built the same key at the same moment: theirs is as good.
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# A graded build: in a fresh folder of the request's room, its products taken out (boundary.py)

# What the grader takes out of a graded compile, at most: the product (a 700 MB static array
# stops at the compile's own file-size limit first), a feedback file (a dump), the preprocessed source (a source
# that expands to more is checked as written, with a note), the dependency list.
PRODUCT_CAP = 1 << 30
FEEDBACK_CAP = 64 << 20
PREPROCESSED_CAP = 64 << 20
DEPENDENCIES_CAP = 4 << 20
INCLUDES = "src"  # a graded build folder's copy of the submission's files


def _build_in_room(job: _Job) -> BuildResult:
    """The compile of a graded request: a fresh folder in its room holding the source and a
    copy of the submission's files, given to the box's uid; the compiler runs in a box there;
    then only what the grader asks for (the product, the dumps, the preprocessed source, the
    list of files read) is taken out, as regular files of the box's uid, into a folder of the
    grader's own, and the box's folder is removed."""
    request = job.request
    assert request.room is not None
    work = _room_folder(job)
    include = work / INCLUDES
    box = box_for(request, job.toolchain, work, job.cache_dir, job.uid,
                  isolation.sandbox_support(), job.protections) if request.sandbox else None
    start = time.monotonic()
    try:
        result = _compile(job, compile_argv(request, job.toolchain, include), work, box,
                          (*job.hidden_flags, *job.dependencies.flags))
        output = result.output.replace(str(include), ".")
        taken = boundary.fresh(job.final.parent, f".{job.key}.tmp-")
        said = _take_products(job, work, taken, box.hidden if box else ()) if result.ok \
            else _Taken(failed="the compiler failed")
        output += said.note
        if said.refused:
            output += f"idrrun: refused: {said.refused}\n"
        elif said.failed and result.ok:
            output += f"idrrun: the compile left nothing usable ({said.failed})\n"
        if said.failed or said.refused:
            boundary.remove(taken)
            return job.result(result, output, start, ok=False, refused=said.refused)
        frames = _keep(job, taken, output)
        return job.result(result, output, start, frames=frames)
    finally:
        boundary.remove(work)


def _room_folder(job: _Job) -> Path:
    """The build's fresh box folder: the padded source, and the submission's files in
    INCLUDES (where its own headers are found)."""
    request = job.request
    assert request.room is not None
    support = isolation.sandbox_support() if request.sandbox else None
    source = (source_file_name(request.source),
              padded_text(request.source).encode("utf-8", "surrogateescape"))
    return boundary.box_folder(request.room, "build-", job.uid, job.uid,
                               files_from=request.source.origin_dir, files_into=INCLUDES,
                               put_files=(source,),
                               tmp=sandbox.own_tmp(support))


@dataclass(frozen=True)
class _Taken:
    """What came out of a graded compile's folder."""

    failed: str = ""  # why there is no usable build ("": there is one)
    refused: str = ""  # what it read from outside the submission
    note: str = ""  # for the build's output


def _take_products(job: _Job, work: Path, taken: Path, hidden: tuple[Path, ...]) -> _Taken:
    """The product, the list of files the compiler read (judged), the preprocessed source and
    the family's feedback files, out of the box's folder into `taken` (the grader's)."""
    owners = (job.uid if job.uid >= 0 else os.geteuid(),)
    fd = boundary.open_dir(work)
    try:
        failed = boundary.take_to(fd, job.product, taken / job.product, PRODUCT_CAP, owners, 0o700)
        if failed:
            return _Taken(failed=f"its {job.product}: {failed}")
        refused = ""
        if job.dependencies.file:
            listed = boundary.take(fd, job.dependencies.file, DEPENDENCIES_CAP, owners)
            if listed.text is None:
                return _Taken(failed=f"the list of files it read: {listed.why}")
            refused = judge_dependencies(parse_dependencies(listed.text), work,
                                         readable_roots(job.toolchain), hidden)
        note = _take_preprocessed(fd, job.preprocess.saved, taken, owners) \
            if job.preprocess.saved else ""
        for name in boundary.names(fd):
            if any(fnmatch.fnmatchcase(name, p) for p in job.feedback_files) and \
                    name not in (job.product, _MARKER, PREPROCESSED):
                boundary.take_to(fd, name, taken / name, FEEDBACK_CAP, owners)
        return _Taken(refused=refused, note=note)
    finally:
        os.close(fd)


def _take_preprocessed(fd: int, saved: str, taken: Path, owners: tuple[int, ...]) -> str:
    """The compile's preprocessed source, without line markers, as PREPROCESSED in the grader's
    folder; "" when done, else a note for the build's output."""
    got = boundary.take(fd, saved, PREPROCESSED_CAP, owners)
    if got.text is None:
        return (f"idrrun: the compiler's preprocessed source was not read ({got.why}): the "
                "source checks read the source as written\n")
    write_atomic(taken / PREPROCESSED, _LINE_MARKER.sub("", got.text))
    return ""


def parse_dependencies(text: str) -> list[str]:
    """The files of a make rule as gcc's -MD writes it ("prog: a.c b.h \\\n c.h"; a space
    in a name written "\\ "), targets left out."""
    joined = text.replace("\\\n", " ")
    out: list[str] = []
    for line in joined.splitlines():
        _, colon, rest = line.partition(": ")
        if not colon:
            continue
        word = ""
        escaped = False
        for ch in rest + " ":
            if escaped:
                word += ch
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch.isspace():
                if word:
                    out.append(word)
                word = ""
            else:
                word += ch
    return out


def readable_roots(toolchain: Toolchain) -> tuple[Path, ...]:
    """Where a graded compile may read besides its own folder: the system's folders and the
    prefixes of its compilers (an MPI wrapper's and the compiler it runs)."""
    return (*(Path(d) for d in sandbox.SYSTEM_DIRS), *(Path(p) for p in toolchain.prefixes))


def judge_dependencies(files: list[str], work: Path, roots: tuple[Path, ...],
                       hidden: tuple[Path, ...]) -> str:
    """What a graded compile read from outside its folder and the allowed roots, or from a
    hidden folder (the course's, idrrun's own): "" when nothing."""
    outside = []
    for name in files:
        path = Path(os.path.normpath(work / name))
        if path == work or work in path.parents:
            continue  # its own folder (which may lie in the cache, with srun)
        if any(path == h or h in path.parents for h in hidden) or \
                not any(path == r or r in path.parents for r in roots):
            outside.append(name)
    if not outside:
        return ""
    shown = ", ".join(outside[:3]) + (f" and {len(outside) - 3} more" if len(outside) > 3 else "")
    return (f"the source includes {shown}, from outside the submission; only what was handed "
            "in is compiled")


def _replace_dir(new: Path, old: Path) -> None:
    trash = temp_beside(old)  # two threads may replace the same build
    try:
        os.rename(old, trash)
    except OSError:
        pass
    try:
        os.rename(new, old)
    except OSError:
        shutil.rmtree(new, ignore_errors=True)
    shutil.rmtree(trash, ignore_errors=True)
