# shellcheck shell=bash
# Sourced by gpu_round14.sh and gpu_round15.sh on the GPU machine, after .gpu/activate.sh: where
# the outputs go ($out), the environment every figure is taken in, the machine described.
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
unset PYTHONDONTWRITEBYTECODE  # as pip installs it: bytecode compiled
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} IDRRUN_EXAMPLES=$PWD/examples COLUMNS=220
export XDG_CACHE_HOME=/tmp/idrrun-gpu-cache
python3 -m compileall -q idrrun /tmp/gpu-site > /dev/null 2>&1
{ date; nvidia-smi -L; echo "cores $(nproc), uid $(id -u)"; grep cgroup /proc/mounts; uname -r; } > "$out/machine.txt" 2>&1
