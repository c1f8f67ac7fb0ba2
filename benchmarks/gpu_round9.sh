#!/usr/bin/env bash
# Reasons for the course rows that did not pass on the GPU (gpu_round7/8), a probe of GCC 12's
# declare create on nvptx, then where `idrrun run` spends its fixed cost (gpu_round6.sh).
#   carry .gpu:  source .gpu/activate.sh && bash benchmarks/gpu_round9.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=220
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
w=$(mktemp -d)
gcc -O2 -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm" \
    benchmarks/reduction/declare_probe.c -o "$w/probe" -lm 2>/dev/null && timeout 20 "$w/probe" | tee "$out/declare_probe.txt"
gcc -O2 -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm" \
    examples/C/routines_pendulum_solution.c -o "$w/pend" -lm 2>/dev/null
for n in 64 2000; do
  echo "pendulum n=$n:"; timeout 20 "$w/pend" $n 1e-3 | tail -3; echo "exit $?"
done 2>&1 | tee "$out/pendulum.txt"
timeout 150 python3 -m idrrun course check -j 2 --exercise openmp_heat > "$out/course_openmp.txt" 2>&1
timeout 60 python3 -m idrrun course check -j 2 --exercise async_matmul > "$out/course_async.txt" 2>&1
sed -i 's/--count 30 --repeat 2/--count 20 --repeat 1/; s/timeout 240/timeout 150/' benchmarks/gpu_round6.sh
bash benchmarks/gpu_round6.sh
