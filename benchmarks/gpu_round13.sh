#!/usr/bin/env bash
# idrrun's fixed cost as an installed idrrun has it (bytecode compiled, as pip does), on 2 cores
# of the GPU machine, and grading against the bare commands (issue 11's targets):
#   carry .gpu:  source .gpu/activate.sh && bash benchmarks/gpu_round13.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
unset PYTHONDONTWRITEBYTECODE
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
python3 -m compileall -q idrrun /tmp/gpu-site > /dev/null 2>&1
bash benchmarks/jacobi_overhead.sh --rounds 5 --version > "$out/overhead13.txt"
IDRRUN_OFFLOAD=host timeout 170 taskset -c 0,1 python3 benchmarks/grade_bench.py --count 20 --repeat 1 2>&1 | tail -8
