#!/usr/bin/env bash
# Set up idrrun on a fresh Debian/Ubuntu machine: compilers (gcc, g++, gfortran, GCC's nvptx
# offloading where the distribution has it), Open MPI, and a virtual environment .venv with
# idrrun and its test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

packages=(gcc g++ gfortran make openmpi-bin libopenmpi-dev python3 python3-venv python3-pip)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# GCC's OpenACC offloading to NVIDIA GPUs: optional, the host fallback works without it.
gcc_major=$(gcc -dumpversion 2>/dev/null | cut -d. -f1 || true)
if [[ -n "$gcc_major" ]] && apt-cache show "gcc-${gcc_major}-offload-nvptx" >/dev/null 2>&1; then
  for p in "gcc-${gcc_major}-offload-nvptx" libgomp-plugin-nvptx1; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
fi
if (( ${#missing[@]} )); then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  # a gcc installed just now may have a newer major version: take its offload package too
  gcc_major=$(gcc -dumpversion | cut -d. -f1)
  if apt-cache show "gcc-${gcc_major}-offload-nvptx" >/dev/null 2>&1; then
    $SUDO apt-get install -y -q --no-install-recommends "gcc-${gcc_major}-offload-nvptx" libgomp-plugin-nvptx1
  fi
fi

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
echo "setup: done. $(.venv/bin/idrrun --version); compilers: $(gcc -dumpfullversion), $(gfortran -dumpfullversion)"
