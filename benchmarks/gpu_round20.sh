#!/usr/bin/env bash
# Session of 2026-11-23 (third), third device call (carry .gpu): what each part of the built-in
# tracer costs inside the traced program (tracer_cost.py, 2 cores, 7 rounds).
#   source .gpu/activate.sh && bash benchmarks/gpu_round20.sh
set -uo pipefail
# shellcheck source=SCRIPTDIR/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"  # $out, the environment, machine.txt
timeout 200 taskset -c 0,1 python3 benchmarks/tracer_cost.py --rounds 7 > "$out/tracer_cost.txt" 2>&1
echo "exit $?" >> "$out/tracer_cost.txt"
