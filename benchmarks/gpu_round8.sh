#!/usr/bin/env bash
# The course rows that did not pass on the GPU in gpu_round7.sh, one by one with their reasons
# (GPU arguments, profiled as the grader does for trace checks):
#   carry .gpu:  source .gpu/activate.sh && bash benchmarks/gpu_round8.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=200
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
one() {  # NAME FILE: the check with the spec's GPU arguments, profiled
  local s=$SECONDS
  timeout 70 python3 -m idrrun run -a --profile --check "$1" "$2" > "$out/$1-$(basename "$2").txt" 2>&1
  echo "== $1 $2: exit $?, $((SECONDS - s)) s"
  grep -E "FAIL|n/a|INCOMPLETE|not yet|PASS,|exit [0-9]|timed out|killed|error" "$out/$1-$(basename "$2").txt" | head -12
}
one async_matmul examples/C/async_matmul_solution.c
one openmp_heat examples/C/openmp_heat_solution.c
one openmp_heat examples/Fortran/openmp_heat_solution.f90
one routines_pendulum examples/C/routines_pendulum_solution.c
one routines_pendulum examples/Fortran/routines_pendulum_solution.f90
