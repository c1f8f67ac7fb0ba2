#!/usr/bin/env bash
# Second batch of GPU checks: Jacobi variants (issue 13.4), idrrun's overhead with the probe
# remembered (13.5), sandboxed grading of the asynchronism exercise (11), the headline cell
# `%%idrrun -a --profile --accopts "cc70,pinned"` in a real kernel (12), the built-in profiler
# with the CUDA toolkit hidden and CUPTI from NVIDIA's wheels (12). From the project root:
#   source .gpu/activate.sh && bash benchmarks/gpu_round2.sh      (.gpu2/ holds the CUPTI wheels)
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
idrrun() { python3 -m idrrun "$@"; }
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader) | $(date)"

note "== Jacobi variants, 4096^2 x 1000 (ms per iteration, % of the bandwidth floor)"
PEAK_GBS=${PEAK_GBS:-3350} OUT=$out bash benchmarks/jacobi/run_gpu.sh > "$out/jacobi.txt" 2>&1
cat "$out/jacobi.txt" >> "$summary"

note "== idrrun run vs bare, Jacobi 4096 x 1000, 5 interleaved rounds (probe remembered)"
w=$(mktemp -d /tmp/idrrun-bare-XXXXXX)
gcc -O2 -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm" -o "$w/p" examples/C/data_laplace_solution.c -lm 2>/dev/null
idrrun run -a --cliopts "4096 10" examples/C/data_laplace_solution.c > /dev/null 2>&1  # warm the caches
t() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); python3 -c "print(round($e-$s,3))"; }
for _ in 1 2 3 4 5; do
  echo "bare_run $(t "$w/p" 4096 1000)"
  echo "idrrun_cached_run $(t python3 -m idrrun run -a --cliopts '4096 1000' examples/C/data_laplace_solution.c)"
  echo "idrrun_cached_profile $(t python3 -m idrrun run -a --profile --cliopts '4096 1000' examples/C/data_laplace_solution.c)"
  echo "version $(t python3 -m idrrun --version)"
  echo "bare_true $(t true)"
done > "$out/overhead.txt"
python3 - "$out/overhead.txt" <<'PY' | tee -a "$summary"
import collections, statistics, sys
times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, t = line.split()
    times[name].append(float(t))
for name, ts in times.items():
    print(f"{name:24s} median {statistics.median(ts):.3f} s  {ts}")
PY
python3 -X importtime -m idrrun run --help 2> "$out/importtime.txt" > /dev/null
sort -t'|' -k2 -n "$out/importtime.txt" | tail -8 >> "$summary"

note "== sandbox cost per run (proc.run of 'true', 30 each, ms median)"
python3 - <<'PY' | tee -a "$summary"
import os, statistics, tempfile, time
from pathlib import Path
from idrrun.model import Limits
from idrrun.run import isolation, proc, sandbox
prot = isolation.probe(Path("/tmp/idrrun-gpu-cache/idrrun"))
sup = isolation.sandbox_support()
w = Path(tempfile.mkdtemp())
box = sandbox.Box(workdir=w, writable=(w,), env=sandbox.clean_env(os.environ, {}), support=sup)
own = sandbox.Box(workdir=w, writable=(w,), env=sandbox.clean_env(os.environ, {}), support=sup,
                  uid=sandbox.fresh_uid(), gid=sandbox.fresh_uid())
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

note "== grading 4 async submissions in the sandbox"
cls=$(mktemp -d /tmp/idrrun-class-XXXXXX)
cp examples/C/async_matmul_solution.c "$cls/alice.c"
cp examples/Fortran/async_matmul_solution.f90 "$cls/bob.f90"
sed 's/init_mat(A, dim, 6.0, 1);/init_mat(A, dim, 5.0, 1);/' examples/C/async_matmul_solution.c > "$cls/carol.c"
sed 's/ async(queue)//g; s/ wait(1, 2, 3)//g' examples/C/async_matmul_solution.c > "$cls/dave.c"
(cd "$cls" && idrrun grade async_matmul alice.c bob.f90 carol.c dave.c -j 2 --report "$out/async_grades.json") > "$out/grade.txt" 2>&1
python3 - "$out/async_grades.json" <<'PY' | tee -a "$summary"
import json, sys
for row in json.load(open(sys.argv[1])):
    checks = {c["name"]: c["status"] + (f" ({c['got']})" if c["got"] else "") for c in row["checks"]}
    print(f"{row['student']:6s} {row['verdict']:10s} sandbox={row['sandbox']} ran_on_gpu={checks.get('ran_on_gpu')} queues={checks.get('queues')} run={row['run_seconds']}s | {row['reasons'][:90]}")
PY

note "== the headline cell in a real kernel: %%idrrun -a --profile --accopts \"cc70,pinned\""
python3 - "$out" <<'PY' 2>&1 | tee -a "$summary"
import sys, re
from pathlib import Path
from jupyter_client.manager import start_new_kernel
out = Path(sys.argv[1])
km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60)
def run(code, timeout=300):
    msg = kc.execute(code); text = []; html = []
    while True:
        m = kc.get_iopub_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") != msg: continue
        c = m["content"]
        if m["msg_type"] == "stream": text.append(c["text"])
        elif m["msg_type"] in ("display_data", "execute_result"): html.append(c["data"].get("text/html", "") or c["data"].get("text/plain", ""))
        elif m["msg_type"] == "error": text.append("\n".join(c["traceback"]))
        elif m["msg_type"] == "status" and c["execution_state"] == "idle": break
    return "".join(text), html
run("%load_ext idrrun")
src = Path("examples/C/async_matmul_solution.c").read_text()
text, html = run('%%idrrun -a --profile --accopts "cc70,pinned" --cliopts 2000\n' + src)
clean = re.sub(r"\x1b\[[0-9;]*m", "", text)
(out / "headline_cell.txt").write_text(clean + "\n\n" + "\n".join(h[:3000] for h in html))
print(clean[:2500])
print("displays:", len(html), "| timeline in HTML:", any("data:image/png" in h for h in html))
kc.stop_channels(); km.shutdown_kernel(now=True)
PY

note "== the built-in profiler with the CUDA toolkit hidden, CUPTI from NVIDIA's wheels"
site=/tmp/cupti-site; rm -rf "$site"; mkdir -p "$site"; tar -C "$site" -xJf .gpu2/cupti-wheels.tar.xz
hide=()
for d in /usr/local/cuda /usr/local/cuda-*; do [ -d "$d" ] && hide+=(--tmpfs "$d"); done
bwrap --dev-bind / / "${hide[@]}" --setenv PYTHONPATH "$site:$PYTHONPATH" --setenv XDG_CACHE_HOME /tmp/idrrun-hidden-cache \
  -- bash -c 'ls /usr/local/cuda 2>&1 | head -1; which nvcc ptxas || echo "no nvcc, no ptxas"; python3 -m idrrun doctor | grep -E "CUPTI|offloading"; python3 -m idrrun run -a --profile --accopts cc80 --cliopts 2000 examples/C/async_matmul_solution.c' > "$out/hidden_toolkit.txt" 2>&1
head -40 "$out/hidden_toolkit.txt" | tee -a "$summary"
(cd "$out" && tar -czf pictures.tgz jacobi/*.txt) 2>/dev/null
rm -rf "$out/jacobi"
