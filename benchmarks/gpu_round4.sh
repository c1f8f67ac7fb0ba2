#!/usr/bin/env bash
# Fourth batch, first of two calls (each under the 10-minute limit of a GPU call): the course on
# the GPU (issue 14: every exercise checked with its GPU arguments, trace checks evaluated), the
# GPU-busy share of profile_cg, the picture checks of blur and life, the built-in profiler with
# the CUDA toolkit hidden (issue 12), and the toolchain left in /opt for nsys_check_gpu.sh.
#   carry .gpu .gpu2:  source .gpu/activate.sh && bash benchmarks/gpu_round4.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=160
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
idr() { python3 -m idrrun "$@"; }
summary=$out/summary4.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader) | $(nproc) cores | $(date)"

note "== idrrun course check on the GPU (-j 2; trace checks profiled)"
s=$SECONDS
timeout 240 python3 -m idrrun course check -j 2 --json > "$out/course_gpu.json" 2> "$out/course_gpu.err"
note "course check: exit $?, $((SECONDS - s)) s"
python3 - "$out/course_gpu.json" <<'PY' | tee -a "$summary"
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except Exception as exc:  # the table is what matters; say why there is none
    print("no JSON:", exc); sys.exit(0)
print(f"{data['passed']} passed ({data['incomplete']} incomplete), {data['failed']} failed; {data['where']}")
TRACE = ("ran_on_gpu", "queues", "data", "GPU busy", "gpu_busy")
for r in data["rows"]:
    for role in ("solution", "start"):
        row = r[role]
        trace = [f"{c['name']}={c['status']}({c.get('got', '')})" for c in row["checks"]
                 if any(t in c["name"] for t in TRACE)]
        bad = [c["name"] for c in row["checks"] if c["status"] != "pass"]
        print(f"{r['exercise']:18s} {r['language']:8s} {role:8s} {row['verdict']:10s} "
              f"run {float(row['run_seconds']):6.2f}s | {'; '.join(trace)[:120]} | not passed: {', '.join(bad)[:100]}")
PY
tail -5 "$out/course_gpu.err" | tee -a "$summary"

note "== profile_cg: GPU busy share (solution vs start file)"
for l in C Fortran; do for r in solution exercise; do
  f=$(find examples/$l -name "profile_cg_$r.*" | head -1)
  timeout 60 python3 -m idrrun run -a --profile --check profile_cg "$f" > "$out/profile_cg_${l}_$r.txt" 2>&1
  note "$l $r: $(grep -hE 'GPU busy|gpu_busy' "$out/profile_cg_${l}_$r.txt" | head -3 | tr '\n' ' ')"
done; done

note "== blur_passes and life_swap solutions, profiled and checked"
for ex in blur_passes life_swap; do
  timeout 60 python3 -m idrrun run -a --profile --check $ex examples/C/${ex}_solution.c > "$out/$ex.txt" 2>&1
  note "$ex: exit $? | $(grep -hiE 'PASS|FAIL|INCOMPLETE|per (pass|generation|iteration)|picture|PSNR' "$out/$ex.txt" | head -6 | tr '\n' ' ')"
done

note "== the built-in profiler with the CUDA toolkit hidden, CUPTI from NVIDIA's wheels"
site=/tmp/cupti-site; rm -rf "$site"; mkdir -p "$site"; tar -C "$site" -xJf .gpu2/cupti-wheels.tar.xz
hide=()
for d in /usr/local/cuda*; do [ -d "$d" ] && [ ! -L "$d" ] && hide+=(--tmpfs "$d"); done
timeout 90 bwrap --dev-bind / / "${hide[@]}" --setenv PYTHONPATH "$site:$PYTHONPATH" \
  --setenv XDG_CACHE_HOME /tmp/idrrun-hidden-cache -- bash -c '
  ls -A /usr/local/cuda/ 2>/dev/null | head -2; echo "(cuda folder entries above: none means hidden)"
  command -v nvcc ptxas || echo "no nvcc, no ptxas on PATH"
  python3 -m idrrun doctor | grep -iE "CUPTI|profil|offload"
  python3 -m idrrun run -a --profile --accopts cc80 --cliopts 2000 examples/C/async_matmul_solution.c' \
  > "$out/hidden_toolkit.txt" 2>&1
note "hidden toolkit: exit $?"
grep -E "hidden|nvcc|CUPTI|profil|queue|GPU busy|exit|error" "$out/hidden_toolkit.txt" | head -20 | tee -a "$summary"

note "== toolchain for nsys_check_gpu.sh (stays in /opt for the next call)"
bash benchmarks/nsys_check_gpu.sh --toolchain-only 2>&1 | tail -2 | tee -a "$summary"
