#!/usr/bin/env bash
# Session of 2026-11-23 (afternoon), one device call (carry .gpu and build/before, an earlier
# idrrun: `git archive ea4172a idrrun | tar -x -C build/before`): --profile with the trace read
# during the run and the faster timeline -- where its time goes (profile_cost.py), the Jacobi
# solution's `idrrun run --profile` against the bare run and against the earlier idrrun
# (jacobi_overhead.sh --against), and the GPU tests and the profiler's tests there.
#   source .gpu/activate.sh && bash benchmarks/gpu_round16.sh
set -uo pipefail
# shellcheck source=SCRIPTDIR/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"  # $out, the environment, machine.txt
timeout 200 taskset -c 0,1 python3 benchmarks/profile_cost.py --rounds 5 > "$out/profile_cost.txt" 2>&1
echo "profile_cost: exit $?" >> "$out/profile_cost.txt"
against=()
[ -d build/before/idrrun ] && against=(--against build/before)
timeout 260 bash benchmarks/jacobi_overhead.sh --rounds 7 --profile "${against[@]}" > "$out/jacobi.txt" 2>&1
echo "jacobi_overhead: exit $?" >> "$out/jacobi.txt"
cat "/tmp/idrrun-$(id -u)"/*.log > "$out/server_logs.txt" 2>&1
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_hostile.py tests/test_kernel.py \
  tests/test_profile.py tests/test_profile_views.py > "$out/gpu_tests.txt" 2>&1
echo "pytest -m gpu: exit $?" >> "$out/gpu_tests.txt"
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_profile.py tests/test_profile_views.py \
  tests/test_resident.py > "$out/tests.txt" 2>&1
echo "pytest: exit $?" >> "$out/tests.txt"
