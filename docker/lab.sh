#!/usr/bin/env bash
# The course images' command: JupyterLab in the home folder, on port 8888 of every interface,
# never without a token. JUPYTER_TOKEN sets it; unset or empty, one is made here and printed.
# JUPYTER_IP and JUPYTER_PORT change where it listens; arguments go to `jupyter lab`.
set -euo pipefail

port=${JUPYTER_PORT:-8888}
if [[ -n ${JUPYTER_TOKEN:-} ]]; then
  echo "lab.sh: open http://localhost:$port/lab and give the token set in JUPYTER_TOKEN"
else
  JUPYTER_TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
  export JUPYTER_TOKEN
  # Jupyter prints only the tokens it makes itself: this one is printed here.
  echo "lab.sh: token made now (set JUPYTER_TOKEN to choose it): $JUPYTER_TOKEN"
  echo "lab.sh: open http://localhost:$port/lab?token=$JUPYTER_TOKEN"
fi
exec jupyter lab --no-browser --ip="${JUPYTER_IP:-0.0.0.0}" --port="$port" \
  --ServerApp.root_dir="$HOME" "$@"
