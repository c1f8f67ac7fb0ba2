#!/usr/bin/env bash
# On the GPU machine (after `source .gpu/activate.sh`): the Jacobi variants of
# jacobi_variants.c at 4096^2 x 1000 iterations, each with GCC's default launch geometry and a
# few GOMP_OPENACC_DIM settings; one line per run: ms per iteration and % of the bandwidth floor
# at the device's memory bandwidth ($PEAK_GBS, default 4300 GB/s: a stream-like figure on H200).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp}/jacobi
mkdir -p "$out"
peak=${PEAK_GBS:-4300}
flags=(-O3 -fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm")
for v in 1 2 3 4 5 6; do
  gcc "${flags[@]}" -DVARIANT=$v -o "$out/jacobi$v" "$here/jacobi_variants.c" -lm 2>"$out/build$v.log" || {
    echo "variant $v: build failed"; tail -3 "$out/build$v.log"; continue; }
done
printf '%-8s %-16s %12s %10s\n' variant GOMP_OPENACC_DIM ms/iter "% floor"
for v in 1 2 3 4 5 6; do
  [ -x "$out/jacobi$v" ] || continue
  for dim in "" "528::128" "1056::128" "264::256" "132:4:32"; do
    line=$(GOMP_OPENACC_DIM=$dim timeout 120 "$out/jacobi$v" "${N:-4096}" "${ITERS:-1000}" 2>&1 | tail -1)
    ms=$(sed -n 's/.*ms_per_iter \([0-9.]*\).*/\1/p' <<<"$line")
    bytes=$(sed -n 's/.*bytes_per_iter \([0-9.]*\).*/\1/p' <<<"$line")
    if [ -n "$ms" ]; then
      pct=$(python3 -c "print(f'{100 * $bytes / ($peak * 1e9) / ($ms / 1e3):.1f}')")
      printf '%-8s %-16s %12s %10s\n' "$v" "${dim:-default}" "$ms" "$pct"
    else
      printf '%-8s %-16s %s\n' "$v" "${dim:-default}" "$line"
    fi
  done
done | tee "$out/table.txt"
