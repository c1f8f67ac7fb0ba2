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
src=examples/C/data_laplace_solution.c
w=$(mktemp -d)
gcc -O2 -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm" -o "$w/p" $src -lm 2>/dev/null
python3 -m idrrun run -a --cliopts "4096 10" $src > /dev/null 2>&1
t() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); python3 -c "print(round($e-$s,3))"; }
for _ in 1 2 3 4 5; do
  echo "bare_run $(t taskset -c 0,1 "$w/p" 4096 1000)"
  echo "idrrun_run $(t taskset -c 0,1 python3 -m idrrun run -a --cliopts '4096 1000' $src)"
  echo "version $(t taskset -c 0,1 python3 -m idrrun --version)"
done > "$out/overhead13.txt"
python3 - "$out/overhead13.txt" <<'PY'
import collections, statistics, sys
times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, t = line.split()
    times[name].append(float(t))
med = {k: statistics.median(v) for k, v in times.items()}
for name, ts in times.items():
    print(f"{name:12s} median {med[name]:.3f} s  {ts}")
b = med["bare_run"]
print(f"idrrun run over bare: +{med['idrrun_run'] - b:.3f} s (+{100 * (med['idrrun_run'] - b) / b:.1f}%)")
PY
IDRRUN_OFFLOAD=host timeout 170 taskset -c 0,1 python3 benchmarks/grade_bench.py --count 20 --repeat 1 2>&1 | tail -8
