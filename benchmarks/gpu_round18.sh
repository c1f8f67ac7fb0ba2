#!/usr/bin/env bash
# Session of 2026-11-23 (third), first device call (carry .gpu): where `idrrun run --profile`
# spends its time against `idrrun run`, phase by phase (profile_phases.py, 2 cores and all
# cores), the whole commands through the resident server (jacobi_overhead.sh), and the per-cell
# cost in a real kernel after the flush change (cell_overhead.py).
#   source .gpu/activate.sh && bash benchmarks/gpu_round18.sh
set -uo pipefail
# shellcheck source=SCRIPTDIR/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"  # $out, the environment, machine.txt
timeout 120 taskset -c 0,1 python3 benchmarks/profile_phases.py --rounds 7 --checks > "$out/phases_2cores.txt" 2>&1
echo "exit $?" >> "$out/phases_2cores.txt"
timeout 100 python3 benchmarks/profile_phases.py --rounds 5 > "$out/phases_all.txt" 2>&1
echo "exit $?" >> "$out/phases_all.txt"
timeout 150 bash benchmarks/jacobi_overhead.sh --rounds 7 --profile > "$out/jacobi.txt" 2>&1
echo "exit $?" >> "$out/jacobi.txt"
timeout 120 taskset -c 0,1 python3 benchmarks/cell_overhead.py --rounds 20 > "$out/cell_overhead.txt" 2>/dev/null
echo "exit $?" >> "$out/cell_overhead.txt"
