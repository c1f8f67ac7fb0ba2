#!/usr/bin/env bash
# GCC 14 on the GPU machine (issue 50, item 3): the course check and the Jacobi per iteration under
# GCC 12 (the machine's own, from .gpu/) and GCC 14 (a Debian 13 root entered with bubblewrap, the
# NVIDIA driver's devices and libraries bound in), beside the bandwidth floor.
#
# The root: `bash benchmarks/gcc14_root.sh .gpu14/gcc14-root.tar.xz` on the development machine
# (58 MiB: with the working tree over one carry, so it also writes two parts of 40 MiB at most).
# Each call carries at most 64 MiB and runs at most 10 minutes; what is outside the working tree
# stays while the machine is warm, so, from the project's root:
#
#   call 1, carrying .gpu:        source .gpu/activate.sh && bash benchmarks/gcc14_gpu.sh gcc12
#   call 2, carrying .gpu14/gcc14-root.tar.xz.part-aa:
#                                 bash benchmarks/gcc14_gpu.sh stash .gpu14/gcc14-root.tar.xz.part-aa
#   call 3, carrying .gpu14/gcc14-root.tar.xz.part-ab and .gpu14/gcc14-root.tar.xz.sha256:
#                                 bash benchmarks/gcc14_gpu.sh gcc14 .gpu14/gcc14-root.tar.xz
#   call 4 (nothing carried):     bash benchmarks/gcc14_gpu.sh compare
#
# With the MPI exercise (2026-12-03): the root made with GCC14_ROOT_MPI=1 (.gpu14/gcc14-root-mpi.tar.xz)
# and GCC14_MPI=1 on both sides. Each `jacobi` step also counts the driver calls per iteration
# (`calls`, benchmarks/driver_calls.c, built into $RESULTS by the gcc12 call with the machine's
# gcc): on a machine lost between calls, carry .gpu/bin/bwrap and a driver_calls.so built here
# and copy them into $RESULTS/bin and $RESULTS before the gcc14 call (the compare step then runs
# here, on the two course-*.json brought back).
#
# gcc12: the Jacobi under the machine's gcc (GCC 12, /opt/gcc-offload), then `idrrun course check
# --json` with it; gcc14: the root unpacked into /opt/gcc14-root (once), then the same inside it;
# compare: both tables side by side, and docker/same_rows.py on the two course checks (the same
# verdicts and marks?). multigpu_integral (MPI ranks) is left out of both: the root has no MPI.
# The results are kept in /opt/gcc14-bench between calls and copied to $OUT when it is set.
# `jacobi` instead of gcc12/gcc14 measures only the Jacobi (GCC 12 and, when the root is there,
# GCC 14: a minute).
#
# Environment: PEAK_GBS (default 4800, an H200's HBM3e: the floor of the 4096² Jacobi is then
# 0.112 ms), N and ITERATIONS (4096, 1000), JOBS (course check, default 2: timed checks want a GPU
# of their own), COURSE_ARGS (instead of the exercises chosen, e.g. "--exercise data_laplace"),
# GCC14_MPI=1 (a root made with GCC14_ROOT_MPI=1: the MPI exercise too), PYTHON (GCC 12's side,
# default python3), ROOT14 (default /opt/gcc14-root), GCC14_BENCH (default /opt/gcc14-bench).
# Without a GPU it runs as well, everything on the host: a dry run of the script, no figure
# (N=256 ITERATIONS=10: tried so on the development machine, 36 rows the same).
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-}
ROOT14=${ROOT14:-/opt/gcc14-root}
RESULTS=${GCC14_BENCH:-/opt/gcc14-bench}
PEAK_GBS=${PEAK_GBS:-4800}
N=${N:-4096} ITERATIONS=${ITERATIONS:-1000} JOBS=${JOBS:-2}
SEED=idrrun-gcc14-gpu  # the hidden argument sets drawn alike under both compilers
mkdir -p "$RESULTS"

say() { echo "gcc14_gpu: $*"; }
die() { echo "gcc14_gpu: $*" >&2; exit 1; }

# --- GCC 12: the machine's own (.gpu/activate.sh's /opt/gcc-offload, kept from an earlier call)
gcc12_env() {
  if [[ $(gcc -dumpversion 2>/dev/null | cut -d. -f1) != 12 && -x /opt/gcc-offload/usr/bin/gcc-12 ]]; then
    # what .gpu/activate.sh exports, for a call that did not carry .gpu/
    export PATH=/opt/gcc-offload/usr/bin:$PATH
    export LD_LIBRARY_PATH=/opt/gcc-offload/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    [[ -d /tmp/gpu-site ]] && export PYTHONPATH=/tmp/gpu-site${PYTHONPATH:+:$PYTHONPATH}
  fi
  [[ $(gcc -dumpversion | cut -d. -f1) == 12 ]] || die "no GCC 12 on PATH: source .gpu/activate.sh first"
  if [[ -x .gpu/bin/bwrap ]]; then mkdir -p "$RESULTS/bin" && cp .gpu/bin/bwrap "$RESULTS/bin/"; fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
}

# --- GCC 14: the Debian 13 root ------------------------------------------------------------------

# A root over one carry comes in parts (gcc14_root.sh writes TARBALL.part-aa, -ab and
# TARBALL.sha256): each call that carries one keeps it in $RESULTS/parts (`stash`); the call that
# has them all joins them, checks the digest, and unpacks.
stash() {  # FILE...: parts (and the .sha256) kept outside the working tree for a later call
  local file
  mkdir -p "$RESULTS/parts"
  for file in "$@"; do
    [[ -f $file ]] || die "$file: no such file"
    cp "$file" "$RESULTS/parts/"
  done
  say "kept in $RESULTS/parts: $(cd "$RESULTS/parts" && echo *)"
}

unpack_root() {  # TARBALL: into $ROOT14, once
  local tarball=${1:-}
  [[ -x $ROOT14/usr/bin/gcc-14 ]] && return 0
  [[ -n $tarball ]] || die "no root in $ROOT14: give the tarball (gcc14_gpu.sh gcc14 .gpu14/gcc14-root.tar.xz)"
  local name parts=() here digest
  name=$(basename "$tarball")
  for here in "$tarball".part-* "$tarball.sha256"; do
    if [[ ! -f $tarball && -f $here ]]; then stash "$here"; fi
  done
  if [[ -f $tarball ]]; then
    parts=("$tarball")
  else
    mapfile -t parts < <(compgen -G "$RESULTS/parts/$name.part-*" | sort)
    (( ${#parts[@]} )) || die "$tarball: no such file, and no part of it kept in $RESULTS/parts"
  fi
  digest=$tarball.sha256
  [[ -f $digest ]] || digest=$RESULTS/parts/$name.sha256
  if [[ -f $digest ]]; then
    [[ $(cat "${parts[@]}" | sha256sum | cut -d' ' -f1) == $(cut -d' ' -f1 "$digest") ]] \
      || die "$name: the ${#parts[@]} part(s) at hand do not make the tarball $digest names (a part still to carry?)"
  fi
  mkdir -p "$ROOT14"
  case $name in
    *.zst) command -v zstd >/dev/null || die "no zstd here: make the root as .tar.xz (gcc14_root.sh .gpu14/gcc14-root.tar.xz)"
           cat "${parts[@]}" | zstd -dc --long=27 | tar -C "$ROOT14" -xf - ;;
    *.xz) cat "${parts[@]}" | xz -dc | tar -C "$ROOT14" -xf - ;;
    *) die "$tarball: a .tar.zst or .tar.xz" ;;
  esac
  say "$ROOT14 unpacked: $(du -sh "$ROOT14" | cut -f1)"
}

# The driver's user-space libraries the root needs, found where this machine's loader finds them:
# libcuda (libgomp's nvptx plugin opens it), its PTX JIT compiler (GCC's code is PTX for sm_80,
# compiled for the GPU when the program starts) and NVML (nvidia-smi, which idrrun asks).
DRIVER_LIBS=(libcuda.so.1 libnvidia-ptxjitcompiler.so.1 libnvidia-ml.so.1 libnvidia-nvvm.so.4)
BWRAP=()
bwrap_args() {
  # The machine has no bubblewrap: Debian 12's, which pack.sh puts in .gpu/bin, kept by `gcc12`.
  command -v bwrap >/dev/null || PATH=$PATH:$RESULTS/bin
  command -v bwrap >/dev/null || die "no bwrap: run gcc14_gpu.sh gcc12 first, carrying .gpu (its bin/bwrap)"
  BWRAP=(bwrap --bind "$ROOT14" / --dev-bind /dev /dev --proc /proc --ro-bind /sys /sys
         --tmpfs /tmp --bind "$PWD" "$PWD" --bind "$RESULTS" "$RESULTS" --chdir "$PWD")
  [[ -d /usr/local/cuda ]] && BWRAP+=(--ro-bind "$(readlink -f /usr/local/cuda)" /usr/local/cuda)
  local lib found
  for lib in "${DRIVER_LIBS[@]}"; do
    found=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ { print $NF; exit }')
    if [[ -z $found ]]; then
      if [[ $lib == libcuda.so.1 && -e /dev/nvidiactl ]]; then
        die "ldconfig -p finds no $lib, yet /dev/nvidiactl is here: is the driver's user part installed?"
      fi
      [[ $lib == libcuda.so.1 ]] && say "no NVIDIA driver here: everything runs on the host (a dry run)"
      continue
    fi
    touch "$ROOT14/usr/lib/x86_64-linux-gnu/$lib"  # the mount point
    BWRAP+=(--ro-bind "$(readlink -f "$found")" "/usr/lib/x86_64-linux-gnu/$lib")
  done
  if command -v nvidia-smi >/dev/null; then
    touch "$ROOT14/usr/bin/nvidia-smi"
    BWRAP+=(--ro-bind "$(readlink -f "$(command -v nvidia-smi)")" /usr/bin/nvidia-smi)
  fi
  BWRAP+=(--clearenv --setenv PATH /usr/local/cuda/bin:/usr/bin:/usr/sbin:/bin --setenv HOME /tmp
          --setenv LANG C.UTF-8 --setenv PYTHONPATH "/opt/idrrun-site:$PWD" --setenv PYTHONUNBUFFERED 1
          --setenv IDRRUN_CACHE_DIR "$RESULTS/cache14")
}
in_root() { "${BWRAP[@]}" "$@"; }

# --- the Jacobi ------------------------------------------------------------------------------------

# Each program built as a student's (-O2, or -O3 for the variants as course_gpu.py builds them), for
# sm_80, and run once; its ms per iteration as it prints it.
jacobi() {  # NAME RUNNER...: one row per program into $RESULTS/jacobi-NAME.txt
  local name=$1
  shift
  local out=$RESULTS/jacobi-$name.txt build=$RESULTS/build-$name v line
  local offload=(-fopenacc -foffload=nvptx-none "-foffload-options=nvptx-none=-misa=sm_80 -lm -latomic")
  rm -rf "$build" && mkdir -p "$build"
  : >"$out"
  "$@" gcc --version | head -1 | sed 's/^/# /' >>"$out"
  for v in 1 2 3 4 5 6; do
    "$@" gcc -O3 "${offload[@]}" "-DVARIANT=$v" -o "$build/jacobi$v" benchmarks/jacobi/jacobi_variants.c -lm
    line=$("$@" "$build/jacobi$v" "$N" "$ITERATIONS" | tail -1)
    echo "variant$v $line" >>"$out"
  done
  for src in examples/C/data_laplace_solution.c examples/Fortran/data_laplace_solution.f90; do
    local compiler=gcc && [[ $src == *.f90 ]] && compiler=gfortran
    "$@" "$compiler" -O2 "${offload[@]}" -o "$build/laplace-${src##*.}" "$src" -lm
    line=$("$@" "$build/laplace-${src##*.}" "$N" "$ITERATIONS" | sed -n 's/^time per iteration = *\([0-9.]*\) ms/\1/p')
    echo "data_laplace_${src##*.} ms_per_iter $line" >>"$out"
  done
  say "Jacobi under $name: $out"
  calls "$name" "$@"
}

# The CUDA driver calls per iteration of the course's Jacobi solution: each build run under
# benchmarks/driver_calls.c (a CUPTI injection counting every driver call) with ITERATIONS and
# twice as many; the difference over ITERATIONS is what one iteration calls, by function.
calls() {  # NAME RUNNER...: $RESULTS/calls-NAME-{c,f90}-{1,2}.txt, then the table
  local name=$1 ext twice=$(( 2 * ITERATIONS )) so=$RESULTS/driver_calls.so
  shift
  if [[ ! -f $so ]]; then
    local cuda
    cuda=$(readlink -f /usr/local/cuda)
    gcc -O2 -shared -fPIC -I"$cuda/include" -o "$so" benchmarks/driver_calls.c \
      -L"$cuda/lib64" -Wl,-rpath,/usr/local/cuda/lib64 -lcupti \
      || { say "driver_calls.so not built (no CUPTI?): no calls counted"; return 0; }
  fi
  for ext in c f90; do
    "$@" env CUDA_INJECTION64_PATH="$so" DRIVER_CALLS_OUT="$RESULTS/calls-$name-$ext-1.txt" \
      "$RESULTS/build-$name/laplace-$ext" "$N" "$ITERATIONS" >/dev/null
    "$@" env CUDA_INJECTION64_PATH="$so" DRIVER_CALLS_OUT="$RESULTS/calls-$name-$ext-2.txt" \
      "$RESULTS/build-$name/laplace-$ext" "$N" "$twice" >/dev/null
  done
  calls_table "$name" | tee "$RESULTS/calls-$name.txt"
}

calls_table() {  # NAME: per iteration, by driver function, from the two runs of each build
  python3 - "$RESULTS" "$1" "$ITERATIONS" <<'EOF'
import sys
from pathlib import Path
results, name, iterations = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def read(path):
    rows = {}
    for line in path.read_text().splitlines() if path.exists() else ():
        if not line.startswith("#"):
            calls, ns, function = line.split()
            rows[function] = (int(calls), int(ns))
    return rows
for ext in ("c", "f90"):
    once, twice = (read(results / f"calls-{name}-{ext}-{k}.txt") for k in (1, 2))
    if not once or not twice:
        print(f"{name} data_laplace.{ext}: no counts (the injection did not load?)")
        continue
    per = {f: ((twice[f][0] - once.get(f, (0, 0))[0]) / iterations,
               (twice[f][1] - once.get(f, (0, 0))[1]) / iterations / 1e3) for f in twice}
    per = {f: v for f, v in per.items() if v[0] >= 0.5}
    total = sum(c for c, _ in per.values()), sum(us for _, us in per.values())
    print(f"{name} data_laplace.{ext}: {total[0]:.1f} driver calls per iteration, {total[1]:.1f} us in them")
    for f, (c, us) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"  {f:34s} {c:6.2f} calls {us:9.1f} us")
EOF
}

# The root as gcc14_root.sh makes it has no MPI: the exercises whose spec runs MPI ranks
# (multigpu_integral) are left out of both course checks, unless GCC14_MPI=1 (a root made with
# GCC14_ROOT_MPI=1: 339 MiB against 280, xz 70 MiB in two parts).
exercises() {
  local spec
  [[ ${GCC14_MPI:-0} == 1 || -n ${COURSE_ARGS:-} ]] && return 0
  for spec in examples/*.toml; do
    grep -q '^ranks *=' "$spec" || printf -- '--exercise %s ' "$(basename "$spec" .toml)"
  done
}

course() {  # NAME PYTHON RUNNER...: idrrun course check --json into $RESULTS/course-NAME.json
  local name=$1 python=$2
  shift 2
  local started=$SECONDS
  # shellcheck disable=SC2046,SC2086  # words of command lines
  "$@" env IDRRUN_GRADING_SEED=$SEED "$python" -m idrrun course check --json -j "$JOBS" -c gcc \
    ${COURSE_ARGS:-} $(exercises) >"$RESULTS/course-$name.json" 2>"$RESULTS/course-$name.log" || true
  [[ -s $RESULTS/course-$name.json ]] || { tail -n 20 "$RESULTS/course-$name.log"; die "course check under $name: no rows"; }
  say "course check under $name: $(( SECONDS - started )) s, $RESULTS/course-$name.json"
}

table() {
  python3 - "$RESULTS" "$PEAK_GBS" "$N" <<'EOF'
import re, sys
from pathlib import Path
results, peak, n = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
def read(name):
    path = results / f"jacobi-{name}.txt"
    rows, head = {}, ""
    for line in path.read_text().splitlines() if path.exists() else ():
        if line.startswith("# "):
            head = line[2:]
            continue
        ms = re.search(r"ms_per_iter ([\d.]+)", line)
        moved = re.search(r"bytes_per_iter ([\d.]+)", line)
        rows[line.split()[0]] = (float(ms.group(1)) if ms else None,
                                 float(moved.group(1)) if moved else 32.0 * (n - 2) ** 2)
    return head, rows
(h12, a), (h14, b) = read("gcc12"), read("gcc14")
print(f"Jacobi {n}^2, ms per iteration; floor = bytes per iteration at {peak:.0f} GB/s")
print(f"  GCC 12: {h12 or 'not measured'}\n  GCC 14: {h14 or 'not measured'}")
print(f"  {'program':22s} {'floor':>7s} {'GCC 12':>8s} {'% floor':>7s} {'GCC 14':>8s} {'% floor':>7s}")
for name in sorted(set(a) | set(b)):
    moved = (a.get(name) or b.get(name))[1]
    floor = moved / (peak * 1e9) * 1e3
    cells = []
    for rows in (a, b):
        ms = rows.get(name, (None, 0))[0]
        cells += [f"{ms:8.3f}", f"{100 * floor / ms:6.1f}%"] if ms else [f"{'-':>8s}", f"{'-':>7s}"]
    print(f"  {name:22s} {floor:7.3f} {' '.join(cells)}")
EOF
}

finish() {
  table | tee "$RESULTS/table.txt"
  if [[ -n ${OUT:-} ]]; then cp "$RESULTS"/*.txt "$RESULTS"/*.json "$OUT"/ 2>/dev/null || true; fi
}

case $MODE in
  gcc12)
    gcc12_env
    jacobi gcc12 env
    course gcc12 "${PYTHON:-python3}" env
    finish ;;
  gcc14)
    unpack_root "${2:-}"
    bwrap_args
    in_root ldconfig
    in_root gcc --version | head -1
    in_root python3 -m idrrun doctor | grep -E '^(compiler gcc|gcc |GPU|CUPTI)' || true
    jacobi gcc14 in_root
    course gcc14 python3 in_root
    finish ;;
  jacobi)
    gcc12_env
    jacobi gcc12 env
    if [[ -x $ROOT14/usr/bin/gcc-14 ]]; then
      bwrap_args && in_root ldconfig && jacobi gcc14 in_root
    fi
    finish ;;
  stash)
    shift
    stash "$@" ;;
  compare)
    finish
    python3 docker/same_rows.py "$RESULTS/course-gcc12.json" "$RESULTS/course-gcc14.json" \
      --name-a "GCC 12" --name-b "GCC 14" | tail -n 45 ;;
  *) die "usage: gcc14_gpu.sh gcc12 | stash PART... | gcc14 TARBALL | jacobi | compare (see its header)" ;;
esac
