"""run/boundary.py: what the grader reads out of, and puts into, a folder a box could write.

Every test plants what a hostile program could leave (a link, a FIFO, a hard link, a sparse
giant, a deep folder) and checks that the grader neither follows, hangs, nor reads it whole.
Both ways of opening are tried: openat2 (this kernel has it) and the walk without it."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from idrrun.run import boundary, tools


@pytest.fixture(params=["openat2", "walk"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "walk":
        monkeypatch.setattr(boundary.reading, "_openat2_works", False)
    else:
        monkeypatch.setattr(boundary.reading, "_openat2_works", None)
    yield request.param


def _box(tmp_path: Path) -> Path:
    box = tmp_path / "box"
    (box / "sub").mkdir(parents=True)
    (box / "sub" / "out.txt").write_text("result 42\n")
    (tmp_path / "secret").write_text("root only\n")
    (box / "link").symlink_to(tmp_path / "secret")
    (box / "sublink").symlink_to(box / "sub")
    (box / "up").symlink_to("..")
    os.mkfifo(box / "fifo")
    return box


def test_take_reads_regular_files_and_nothing_else(tmp_path: Path, way: str) -> None:
    fd = boundary.open_dir(_box(tmp_path))
    try:
        assert boundary.take(fd, "sub/out.txt", 100).data == b"result 42\n"
        for name in ("link", "sublink/out.txt", "up/secret", "../secret", "/etc/passwd"):
            got = boundary.take(fd, name, 100)
            assert got.data is None and got.why, (name, got)
        assert "link" in boundary.take(fd, "link", 100).why
        # a FIFO: not opened for reading (that would wait for a writer), refused at once
        assert boundary.take(fd, "fifo", 100).why == "not a regular file"
        assert boundary.take(fd, "nothing", 100).why == "absent"
        assert "more than the 4 bytes" in boundary.take(fd, "sub/out.txt", 4).why
    finally:
        os.close(fd)


def test_take_refuses_a_hard_link_and_a_stranger_s_file(tmp_path: Path, way: str) -> None:
    box = _box(tmp_path)
    os.link(tmp_path / "secret", box / "hard")
    fd = boundary.open_dir(box)
    try:
        assert "hard link" in boundary.take(fd, "hard", 100).why
        someone = os.geteuid() + 1
        assert "did not write" in boundary.take(fd, "sub/out.txt", 100, owners=(someone,)).why
        assert boundary.take(fd, "sub/out.txt", 100, owners=(os.geteuid(),)).data is not None
    finally:
        os.close(fd)


def test_take_to_copies_without_following_and_keeps_holes(tmp_path: Path, way: str) -> None:
    box = _box(tmp_path)
    with open(box / "sparse", "wb") as fh:
        fh.seek(64 << 20)
        fh.write(b"end")
    out = tmp_path / "out"
    out.mkdir()
    fd = boundary.open_dir(box)
    try:
        assert boundary.take_to(fd, "sparse", out / "sparse", 128 << 20) == ""
        assert boundary.take_to(fd, "link", out / "link", 100) != ""
        assert "more than" in boundary.take_to(fd, "sparse", out / "again", 1 << 20)
    finally:
        os.close(fd)
    st = os.stat(out / "sparse")
    assert st.st_size == (64 << 20) + 3 and st.st_blocks * 512 < 1 << 20  # still sparse
    assert not (out / "link").exists() and not (out / "again").exists()


def test_copy_tree_copies_regular_files_within_bounds(tmp_path: Path) -> None:
    src = tmp_path / "sub"
    (src / "inc").mkdir(parents=True)
    (src / "main.c").write_text("int main(void) { return 0; }\n")
    (src / "inc" / "x.h").write_text("#define X 1\n")
    (src / "leak.c").symlink_to("/etc/passwd")
    os.mkfifo(src / "pipe")
    dest = tmp_path / "dest"
    dest.mkdir()
    fd = boundary.open_dir(dest)
    try:
        copied = boundary.copy_tree(src, fd)
    finally:
        os.close(fd)
    assert copied.refused == "" and sorted(copied.files) == ["inc/x.h", "main.c"]
    assert any("leak.c: a link" in s for s in copied.skipped)
    assert not (dest / "leak.c").exists() and not (dest / "pipe").exists()


@pytest.mark.parametrize("case", ["sparse 4 GB", "1100 deep", "5000 files"])
def test_copy_tree_refuses_what_would_stop_the_grader(tmp_path: Path, case: str) -> None:
    src = tmp_path / "sub"
    src.mkdir()
    (src / "main.c").write_text("int main(void) { return 0; }\n")
    if case == "sparse 4 GB":
        with open(src / "big.dat", "wb") as fh:
            fh.seek(4 << 30)
            fh.write(b"x")
    elif case == "1100 deep":
        fd = os.open(src, os.O_RDONLY)
        for _ in range(1100):  # deeper than PATH_MAX allows by name: made through descriptors
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(fd)
    else:
        for i in range(5000):
            (src / f"f{i}").write_text("")
    dest = tmp_path / "dest"
    dest.mkdir()
    fd = boundary.open_dir(dest)
    try:
        copied = boundary.copy_tree(src, fd)
    finally:
        os.close(fd)
    assert copied.refused and copied.files == ()
    assert os.listdir(dest) == []  # all or nothing: not a byte written
    print(case, "->", copied.refused)
    boundary.remove(src)  # (pytest's own clean-up recurses: it would fail on 1100 levels)
    assert not src.exists()


def _opened(folder: Path) -> tuple[int, int]:
    fd = boundary.open_published(folder)
    try:
        st = os.fstat(fd)
        return st.st_dev, st.st_ino
    finally:
        os.close(fd)


def test_a_published_folder_is_refused_where_someone_else_could_redirect_it(tmp_path: Path) -> None:
    """The boards' folder (root writes pages there for the hub): its own rules (check_own), and
    nobody but root and the grader able to change the way to it, as typed or as its links lead."""
    safe = tmp_path / "safe"
    (safe / "boards").mkdir(parents=True)
    real = os.stat(safe / "boards")
    assert _opened(safe / "boards") == (real.st_dev, real.st_ino)
    made = tmp_path / "new" / "deeper" / "boards"  # made with its parents, inside safe folders
    assert _opened(made) and made.is_dir()
    sticky = tmp_path / "sticky"  # as /tmp: others may add names, not rename ours
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    assert _opened(sticky / "boards")
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    os.chmod(open_to_all, 0o777)
    with pytest.raises(boundary.NotOwnFolder, match="the way to it is not safe: .*open is writable by others"):
        boundary.open_published(open_to_all / "boards")
    assert not (open_to_all / "boards").exists()  # nothing made there
    (open_to_all / "boards").mkdir()  # already there, the grader's own: still refused
    with pytest.raises(boundary.NotOwnFolder, match="not safe"):
        boundary.open_published(open_to_all / "boards")
    # A link someone else could replace, to a safe folder: refused; one in a safe folder, to a
    # safe folder (the teacher's /srv -> /data): taken; one in a safe folder leading through
    # one others may write: refused.
    (open_to_all / "way").symlink_to(safe)
    with pytest.raises(boundary.NotOwnFolder, match="not safe"):
        boundary.open_published(open_to_all / "way" / "boards")
    (tmp_path / "link").symlink_to(safe)
    assert _opened(tmp_path / "link" / "boards") == (real.st_dev, real.st_ino)
    (open_to_all / "inner" / "boards").mkdir(parents=True)
    (tmp_path / "via").symlink_to(open_to_all / "inner")
    with pytest.raises(boundary.NotOwnFolder, match="not safe"):
        boundary.open_published(tmp_path / "via" / "boards")
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        with pytest.raises(boundary.NotOwnFolder, match="belongs to uid 65534"):
            boundary.open_published(theirs / "boards")
        assert not (theirs / "boards").exists()


def test_own_dir_refuses_a_folder_someone_else_made(tmp_path: Path) -> None:
    mine = boundary.own_dir(tmp_path / "mine", 0o711)
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o711
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "planted").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(boundary.NotOwnFolder, match="is a link"):
        boundary.own_dir(tmp_path / "planted")
    open_to_all = tmp_path / "open"
    open_to_all.mkdir(mode=0o777)
    os.chmod(open_to_all, 0o777)
    with pytest.raises(boundary.NotOwnFolder, match="writable by others"):
        boundary.check_own(open_to_all)
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        with pytest.raises(boundary.NotOwnFolder, match="belongs to uid 65534"):
            boundary.own_dir(theirs)


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a folder over needs root")
def test_box_folder_is_filled_then_handed_over(tmp_path: Path) -> None:
    room = boundary.own_dir(tmp_path / "room", 0o711)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.c").write_text("x")
    uid = 1_900_000_123
    folder = boundary.box_folder(room, "run-", uid, uid, files_from=src, files_into="src",
                                 put_files=(("data.txt", b"1 2 3"),), tmp=".tmp",
                                 make_dirs=("idrrun-profile/x",))
    owners = {os.lstat(p).st_uid for p in [folder, *folder.rglob("*")]}
    assert owners == {uid}
    assert (folder / "src" / "a.c").read_text() == "x" and (folder / "data.txt").read_bytes() == b"1 2 3"
    assert (folder / "idrrun-profile" / "x").is_dir() and (folder / ".tmp").is_dir()
    sealed = boundary.sealed_folder(room, "bin-", uid)
    exe = boundary.seal(src / "a.c", sealed, "prog", uid)
    st = os.stat(exe)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, uid, 0o750)
    assert stat.S_IMODE(os.stat(sealed).st_mode) == 0o710
    # what the box leaves is removed without following its links
    (folder / "escape").symlink_to(src)
    boundary.remove(folder)
    assert not folder.exists() and (src / "a.c").exists()


def test_remove_takes_a_tree_deeper_than_python_s_stack_and_follows_no_link(tmp_path: Path) -> None:
    top = tmp_path / "box"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for level in range(3000):
        os.mkdir("d", dir_fd=fd)
        if level % 500 == 0:
            os.symlink(victim, f"/proc/self/fd/{fd}/escape")
            os.mkfifo(f"/proc/self/fd/{fd}/pipe")
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    boundary.remove(top)
    assert not top.exists() and (victim / "keep").read_text() == "mine"
    boundary.remove(tmp_path / "never-was")  # nothing to do: no error


def test_usage_counts_blocks_not_claims_and_stops_early(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    with open(box / "sparse", "wb") as fh:
        fh.seek(8 << 30)
        fh.write(b"x")
    assert boundary.usage(box, 1 << 20, 100) is None
    (box / "real").write_bytes(b"x" * (2 << 20))
    assert boundary.usage(box, 1 << 20, 100) == "more than 1 MiB of files"
    for i in range(20):
        (box / f"f{i}").touch()
    assert boundary.usage(box, 1 << 30, 10) == "more than 10 files"


def test_a_changed_tool_is_built_again_not_run(tmp_path: Path) -> None:
    made: list[Path] = []

    def compile_to(tmp: Path) -> "object":
        tmp.write_text("#!/bin/sh\necho tool\n")
        made.append(tmp)
        from idrrun.model import ProcResult
        return ProcResult(argv=("cc",), returncode=0)

    target = tmp_path / "cache" / "guard" / "idrrun-guard-x"
    built, why = tools.build(target, compile_to, "the guard")  # type: ignore[arg-type]
    assert built == target and why == "" and tools.checked(target) and len(made) == 1
    target.write_text("#!/bin/sh\necho poisoned\n")  # what a box once managed to write
    assert not tools.checked(target)
    built, _ = tools.build(target, compile_to, "the guard")  # type: ignore[arg-type]
    assert len(made) == 2 and target.read_text().endswith("echo tool\n") and tools.checked(target)
    # a copy a box may run is checked the same way, and replaced when it was changed
    (tmp_path / "room").mkdir()
    placed = tools.place(target, tmp_path / "room" / "tools")
    assert stat.S_IMODE(os.stat(placed).st_mode) == 0o755
    placed.write_text("changed")
    assert tools.place(target, tmp_path / "room" / "tools").read_text().endswith("echo tool\n")


def test_a_tool_is_hashed_once_while_nothing_changes_it(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """tools.checked keeps what it hashed by the files' identity (their ctime included): the
    next use of an unchanged tool reads no byte of it; a tool rewritten since, even to the same
    size, is hashed again and refused."""
    def compile_to(tmp: Path) -> "object":
        tmp.write_text("#!/bin/sh\necho tool\n")
        from idrrun.model import ProcResult
        return ProcResult(argv=("cc",), returncode=0)

    target = tmp_path / "cache" / "tracer" / "idrrun-tool-y"
    tools.build(target, compile_to, "a tool")  # type: ignore[arg-type]
    hashed: list[Path] = []
    digest_of = tools.digest_of
    monkeypatch.setattr(tools, "digest_of", lambda path: hashed.append(path) or digest_of(path))
    assert tools.checked(target) and len(hashed) == 1  # just built: hashed at every use
    assert tools.checked(target) and len(hashed) == 2
    monkeypatch.setattr(tools, "FRESH", -1.0)  # as if built long ago
    assert tools.checked(target) and len(hashed) == 3
    assert tools.checked(target) and tools.checked(target) and len(hashed) == 3
    target.write_text("#!/bin/sh\necho TOOL\n")  # the same size, a new ctime
    assert not tools.checked(target) and len(hashed) == 4


def test_open_beneath_refuses_names_out_of_the_folder(tmp_path: Path, way: str) -> None:
    fd = boundary.open_dir(_box(tmp_path))
    try:
        for name in ("", "/", "../x", "a/../../x"):
            with pytest.raises(OSError) as caught:
                boundary.open_beneath(fd, name)
            assert caught.value.errno in (errno.EXDEV, errno.ENOENT, errno.ELOOP)
    finally:
        os.close(fd)


def _written_while_read(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[int]:
    """At the first read of the file `path` names (by its device and inode), something else
    writes more to it through a descriptor of its own, as a program still running would.
    Returns the list the descriptor read is put in once that happened."""
    st = os.stat(path)
    real = os.read
    written: list[int] = []

    def read(fd: int, n: int) -> bytes:
        data = real(fd, n)
        opened = os.fstat(fd)
        if not written and (opened.st_dev, opened.st_ino) == (st.st_dev, st.st_ino):
            with open(path, "ab") as fh:
                fh.write(b"and more\n")
            written.append(fd)
        return data

    monkeypatch.setattr(os, "read", read)
    return written


CHANGED = "changed while it was read: not used"


@pytest.mark.parametrize("reader", ["take", "take_to", "copy_tree"])
def test_a_file_written_while_it_is_read_is_refused(tmp_path: Path, way: str, reader: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """What is read is one state of the file: one that changes while it is read (its size, its
    times, its inode before and after) is refused, by every reader of the boundary."""
    box = _box(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    fd = boundary.open_dir(box)
    try:
        written = _written_while_read(monkeypatch, box / "sub" / "out.txt")
        if reader == "take":
            got = boundary.take(fd, "sub/out.txt", 100)
            assert (got.data, got.why) == (None, CHANGED)
        elif reader == "take_to":
            assert boundary.take_to(fd, "sub/out.txt", out / "out.txt", 100) == CHANGED
            assert not (out / "out.txt").exists()
        else:
            dest = boundary.open_dir(out)
            try:
                copied = boundary.copy_tree(box / "sub", dest, single_link=True)
            finally:
                os.close(dest)
            assert copied.files == () and copied.refused == f"out.txt: {CHANGED}"
    finally:
        os.close(fd)
    assert written  # (the write came while it was read)
    monkeypatch.undo()
    fd = boundary.open_dir(box)
    try:  # read again, unchanged this time: taken
        assert boundary.take(fd, "sub/out.txt", 100).data == b"result 42\nand more\n"
    finally:
        os.close(fd)


def test_a_file_removed_once_opened_is_read_as_it_was_opened(tmp_path: Path, way: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """One rule of links for every reader: a file with another name is refused (a hard link to
    a file the writer may not read); one left with no name (removed, or replaced by a rename,
    after it was opened: a release published again while a receiver reads it) is nobody
    else's, and is read as it was opened, unless it changes while it is read."""
    box = _box(tmp_path)
    opened = boundary.reading.open_beneath

    def then_replaced(dirfd: int, rel: str, flags: int = boundary.READ_FLAGS) -> int:
        fd = opened(dirfd, rel, flags)
        (box / "new").write_text("the next version\n")
        os.rename(box / "new", box / rel)  # the file opened has no name left
        return fd

    monkeypatch.setattr(boundary.reading, "open_beneath", then_replaced)
    fd = boundary.open_dir(box)
    try:
        assert boundary.take(fd, "sub/out.txt", 100).data == b"result 42\n"
    finally:
        os.close(fd)


def test_a_handed_in_file_written_while_the_grader_reads_it_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The grader's own way in (discover: a student's file read once into its copy) goes
    through the same rule: a file she writes to while it is read is refused, never judged on
    half of each version."""
    from conftest import ROOT
    from idrrun.checks import specs
    from idrrun.grading import discover

    handed = tmp_path / "alice.c"
    handed.write_text((ROOT / "examples" / "C" / "intro_saxpy_solution.c").read_text())
    exercise = specs.load(ROOT / "examples" / "intro_saxpy.toml")
    into = tmp_path / "into"
    into.mkdir(mode=0o700)
    written = _written_while_read(monkeypatch, handed)
    [sub] = discover.discover([handed], exercise, None, into=into)
    assert written and sub.source is None and CHANGED in sub.problem, sub
