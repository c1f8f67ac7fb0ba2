#!/usr/bin/env bash
# One batch of GPU checks, on the GPU machine (../shared/gpu/README.md), from the project root:
#   source .gpu/activate.sh && bash benchmarks/gpu_session.sh
# Logs go to $OUT (or ./gpu-out). Ends with short tables to paste into notes.
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=170
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
idr() { python3 -m idrrun.cli "$@"; }

nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$out/gpu.txt"

echo "== kernel tests (gpu marker and the acc cell) =="
python3 -m pytest -p no:cacheprovider -s -q tests/test_kernel.py -k "acc_cell" 2>&1 | tee "$out/kernel_gpu.log" | tail -40

echo "== data management: per-iteration times, 4096^2, 100 iterations =="
for f in examples/C/data_laplace_exercise.c examples/C/data_laplace_solution.c \
         examples/Fortran/data_laplace_exercise.f90 examples/Fortran/data_laplace_solution.f90; do
  echo "-- $f"
  idr run -a --cliopts "4096 100" "$f" 2>&1 | grep -E "OpenACC on|iteration|error =|exit|failed"
done 2>&1 | tee "$out/data_laplace.txt"

echo "== course check on the GPU =="
( time idr course check -j 4 ) 2>&1 | tee "$out/course_gpu.txt" | tail -30
echo "== course check on the host (same machine, offload disabled) =="
( time IDRRUN_OFFLOAD=host idr course check -j 8 ) 2>&1 | tee "$out/course_host.txt" | tail -30
echo "== solutions with their GPU arguments: GPU vs host =="
python3 benchmarks/gpu_vs_host.py --host-jobs 12 --timeout 240 2>&1 | tee "$out/gpu_vs_host.txt"
