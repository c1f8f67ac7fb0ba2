#!/usr/bin/env bash
# GCC 12's declare on nvptx (benchmarks/reduction/declare_probe.c, 5 variants), the OpenMP
# offload build of openmp_heat with -latomic, then the toolchain left in /opt for
# nsys_check_gpu.sh (the next call carries .gpu-nsys).
#   carry .gpu:  source .gpu/activate.sh && bash benchmarks/gpu_round10.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=200
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
w=$(mktemp -d)
for v in 1 2 3 4 5; do
  opt=-O2; [[ $v == 2 ]] && opt=-O0
  gcc $opt -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm" \
      -DVARIANT=$v benchmarks/reduction/declare_probe.c -o "$w/p$v" -lm 2>/dev/null \
    && timeout 20 "$w/p$v"
done 2>&1 | tee "$out/declare.txt"
for f in examples/C/openmp_heat_solution.c examples/Fortran/openmp_heat_solution.f90; do
  timeout 90 python3 -m idrrun run -t --check openmp_heat "$f" 2>&1 | tail -12
done 2>&1 | tee "$out/openmp_heat.txt"
bash benchmarks/nsys_check_gpu.sh --toolchain-only 2>&1 | tail -1
