#!/usr/bin/env bash
# Where `idrrun run` spends its fixed cost on the GPU machine (2 cores, taskset), and grading
# against the bare commands:
#   carry .gpu:  source .gpu/activate.sh && bash benchmarks/gpu_round6.sh
# Writes $OUT/run.prof and $OUT/profile.prof (cProfile: python3 -m pstats FILE), importtime.txt,
# and summary6.txt.
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
summary=$out/summary6.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "== $(nvidia-smi --query-gpu=name --format=csv,noheader) | $(date) | PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}"
src=examples/C/data_laplace_solution.c
python3 -m idrrun run -a --cliopts "4096 10" $src > /dev/null 2>&1
python3 -m idrrun run -a --profile --cliopts "4096 10" $src > /dev/null 2>&1
for kind in run profile; do
  flag=(); [[ $kind == profile ]] && flag=(--profile)
  s=$(date +%s.%N)
  taskset -c 0,1 python3 -m cProfile -o "$out/$kind.prof" -m idrrun run -a "${flag[@]}" --cliopts "4096 1000" $src > "$out/$kind.txt" 2>&1
  e=$(date +%s.%N)
  note "$kind: $(python3 -c "print(round($e-$s,3))") s wall under cProfile; program: $(grep -E '^exit 0' "$out/$kind.txt")"
  python3 - "$out/$kind.prof" <<'PY' | tee -a "$summary"
import pstats, sys
st = pstats.Stats(sys.argv[1])
st.sort_stats("cumulative")
rows = []
for (file, line, fn), (cc, nc, tt, ct, callers) in st.stats.items():
    if "idrrun" in file or fn in ("wait", "select", "poll", "read", "communicate", "sleep"):
        rows.append((ct, tt, nc, f"{file.split('idrrun/')[-1]}:{line}({fn})"))
for ct, tt, nc, name in sorted(rows, reverse=True)[:28]:
    print(f"  {ct:7.3f} cum {tt:7.3f} own {nc:6d}x  {name}")
PY
done
taskset -c 0,1 python3 -X importtime -m idrrun run -a --cliopts "4096 10" $src 2> "$out/importtime.txt" > /dev/null
note "imports (cumulative us, top 6):"
sort -t'|' -k2 -n "$out/importtime.txt" | tail -6 | tee -a "$summary"

note "== grading 30 submissions of data_laplace: -j1, -j2, bare xargs -P2 (grade_bench.py, host)"
IDRRUN_OFFLOAD=host timeout 240 taskset -c 0,1 python3 benchmarks/grade_bench.py --count 30 --repeat 2 2>&1 | tail -8 | tee -a "$summary"
