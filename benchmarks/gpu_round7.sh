#!/usr/bin/env bash
# The whole course on the GPU: every exercise's solution and start file with their GPU arguments,
# trace checks profiled (issue 14), one row per line as it ends; then the built-in profiler with
# the CUDA toolkit hidden, CUPTI and the CUDA headers from NVIDIA's wheels (.gpu2, issue 12).
#   carry .gpu .gpu2:  source .gpu/activate.sh && bash benchmarks/gpu_round7.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=200
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
s=$SECONDS
timeout 480 python3 -m idrrun course check -j 4 > "$out/course_gpu.txt" 2>&1
echo "course check: exit $?, $((SECONDS - s)) s" >> "$out/course_gpu.txt"

site=/tmp/cupti-site; rm -rf "$site"; mkdir -p "$site"; tar -C "$site" -xJf .gpu2/cupti-wheels.tar.xz
hide=()
for d in /usr/local/cuda*; do [ -d "$d" ] && [ ! -L "$d" ] && hide+=(--tmpfs "$d"); done
timeout 60 bwrap --dev-bind / / "${hide[@]}" --setenv PYTHONPATH "$site:$PYTHONPATH" \
  --setenv XDG_CACHE_HOME /tmp/idrrun-hidden-cache -- bash -c '
  ls -A /usr/local/cuda/ 2>/dev/null | head -2; echo "(cuda folder entries above: none means hidden)"
  command -v nvcc ptxas || echo "no nvcc, no ptxas on PATH"
  python3 -m idrrun doctor | grep -iE "CUPTI"
  python3 -m idrrun run -a --profile --accopts cc80 --cliopts 2000 examples/C/async_matmul_solution.c' \
  > "$out/hidden_toolkit.txt" 2>&1
echo "hidden toolkit: exit $?" >> "$out/hidden_toolkit.txt"
