#!/usr/bin/env bash
# Here (the CPU machine), from the project's root: packs the target part of Debian's Nsight Systems
# (docker/install.sh nsys installs it) for the GPU machine, which has no nsys and no registry:
#   bash benchmarks/nsys_gpu_pack.sh
# Writes .gpu-nsys/nsys-target.tar.xz (git-ignored, ~23 MB: the folder target-linux-x64 without
# the CUPTI copies older than 11.8, which no driver of that machine needs). Then on the GPU machine,
# with .gpu-nsys carried: benchmarks/nsys_check_gpu.sh; back here: benchmarks/nsys_check_import.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

nsys=$(command -v nsys || true)
[[ -n $nsys ]] || { [[ -x /usr/lib/nsight-systems/bin/nsys ]] && nsys=/usr/lib/nsight-systems/bin/nsys; }
[[ -n $nsys ]] || { echo "nsys_gpu_pack: no nsys here: bash docker/install.sh nsys" >&2; exit 1; }
target=$(dirname "$(readlink -f "$nsys")")
[[ $(basename "$target") == target-linux-x64 ]] \
  || { echo "nsys_gpu_pack: $nsys is not in a target-linux-x64 folder" >&2; exit 1; }

mkdir -p .gpu-nsys
out=.gpu-nsys/nsys-target.tar.xz
tar -C "$(dirname "$target")" --exclude='target-linux-x64/libcupti.so.10.*' \
    --exclude='target-linux-x64/libcupti.so.11.[0-7]' -cf - target-linux-x64 \
  | xz -T0 -6 >"$out.part"
mv "$out.part" "$out"
"$nsys" --version >.gpu-nsys/version.txt
echo "nsys_gpu_pack: $out, $(du -h "$out" | cut -f1), $(cat .gpu-nsys/version.txt)"
echo "nsys_gpu_pack: carry .gpu-nsys (and, in a first call, .gpu: they do not fit in one call together)"
