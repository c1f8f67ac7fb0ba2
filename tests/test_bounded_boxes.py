"""Bounded boxes (issue 33, part 5): every writable mount of a box has a size, counted against
the run's disk cap (namespaces), and at the uid level nothing of a box outlives its run: its
SysV IPC objects and the files its uid left in the world-writable folders are removed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from idrrun.model import Limits, SandboxSupport
from idrrun.run import boundary, isolation, leftovers, proc, sandbox, tools
from idrrun.run.sandbox import Box

# Writes 8 MiB (80 MiB in /dev/shm, past its size) to each writable-looking place of a box,
# then says how many bytes each file holds ("-" when it could not be made).
FILL = """
for target in /x /dev/x /dev/shm/x /tmp/x /hidden/x; do
    count=8
    [ "$target" = /dev/shm/x ] && count=80
    dd if=/dev/zero of="$target" bs=1M count=$count 2>/dev/null
    echo "$target $(stat -c %s "$target" 2>/dev/null || echo -)"
done
"""


@pytest.fixture(scope="module")
def protections(tmp_path_factory: pytest.TempPathFactory) -> isolation.Protections:
    return isolation.probe(tmp_path_factory.mktemp("cache"))


@pytest.mark.skipif(isolation.sandbox_support().level != "namespaces",
                    reason="this machine cannot make namespaces (bubblewrap)")
def test_every_writable_mount_of_a_box_has_a_size(tmp_path: Path,
                                                  protections: isolation.Protections) -> None:
    work = tmp_path / "work"
    work.mkdir()
    hidden = Path("/usr/local/share/idrrun-test-hidden")
    box = Box(workdir=work, writable=(work,), hidden=(hidden,), tmp_size=4 << 20,
              env=sandbox.clean_env(os.environ, {}), support=isolation.sandbox_support())
    hidden.mkdir(exist_ok=True)
    try:
        r = proc.run(["/bin/sh", "-c", FILL], what="run", timeout=60, spec=proc.ProcSpec(
            cwd=work, protections=protections, limits=Limits(), box=box))
    finally:
        hidden.rmdir()
    sizes = dict(line.split() for line in r.output.splitlines() if line.startswith("/"))
    # the root, /dev and the folders over hidden ones are read-only to the program
    assert sizes["/x"] == "-" and sizes["/dev/x"] == "-" and sizes["/hidden/x"] == "-", r.output
    assert int(sizes["/dev/shm/x"]) <= sandbox.SHM_SIZE, r.output
    assert int(sizes["/tmp/x"]) <= 4 << 20, r.output


def test_the_tmpfs_mounts_count_against_the_disk_cap() -> None:
    support = isolation.sandbox_support()
    box = Box(workdir=Path("/w"), writable=(Path("/w"),), support=support)
    if support.level == "namespaces":
        assert sandbox.mounts_size(box) == \
            sandbox.ROOT_SIZE + sandbox.SHM_SIZE + sandbox.TMP_SIZE
    assert sandbox.mounts_size(box) < sandbox.DISK_CAP


# Every kind of leftover a program of the uid level can make: SysV shared memory, a message
# queue, a semaphore set, and files and folders (a link among them) in the world-writable
# folders and the grader's TMPDIR (argv[1]).
LEAVES = r"""
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int shm = shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600);
    int msg = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    int sem = semget(IPC_PRIVATE, 3, IPC_CREAT | 0600);
    printf("ipc %d %d %d\n", shm, msg, sem);
    const char *dirs[] = {"/tmp", "/var/tmp", "/dev/shm", "/run/lock", argv[1]};
    char path[4096];
    for (int k = 0; k < 5; k++) {
        snprintf(path, sizeof path, "%s/idrrun-left-%d-file", dirs[k], (int)getuid());
        FILE *f = fopen(path, "w");
        if (f) { fputs("left\n", f); fclose(f); }
        snprintf(path, sizeof path, "%s/idrrun-left-%d-dir", dirs[k], (int)getuid());
        mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/idrrun-left-%d-dir/inner", dirs[k], (int)getuid());
        mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/idrrun-left-%d-link", dirs[k], (int)getuid());
        if (symlink("/etc/passwd", path)) {}
    }
    return 0;
}
"""


def _left(uid: int, folders: tuple[str, ...]) -> list[str]:
    return [f"{d}/{e.name}" for d in folders for e in os.scandir(d)
            if e.stat(follow_symlinks=False).st_uid == uid]


@pytest.mark.skipif(os.geteuid() != 0, reason="a box of its own uid needs root")
def test_nothing_of_a_uid_level_box_outlives_its_run(protections: isolation.Protections) -> None:

    base = Path(tempfile.mkdtemp(prefix="idrrun-leftovers-", dir="/tmp"))  # passable by all
    os.chmod(base, 0o711)
    try:
        _leave_and_sweep(base, protections)
    finally:
        boundary.remove(base)


def _leave_and_sweep(base: Path, protections: isolation.Protections) -> None:
    shared = base / "shared"  # the grader's TMPDIR: open to all, sticky, as /tmp is
    shared.mkdir()
    os.chmod(shared, 0o1777)
    source = base / "leaves.c"
    source.write_text(LEAVES)
    exe = base / "leaves"
    assert proc.run(["gcc", "-o", str(exe), str(source)], what="compile", timeout=120).ok
    os.chmod(exe, 0o755)
    room = boundary.own_dir(base / "room", 0o711)
    uid = sandbox.fresh_uid()
    folder = boundary.box_folder(room, "run-", uid, uid, tmp=".tmp")
    sealed = boundary.sealed_folder(room, "bin-", uid)
    program = boundary.seal(exe, sealed, "leaves", uid)
    guard = tools.place(protections.guard, room / "tools") if protections.guard else None
    box = Box(workdir=folder, writable=(folder,), readable=(sealed,),
              env=sandbox.clean_env(os.environ, {}), uid=uid, gid=uid,
              support=SandboxSupport("uid", None, True, "test"), disk_caps=True,
              inner_guard=guard)
    watched = (*leftovers.WORLD_WRITABLE, str(shared))
    tempfile.tempdir, before = str(shared), tempfile.tempdir  # the grader's TMPDIR
    try:
        r = proc.run([str(program), str(shared)], what="run", timeout=30, spec=proc.ProcSpec(
            cwd=folder, protections=protections, limits=Limits(), box=box))
    finally:
        tempfile.tempdir = before
    assert "ipc " in r.output, (r.describe(), r.output, r.start_error)
    made = [int(w) for w in r.output.split("ipc ")[1].split()[:3]]
    assert r.ok and all(i >= 0 for i in made), r.output
    assert leftovers.ipc_objects(uid) == [], "SysV IPC objects outlived the run"
    assert _left(uid, watched) == [], "files outlived the run"
    assert os.path.isfile("/etc/passwd")  # a link went, not its target
    assert any("SysV IPC" in n for n in r.notes) and any("-dir, left" in n for n in r.notes)


def test_sysvipc_lines_are_read_by_their_columns() -> None:
    text = ("       key      shmid perms   size  cpid  lpid nattch   uid   gid  cuid  cgid\n"
            "         0         12   600  1048576  10  0  0  1900000001  5  1900000001  5\n"
            "         0         13   600  1048576  10  0  0  0  0  1900000001  5\n"
            "         0         14   600  1048576  10  0  0  0  0  0  0\n")
    found = leftovers.parse_sysvipc(text, "shmid", "shm", 1900000001)
    assert [o.id for o in found] == [12, 13]
    assert leftovers.ipcrm_argv(found) == ("ipcrm", "-m", "12", "-m", "13")
    assert leftovers.ipcrm_argv([]) == ()
