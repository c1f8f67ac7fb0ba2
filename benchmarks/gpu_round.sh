#!/usr/bin/env bash
# One batch of GPU checks for this round (issues 11 and 13), from the project root on the GPU
# machine:  source .gpu/activate.sh && bash benchmarks/gpu_round.sh
# Writes logs and pictures to $OUT; prints a short table last.
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
idrrun() { python3 -m idrrun.cli "$@"; }
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

note "== machine"
note "$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader) | $(gcc --version | head -1) | bwrap $(bwrap --version 2>&1)"
idrrun doctor > "$out/doctor.txt" 2>&1; grep -E "sandbox|GPU|offload|protections" "$out/doctor.txt" | tee -a "$summary"

note "== Jacobi variants (issue 13.4)"
OUT=$out bash benchmarks/jacobi/run_gpu.sh > "$out/jacobi.txt" 2>&1; cat "$out/jacobi.txt" >> "$summary"

note "== profiler check (issue 13.1-3)"
OUT=$out/profile bash benchmarks/profile_check_gpu.sh > "$out/profile_check.txt" 2>&1
tail -40 "$out/profile/check_summary.txt" >> "$summary" 2>/dev/null

note "== grading 4 async submissions in the sandbox (issue 11)"
cls=$(mktemp -d /tmp/idrrun-class-XXXXXX)
cp examples/C/async_matmul_solution.c "$cls/alice.c"
cp examples/Fortran/async_matmul_solution.f90 "$cls/bob.f90"
sed 's/init_mat(A, dim, 6.0, 1);/init_mat(A, dim, 5.0, 1);/' examples/C/async_matmul_solution.c > "$cls/carol.c"
sed 's/ async([0-9])//g; s/ wait([0-9, ]*)//g' examples/C/async_matmul_solution.c > "$cls/dave.c"
(cd "$cls" && time idrrun grade async_matmul alice.c bob.f90 carol.c dave.c -j 2 --report "$out/async_grades.json") > "$out/grade.txt" 2>&1
python3 - "$out/async_grades.json" <<'PY' | tee -a "$summary"
import json, sys
for row in json.load(open(sys.argv[1])):
    checks = {c["name"]: c["status"] + (f" ({c['got']})" if c["got"] else "") for c in row["checks"]}
    print(f"{row['student']:6s} {row['verdict']:10s} sandbox={row['sandbox']} ran_on_gpu={checks.get('ran_on_gpu')} queues={checks.get('queues')} | {row['reasons'][:90]}")
PY

note "== idrrun run vs bare on the GPU, Jacobi 4096 x 1000 (issue 13.5), 3 interleaved rounds"
w=$(mktemp -d /tmp/idrrun-bare-XXXXXX)
for _ in 1 2 3; do
  s=$(date +%s.%N); gcc -O2 -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm" -o "$w/p" examples/C/data_laplace_solution.c -lm 2>/dev/null; "$w/p" 4096 1000 > /dev/null; e=$(date +%s.%N)
  echo "bare compile+run $(python3 -c "print(round($e-$s,3))")"
  s=$(date +%s.%N); idrrun run -a --force --cliopts "4096 1000" examples/C/data_laplace_solution.c > /dev/null 2>&1; e=$(date +%s.%N)
  echo "idrrun compile+run $(python3 -c "print(round($e-$s,3))")"
  s=$(date +%s.%N); "$w/p" 4096 1000 > /dev/null; e=$(date +%s.%N)
  echo "bare run $(python3 -c "print(round($e-$s,3))")"
  s=$(date +%s.%N); idrrun run -a --cliopts "4096 1000" examples/C/data_laplace_solution.c > /dev/null 2>&1; e=$(date +%s.%N)
  echo "idrrun cached run $(python3 -c "print(round($e-$s,3))")"
  s=$(date +%s.%N); idrrun run -a --profile --cliopts "4096 1000" examples/C/data_laplace_solution.c > /dev/null 2>&1; e=$(date +%s.%N)
  echo "idrrun cached run --profile $(python3 -c "print(round($e-$s,3))")"
done > "$out/overhead.txt"
python3 - "$out/overhead.txt" <<'PY' | tee -a "$summary"
import collections, statistics, sys
times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    *name, t = line.split()
    times[" ".join(name)].append(float(t))
for name, ts in times.items():
    print(f"{name:32s} median {statistics.median(ts):.3f} s  {ts}")
PY

note "== pytest -m gpu"
python3 -m pytest -q -m gpu -p no:cacheprovider tests > "$out/pytest_gpu.txt" 2>&1; tail -3 "$out/pytest_gpu.txt" | tee -a "$summary"
cat "$summary"
