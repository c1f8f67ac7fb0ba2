#!/usr/bin/env bash
# The course's hub environment at PREFIX: the course's environment (docker/install.sh python:
# idrrun and JupyterLab), JupyterHub and batchspawner in it, and configurable-http-proxy (npm)
# in PREFIX/bin. The same PREFIX serves the hub (as root) and each student's server on the
# nodes (as her): it must be on a file system the nodes see, and readable by every student.
#
#   bash hub/install.sh PREFIX [WHEELS]      # WHEELS: a folder with idrrun's wheel
#   PYTHON=/usr/bin/python3 bash hub/install.sh ...   # a Python every user can run
#
# As root it first makes sure that an account with no rights of its own (nobody) can run that
# Python and enter PREFIX's folder, and at the end the environment, else it stops and names the
# fix (a Python under a home only its owner may enter: every student's server would die at
# once). It writes /etc/profile.d/idrrun-hub.sh on this machine (a copy in PREFIX/etc/profile.d
# for the nodes, whose /etc is their own): idrrun on PATH in the students' terminals.
set -euo pipefail
[[ ${1:-} && ${1:-} != -h && ${1:-} != --help ]] || {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; [[ ${1:-} ]]; exit; }
prefix=$1 wheels=${2:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
profile=/etc/profile.d/idrrun-hub.sh

say() { echo "hub/install.sh: $*"; }
die() { echo "hub/install.sh: $*" >&2; exit 1; }

# The command as nobody, from /, its error output on stdout: what a student's job would meet.
as_nobody() { (cd / && runuser -u nobody -- "$@" >/dev/null) 2>&1; }
can_check() { (( EUID == 0 )) && command -v runuser >/dev/null && id -u nobody >/dev/null 2>&1; }

# PREFIX's folder, or the nearest one above it that exists (the one install.sh will create in).
existing() {
  local dir=$1
  while [[ ! -e $dir ]]; do dir=$(dirname "$dir"); done
  echo "$dir"
}

# The Python the environment will run: PREFIX's own on a second run, else PYTHON's (or python3:
# the first that docker/install.sh tries).
if [[ -x $prefix/bin/python ]]; then
  python=$prefix/bin/python fix="rm -rf $prefix && PYTHON=/usr/bin/python3 bash hub/install.sh $prefix${wheels:+ $wheels}"
else
  python=$(command -v "${PYTHON:-python3}") || die "no ${PYTHON:-python3} (set PYTHON)"
  fix="PYTHON=/usr/bin/python3 bash hub/install.sh $prefix${wheels:+ $wheels}"
fi

check_students_can_use() {
  local err dir
  dir=$(existing "$prefix")
  err=$(as_nobody test -x "$dir") \
    || die "other users cannot enter $dir: every student's server would fail to start. PREFIX must be in folders every student can enter, on a file system every node sees (e.g. /opt/idrrun)${err:+ ($err)}"
  err=$(as_nobody "$python" -c '') \
    || die "$python cannot be run by other users (as nobody: ${err:-exit $?}): every student's server would die at once. Use a Python every user can run, not one under a home only its owner may enter (a pyenv's, root's): $fix"
}

if can_check; then
  check_students_can_use
else
  echo "hub/install.sh: not root: could not check that other users can run $python and enter $prefix (as root, install.sh runs them as nobody), nor write $profile (on every node, as root: cp $prefix/etc/profile.d/idrrun-hub.sh $profile)" >&2
fi
command -v npm >/dev/null || die "no npm (docker/install.sh dev installs it)"

bash "$here/../docker/install.sh" python "$prefix" ${wheels:+"$wheels"}
"$prefix/bin/python" -m pip install -q "jupyterhub>=5" "batchspawner>=1.3"
npm install -g --silent --prefix "$prefix" configurable-http-proxy
install -D -m 644 "$here/idrrun-hub.sh" "$prefix/etc/profile.d/idrrun-hub.sh"
chmod -R a+rX "$prefix"
if can_check; then
  err=$(as_nobody "$prefix/bin/python" -I -c 'import idrrun, jupyterhub, batchspawner') \
    || die "other users cannot run $prefix's Python (as nobody: ${err:-exit $?}): $fix"
  install -m 644 "$here/idrrun-hub.sh" "$profile"
  say "$profile written (idrrun on PATH in the students' terminals): on every node whose /etc is its own, cp $prefix/etc/profile.d/idrrun-hub.sh $profile"
fi
say "JupyterHub $("$prefix/bin/jupyterhub" --version), batchspawner, $("$prefix/bin/configurable-http-proxy" --version | head -1) in $prefix"
