"""What one sandboxed run costs the grader, part by part (issue 23's boundary).

    python benchmarks/box_cost.py [--rounds 30]

Times, medians of ROUNDS, on this machine:
- proc.run of `true`: plain; through the guard and its limits; in a bubblewrap box as idrrun's
  own user; in a box with a fresh uid (root only);
- the boundary's work around a graded run (run/boundary.py): a fresh run folder filled with a
  copy of the submission and handed to the box's uid, the executable sealed in a folder of its
  own, the outputs taken out, both folders removed;
- a whole graded run of a small program whose build is cached (pipeline.execute on a request
  with a room), which is what each hidden argument set costs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idrrun import pipeline  # noqa: E402
from idrrun.pipeline import NullReporter  # noqa: E402
from idrrun.model import Limits, Settings  # noqa: E402
from idrrun.request import resolve, source  # noqa: E402
from idrrun.request.options import Options  # noqa: E402
from idrrun.run import boundary, isolation, proc, sandbox, tools  # noqa: E402
from idrrun.run.sandbox import Box  # noqa: E402
from idrrun import toolchains  # noqa: E402

PROGRAM = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


def median_ms(fn: Callable[[], object], rounds: int) -> float:
    fn()  # warm
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30, help="repetitions per figure (median)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="box-cost-"))
    os.chmod(work, 0o711)
    cache = work / "cache"
    protections = isolation.probe(cache)
    support = isolation.sandbox_support()
    limits = Limits()
    rows: list[tuple[str, float]] = []

    def run_true(box: Box | None = None, guarded: bool = True) -> None:
        r = proc.run(["/bin/true"], what="run", timeout=10, spec=proc.ProcSpec(
            cwd=box.workdir if box else work, protections=protections if guarded else None,
            limits=limits if guarded else None, box=box))
        assert r.ok, r.describe()

    rows.append(("proc.run true, plain", median_ms(lambda: run_true(guarded=False), args.rounds)))
    rows.append(("... guard and limits", median_ms(run_true, args.rounds)))
    if support.level == "namespaces":
        own = work / "own"
        own.mkdir()
        box = Box(workdir=own, writable=(own,), env=sandbox.clean_env(os.environ, {}),
                  support=support)
        rows.append(("... bubblewrap box, idrrun's user", median_ms(lambda: run_true(box), args.rounds)))
    room = boundary.own_dir(work / "room", 0o711)
    src = boundary.own_dir(room / "src", 0o700)
    (src / "main.c").write_text(PROGRAM)
    exe = work / "prog"
    exe.write_bytes(Path("/bin/true").read_bytes())
    os.chmod(exe, 0o755)
    root = os.geteuid() == 0

    def staged(run: bool) -> None:
        uid = sandbox.fresh_uid() if root else -1
        folder = boundary.box_folder(room, "run-", uid, uid, files_from=src,
                                     tmp=".tmp" if support.level == "uid" else "")
        sealed = boundary.sealed_folder(room, "bin-", uid)
        program = boundary.seal(exe, sealed, "prog", uid)
        if run:
            guard = tools.place(protections.guard, room / "tools") \
                if uid >= 0 and protections.guard is not None else None
            box = Box(workdir=folder, writable=(folder,), readable=(sealed,),
                      env=sandbox.clean_env(os.environ, {}), uid=uid, gid=uid, support=support,
                      disk_caps=True, inner_guard=guard)
            r = proc.run([str(program)], what="run", timeout=10, spec=proc.ProcSpec(
                cwd=folder, protections=protections, limits=limits, box=box))
            assert r.ok, (r.describe(), r.output)
        fd = boundary.open_dir(folder)
        try:
            boundary.take(fd, "picture.pgm", 1 << 20)
        finally:
            os.close(fd)
        boundary.remove(folder)
        boundary.remove(sealed)

    rows.append(("boundary around a run (stage, seal, take, remove)",
                 median_ms(lambda: staged(False), args.rounds)))
    if support.level != "none":
        label = "... with the run, in its box" + (" as a fresh uid" if root else "")
        rows.append((label, median_ms(lambda: staged(True), args.rounds)))
        settings = Settings(cache_dir=cache)
        probe = toolchains.probe(settings, "gcc")
        request, toolchain = resolve.resolve(Options(), source.from_file(src / "main.c", "c", "main.c"),
                                             src, settings, probe)
        request = request.__class__(**{**request.__dict__, "sandbox": True, "room": room})

        def graded() -> None:
            outcome = pipeline.execute(request, toolchain, probe, settings, NullReporter())
            assert outcome.failure is None, outcome.failure

        rows.append(("a graded run, build cached (pipeline.execute)", median_ms(graded, args.rounds)))
    print(f"sandbox level: {support.level}; root: {root}; {args.rounds} rounds, medians")
    for label, ms in rows:
        print(f"  {label:55s} {ms:7.2f} ms")
    boundary.remove(work)


if __name__ == "__main__":
    main()
