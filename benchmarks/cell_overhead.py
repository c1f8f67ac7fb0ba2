"""What a %%idrrun cell costs over a bare compile+run of the same command, in a real kernel.

    python benchmarks/cell_overhead.py [--rounds 20]

For each program (hello; a 200-line C program), interleaved rounds of three cells in one kernel:
- bare:   a Python cell running the same compiler command and the program with subprocess
- idrrun: `%%idrrun --force` (compiled and run every time)
- cached: `%%idrrun` (the build taken from the cache)
Each figure is the cell's wall time seen by the client (execute request to idle), median over
the rounds; the difference idrrun - bare is the overhead (issue 13 target: <= 5 ms; cached cell
<= 10 ms in all).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import start_new_kernel

ROOT = Path(__file__).resolve().parent.parent

HELLO = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


def two_hundred_lines() -> str:
    """A 200-line program: many small functions and an OpenACC loop (host build here)."""
    funcs = "\n".join(
        f"static double f{i}(double x)\n{{\n    double y = x * {i + 1}.0 + {i}.5;\n"
        f"    return y > 100.0 ? y / 3.0 : y * 2.0;\n}}\n" for i in range(30))
    body = " + ".join(f"f{i}(a[i])" for i in range(30))
    return ("#include <stdio.h>\n#include <stdlib.h>\n" + funcs +
            "int main(void)\n{\n    static double a[100000];\n    double s = 0.0;\n"
            "    for (int i = 0; i < 100000; i++) a[i] = i * 1e-3;\n"
            "    #pragma acc parallel loop reduction(+:s) copyin(a)\n"
            f"    for (int i = 0; i < 100000; i++) s += {body};\n"
            '    printf("s = %.6e\\n", s);\n    return 0;\n}\n')


class Kernel:
    def __init__(self, cwd: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=env,
                                            startup_timeout=60)

    def run(self, code: str) -> tuple[float, str]:
        start = time.perf_counter()
        msg = self.kc.execute(code)
        text: list[str] = []
        while True:
            m: Any = self.kc.get_iopub_msg(timeout=120)
            if m["parent_header"].get("msg_id") != msg:
                continue
            if m["msg_type"] == "stream":
                text.append(m["content"]["text"])
            elif m["msg_type"] == "error":
                text.append("\n".join(m["content"]["traceback"]))
            elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
        return time.perf_counter() - start, "".join(text)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="idrrun-cell-bench-"))
    k = Kernel(work)
    k.run("%load_ext idrrun")
    print(f"per-cell cost, {args.rounds} interleaved rounds, medians (ms); machine: "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for label, code in (("hello", HELLO), ("200-line", two_hundred_lines())):
        _, out = k.run("%%idrrun -a --force\n" + code)
        command = re.search(r"^\$ (.*)$", re.sub(r"\x1b\[[0-9;]*m", "", out), re.MULTILINE)
        assert command is not None, out
        argv = shlex.split(command.group(1))
        (work / "bare").mkdir(exist_ok=True)
        (work / "bare" / "source.c").write_text("\n" + code)
        bare = ("import subprocess\n"
                f"subprocess.run({argv!r}, cwd={str(work / 'bare')!r}, capture_output=True, check=True)\n"
                f"print(subprocess.run(['./prog'], cwd={str(work / 'bare')!r}, capture_output=True, text=True).stdout, end='')\n")
        times: dict[str, list[float]] = {"bare": [], "idrrun": [], "cached": []}
        for _ in range(args.rounds):
            times["bare"].append(k.run(bare)[0])
            times["idrrun"].append(k.run("%%idrrun -a --force\n" + code)[0])
            times["cached"].append(k.run("%%idrrun -a\n" + code)[0])
        med = {name: 1000 * statistics.median(ts) for name, ts in times.items()}
        print(f"{label:9s} bare {med['bare']:7.1f}  idrrun {med['idrrun']:7.1f}  "
              f"overhead {med['idrrun'] - med['bare']:+6.1f}  cached cell {med['cached']:6.1f}")
    k.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
