"""Each exercise's solution with its GPU arguments, on the GPU and on the host: a table.

    python benchmarks/gpu_vs_host.py [--host-jobs 8] [--timeout 300]

Runs `idrrun run -a` (the GPU when present) one at a time, then the same with IDRRUN_OFFLOAD=host
in parallel, and prints the program's run time for both (the `exit 0 · X s` line).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_DONE = re.compile(r"^(exit 0|exit code \d+|killed by \S+|timed out) · ([\d.]+) s", re.MULTILINE)


def run(path: Path, args: tuple[str, ...], host: bool, timeout: float) -> str:
    # Ahead of what is there (the GPU machine's wheels are on PYTHONPATH too).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    if host:
        env["IDRRUN_OFFLOAD"] = "host"
    cmd = [sys.executable, "-m", "idrrun.cli", "run", "-a", "--timeout", str(timeout),
           "--cliopts", " ".join(args), str(path)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = _DONE.search(r.stdout)
    if not m:
        print(f"{path.name}: no exit line (rc {r.returncode}): {(r.stdout + r.stderr).strip()[-300:]}",
              file=sys.stderr, flush=True)
        return "build failed" if r.returncode == 1 else f"rc {r.returncode}"
    return f"{float(m.group(2)):.2f}" if m.group(1) == "exit 0" else m.group(1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host-jobs", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from idrrun.checks import specs

    jobs = [(ex, lang, pair.solution) for ex in specs.all_exercises(ROOT / "examples")
            for lang, pair in ex.sources.items()]
    # Each figure is printed as soon as it is known, so that a run cut short keeps what it had.
    gpu = []
    for ex, lang, path in jobs:
        gpu.append(run(path, ex.gpu_args, False, a.timeout))
        print(f"GPU  {ex.name} {lang}: {gpu[-1]}", flush=True)

    def host_run(job: tuple[specs.Exercise, str, Path]) -> str:
        result = run(job[2], job[0].gpu_args, True, a.timeout)
        print(f"host {job[0].name} {job[1]}: {result}", flush=True)
        return result

    with ThreadPoolExecutor(a.host_jobs) as pool:
        host = list(pool.map(host_run, jobs))
    print(f"{'exercise':18s} {'language':9s} {'args':22s} {'GPU s':>10s} {'host s':>12s}")
    for (ex, lang, _), g, h in zip(jobs, gpu, host):
        print(f"{ex.name:18s} {lang:9s} {' '.join(ex.gpu_args):22s} {g:>10s} {h:>12s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
