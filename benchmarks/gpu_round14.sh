#!/usr/bin/env bash
# Session of 2026-11-22 (evening), two device calls:
#   part course: the whole course with its GPU arguments, `course check -j 4` (issue 14's table;
#                confirms that no row comes out incomplete under -j 4 since the per-thread
#                temporary names), one row per line as it ends, then the table with times
#   part costs:  each solution on the GPU and on the host (gpu_vs_host.py), then the runner's cost
#                on 2 cores since the guard's fast cgroup join: per cell in a real kernel, and
#                `idrrun run` of the Jacobi solution against the bare run (issue 13)
#   part table:  openmp_heat's rows with the mgomp multilib that pack.sh leaves out (as
#                gpu_round12.sh), then gpu_vs_host.py alone
#   part rest:   what the table's call left: blur_passes on the GPU (its photo beside it), and on
#                the host, in parallel, the solutions cut off by its time limit
#   part verify: after checked gcc builds keep their own preprocessor output (-save-temps=obj):
#                the GPU tests, a class of 4 async_matmul submissions graded in the sandbox
#                (ran_on_gpu and queues evaluated: issue 11), a part of the course under -j 4
#   part grading: grade_bench.py with 30 submissions on 2 of its cores (host builds, issue 11)
#   carry .gpu .gpu2:  source .gpu/activate.sh && bash benchmarks/gpu_round14.sh course|costs|table
set -uo pipefail
# shellcheck source=SCRIPTDIR/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"  # $out, the environment, machine.txt

if [ "${1:-}" = course ]; then
  s=$SECONDS
  timeout "${COURSE_TIMEOUT:-500}" python3 -m idrrun course check -j 4 > "$out/course_gpu.txt" 2>&1
  echo "course check -j 4: exit $?, $((SECONDS - s)) s" >> "$out/course_gpu.txt"
  exit 0
fi

if [ "${1:-}" = table ]; then
  tar -C /opt/gcc-offload/usr/lib/gcc/x86_64-linux-gnu/12/accel/nvptx-none -xJf .gpu2/mgomp.tar.xz
  timeout 200 python3 -m idrrun course check -j 2 --exercise openmp_heat > "$out/course_openmp.txt" 2>&1
  echo "course check openmp_heat: exit $?" >> "$out/course_openmp.txt"
  s=$SECONDS
  timeout 360 python3 benchmarks/gpu_vs_host.py --host-jobs 14 --timeout 150 > "$out/gpu_vs_host.txt" 2>&1
  echo "gpu_vs_host: exit $?, $((SECONDS - s)) s" >> "$out/gpu_vs_host.txt"
  exit 0
fi

if [ "${1:-}" = grading ]; then
  IDRRUN_OFFLOAD=host timeout 400 taskset -c 0,1 python3 benchmarks/grade_bench.py --count 30 --repeat 3 \
    > "$out/grade_bench.txt" 2>&1
  echo "grade_bench: exit $?" >> "$out/grade_bench.txt"
  exit 0
fi

if [ "${1:-}" = verify ]; then
  tar -C /opt/gcc-offload/usr/lib/gcc/x86_64-linux-gnu/12/accel/nvptx-none -xJf .gpu2/mgomp.tar.xz
  timeout 150 python3 -m pytest -p no:cacheprovider -q -m gpu tests/test_hostile.py tests/test_kernel.py \
    > "$out/pytest_gpu.txt" 2>&1
  echo "pytest -m gpu: exit $?" >> "$out/pytest_gpu.txt"
  k=$(mktemp -d)
  cp examples/C/async_matmul_solution.c "$k/ann.c"
  cp examples/Fortran/async_matmul_solution.f90 "$k/bob.f90"
  cp examples/C/async_matmul_exercise.c "$k/carl.c"
  sed -E 's/async\([0-9]+\)/async(1)/g; s/wait\([0-9]+\)/wait(1)/g' examples/C/async_matmul_solution.c > "$k/dana.c"
  s=$SECONDS
  timeout 170 python3 -m idrrun grade async_matmul "$k/ann.c" "$k/bob.f90" "$k/carl.c" "$k/dana.c" -j 2 \
    --report "$out/async_class.json" > "$out/async_class.txt" 2>&1
  echo "grade: exit $?, $((SECONDS - s)) s" >> "$out/async_class.txt"
  s=$SECONDS
  timeout 220 python3 -m idrrun course check -j 4 -l c --exercise async_matmul --exercise variables_median \
    --exercise loops_matvec --exercise profile_cg --exercise openmp_heat > "$out/course_verify.txt" 2>&1
  echo "course check: exit $?, $((SECONDS - s)) s" >> "$out/course_verify.txt"
  exit 0
fi

if [ "${1:-}" = rest ]; then
  root=$PWD
  cd examples/data || exit 1  # camera.pgm, blur_passes' argument
  one() {  # where exercise language file args...
    local where=$1 name=$2 lang=$3 file=$4; shift 4
    local env=(); [ "$where" = host ] && env=(IDRRUN_OFFLOAD=host)
    local line
    line=$(env "${env[@]}" timeout 250 python3 -m idrrun run -a --timeout 240 --cliopts "$*" "$root/examples/$file" 2>&1 \
           | grep -E '^(exit 0|exit code [0-9]+|killed by|timed out) ·' | tail -1)
    echo "$where $name $lang: ${line:-no exit line}"
  }
  one GPU blur_passes c C/blur_passes_solution.c camera.pgm 100
  one GPU blur_passes fortran Fortran/blur_passes_solution.f90 camera.pgm 100
  one host blur_passes c C/blur_passes_solution.c camera.pgm 100 &
  one host blur_passes fortran Fortran/blur_passes_solution.f90 camera.pgm 100 &
  one host data_laplace c C/data_laplace_solution.c 4096 1000 &
  one host data_laplace fortran Fortran/data_laplace_solution.f90 4096 1000 &
  one host deepcopy_csr c C/deepcopy_csr_solution.c 10000000 1000 &
  one host deepcopy_csr fortran Fortran/deepcopy_csr_solution.f90 10000000 1000 &
  one host tiling_laplace c C/tiling_laplace_solution.c 2050 2050 1000 &
  one host tiling_laplace fortran Fortran/tiling_laplace_solution.f90 2050 2050 1000 &
  wait
  exit 0
fi > "$out/rest.txt" 2>&1

s=$SECONDS
timeout 330 python3 benchmarks/gpu_vs_host.py --host-jobs 14 --timeout 150 > "$out/gpu_vs_host.txt" 2>&1
echo "gpu_vs_host: exit $?, $((SECONDS - s)) s" >> "$out/gpu_vs_host.txt"

timeout 100 taskset -c 0,1 python3 benchmarks/cell_overhead.py --rounds 20 > "$out/cell_overhead.txt" 2>/dev/null

bash benchmarks/jacobi_overhead.sh --rounds 5 --profile > "$out/overhead14.txt"
