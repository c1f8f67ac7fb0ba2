#!/usr/bin/env bash
# Session of 2026-11-23 (third), fourth device call (carry .gpu): after this session's changes,
# `idrrun run --profile` phase by phase (profile_phases.py --bare), the tracer's parts with more
# rounds (tracer_cost.py), the whole commands (jacobi_overhead.sh --profile), the per-cell cost
# in a real kernel (cell_overhead.py), and the GPU tests.
#   source .gpu/activate.sh && bash benchmarks/gpu_round21.sh
set -uo pipefail
# shellcheck source=SCRIPTDIR/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"  # $out, the environment, machine.txt
timeout 150 taskset -c 0,1 python3 benchmarks/profile_phases.py --rounds 9 --checks --bare \
  > "$out/phases_2cores.txt" 2>&1
echo "exit $?" >> "$out/phases_2cores.txt"
timeout 200 taskset -c 0,1 python3 benchmarks/tracer_cost.py --rounds 11 > "$out/tracer_cost.txt" 2>&1
echo "exit $?" >> "$out/tracer_cost.txt"
timeout 150 bash benchmarks/jacobi_overhead.sh --rounds 9 --profile > "$out/jacobi.txt" 2>&1
echo "exit $?" >> "$out/jacobi.txt"
timeout 120 taskset -c 0,1 python3 benchmarks/cell_overhead.py --rounds 20 > "$out/cell_overhead.txt" 2>/dev/null
echo "exit $?" >> "$out/cell_overhead.txt"
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_hostile.py tests/test_kernel.py \
  > "$out/gpu_tests.txt" 2>&1
echo "pytest -m gpu: exit $?" >> "$out/gpu_tests.txt"
