#!/usr/bin/env bash
# Third batch on the GPU machine: overhead figures measured on 2 of its cores (taskset), idle
# (the development machine is shared), the profiler with the toolkit hidden, Jacobi profiles.
#   source .gpu/activate.sh && bash benchmarks/gpu_round3.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(nvidia-smi --query-gpu=name --format=csv,noheader) | $(nproc) cores, benchmarks on 2 (taskset -c 0,1) | $(date)"

note "== per-cell overhead in a real kernel (issue 13.5)"
taskset -c 0,1 python3 benchmarks/cell_overhead.py --rounds 20 2>/dev/null | tee -a "$summary"

note "== idrrun run vs bare over a V&V-like suite (issue 13.5)"
IDRRUN_OFFLOAD=host taskset -c 0,1 python3 benchmarks/vv_bench.py --programs 200 --rounds 2 2>&1 | tail -5 | tee -a "$summary"

note "== grading 30 submissions, -j1 / -j2 / bare xargs -P2, sandboxed (issue 11)"
IDRRUN_OFFLOAD=host taskset -c 0,1 python3 benchmarks/grade_bench.py --count 30 --repeat 3 2>&1 | tail -6 | tee -a "$summary"

note "== the built-in profiler with the CUDA toolkit hidden, CUPTI from NVIDIA's wheels (issue 12)"
site=/tmp/cupti-site; rm -rf "$site"; mkdir -p "$site"; tar -C "$site" -xJf .gpu2/cupti-wheels.tar.xz
hide=()
for d in /usr/local/cuda*; do [ -d "$d" ] && [ ! -L "$d" ] && hide+=(--tmpfs "$d"); done
bwrap --dev-bind / / "${hide[@]}" --setenv PYTHONPATH "$site:$PYTHONPATH" --setenv XDG_CACHE_HOME /tmp/idrrun-hidden-cache \
  -- bash -c 'ls -A /usr/local/cuda/ | head -2; echo "cuda folder entries above (none: hidden)"; command -v nvcc ptxas || echo "no nvcc, no ptxas"; python3 -m idrrun doctor | grep -E "CUPTI|offloading"; python3 -m idrrun run -a --profile --accopts cc80 --cliopts 2000 examples/C/async_matmul_solution.c' > "$out/hidden_toolkit.txt" 2>&1
head -60 "$out/hidden_toolkit.txt" | tee -a "$summary"

note "== Jacobi variants under the built-in tracer (idrrun run --profile)"
for v in 1 3 4 5; do
  python3 -m idrrun run -a --profile --options "-DVARIANT=$v -O3" --cliopts "4096 1000" benchmarks/jacobi/jacobi_variants.c > "$out/jacobi_profile_$v.txt" 2>&1
  grep -E "^variant|GPU busy|kernels|host waited|hint|idle|launch" "$out/jacobi_profile_$v.txt" | head -12 | tee -a "$summary"
done
