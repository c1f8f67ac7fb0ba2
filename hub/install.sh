#!/usr/bin/env bash
# The course's hub environment at PREFIX: the course's environment (docker/install.sh python:
# idrrun and JupyterLab), JupyterHub and batchspawner in it, and configurable-http-proxy (npm)
# in PREFIX/bin. The same PREFIX serves the hub (as root) and each student's server on the
# nodes (as her): it must be on a file system the nodes see, and readable by every student.
#
#   bash hub/install.sh PREFIX [WHEELS]      # WHEELS: a folder with idrrun's wheel
#   PYTHON=/usr/bin/python3 bash hub/install.sh ...   # a Python every user can run
set -euo pipefail
[[ ${1:-} && ${1:-} != -h && ${1:-} != --help ]] || {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; [[ ${1:-} ]]; exit; }
prefix=$1 wheels=${2:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bash "$here/../docker/install.sh" python "$prefix" ${wheels:+"$wheels"}
"$prefix/bin/python" -m pip install -q "jupyterhub>=5" "batchspawner>=1.3"
command -v npm >/dev/null || { echo "hub/install.sh: no npm (docker/install.sh dev installs it)" >&2; exit 1; }
npm install -g --silent --prefix "$prefix" configurable-http-proxy
chmod -R a+rX "$prefix"
echo "hub/install.sh: JupyterHub $("$prefix/bin/jupyterhub" --version), batchspawner, $("$prefix/bin/configurable-http-proxy" --version | head -1) in $prefix"
