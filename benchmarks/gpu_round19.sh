#!/usr/bin/env bash
# Session of 2026-11-23 (third), second device call (carry .gpu): `idrrun run --profile` against
# `idrrun run`, phase by phase, with the trace followed or not during the run, and the program
# alone and traced outside idrrun (profile_phases.py --bare, 2 cores, 9 rounds).
#   source .gpu/activate.sh && bash benchmarks/gpu_round19.sh
set -uo pipefail
# shellcheck source=SCRIPTDIR/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"  # $out, the environment, machine.txt
timeout 200 taskset -c 0,1 python3 benchmarks/profile_phases.py --rounds 9 --checks --bare \
  > "$out/phases_2cores.txt" 2>&1
echo "exit $?" >> "$out/phases_2cores.txt"
