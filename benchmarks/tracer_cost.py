"""What each part of the built-in tracer costs inside the traced program, on a GPU machine
(issue 13: `--profile`'s cost; the tracer's share of it is CUPTI's work in the program).

    python benchmarks/tracer_cost.py [--source examples/C/data_laplace_solution.c]
                                     [--args "4096 1000"] [--rounds 7]

Builds the program once (gcc, nvptx offloading, profile_cost.build) and variants of
idrrun/profile/tracer.c, each a copy with one part taken out by a text substitution (the
product's source is not changed), then runs interleaved rounds, medians:
- alone:         the program, no tracer
- full:          the tracer as idrrun injects it (flushed every 100 ms)
- no sync:       without CUPTI's synchronisation records (the "host waits" row)
- no callbacks:  without the driver-API callbacks (naming streams by OpenACC queue)
- kernels only:  kernel records only (no copies, memsets, synchronisations, callbacks)
- not flushed:   the full tracer, records written only when CUPTI's buffers fill and at exit
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idrrun.profile import tracer  # noqa: E402
from profile_cost import arguments, build  # noqa: E402  (this folder is sys.path[0])

SYNC = '        {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "cuptiActivityEnable(SYNCHRONIZATION)"},\n'
COPIES = ('        {CUPTI_ACTIVITY_KIND_MEMCPY, "cuptiActivityEnable(MEMCPY)"},\n'
          '        {CUPTI_ACTIVITY_KIND_MEMSET, "cuptiActivityEnable(MEMSET)"},\n')
HOOK = "            report(hooks[i].call, cuptiEnableCallback(1, subscriber, hooks[i].domain, hooks[i].id));\n"
NO_DRIVER_HOOK = ("            if (hooks[i].domain != CUPTI_CB_DOMAIN_DRIVER_API)\n"
                  "                report(hooks[i].call, cuptiEnableCallback(1, subscriber, "
                  "hooks[i].domain, hooks[i].id));\n")

VARIANTS: dict[str, list[tuple[str, str]]] = {
    "full": [],
    "no sync": [(SYNC, "")],
    "no callbacks": [(HOOK, NO_DRIVER_HOOK)],
    "kernels only": [(SYNC, ""), (COPIES, ""), (HOOK, NO_DRIVER_HOOK)],
}


def build_variant(name: str, edits: list[tuple[str, str]], work: Path) -> Path:
    text = tracer.TRACER_SOURCE.read_text()
    for old, new in edits:
        assert old in text, f"{name}: the tracer's source changed, {old.strip()!r} not found"
        text = text.replace(old, new)
    source = work / f"tracer-{name.replace(' ', '-')}.c"
    source.write_text(text)
    cupti = tracer.find_cupti(os.environ)
    assert not isinstance(cupti, str), cupti
    library = work / f"{source.stem}.so"
    argv = list(tracer.build_command("gcc", cupti, library))
    argv[argv.index(str(tracer.TRACER_SOURCE))] = str(source)
    subprocess.run(argv, check=True)
    return library


def main() -> int:
    args = arguments(rounds=7).parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-tracer-cost-"))
    exe = work / "prog"
    build(Path(args.source), exe)
    libraries = {name: build_variant(name, edits, work) for name, edits in VARIANTS.items()}
    runs: dict[str, dict[str, str]] = {"alone": {}}
    for name, library in libraries.items():
        runs[name] = {"CUDA_INJECTION64_PATH": str(library), "IDRRUN_TRACE_FLUSH_MS": "100"}
    runs["not flushed"] = {"CUDA_INJECTION64_PATH": str(libraries["full"]),
                           "IDRRUN_TRACE_FLUSH_MS": "0"}
    times: dict[str, list[float]] = {name: [] for name in runs}
    lines: dict[str, int] = {}
    argv = [str(exe), *shlex.split(args.args)]
    for _ in range(args.rounds + 1):  # the first round warms the GPU and the files up
        for name, extra in runs.items():
            trace = work / "trace.jsonl"
            trace.unlink(missing_ok=True)
            env = {**os.environ, **extra, "IDRRUN_TRACE_FILE": str(trace)}
            start = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - start)
            lines[name] = len(trace.read_bytes().splitlines()) if trace.exists() else 0
    alone = statistics.median(times["alone"][1:])
    print(f"{Path(args.source).name} {args.args}, {args.rounds} rounds, medians; "
          f"affinity {len(os.sched_getaffinity(0))} cores")
    for name, ts in times.items():
        t = statistics.median(ts[1:])
        print(f"  {name:14s} {t:7.3f} s  {100 * (t - alone) / alone:+6.1f} %  "
              f"({lines[name]} trace lines)  rounds " + " ".join(f"{x:.3f}" for x in ts[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
