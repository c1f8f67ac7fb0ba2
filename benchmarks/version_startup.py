"""Benchmark: how long `idrrun --version` takes, against a bare `python -c pass`.

    python benchmarks/version_startup.py [--runs 30] [--idrrun PATH]

Runs each command --runs times (after 3 warm-up runs) and prints min / median / max wall time
in milliseconds: the interpreter alone, `python -m idrrun --version`, the `idrrun` console script
(the one pip installs, next to this interpreter, or --idrrun), and `idrrun run --help` (which
loads the option spec). Target: `idrrun --version` <= 50 ms on an idle machine. Then the modules
`idrrun --version` imports (python -X importtime), heaviest first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timings(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    for _ in range(3):
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=30, help="timed runs per command")
    p.add_argument("--idrrun", type=Path, default=Path(sys.executable).with_name("idrrun"),
                   help="the console script (default: beside this python)")
    args = p.parse_args()
    env = dict(os.environ)
    installed = subprocess.run([sys.executable, "-c", "import idrrun"], capture_output=True).returncode == 0
    if not installed:  # measure the checkout's idrrun
        env["PYTHONPATH"] = str(ROOT)
    print(f"idrrun from {'the installed package' if installed else ROOT}")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -m idrrun --version": [sys.executable, "-m", "idrrun", "--version"],
        "idrrun --version": [str(args.idrrun), "--version"],
        "idrrun run --help": [str(args.idrrun), "run", "--help"],
    }
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, {args.runs} runs each")
    print(f"{'command':30s} {'min ms':>8s} {'median':>8s} {'max':>8s}")
    for name, argv in commands.items():
        if not Path(argv[0]).exists():
            print(f"{name:30s} (not installed: {argv[0]})")
            continue
        t = timings(argv, args.runs, env)
        print(f"{name:30s} {min(t):8.1f} {statistics.median(t):8.1f} {max(t):8.1f}")
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "idrrun", "--version"], env=env,
                       capture_output=True, text=True, check=True)
    rows = []
    for line in r.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    print("heaviest imports of `idrrun --version` (cumulative us):")
    for micros, module in sorted(rows, reverse=True)[:8]:
        print(f"  {micros:8d} {module}")


if __name__ == "__main__":
    main()
