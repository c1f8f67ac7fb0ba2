#!/usr/bin/env bash
# Installs the OpenACC course, one part at a time, on Debian or Ubuntu. The course images
# (docker/Dockerfile, docker/Dockerfile.nvhpc) are built with it, scripts/setup.sh takes its
# system packages from it, and .ci/run runs every part. Each part is safe to run again.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: install.sh PART [ARGUMENT]

  system          compilers (gcc, g++, gfortran, and GCC's nvptx offloading where the
                  distribution has it for its gcc), Open MPI, Python >= 3.11 with venv, tini,
                  bubblewrap (the grading sandbox), musl-tools where packaged (the run guard)
  dev             what the tests need besides: shellcheck, slurm-wlm, munge, chromium and
                  chromium-driver (the browser tests, where Debian packages them), and Node.js
                  with npm (the JupyterLab extension's build) when npm is missing
  nsys            optional, Debian only: Nsight Systems from Debian's contrib and non-free
                  components (nsight-systems, which pulls libcuda1), for --profile nsys; not
                  for the images, nor for a machine whose NVIDIA driver is not Debian's
  podman          podman, runc and mmdebstrap: docker/build-and-test.sh builds and tries the
                  course image with them, with no Docker engine and no registry
  wheel DEST [--sdist]
                  idrrun's wheel built from this source tree into DEST, with its JupyterLab
                  extension (built with npm: Debian's nodejs and npm when npm is missing);
                  with --sdist, the sdist too, and the wheel built from it (as pip builds it
                  from PyPI's sdist; the packaging tests take both: IDRRUN_TEST_DISTS)
  python PREFIX [WHEELS]
                  a virtual environment at PREFIX with idrrun and JupyterLab: idrrun from the
                  wheel in the folder WHEELS (made by the wheel part), else from this source tree
  course DEST     the students' copy of the course that the idrrun on PATH carries (idrrun
                  course init --students: no solutions, no hidden or grading-only data):
                  notebooks/ and examples/ copied into DEST (files of the same name are
                  replaced, other files are left alone)
  config COURSE   for the current user: every IPython kernel loads idrrun, and idrrun finds the
                  exercises in COURSE/examples

system, dev, nsys and podman install Debian packages: as root, or through sudo.
EOF
}

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PART=${1:-}
export DEBIAN_FRONTEND=noninteractive

say() { echo "install.sh $PART: $*"; }
die() { echo "install.sh $PART: $*" >&2; exit 1; }
usage_error() { echo "install.sh: $*; 'install.sh --help' describes each part" >&2; exit 2; }

# --- Debian packages ----------------------------------------------------------------------

as_root() {
  if (( EUID == 0 )); then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    die "not root and no sudo: cannot run $*"
  fi
}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

UPDATED=no
update_once() {
  if [[ $UPDATED == no ]]; then
    as_root apt-get update -q
    UPDATED=yes
  fi
}

# apt-cache knows no package before the first `apt-get update` (a new image has no lists).
available() {
  compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null || update_once
  apt-cache show "$1" >/dev/null 2>&1
}

# Installs those of the packages that are not installed yet: none missing, nothing done.
ensure() {
  local missing=() package
  for package in "$@"; do
    installed "$package" || missing+=("$package")
  done
  (( ${#missing[@]} )) || return 0
  say "installing ${missing[*]}"
  update_once
  as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# The first of $PYTHON, python3, python3.13, python3.12, python3.11 that is Python >= 3.11.
find_python() {
  local candidate
  for candidate in ${PYTHON:-} python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null \
        && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

part_system() {
  # tini is PID 1 in the images: it reaps what students' programs leave behind. bubblewrap is
  # the sandbox of every graded compile and run (idrrun/run/sandbox.py).
  ensure gcc g++ gfortran make openmpi-bin libopenmpi-dev python3 python3-venv python3-pip tini \
    bubblewrap
  # musl's C library for the run guard (idrrun/run/isolation.py): linked with it, the guard
  # starts ~0.5 ms sooner at every compile and run in a virtual machine. Optional: without it
  # the guard links with glibc.
  if available musl-tools; then
    ensure musl-tools
  fi
  # GCC's OpenACC offloading to NVIDIA GPUs, for the distribution's gcc. Optional: without it
  # idrrun builds for the host and says so.
  local major
  major=$(gcc -dumpversion | cut -d. -f1)
  if available "gcc-$major-offload-nvptx"; then
    ensure "gcc-$major-offload-nvptx" libgomp-plugin-nvptx1
  else
    say "no gcc-$major-offload-nvptx in this distribution: gcc builds OpenACC for the host only"
  fi
  # idrrun needs Python >= 3.11. Ubuntu 22.04's python3 is 3.10, with a python3.11 beside it.
  if ! find_python >/dev/null; then
    ensure python3.11 python3.11-venv
  fi
}

part_dev() {
  # The scripts' tests lint with shellcheck. The srun launcher's tests and CI start a SLURM
  # cluster of three nodes of their own (tests/slurmcluster.py): slurm-wlm (slurmctld, slurmd,
  # the clients and the PMIx plugin for MPI across nodes), munge, and unshare (util-linux) for
  # each node's own /tmp.
  ensure shellcheck slurm-wlm munge util-linux
  # `pip install -e .` builds the JupyterLab extension with npm (hatch-jupyter-builder). A
  # Node.js of other origin (NodeSource's bundles its npm) is left as it is.
  command -v npm >/dev/null || ensure nodejs npm
  # tests/test_labextension.py drives JupyterLab in a headless chromium through its driver
  # (selenium). Debian packages both; Ubuntu's chromium is a snap, which this does not install:
  # those tests are skipped there.
  if available chromium-driver; then
    ensure chromium chromium-driver
  else
    say "no chromium-driver package here: tests/test_labextension.py will be skipped"
  fi
}

# --- Nsight Systems -----------------------------------------------------------------------

NSYS_SOURCES=/etc/apt/sources.list.d/idrrun-nsight-systems.sources

# The mirror that serves this Debian release's main component, as apt read it from the
# machine's sources (one-line or deb822 files alike).
debian_mirror() {
  local codename=$1
  compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null || update_once
  # shellcheck disable=SC2016  # apt's own $(FIELD) placeholders
  apt-get indextargets --format '$(REPO_URI) $(CODENAME) $(COMPONENT)' 'Identifier: Packages' \
    | awk -v suite="$codename" '$2 == suite && $3 == "main" { print $1; exit }'
}

part_nsys() {
  local codename="" mirror
  if grep -qsx 'ID=debian' /etc/os-release; then
    codename=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)
  fi
  [[ -n $codename ]] || die "Nsight Systems comes from Debian's non-free component, and this is not Debian (NVIDIA's own packages: https://developer.nvidia.com/nsight-systems)"
  if ! available nsight-systems; then
    mirror=$(debian_mirror "$codename")
    [[ -n $mirror ]] || die "no apt source of Debian $codename's main component to take the mirror from"
    say "adding the contrib and non-free components of $mirror $codename ($NSYS_SOURCES)"
    as_root tee "$NSYS_SOURCES" >/dev/null <<EOF
# Debian's nsight-systems (non-free) and what it needs (contrib); written by idrrun's install.sh
Types: deb
URIs: $mirror
Suites: $codename
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    UPDATED=no
    update_once
    available nsight-systems || die "no nsight-systems package in $mirror $codename contrib non-free"
  fi
  # nsight-systems (stats, export, the importer) pulls nsight-systems-target (what profiles)
  # and libcuda1, which a CPU-only machine never loads.
  ensure nsight-systems
  nsys_link_importer
  nsys_self_test
}

# nsys on PATH, else Debian's own (a machine may keep it off PATH).
nsys_exe() {
  command -v nsys && return 0
  [[ -x /usr/lib/nsight-systems/bin/nsys ]] && echo /usr/lib/nsight-systems/bin/nsys
}

# `nsys profile` runs the importer (QdstrmImporter) from TARGET/../host-linux-x64, TARGET being
# where the nsys executable lies. Debian puts the target part under /usr/lib/<triplet>/ and the
# host part under /usr/lib/nsight-systems/ without a link between them: nsys profile then never
# writes its report.
nsys_link_importer() {
  local exe target host
  exe=$(nsys_exe) || die "nsight-systems is installed but there is no nsys"
  target=$(dirname "$(readlink -f "$exe")")
  [[ -x $target/../host-linux-x64/QdstrmImporter ]] && return 0
  for host in /usr/lib/nsight-systems/host-linux-x64 /opt/nvidia/nsight-systems/*/host-linux-x64; do
    if [[ -x $host/QdstrmImporter ]]; then
      say "linking $(dirname "$target")/host-linux-x64 -> $host (where nsys profile looks for its importer)"
      as_root ln -sfn "$host" "$(dirname "$target")/host-linux-x64"
      return 0
    fi
  done
  die "no QdstrmImporter for $target: nsys profile could not write its reports"
}

# A profile of `true`: the importer runs and the report is written.
nsys_self_test() {
  local exe dir
  exe=$(nsys_exe)
  dir=$(mktemp -d)
  # CPU sampling and context-switch tracing off, as idrrun runs it: it reads neither, and with
  # them nsys 2022.4's agent spins for ever after the program on Linux 6 (perf events).
  if timeout 120 "$exe" profile --trace=osrt --sample=none --cpuctxsw=none --stats=false \
        -o "$dir/self-test" true >"$dir/log" 2>&1 && [[ -s $dir/self-test.nsys-rep ]]; then
    say "$("$exe" --version): nsys profile writes its reports ($exe)"
    rm -rf "$dir"
  else
    cat "$dir/log" >&2
    rm -rf "$dir"
    die "nsys profile did not write its report"
  fi
}

# --- podman -------------------------------------------------------------------------------

part_podman() {
  # podman builds with the buildah library it carries (no buildah command needed); runc because
  # crun refuses some machines (docker/README.md); mmdebstrap makes the debian:12 base image
  # from Debian's packages where no registry is reachable.
  ensure podman runc mmdebstrap
}

# --- the course ---------------------------------------------------------------------------

part_wheel() {
  local dest=$1 sdist=${2:-} python venv what=--wheel
  [[ -n $sdist ]] && what=  # python -m build: the sdist, then the wheel from it
  # A bare image (the images' first stage) has no Python yet: only what building needs.
  find_python >/dev/null || ensure python3 python3-venv
  python=$(find_python) || die "no Python >= 3.11 (set PYTHON)"
  # The JupyterLab extension inside the wheel is built with npm (hatch-jupyter-builder), unless
  # labextension/dist is already newer than its sources.
  command -v npm >/dev/null || ensure nodejs npm ca-certificates
  venv=$(mktemp -d /tmp/idrrun-wheel-XXXXXX)
  "$python" -m venv "$venv"
  # One build environment for the sdist and the wheel built from it: what pyproject.toml's
  # [build-system] requires and its hooks' dependencies, installed once (python -m build
  # --no-isolation; it refuses to build when one is missing). Isolated, build installs
  # JupyterLab twice: 86 s against 56 s here, the dists byte for byte the same.
  # shellcheck disable=SC2046  # one requirement per word, none with a space
  "$venv/bin/python" -m pip install -q build $("$python" -c '
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    p = tomllib.load(f)
hooks = p.get("tool", {}).get("hatch", {}).get("build", {}).get("hooks", {})
print(" ".join(p["build-system"]["requires"] +
               [d for hook in hooks.values() for d in hook.get("dependencies", [])]))' "$SRC/pyproject.toml")
  mkdir -p "$dest"
  # (its bin/ first on PATH, as an isolated build has it: npm's build runs `jupyter labextension`)
  PATH="$venv/bin:$PATH" "$venv/bin/python" -m build --no-isolation ${what:+"$what"} --outdir "$dest" "$SRC" >"$venv/log" 2>&1 \
    || { tail -n 40 "$venv/log" >&2; rm -rf "$venv"; die "python -m build ${what:+$what }failed (its last lines above)"; }
  rm -rf "$venv"
  say "$(cd "$dest" && echo idrrun-*.whl ${sdist:+idrrun-*.tar.gz}) in $dest"
}

part_python() {
  local prefix=$1 wheels=${2:-} python what=$SRC wheel
  python=$(find_python) || die "no Python >= 3.11 (run 'install.sh system' first, or set PYTHON)"
  if [[ -n $wheels ]]; then
    wheel=$(compgen -G "$wheels/idrrun-*.whl" | sort -V | tail -n 1) \
      || die "no idrrun-*.whl in $wheels (install.sh wheel $wheels makes one)"
    what=$wheel
  fi
  if [[ ! -x $prefix/bin/python ]]; then
    say "creating a virtual environment in $prefix with $python"
    "$python" -m venv "$prefix"
  fi
  "$prefix/bin/python" -m pip install -q --upgrade pip
  # Not editable: the environment must not depend on the source tree staying where it is.
  "$prefix/bin/python" -m pip install -q "${what}[lab]"
  say "$("$prefix/bin/idrrun" --version) and JupyterLab $("$prefix/bin/jupyter-lab" --version) in $prefix"
}

part_course() {
  local dest=$1 tmp
  command -v idrrun >/dev/null \
    || die "no idrrun on PATH (install.sh python PREFIX makes one in PREFIX/bin)"
  # The students' copy, made by idrrun itself from the course it carries (the wheel's, already
  # the students'; a checkout's, with its solutions): a teacher's course never reaches DEST.
  # It leaves out what a checkout may hold besides the course: builds and scratch files.
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/idrrun-course-XXXXXX")
  if ! idrrun course init "$tmp/course" --students >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    rm -rf "$tmp"
    die "idrrun course init --students failed (its output above)"
  fi
  mkdir -p "$dest"
  tar -C "$tmp/course" -cf - notebooks examples | tar -C "$dest" -xf -
  rm -rf "$tmp"
  say "the students' notebooks and examples in $dest"
}

part_config() {
  local course=$1
  [[ -d $course/examples ]] || die "$course/examples: no such folder (run 'install.sh course $course' first)"
  course=$(cd "$course" && pwd)

  local ipython=${IPYTHONDIR:-$HOME/.ipython}/profile_default/ipython_config.py
  if grep -qsE "[\"']idrrun[\"']" "$ipython"; then
    say "$ipython already loads idrrun"
  else
    mkdir -p "$(dirname "$ipython")"
    # Appends rather than assigns: a config that loads other extensions keeps them.
    cat >>"$ipython" <<'EOF'
# %%idrrun and %idrrunfile in every notebook, without %load_ext (written by idrrun's install.sh)
c = get_config()  # noqa: F821
c.InteractiveShellApp.extensions.append("idrrun")
EOF
    say "$ipython loads idrrun"
  fi

  local toml=${XDG_CONFIG_HOME:-$HOME/.config}/idrrun/config.toml
  if [[ -e $toml ]]; then
    say "$toml exists: left as it is (examples_dir = \"$course/examples\" would find the course from anywhere)"
  else
    mkdir -p "$(dirname "$toml")"
    cat >"$toml" <<EOF
# The course's exercises, wherever idrrun runs (written by idrrun's install.sh)
examples_dir = "$course/examples"
EOF
    say "$toml: examples_dir = \"$course/examples\""
  fi
}

# --- arguments ----------------------------------------------------------------------------

no_argument() {
  (( $# == 1 )) || usage_error "'$PART' takes no argument"
}
one_argument() {  # NAME "$@"
  local name=$1
  shift
  if (( $# != 2 )) || [[ -z $2 ]]; then
    usage_error "'$PART' takes one argument: install.sh $PART $name"
  fi
}

case $PART in
  -h | --help) usage ;;
  system) no_argument "$@"; part_system ;;
  dev) no_argument "$@"; part_dev ;;
  nsys) no_argument "$@"; part_nsys ;;
  podman) no_argument "$@"; part_podman ;;
  wheel)
    if (( $# < 2 || $# > 3 )) || [[ -z $2 ]] || [[ $# == 3 && $3 != --sdist ]]; then
      usage_error "'wheel' takes one argument: install.sh wheel DEST (and --sdist for the sdist too)"
    fi
    part_wheel "$2" "${3:-}" ;;
  python)
    if (( $# < 2 || $# > 3 )) || [[ -z $2 ]] || [[ $# == 3 && -z $3 ]]; then
      usage_error "'python' takes PREFIX and, optionally, WHEELS: install.sh python PREFIX [WHEELS]"
    fi
    part_python "$2" "${3:-}" ;;
  course) one_argument DEST "$@"; part_course "$2" ;;
  config) one_argument COURSE "$@"; part_config "$2" ;;
  "") usage_error "no part given: expected system, dev, nsys, podman, wheel, python, course or config" ;;
  *) usage_error "unknown part '$PART': expected system, dev, nsys, podman, wheel, python, course or config" ;;
esac
