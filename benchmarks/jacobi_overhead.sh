#!/usr/bin/env bash
# The Jacobi solution (data_laplace, 4096 x 1000, build cached) on 2 cores of a GPU machine:
# the bare program against `idrrun run` (by its resident server: README, "In a terminal"), the same
# in-process (IDRRUN_RESIDENT=0) and, with --profile, `idrrun run --profile`; with --version also
# `idrrun --version` (the interpreter and its imports alone); with --against DIR also
# `idrrun run --profile` by the idrrun package in DIR (an earlier version: DIR/idrrun). Interleaved
# rounds, one "NAME SECONDS" line each, then the medians and idrrun's cost over the bare run.
#   bash benchmarks/jacobi_overhead.sh [--rounds N] [--profile] [--version] [--against DIR]
# Called by gpu_round13.sh and gpu_round14.sh after .gpu/activate.sh.
set -uo pipefail
rounds=5 profile=0 version=0 against=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --profile) profile=1 ;;
    --version) version=1 ;;
    --against) against=$(cd "$2" && pwd); shift ;;
    *) echo "jacobi_overhead.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
src=examples/C/data_laplace_solution.c
w=$(mktemp -d)
gcc -O2 -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm" -o "$w/p" $src -lm 2>/dev/null
# fills the build cache and starts the resident server, by the second call (its key has the CPU
# set: taskset too)
for _ in 1 2; do
  taskset -c 0,1 python3 -m idrrun run -a --cliopts "4096 10" $src > /dev/null 2>&1
  if [ -n "$against" ]; then  # its own server (another key: other files)
    PYTHONPATH=$against${PYTHONPATH#"$PWD"} taskset -c 0,1 python3 -m idrrun run -a --cliopts "4096 10" $src > /dev/null 2>&1
  fi
done
sleep 3
t() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); python3 -c "print(round($e-$s,3))"; }
for _ in $(seq "$rounds"); do
  echo "bare_run $(t taskset -c 0,1 "$w/p" 4096 1000)"
  echo "idrrun_run $(t taskset -c 0,1 python3 -m idrrun run -a --cliopts '4096 1000' $src)"
  echo "in_process $(t taskset -c 0,1 env IDRRUN_RESIDENT=0 python3 -m idrrun run -a --cliopts '4096 1000' $src)"
  [ "$profile" = 1 ] && echo "idrrun_profile $(t taskset -c 0,1 python3 -m idrrun run -a --profile --cliopts '4096 1000' $src)"
  [ -n "$against" ] && echo "profile_before $(PYTHONPATH=$against${PYTHONPATH#"$PWD"} t taskset -c 0,1 python3 -m idrrun run -a --profile --cliopts '4096 1000' $src)"
  [ "$version" = 1 ] && echo "version $(t taskset -c 0,1 python3 -m idrrun --version)"
done > "$w/times.txt"
cat "$w/times.txt"
python3 - "$w/times.txt" <<'PY'
import collections, statistics, sys
times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, t = line.split()
    times[name].append(float(t))
med = {k: statistics.median(v) for k, v in times.items()}
for name, ts in times.items():
    print(f"{name:14s} median {med[name]:.3f} s  {ts}")
b = med["bare_run"]
for name in ("idrrun_run", "in_process", "idrrun_profile", "profile_before"):
    if name in med:
        print(f"{name} over bare: {med[name] - b:+.3f} s ({100 * (med[name] - b) / b:+.1f} %)")
if "idrrun_profile" in med:  # the profiler's own cost: against the same command without it
    r = med["idrrun_run"]
    print(f"idrrun_profile over idrrun_run: {med['idrrun_profile'] - r:+.3f} s "
          f"({100 * (med['idrrun_profile'] - r) / r:+.1f} %)")
PY
rm -rf "$w"
