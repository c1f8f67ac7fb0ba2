#!/usr/bin/env bash
# The benchmarks as named suites, from the project's root:
#   bash benchmarks/run.sh [--quick] [--budget SECONDS] [--record|--no-record] SUITE...
#   bash benchmarks/run.sh --list
# On the GPU machine (../shared/gpu/README.md), carrying .gpu:
#   source .gpu/activate.sh && bash benchmarks/run.sh --budget 570 gpu
# and on a development machine without a GPU the host suites (PYTHON names the interpreter):
#   PYTHON=.venv/bin/python bash benchmarks/run.sh host
# Each driver's whole log goes to $OUT/logs/NAME.log (else to a new folder under /tmp); its figures
# go to $OUT/section.md, printed last as a short table, and that section is inserted into
# benchmarks/RESULTS.md (newest first) with the command, the date and the machine (CPU, cores,
# GPU, compilers). Where $OUT was given (the GPU machine's result folder, of which at most 8 files
# of 16 MiB come back), the logs end packed as $OUT/logs.tgz.part-* (cat them | tar -xz). From
# another machine's run, bring its section in with
#   python3 benchmarks/bench.py insert FILES_AT/section.md
# --quick: small counts, to check the suites (its figures are not recorded unless --record).
# --budget: stop starting steps when the time is spent (a device call lasts 10 minutes at most).
# Cost figures are taken on CPUs $BENCH_CPUS (default 0,1 where there are more than 2 cores, as
# the 2-core development machine has them); the XDG cache is $BENCH_CACHE (default
# /tmp/idrrun-bench-cache), kept between runs as a course machine keeps it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

SUITES="cell run jacobi grade similarity sandbox evidence annotate profile timelines course-gpu versus-host variants lanes-course lanes-verdicts lanes-bench ladder-spin ladder-copies ladder-intro ladder-data ladder-more class-speed timed students students-lines diagnosis slurm classroom"
GROUPS_="host gpu all"
describe() {
  case $1 in
    cell) echo "a %%idrrun cell against a bare compile+run, in a real kernel (cell_overhead.py; 2 min)" ;;
    run) echo "idrrun run per file against bare, where one call goes (run_overhead.py files, where; 5 min)" ;;
    jacobi) echo "idrrun run (and --profile on a GPU) of the Jacobi solution against bare (run_overhead.py jacobi; 2 min)" ;;
    grade) echo "grading a class -j1, -j2 against bare xargs -P2 (grade_bench.py; 6 min)" ;;
    similarity) echo "idrrun similarity over a generated class of 100 (similarity_bench.py; 1 min)" ;;
    sandbox) echo "the guard, the sandbox, the boundary, the cgroup per run (box_cost.py; 1 min)" ;;
    evidence) echo "the grader's peak memory per row against a forged trace, regions files, a huge picture (evidence_cost.py; 2 min)" ;;
    annotate) echo "the annotated source of a 300-line --check cell (annotate_cost.py; 20 s)" ;;
    profile) echo "GPU: what --profile costs, phase by phase, tracer part by part (profile_cost.py; 4 min)" ;;
    timelines) echo "GPU: the course's runs under the tracer, pictures with the logs (profile_cost.py timelines; 1 min)" ;;
    course-gpu) echo "the course checked, a class graded on the GPU (course_gpu.py table, class; 7 min)" ;;
    versus-host) echo "GPU: each solution on the GPU and on one host core (course_gpu.py versus-host; 6 min)" ;;
    variants) echo "GPU: GCC's nvptx code, Jacobi and dot-product variants (course_gpu.py variants; 2 min)" ;;
    lanes-course) echo "GPU: course check at -j 1 and -j 8, the same rows? (lanes_class.py course; 8 min)" ;;
    lanes-verdicts) echo "GPU: a class of 24 graded at -j 1 and -j 8, the same verdicts? (lanes_class.py verdicts; 6 min)" ;;
    lanes-bench) echo "GPU: that class at -j 8 against the same work bare (lanes_class.py bench; 5 min)" ;;
    ladder-spin) echo "GPU: profile_cg's host-spinning port fails its GPU busy, relative to the solution's (ladder_gpu.py spin; 2 min)" ;;
    ladder-copies) echo "GPU: five copies of profile_cg's solution at -j 8: one mark? (ladder_gpu.py copies; 3 min)" ;;
    ladder-intro|ladder-data|ladder-more) echo "GPU: the ladder of near-misses, a third of the exercises each (ladder_gpu.py ladder; 10 min)" ;;
    class-speed) echo "GPU: a class of 30 per exercise (profile_cg, data_laplace: 6 kinds, renamed copies) at -j 8 and -j 1: wall time, GPU held alone by the timed runs, the same marks? (class_speed.py; 9 min)" ;;
    timed) echo "GPU: the timed checks' figures, solutions alone, as grading measures them (timed_figures.py; 2 min)" ;;
    students) echo "GPU: a students' copy from the wheel checks three solutions; data_laplace's feedback beside the solution (students_gpu.py; 1 min)" ;;
    students-lines) echo "GPU: every check cell of the students' notebooks, with its own flags, on the solution, C and Fortran (students_gpu.py --lines; 4 min)" ;;
    diagnosis) echo "GPU: the diagnosis on the slow ports of benchmarks/slowports, each beside its solution; traces in \$OUT (diagnosis_score.py; 9 min a call, cases: DIAGNOSIS_ONLY='c_*')" ;;
    slurm) echo "root, SLURM: srun per step, grading across nodes (slurm_bench.py; 5 min)" ;;
    classroom) echo "root, SLURM, the hub's environment: 5 and 30 students on the hub, submit, collect, grade, return (classroom_scale.py; 12 min)" ;;
    host) echo "cell run grade similarity sandbox evidence annotate" ;;
    gpu) echo "jacobi profile course-gpu" ;;
    all) echo "host gpu" ;;
  esac
}
usage() {
  echo "usage: bash benchmarks/run.sh [--quick] [--budget SECONDS] [--record|--no-record] SUITE..."
  echo "suites:"
  local s
  for s in $SUITES; do printf '  %-12s %s\n' "$s" "$(describe "$s")"; done
  echo "groups:"
  for s in $GROUPS_; do printf '  %-12s %s\n' "$s" "$(describe "$s")"; done
}

quick=0 record="" budget=0 wanted=()
while (( $# )); do
  case $1 in
    --list|-h|--help) usage; exit 0 ;;
    --quick) quick=1 ;;
    --record) record=1 ;;
    --no-record) record=0 ;;
    --budget) budget=${2:-}; shift ;;
    -*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) wanted+=("$1") ;;
  esac
  shift
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "run.sh: --budget wants seconds, not '$budget'" >&2; exit 2; }
(( ${#wanted[@]} )) || { usage >&2; exit 2; }
record=${record:-$(( ! quick ))}

# The suites to run, groups expanded, each once, in the order given.
expand() {
  case " $SUITES " in *" $1 "*) echo "$1"; return ;; esac
  case " $GROUPS_ " in
    *" $1 "*) local s; for s in $(describe "$1"); do expand "$s"; done ;;
    *) echo "run.sh: unknown suite '$1' (suites: $SUITES; groups: $GROUPS_; --list says what each does)" >&2
       return 1 ;;
  esac
}
order=()
for w in "${wanted[@]}"; do
  names=$(expand "$w") || exit 2
  for s in $names; do
    case " ${order[*]} " in *" $s "*) ;; *) order+=("$s") ;; esac
  done
done

# The environment every figure is taken in: bytecode compiled as pip installs it, this checkout's
# idrrun first, a cache of the benchmarks' own.
PY=${PYTHON:-python3}
unset PYTHONDONTWRITEBYTECODE
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=200
export XDG_CACHE_HOME=${BENCH_CACHE:-/tmp/idrrun-bench-cache}
"$PY" -m compileall -q idrrun > /dev/null 2>&1
[[ -d /tmp/gpu-site ]] && "$PY" -m compileall -q /tmp/gpu-site > /dev/null 2>&1
pack=0
if [[ -n ${OUT:-} ]]; then pack=1; else OUT=$(mktemp -d /tmp/idrrun-bench-XXXXXX); fi
export OUT
logs=$OUT/logs
mkdir -p "$logs"
export BENCH_SECTION=$OUT/section.md
command="bash benchmarks/run.sh"
(( quick )) && command+=" --quick"
(( budget )) && command+=" --budget $budget"
command+=" ${wanted[*]}"
"$PY" benchmarks/bench.py begin "$BENCH_SECTION" --command "$command" \
  || { echo "run.sh: $PY cannot run benchmarks/bench.py (PYTHON names another interpreter)" >&2; exit 2; }
gpu=0
[[ -n $(nvidia-smi -L 2>/dev/null) ]] && gpu=1
cpus=${BENCH_CPUS-}
if [[ -z ${BENCH_CPUS+set} ]] && (( $(nproc) > 2 )); then cpus=0,1; fi
pin=()
if [[ -n $cpus ]]; then
  pin=(taskset -c "$cpus")
  "$PY" benchmarks/bench.py note "Cost figures on CPUs $cpus (taskset) of the machine's $(nproc)." > /dev/null
fi
started=$SECONDS failed=0

note() { "$PY" benchmarks/bench.py note "$*"; }
q() { if (( quick )); then echo "$1"; else echo "$2"; fi; }

# step NAME SECONDS [pin] COMMAND...: one driver, its log in $logs/NAME.log, its figures (--record)
# in the run's section; cut at SECONDS, or at what the budget leaves.
step() {
  local name=$1 limit=$2 status s
  shift 2
  local how=()
  if [[ $1 == pin ]]; then how=("${pin[@]}"); shift; fi
  if (( budget )); then
    local left=$(( budget - (SECONDS - started) - 10 ))
    if (( left < 30 )); then note "$name: not run, the budget ($budget s) is spent."; return; fi
    (( limit > left )) && limit=$left
  fi
  echo "== $name: $*"
  s=$SECONDS
  "${how[@]}" timeout "$limit" "$@" --record > "$logs/$name.log" 2>&1
  status=$?
  echo "   exit $status, $(( SECONDS - s )) s; log $logs/$name.log"
  if (( status == 124 )); then
    note "$name: stopped after $limit s (its log: $name.log)."; failed=1
  elif (( status != 0 )); then
    note "$name: exit $status: $(tail -3 "$logs/$name.log" | tr '\n' ' ' | cut -c1-300)"; failed=1
  fi
}
gpu_only() {
  (( gpu )) && return 0
  note "$1: not run, no GPU here (nvidia-smi)."
  return 1
}

run_suite() {
  local extra=()
  case $1 in
    cell) step cell 300 pin "$PY" benchmarks/cell_overhead.py --rounds "$(q 3 20)" ;;
    run)
      step run-files 420 pin "$PY" benchmarks/run_overhead.py files --programs "$(q 10 200)" --rounds 1
      step run-where 180 pin "$PY" benchmarks/run_overhead.py where --rounds "$(q 3 8)" ;;
    jacobi)
      (( gpu )) && extra=(--profile)
      step jacobi 300 pin "$PY" benchmarks/run_overhead.py jacobi --rounds "$(q 2 7)" --version "${extra[@]}" ;;
    grade) step grade 600 pin "$PY" benchmarks/grade_bench.py --count "$(q 4 30)" --repeat "$(q 1 3)" ;;
    similarity) step similarity 120 pin "$PY" benchmarks/similarity_bench.py --count "$(q 10 100)" --repeat "$(q 1 3)" ;;
    sandbox)
      (( EUID == 0 )) && extra=(--cgroup)
      step sandbox 180 pin "$PY" benchmarks/box_cost.py --rounds "$(q 5 30)" "${extra[@]}" ;;
    evidence) step evidence 300 pin "$PY" benchmarks/evidence_cost.py --trace-mib "$(q 8 48)" --regions "$(q 128 1024)" ;;
    annotate) step annotate 120 pin "$PY" benchmarks/annotate_cost.py --rounds "$(q 20 200)" ;;
    profile)
      gpu_only profile || return 0
      step profile-phases 240 pin "$PY" benchmarks/profile_cost.py phases --rounds "$(q 2 9)" --checks --bare
      step profile-tracer 240 pin "$PY" benchmarks/profile_cost.py tracer --rounds "$(q 2 7)"
      step profile-steps 200 pin "$PY" benchmarks/profile_cost.py steps --rounds "$(q 2 5)" ;;
    timelines)
      gpu_only timelines || return 0
      step timelines 300 "$PY" benchmarks/profile_cost.py timelines --out "$logs/timelines" ;;
    course-gpu)
      (( quick )) && extra=(--exercise intro_pi --exercise async_matmul)
      step course 560 "$PY" benchmarks/course_gpu.py table -j 4 "${extra[@]}"
      gpu_only "course-gpu class" && step course-class 300 "$PY" benchmarks/course_gpu.py class ;;
    versus-host)
      gpu_only versus-host || return 0
      (( quick )) && extra=(--exercise intro_pi)
      step versus-host 600 "$PY" benchmarks/course_gpu.py versus-host "${extra[@]}" ;;
    variants)
      gpu_only variants || return 0
      step variants 300 "$PY" benchmarks/course_gpu.py variants --iterations "$(q 100 1000)" ;;
    lanes-course)
      gpu_only lanes-course || return 0
      (( quick )) && extra=(--exercise profile_cg --exercise async_matmul)
      step lanes-course 580 "$PY" benchmarks/lanes_class.py course "${extra[@]}" ;;
    lanes-verdicts)
      gpu_only lanes-verdicts || return 0
      step lanes-verdicts 580 "$PY" benchmarks/lanes_class.py verdicts ;;
    lanes-bench)
      gpu_only lanes-bench || return 0
      step lanes-bench 580 "$PY" benchmarks/lanes_class.py bench ;;
    ladder-spin)
      gpu_only ladder-spin || return 0
      step ladder-spin 300 "$PY" benchmarks/ladder_gpu.py spin --record ;;
    ladder-copies)
      gpu_only ladder-copies || return 0
      step ladder-copies 400 "$PY" benchmarks/ladder_gpu.py copies --record ;;
    ladder-intro|ladder-data|ladder-more)
      gpu_only "$1" || return 0
      local part
      case $1 in
        ladder-intro) part="intro_saxpy intro_pi atomic_histogram variables_median mandelbrot_rows md_forces" ;;
        ladder-data) part="data_laplace blur_passes deepcopy_csr life_swap tiling_laplace profile_cg" ;;
        *) part="async_matmul compute_scan interop_blas loops_matvec multigpu_integral openmp_heat routines_pendulum" ;;
      esac
      local e
      for e in $part; do extra+=(--exercise "$e"); done
      step "$1" 580 "$PY" benchmarks/ladder_gpu.py ladder --record --budget 420 "${extra[@]}" ;;
    class-speed)
      gpu_only class-speed || return 0
      (( quick )) && extra=(--students 6)
      step class-speed 580 "$PY" benchmarks/class_speed.py --compare-j1 --budget 420 "${extra[@]}" ;;
    timed)
      gpu_only timed || return 0
      step timed 400 "$PY" benchmarks/timed_figures.py --runs "$(q 3 9)" ;;
    students)
      gpu_only students || return 0
      step students 300 "$PY" benchmarks/students_gpu.py ;;
    students-lines)
      gpu_only students-lines || return 0
      step students-lines 540 "$PY" benchmarks/students_gpu.py --lines ;;
    diagnosis)
      gpu_only diagnosis || return 0
      local only=()
      [[ -n ${DIAGNOSIS_ONLY:-} ]] && read -ra only <<< "--only $DIAGNOSIS_ONLY"
      step diagnosis 580 "$PY" benchmarks/diagnosis_score.py --budget 480 --pack --out "$OUT" "${only[@]}" ;;
    slurm) step slurm 900 "$PY" benchmarks/slurm_bench.py --count "$(q 12 60)" --repeat "$(q 5 20)" ;;
    classroom)
      local sizes
      read -ra sizes <<< "$(q 5 '5 30')"
      step classroom 1500 "$PY" benchmarks/classroom_scale.py --students "${sizes[@]}" ;;
  esac
}

for s in "${order[@]}"; do run_suite "$s"; done

echo
cat "$BENCH_SECTION"
if (( record )); then
  "$PY" benchmarks/bench.py insert "$BENCH_SECTION"
else
  echo "(not recorded in benchmarks/RESULTS.md: --quick; --record to keep it)"
fi
if (( pack )); then
  rm -f "$OUT"/logs.tgz.part-*
  tar -C "$OUT" -czf - logs | split -b 15M - "$OUT/logs.tgz.part-" && rm -rf "$logs"
  logs="$OUT/logs.tgz.part-* (cat them | tar -xz)"
fi
echo "logs: $logs; from another machine: python3 benchmarks/bench.py insert FILES_AT/section.md"
exit "$failed"
