#!/usr/bin/env bash
# Issue 15 on the GPU machine: the same programs profiled by the built-in tracer and by Nsight
# Systems (Debian's 2022.4 target part, packed here by benchmarks/nsys_gpu_pack.sh), so that
# benchmarks/nsys_check_import.sh, back on the CPU machine, can import nsys's raw file and compare
# the two profilers' kernel and copy totals (within 5 %).
#
# The GPU machine has no nsys, no importer and no registry. Two calls (the GCC toolchain and nsys
# do not fit in one 64 MiB call; /opt stays between calls of a warm machine):
#   1. carry .gpu:       source .gpu/activate.sh && bash benchmarks/nsys_check_gpu.sh --toolchain-only
#   2. carry .gpu-nsys:  bash benchmarks/nsys_check_gpu.sh
# (or one call carrying both where they fit). Sizes: NSYS_CHECK_ASYNC (default 2000) and
# NSYS_CHECK_LAPLACE (default "4096 200").
#
# Builds examples/C/async_matmul_solution.c and examples/C/data_laplace_solution.c with gcc
# -fopenacc -foffload=nvptx-none (sm_80, -lm), then for each: a run under the built-in tracer
# (idrrun.profile.plan("builtin")) and a run under nsys with idrrun's own command line
# (plan("nsys")), which leaves RUN/report.qdstrm since the importer is missing. Writes to $OUT
# (or ./gpu-out): check.log, and nsys-check.tar.xz split in 15 MB parts (nsys-check.tar.xz.part-aa,
# -ab, ...: files of at most 16 MiB come back) holding LABEL.trace.jsonl, LABEL.qdstrm,
# LABEL.output.txt (both runs' output), gpu.txt. About 1 minute on an H200.
# Dry run on a machine without a GPU (host builds; checks the script, not the GPU):
#   IDRRUN_CHECK_DRY=1 bash benchmarks/nsys_check_gpu.sh
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
dry=${IDRRUN_CHECK_DRY:-0}

say() { echo "nsys_check_gpu: $*"; }
die() { echo "nsys_check_gpu: $*" >&2; exit 1; }

# GCC with nvptx offloading: activate.sh's, or what it unpacked in an earlier call
# (gcc -v says nvptx-none even where the offload compiler is not installed, as Ubuntu's gcc 13
# does: what counts is mkoffload, hence /opt's gcc first whenever it is there.)
offload() { [[ -x $(gcc -print-prog-name=accel/nvptx-none/mkoffload 2>/dev/null) ]]; }
if [[ -x /opt/gcc-offload/usr/bin/gcc-12 ]]; then
  export PATH=/opt/gcc-offload/usr/bin:$PATH
  export LD_LIBRARY_PATH=/opt/gcc-offload/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [[ $dry != 1 ]] && ! offload; then
  die "no gcc with nvptx offloading: carry .gpu and start with 'source .gpu/activate.sh' (see above)"
fi
if [[ ${1:-} == --toolchain-only ]]; then
  say "toolchain ready: $(gcc --version | head -1) (/opt stays for the next call)"
  exit 0
fi

# nsys: the packed target part, unpacked once into /opt
nsys_dir=/opt/nsys-target/target-linux-x64
if [[ ! -x $nsys_dir/nsys ]]; then
  [[ -f .gpu-nsys/nsys-target.tar.xz ]] || die "no .gpu-nsys/nsys-target.tar.xz: run benchmarks/nsys_gpu_pack.sh here and carry .gpu-nsys"
  mkdir -p /opt/nsys-target && tar -C /opt/nsys-target -xJf .gpu-nsys/nsys-target.tar.xz
fi
say "$("$nsys_dir/nsys" --version)"

# the wheels activate.sh unpacked in an earlier call (re2, pillow, ...), when there
[[ -d /tmp/gpu-site ]] && export PYTHONPATH=/tmp/gpu-site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/idrrun-gpu-cache}
stage=$(mktemp -d /tmp/nsys-check-XXXXXX)
export NSYS_CHECK_STAGE=$stage NSYS_CHECK_NSYS=$nsys_dir/nsys NSYS_CHECK_DRY=$dry

python3 - <<'PY' 2>&1 | tee "$out/check.log"
"""Drives idrrun.profile: plan -> run (proc.run), for the tracer and for nsys."""
import os
import re
import shutil
import sys
import time
from pathlib import Path

from idrrun.profile.session import plan
from idrrun.profile.summary import summarize
from idrrun.profile.tracefile import read_trace
from idrrun.run import proc

STAGE = Path(os.environ["NSYS_CHECK_STAGE"])
NSYS = os.environ["NSYS_CHECK_NSYS"]
DRY = os.environ["NSYS_CHECK_DRY"] == "1"
CACHE = Path(os.environ["XDG_CACHE_HOME"]) / "idrrun"
WORK = STAGE / "work"
WORK.mkdir()
failures = []

gpu = proc.capture(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version",
                    "--format=csv,noheader"], what="probe", timeout=20)
(STAGE / "gpu.txt").write_text(f"{gpu.output.strip() or gpu.describe()}\n{time.strftime('%Y-%m-%d %H:%M')}\n")
print(f"GPU: {gpu.output.strip() or gpu.describe()}")


def build(source: str, name: str) -> Path:
    exe = WORK / name
    offload = (["-foffload=disable"] if DRY else
               ["-foffload=nvptx-none", "-foffload-options=nvptx-none=-misa=sm_80 -lm"])
    r = proc.run(["gcc", "-O2", "-fopenacc", *offload, source, "-o", str(exe), "-lm"],
                 what="compile", timeout=300)
    if not r.ok:
        sys.exit(f"build of {source} failed: {r.describe()}\n{r.output}")
    return exe


def qdstrm_of(run_dir: Path, output: str, started: float) -> Path | None:
    """Where nsys left its raw file: RUN/report.qdstrm without an importer, else the
    temporary one its "Generating" line names."""
    if (run_dir / "report.qdstrm").is_file():
        return run_dir / "report.qdstrm"
    named = re.findall(r"Generating '([^']+\.qdstrm)'", output)
    if named and Path(named[-1]).is_file() and Path(named[-1]).stat().st_mtime >= started:
        return Path(named[-1])
    return None


runs = [("async", build("examples/C/async_matmul_solution.c", "async"),
         os.environ.get("NSYS_CHECK_ASYNC", "200" if DRY else "2000").split(), "C[0] = 42"),
        ("laplace", build("examples/C/data_laplace_solution.c", "laplace"),
         os.environ.get("NSYS_CHECK_LAPLACE", "256 50" if DRY else "4096 200").split(), "error")]
for label, exe, args, expected in runs:
    outputs = []
    # the built-in tracer
    p = plan("builtin", WORK / f"{label}-tracer", CACHE)
    if p.kind != "builtin":
        sys.exit(f"no built-in tracer: {p.notes}")
    r = proc.run([str(exe), *args], what="run", timeout=300,
                 spec=proc.ProcSpec(cwd=p.run_dir, env={**os.environ, **p.env}))
    outputs.append(f"== tracer: {r.describe()}\n{r.output}")
    if not r.ok or expected not in r.output:
        failures.append(f"{label} under the tracer: {r.describe()}, {expected!r} not printed")
    trace = read_trace(p.output) if p.output else None
    if trace is not None and p.output is not None:
        shutil.copyfile(p.output, STAGE / f"{label}.trace.jsonl")
        s = summarize(trace)
        print(f"{label} {' '.join(args)}, tracer: {s.kernel_count} kernels {s.kernel_ns / 1e6:.3f} ms, "
              f"h2d {s.h2d.count} x {s.h2d.bytes} B {s.h2d.total_ns / 1e6:.3f} ms, "
              f"d2h {s.d2h.count} x {s.d2h.bytes} B {s.d2h.total_ns / 1e6:.3f} ms")
    else:
        failures.append(f"{label}: the tracer wrote no trace")
    # nsys, with idrrun's command line
    p = plan("nsys", WORK / f"{label}-nsys", CACHE, nsys_command=(NSYS,))
    started = time.time()
    r = proc.run([*p.argv_prefix, str(exe), *args], what="run", timeout=600,
                 spec=proc.ProcSpec(cwd=p.run_dir, env={**os.environ, **p.env}))
    outputs.append(f"== {' '.join(p.argv_prefix)}: {r.describe()}\n{r.output}")
    raw = qdstrm_of(p.run_dir, r.output, started)
    if expected not in r.output:
        failures.append(f"{label} under nsys: {r.describe()}, {expected!r} not printed")
    if raw is None:
        failures.append(f"{label}: nsys left no .qdstrm (output in {label}.output.txt)")
    else:
        shutil.move(str(raw), STAGE / f"{label}.qdstrm")
        print(f"{label}, nsys: {r.describe()}, {(STAGE / f'{label}.qdstrm').stat().st_size / 1e6:.1f} MB qdstrm")
    (STAGE / f"{label}.output.txt").write_text("\n".join(outputs))

shutil.rmtree(WORK)
print("\n" + ("FAIL:\n  " + "\n  ".join(failures) if failures else "both profilers ran: "
              "now bash benchmarks/nsys_check_import.sh FOLDER on the CPU machine"))
sys.exit(1 if failures else 0)
PY
status=${PIPESTATUS[0]}
rm -f "$out"/nsys-check.tar.xz.part-*
tar -C "$stage" -cf - . | xz -T0 -6 | split -b 15M - "$out/nsys-check.tar.xz.part-"
rm -rf "$stage"
parts=$(find "$out" -name 'nsys-check.tar.xz.part-*' | wc -l)
(( parts <= 7 )) || { say "$parts parts: more than 7 files do not come back; lower the sizes"; status=1; }
ls -la "$out"
exit "$status"
