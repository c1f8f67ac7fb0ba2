#!/usr/bin/env bash
# Session of 2026-11-23 (afternoon), second device call (carry .gpu): the per-cell cost in a real
# kernel (cell_overhead.py, 2 cores, 20 rounds) and `idrrun run` per file over 200 small
# programs (vv_bench.py, 2 cores, host builds) with this session's code, and the GPU tests.
#   source .gpu/activate.sh && bash benchmarks/gpu_round17.sh
set -uo pipefail
# shellcheck source=SCRIPTDIR/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"  # $out, the environment, machine.txt
timeout 150 taskset -c 0,1 python3 benchmarks/cell_overhead.py --rounds 20 > "$out/cell_overhead.txt" 2>/dev/null
echo "cell_overhead: exit $?" >> "$out/cell_overhead.txt"
IDRRUN_OFFLOAD=host timeout 260 taskset -c 0,1 python3 benchmarks/vv_bench.py --programs 200 --rounds 1 \
  > "$out/vv.txt" 2>&1
echo "vv_bench: exit $?" >> "$out/vv.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_hostile.py tests/test_kernel.py \
  > "$out/gpu_tests.txt" 2>&1
echo "pytest -m gpu: exit $?" >> "$out/gpu_tests.txt"
