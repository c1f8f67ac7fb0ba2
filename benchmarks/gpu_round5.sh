#!/usr/bin/env bash
# Fourth batch, second call: what idrrun costs, measured on 2 cores of the GPU machine
# (taskset -c 0,1; the machine is otherwise idle, unlike the shared development machine):
# per-cell overhead in a real kernel, idrrun run against the bare program over a V&V-like suite,
# grading -j1/-j2 against xargs -P2, the cached GPU Jacobi run against the bare one, the
# built-in tracer's cost, and the sandbox's cost per run.
#   carry .gpu:  source .gpu/activate.sh && bash benchmarks/gpu_round5.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
summary=$out/summary5.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(nvidia-smi --query-gpu=name --format=csv,noheader) | $(nproc) cores, figures on 2 (taskset -c 0,1) | $(date)"

note "== per-cell overhead in a real kernel (cell_overhead.py --rounds 10)"
timeout 150 taskset -c 0,1 python3 benchmarks/cell_overhead.py --rounds 10 2>/dev/null | tee -a "$summary"

note "== idrrun run vs bare over a V&V-like suite (vv_bench.py --programs 60 --rounds 1, host)"
IDRRUN_OFFLOAD=host timeout 150 taskset -c 0,1 python3 benchmarks/vv_bench.py --programs 60 --rounds 1 2>&1 | tail -6 | tee -a "$summary"

note "== grading 30 submissions of data_laplace: -j1, -j2, bare xargs -P2 (grade_bench.py, host)"
IDRRUN_OFFLOAD=host timeout 170 taskset -c 0,1 python3 benchmarks/grade_bench.py --count 30 --repeat 2 2>&1 | tail -6 | tee -a "$summary"

note "== cached GPU Jacobi (data_laplace 4096 x 1000): bare, idrrun run, idrrun run --profile"
w=$(mktemp -d /tmp/idrrun-bare-XXXXXX)
# the same timings as later rounds take them (bare, idrrun run, --profile, --version)
bash benchmarks/jacobi_overhead.sh --rounds 5 --profile --version > "$out/overhead5.txt" 2>&1
tail -n 5 "$out/overhead5.txt" | tee -a "$summary"

note "== sandbox cost per run (proc.run of 'true', 30 each, ms median, 2 cores)"
taskset -c 0,1 python3 - <<'PY' | tee -a "$summary"
import os, statistics, tempfile, time
from pathlib import Path
from idrrun.model import Limits
from idrrun.run import isolation, proc, sandbox
prot = isolation.probe(Path("/tmp/idrrun-gpu-cache/idrrun"))
sup = isolation.sandbox_support()
w = Path(tempfile.mkdtemp())
os.chmod(w, 0o755)
box = sandbox.Box(workdir=w, writable=(w,), env=sandbox.clean_env(os.environ, {}), support=sup)
uid = sandbox.fresh_uid()
own = sandbox.Box(workdir=w, writable=(w,), env=sandbox.clean_env(os.environ, {}), support=sup, uid=uid, gid=uid)
for label, kw in (("plain", {}), ("guard+limits", dict(protections=prot, limits=Limits())),
                  ("sandbox", dict(protections=prot, limits=Limits(), box=box)),
                  ("sandbox, own uid", dict(protections=prot, limits=Limits(), box=own))):
    ts = []
    for i in range(30):
        t = time.perf_counter(); r = proc.run(["true"], what="run", timeout=10, spec=proc.ProcSpec(cwd=w, **kw)); ts.append(time.perf_counter() - t)
        assert r.ok, r
    print(f"{label:18s} {1000 * statistics.median(ts):6.1f} ms")
print(sup.describe())
PY

note "== GCC 12 nvptx reductions: one dot product of 1025^2 doubles written 6 ways (benchmarks/reduction)"
for v in 1 2 3 4 5 6; do
  gcc -O2 -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80" -DVARIANT=$v \
      benchmarks/reduction/dot_variants.c -o "$w/dot$v" 2>/dev/null \
    && timeout 60 "$w/dot$v" 1050625 50 2>&1 | tail -1 | tee -a "$summary"
done
