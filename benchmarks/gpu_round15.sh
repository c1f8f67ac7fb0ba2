#!/usr/bin/env bash
# Session of 2026-11-23, one device call (carry .gpu): the resident `idrrun run` on the GPU
# machine (cgroup v2, root): its tests and the CLI's there; the Jacobi solution's `idrrun run`
# against the bare run, resident, in-process and --profile (jacobi_overhead.sh, 2 cores); the
# many-small-programs suite on 2 cores (vv_bench.py, host builds). A second call, part grading:
# grade_bench.py on 2 cores with the guard and the probe made before the rounds (issue 11). A
# third, part profile: where --profile's time goes (profile_cost.py), the Jacobi timings again
# (one resident server throughout since its key ignores files written on PYTHONPATH), and the
# GPU tests with proc's drain to the output's end.
#   source .gpu/activate.sh && bash benchmarks/gpu_round15.sh [grading|profile]
set -uo pipefail
# shellcheck source=SCRIPTDIR/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"  # $out, the environment, machine.txt
if [ "${1:-}" = grading ]; then  # as round 14 took it, with grade_bench.py's warm cache now
  exec bash "$(dirname "$0")/gpu_round14.sh" grading
fi
if [ "${1:-}" = profile ]; then
  timeout 200 taskset -c 0,1 python3 benchmarks/profile_cost.py --rounds 5 > "$out/profile_cost.txt" 2>&1
  echo "profile_cost: exit $?" >> "$out/profile_cost.txt"
  timeout 200 bash benchmarks/jacobi_overhead.sh --rounds 5 --profile > "$out/jacobi.txt" 2>&1
  echo "jacobi_overhead: exit $?" >> "$out/jacobi.txt"
  cat "/tmp/idrrun-$(id -u)"/*.log > "$out/server_logs.txt" 2>&1
  timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ > "$out/gpu_tests.txt" 2>&1
  echo "pytest -m gpu: exit $?" >> "$out/gpu_tests.txt"
  timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_proc.py tests/test_resident.py \
    > "$out/tests.txt" 2>&1
  echo "pytest: exit $?" >> "$out/tests.txt"
  exit 0
fi
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_resident.py tests/test_cli.py \
  > "$out/tests.txt" 2>&1
echo "pytest: exit $?" >> "$out/tests.txt"
timeout 200 bash benchmarks/jacobi_overhead.sh --rounds 5 --profile > "$out/jacobi.txt" 2>&1
echo "jacobi_overhead: exit $?" >> "$out/jacobi.txt"
cat "/tmp/idrrun-$(id -u)"/*.log > "$out/server_logs.txt" 2>&1
IDRRUN_OFFLOAD=host timeout 240 taskset -c 0,1 python3 benchmarks/vv_bench.py --programs 200 --rounds 1 \
  > "$out/vv.txt" 2>&1
echo "vv_bench: exit $?" >> "$out/vv.txt"
