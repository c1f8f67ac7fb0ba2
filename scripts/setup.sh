#!/usr/bin/env bash
# Set up idrrun on a fresh Debian/Ubuntu machine: compilers (gcc, g++, gfortran, GCC's nvptx
# offloading where the distribution has it), Open MPI, bubblewrap, the test tools (shellcheck,
# SLURM, munge; Node.js and npm when npm is missing, for the JupyterLab extension's build), and a
# virtual environment .venv with idrrun and its test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# The system packages come from the course images' recipe, so that there is one list of them.
bash docker/install.sh system
bash docker/install.sh dev

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
echo "setup: done. $(.venv/bin/idrrun --version); compilers: $(gcc -dumpfullversion), $(gfortran -dumpfullversion)"
