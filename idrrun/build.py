"""Source file, compile command, content-addressed build directory.

A build lives in CACHE/builds/KEY/, KEY hashing everything that changes the binary: the source,
its local headers, the compiler's path and version and every flag. It is compiled in a private
temporary folder and renamed into place only when it succeeded, so a failed build never leaves
an executable that could run, and two notebooks building at once never clobber each other.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from .model import BuildResult, Preprocessing, Protections, RunRequest, Source, Toolchain, temp_beside
from .run import isolation, proc, sandbox
from .run.sandbox import Box

EXECUTABLE = "prog"
OBJECT = "prog.o"
SOURCE_STEM = "source"
PREPROCESSED = "source.pre"  # what the compiler read, for the source checks (C, C++)
_MARKER = "build.json"

_C_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
_F_INCLUDE = re.compile(r"^\s*include\s*['\"]([^'\"]+)['\"]", re.MULTILINE | re.IGNORECASE)


def source_file_name(source: Source) -> str:
    return SOURCE_STEM + source.suffix


def padded_text(source: Source) -> str:
    """The text as written to disk: blank lines first, so the compiler's line N is the cell's."""
    return "\n" * (source.first_line - 1) + source.text


MAX_HEADER_BYTES = 4 << 20


def local_headers(source: Source) -> list[Path]:
    """Headers and Fortran include files the source pulls from its own folder, transitively:
    regular files of a sensible size only (a header that is a link to /dev/zero must not hang
    idrrun, which reads them to key the build)."""
    seen: dict[Path, None] = {}
    todo = [source.text]
    origin = source.origin_dir.resolve()
    while todo:
        text = todo.pop()
        for name in _C_INCLUDE.findall(text) + _F_INCLUDE.findall(text):
            path = (source.origin_dir / name).resolve()
            if path in seen or origin not in path.parents:
                continue
            try:
                if not path.is_file() or path.stat().st_size > MAX_HEADER_BYTES:
                    continue
                seen[path] = None
                todo.append(path.read_text(errors="replace"))
            except OSError:
                pass
    return list(seen)


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


def compile_argv(request: RunRequest, toolchain: Toolchain) -> tuple[str, ...]:
    assert toolchain.compiler.path is not None
    out = ("-c", "-o", OBJECT) if request.object_only else ("-o", EXECUTABLE)
    linked = linked_files(request, toolchain)
    return (
        toolchain.compiler.path,
        *(str(linked[w]) if w in linked else w for w in toolchain.flags),
        "-I", str(request.source.origin_dir),
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


def build_key(request: RunRequest, toolchain: Toolchain) -> str:
    h = hashlib.sha256()
    for part in (
        padded_text(request.source),
        request.source.suffix,
        toolchain.compiler.path or "",
        toolchain.compiler.version,
        "\0".join(compile_argv(request, toolchain)[1:]),
    ):
        h.update(part.encode("utf-8", errors="surrogateescape"))
        h.update(b"\0")
    for header in local_headers(request.source):
        h.update(str(header).encode())
        h.update(header.read_bytes())
    for linked in linked_files(request, toolchain).values():
        h.update(str(linked).encode())
        h.update(linked.read_bytes())
    return h.hexdigest()[:20]


def rename_paths(output: str, source: Source) -> str:
    """Compiler diagnostics name the cell ("cell[3]:5:3: error") instead of a temporary file."""
    name = re.escape(source_file_name(source))
    return re.sub(rf'(?<![\w/.-]){name}(?=[:"(,])', source.name.replace("\\", r"\\"), output)


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def compile_box(request: RunRequest, toolchain: Toolchain, work: Path, cache_dir: Path,
                uid: int) -> Box:
    """What a sandboxed compiler sees: the system, its build folder, the source's folder
    (read-only, for its headers) and the compiler's own prefix when it lives elsewhere."""
    support = isolation.sandbox_support()
    readable = [request.source.origin_dir]
    if toolchain.compiler.path is not None:
        prefix = Path(toolchain.compiler.path).resolve().parent.parent
        if not sandbox.in_system_dirs(prefix):
            readable.append(prefix)
    return Box(workdir=work, writable=(work,), readable=tuple(readable),
               hidden=(*request.hide, cache_dir), env=sandbox.clean_env(os.environ, {}),
               uid=uid, gid=uid, support=support)


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


def build(request: RunRequest, toolchain: Toolchain, cache_dir: Path,
          protections: Protections | None = None, preprocess: Preprocessing = Preprocessing(),
          uid: int = -1, launcher: tuple[str, ...] = (),
          env: Mapping[str, str] | None = None) -> BuildResult:
    """Compile (or take from the cache) the request's source.

    preprocess: how the build also leaves PREPROCESSED (the source as the compiler read it:
    comments and disabled blocks gone): flags that make the compile keep it.
    uid: the sandbox's user for this request (-1: idrrun's own).
    launcher, env: run the compiler behind this prefix (a job step: launch.compile_launch),
    with this environment; the command shown and the build's key stay the compiler's own."""
    argv = compile_argv(request, toolchain)
    key = build_key(request, toolchain)
    builds = request.build_cache or cache_dir / "builds"
    final = builds / key
    product = product_name(request)
    if not request.force and (final / _MARKER).is_file() and (final / product).is_file() and \
            (not preprocess.saved or (final / PREPROCESSED).is_file()):
        try:
            recorded = json.loads((final / _MARKER).read_text())
            return BuildResult(
                ok=True, command=argv, proc=None, output=recorded.get("output", ""), cached=True,
                key=key, build_dir=final,
                executable=None if request.object_only else final / EXECUTABLE,
                object_file=final / OBJECT if request.object_only else None,
            )
        except (OSError, ValueError):
            pass  # unreadable marker: build again
    # The student's code is saved before anything can go wrong: a kernel killed while compiling
    # loses nothing (the cell's name and the key say which one it was).
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(request.source.name).stem) or "cell"
    write_atomic(cache_dir / "sources" / f"{safe}-{key}{request.source.suffix}", request.source.text)
    builds.mkdir(parents=True, exist_ok=True)
    # A sandboxed build compiles in its request's scratch folder (beside its own builds, or its
    # working folder), which its box's uid can reach, and on a cluster the nodes too: the cache
    # is private to idrrun.
    scratch = request.build_cache.parent if request.build_cache else request.workdir
    work = Path(tempfile.mkdtemp(dir=scratch if request.sandbox else builds, prefix=f".{key}.tmp-"))
    box = compile_box(request, toolchain, work, cache_dir, uid) if request.sandbox else None
    start = time.monotonic()
    try:
        write_atomic(work / source_file_name(request.source), padded_text(request.source))
        # Through the guard and its limits: a kernel killed mid-build takes the compiler along,
        # and a source that makes the compiler eat memory or write a huge file is stopped.
        before = set(os.listdir(work))
        result = proc.run(
            (argv[0], *preprocess.compile_flags, *argv[1:]), what="compile",
            timeout=request.compile_timeout, cwd=work, env=env,
            max_output=request.max_output, protections=protections,
            limits=request.compile_limits, box=box, cgroups=False, outer=launcher,
        )
        output = rename_paths(result.output, request.source)
        ok = result.ok and (work / product).is_file()
        if ok and preprocess.saved:
            ok = keep_preprocessed(work, before, product, preprocess.saved)
            if not ok:
                output += (f"idrrun: the compiler left no {preprocess.saved} (its preprocessed "
                           "source, for the source checks)\n")
        if box is not None:
            sandbox.take_back(box, [work])
        if not ok:
            return BuildResult(ok=False, command=argv, proc=result, output=output, cached=False,
                               key=key, build_dir=None, seconds=time.monotonic() - start)
        (work / _MARKER).write_text(json.dumps({"command": list(argv), "output": output}))
        if request.force and final.exists():
            _replace_dir(work, final)
        else:
            try:
                os.rename(work, final)
            except OSError:
                if not final.exists():  # another file system (a sandboxed build's /tmp)
                    shutil.copytree(work, final)
                # else another kernel built the same key at the same moment: theirs is as good.
                shutil.rmtree(work, ignore_errors=True)
        return BuildResult(
            ok=True, command=argv, proc=result, output=output, cached=False, key=key,
            build_dir=final, executable=None if request.object_only else final / EXECUTABLE,
            object_file=final / OBJECT if request.object_only else None,
            seconds=time.monotonic() - start,
        )
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


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
