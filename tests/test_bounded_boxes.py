"""Bounded boxes (issue 33, part 5): every writable mount of a box has a size, counted against
the run's disk cap (namespaces), and at the uid level nothing of a box outlives its run: its
SysV IPC objects and the files its uid left in the world-writable folders are removed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from idrrun.model import Limits
from idrrun.run import isolation, proc, sandbox
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
