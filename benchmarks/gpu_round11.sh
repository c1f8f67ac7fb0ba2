#!/usr/bin/env bash
# routines_pendulum after its fix (the table filled on the device), and why openmp_heat's OpenMP
# offload build fails to link on the GPU machine.
#   carry .gpu:  source .gpu/activate.sh && bash benchmarks/gpu_round11.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=200
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
for f in examples/C/routines_pendulum_solution.c examples/Fortran/routines_pendulum_solution.f90; do
  s=$SECONDS
  timeout 60 python3 -m idrrun run -a --profile --check routines_pendulum "$f" > "$out/p.txt" 2>&1
  echo "== $f: exit $?, $((SECONDS - s)) s"; grep -E "PASS|FAIL|n/a|period|time =|exit" "$out/p.txt" | head -14
done
gcc -O2 -fopenmp -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm -latomic" \
    examples/C/openmp_heat_solution.c -o /tmp/oh -lm 2>&1 | grep -v "TEXTREL\|relocation against" | head -8
find /opt/gcc-offload/usr/lib/gcc/x86_64-linux-gnu/12/accel/nvptx-none/ -maxdepth 1 -name 'lib*' | tr '\n' ' '
