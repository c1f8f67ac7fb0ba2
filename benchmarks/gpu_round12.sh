#!/usr/bin/env bash
# openmp_heat's OpenMP offload build on the GPU machine, with the mgomp multilib that
# ../shared/gpu/pack.sh leaves out (.gpu2/mgomp.tar.xz, from Debian's gcc-12-offload-nvptx):
#   carry .gpu .gpu2:  source .gpu/activate.sh && bash benchmarks/gpu_round12.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=200
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
tar -C /opt/gcc-offload/usr/lib/gcc/x86_64-linux-gnu/12/accel/nvptx-none -xJf .gpu2/mgomp.tar.xz
for f in examples/C/openmp_heat_solution.c examples/Fortran/openmp_heat_solution.f90; do
  s=$SECONDS
  timeout 90 python3 -m idrrun run -t --profile --check openmp_heat "$f" > "$out/o.txt" 2>&1
  echo "== $f: exit $?, $((SECONDS - s)) s"; grep -E "PASS|FAIL|n/a|error|exit|GPU busy|kernels" "$out/o.txt" | head -14
done
