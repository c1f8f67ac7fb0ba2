#!/usr/bin/env bash
# Builds the course image (docker/Dockerfile) with podman -- no Docker engine, no registry: the
# debian:12 base is made here from Debian's packages -- then uses it as its users would:
# `idrrun doctor`, a C and a Fortran notebook executed as the image's user (whose course has no
# solution, and who cannot read the teacher's), `idrrun grade` as root with the teacher's course
# on two submissions in a mounted folder, and JupyterLab answering with its token and refusing
# without.
# .ci/run calls it; docker/README.md ("Built and tried in CI") says what it detects and why.
#
#   bash docker/build-and-test.sh            # as root, from anywhere: build it, then try it
#   bash docker/build-and-test.sh build      # only build it (.ci/run: meanwhile, the tests run)
#   bash docker/build-and-test.sh try        # only try the image built before
#
# IDRRUN_IMAGE_WHEELS=DIR: the wheels `docker/install.sh wheel DIR` made on this machine (.ci/run
# has them already) stand for the image's first stage (`podman build --build-context wheel=...`:
# the same script on the same Debian, not run twice); unset, the image builds its own as an
# instructor's build does.
# IDRRUN_DEBIAN=13: the same image on Debian 13 (trixie, GCC 14 and its nvptx offloading:
# `--build-arg DEBIAN=13`), tried the same way; 12 (bookworm, GCC 12) by default.
# IDRRUN_IMAGE names the image (default localhost/idrrun-course:ci, localhost/idrrun-course:ci-debian13
# for Debian 13); IDRRUN_IMAGE_CACHE is where the base's tarball is kept between runs (default
# /var/cache/idrrun-image; a tarball older than IDRRUN_BASE_MAX_DAYS, 30 by default, is made again
# so that the base gets Debian's updates).
# IDRRUN_IMAGE_ROWS=FILE: where `try` writes the rows of `idrrun course check --json` run in the
# image (default: only shown); docker/same_rows.py compares two images' rows (.ci/run does).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "build-and-test: $*"; }
die() { echo "build-and-test: $*" >&2; exit 1; }

DEBIAN=${IDRRUN_DEBIAN:-12}
case $DEBIAN in
  12) SUITE=bookworm GCC=12 ;;
  13) SUITE=trixie GCC=14 ;;
  *) die "IDRRUN_DEBIAN=$DEBIAN: 12 (bookworm, GCC 12) or 13 (trixie, GCC 14)" ;;
esac
default_image=localhost/idrrun-course:ci
[[ $DEBIAN == 12 ]] || default_image+=-debian$DEBIAN
IMAGE=${IDRRUN_IMAGE:-$default_image}
BASE=docker.io/library/debian:$DEBIAN
CACHE=${IDRRUN_IMAGE_CACHE:-/var/cache/idrrun-image}
BASE_TAR=$CACHE/debian-$DEBIAN-minbase.tar
MAX_DAYS=${IDRRUN_BASE_MAX_DAYS:-30}
MODE=${1:-all}
if [[ ! $MODE =~ ^(all|build|try)$ ]] || (( $# > 1 )); then
  die "usage: build-and-test.sh [build|try] (none: both)"
fi
(( EUID == 0 )) || die "run as root: podman builds and runs the image with the machine's own storage"

WORK=$(mktemp -d /tmp/idrrun-image.XXXXXX)
CONTAINERS=()
cleanup() {
  local id
  for id in "${CONTAINERS[@]}"; do
    podman rm -f -t 0 "$id" >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

step_started=$SECONDS
step() {
  printf 'build-and-test: --- %s (%d s so far)\n' "$1" $(( SECONDS - step_started ))
}

bash docker/install.sh podman

# --- what this machine needs ---------------------------------------------------------------
# Each quirk is looked for, not assumed; what is found goes into $WORK (containers.conf and, for
# pip and npm in the build, a CA bundle, a pip.conf and an npmrc), never into the machine's own
# configuration.

CONF_CONTAINERS=() CONF_ENGINE=() BUILD_MOUNTS=()

# The runtime. crun (podman's first choice when installed) refuses a machine whose cgroup
# hierarchy is not cgroup v2 alone (v1 controllers beside the unified one); runc runs there.
runtime=$(podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null || echo unknown)
if [[ $(stat -fc %T /sys/fs/cgroup) != cgroup2fs && $runtime == crun ]]; then
  command -v runc >/dev/null || die "crun does not run on cgroup v1 or hybrid hierarchies, and runc is missing"
  say "quirk: /sys/fs/cgroup is not cgroup v2 alone and podman would use crun: using runc"
  CONF_ENGINE+=('runtime = "runc"')
fi

# The limits. As root, podman raises RLIMIT_NOFILE and RLIMIT_NPROC in every container, which
# fails where root may not raise limits (no CAP_SYS_RESOURCE, as in a container or a sandbox):
# the containers then get this shell's limits. podman starts conmon with RLIMIT_NPROC at most
# kernel.pid_max, which caps the number of processes too.
cap_eff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
if (( (16#$cap_eff >> 24 & 1) == 0 )); then
  limit() {  # ulimit's value, "-1" for unlimited
    local value
    value=$(ulimit "$1")
    [[ $value == unlimited ]] && value=-1
    echo "$value"
  }
  pid_max=$(cat /proc/sys/kernel/pid_max)
  nproc_soft=$(limit -Su) nproc_hard=$(limit -Hu)
  (( nproc_hard < 0 || nproc_hard > pid_max )) && nproc_hard=$pid_max
  (( nproc_soft < 0 || nproc_soft > nproc_hard )) && nproc_soft=$nproc_hard
  nofile="nofile=$(limit -Sn):$(limit -Hn)" nproc="nproc=$nproc_soft:$nproc_hard"
  say "quirk: root may not raise resource limits here (no CAP_SYS_RESOURCE): containers get $nofile, $nproc"
  CONF_CONTAINERS+=("default_ulimits = [\"$nofile\", \"$nproc\"]")
fi

if (( ${#CONF_CONTAINERS[@]} + ${#CONF_ENGINE[@]} )); then
  {
    echo "# written by docker/build-and-test.sh for this machine"
    echo "[containers]"
    printf '%s\n' "${CONF_CONTAINERS[@]}"
    echo "[engine]"
    printf '%s\n' "${CONF_ENGINE[@]}"
  } >"$WORK/containers.conf"
  export CONTAINERS_CONF=$WORK/containers.conf
fi

# HTTPS. pip in the build trusts Mozilla's CA set (its own copy, as Debian's ca-certificates);
# where outgoing HTTPS goes through an intercepting proxy, only this machine's bundle (with the
# proxy's CA) verifies PyPI. Then the build gets that bundle, read-only, and a pip.conf naming it.
intercepted=$(python3 - <<'EOF'
import glob, socket, ssl
mozilla = "".join(open(p).read() for p in sorted(glob.glob("/usr/share/ca-certificates/mozilla/*.crt")))
def verifies(context):
    try:
        with socket.create_connection(("pypi.org", 443), timeout=15) as raw, \
                context.wrap_socket(raw, server_hostname="pypi.org"):
            return True
    except ssl.SSLError:
        return False
    except OSError:
        return True  # unreachable: a problem for pip to report, not a certificate one
print("yes" if mozilla and not verifies(ssl.create_default_context(cadata=mozilla))
      and verifies(ssl.create_default_context()) else "no")
EOF
)
if [[ $intercepted == yes ]]; then
  bundle=$(readlink -f "$(python3 -c 'import ssl; print(ssl.get_default_verify_paths().openssl_cafile)')")
  say "quirk: HTTPS to pypi.org is intercepted (only this machine's CA bundle verifies it): the build's pip and npm get $bundle"
  printf '[global]\ncert = /etc/ssl/idrrun-build-ca.crt\n' >"$WORK/pip.conf"
  # npm (the wheel stage builds the JupyterLab extension) reads its global npmrc from /etc
  # (Debian's npm) or /usr/etc (npm's own default for prefix /usr)
  printf 'cafile=/etc/ssl/idrrun-build-ca.crt\n' >"$WORK/npmrc"
  BUILD_MOUNTS+=(--volume "$bundle:/etc/ssl/idrrun-build-ca.crt:ro" --volume "$WORK/pip.conf:/etc/pip.conf:ro"
                 --volume "$WORK/npmrc:/etc/npmrc:ro" --volume "$WORK/npmrc:/usr/etc/npmrc:ro")
fi

# --- the base image --------------------------------------------------------------------------

if [[ $MODE == try ]]; then
  podman image exists "$IMAGE" || die "no image $IMAGE to try: build-and-test.sh build makes it"
else
step "base image $BASE"
if podman image exists "$BASE"; then
  say "$BASE is there: used as it is"
else
  if [[ -f $BASE_TAR ]] && [[ -z $(find "$BASE_TAR" -mtime "+$MAX_DAYS") ]]; then
    say "reusing $BASE_TAR"
  else
    # This machine's Debian mirrors when it runs the same release (they are the ones that
    # answer here); otherwise mmdebstrap's own (deb.debian.org, with updates and security).
    mirrors=()
    if grep -qsx "VERSION_CODENAME=$SUITE" /etc/os-release; then
      # shellcheck disable=SC2016  # apt's own $(FIELD) placeholders
      mapfile -t mirrors < <(apt-get indextargets --format '$(REPO_URI) $(CODENAME) $(COMPONENT)' \
          'Identifier: Packages' | awk -v s="$SUITE" '$3 == "main" && $2 ~ "^" s "(-updates|-security)?$" { print "deb " $1 " " $2 " main" }' | sort -u)
    fi
    say "making $BASE_TAR with mmdebstrap (minbase, $SUITE${mirrors[*]:+, from }${mirrors[*]:-})"
    mkdir -p "$CACHE"
    mmdebstrap --quiet --variant=minbase --format=tar "$SUITE" "$BASE_TAR.part" "${mirrors[@]}"
    mv "$BASE_TAR.part" "$BASE_TAR"
  fi
  podman import --quiet --change 'CMD ["bash"]' "$BASE_TAR" "$BASE" >/dev/null
fi
podman run --rm --network=host "$BASE" true \
  || die "podman cannot run a container of $BASE here (see the quirks in docker/README.md)"

# --- the image -------------------------------------------------------------------------------

step "podman build --build-arg DEBIAN=$DEBIAN -f docker/Dockerfile -t $IMAGE"
if [[ -n ${IDRRUN_IMAGE_WHEELS:-} ]]; then
  # The wheel stage's product where `COPY --from=wheel` takes it: /opt/idrrun/wheels
  compgen -G "$IDRRUN_IMAGE_WHEELS/idrrun-*.whl" >/dev/null \
    || die "IDRRUN_IMAGE_WHEELS=$IDRRUN_IMAGE_WHEELS holds no idrrun wheel (make it with: bash docker/install.sh wheel DIR)"
  mkdir -p "$WORK/wheel/opt/idrrun/wheels"
  cp "$IDRRUN_IMAGE_WHEELS"/*.whl "$WORK/wheel/opt/idrrun/wheels/"
  BUILD_MOUNTS+=(--build-context "wheel=$WORK/wheel")
  say "the wheel stage: $(cd "$WORK/wheel/opt/idrrun/wheels" && echo *.whl), made on this machine ($IDRRUN_IMAGE_WHEELS)"
fi
old=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
# The whole log (apt's and pip's) goes to a file; the steps and install.sh's lines are shown.
BUILD_LOG=${TMPDIR:-/tmp}/idrrun-image-build-debian$DEBIAN.log
if ! podman build --pull=never --network=host "${BUILD_MOUNTS[@]}" --build-arg "DEBIAN=$DEBIAN" \
    -f docker/Dockerfile -t "$IMAGE" . \
    >"$BUILD_LOG" 2>&1; then
  tail -n 60 "$BUILD_LOG"
  die "podman build failed (the whole log: $BUILD_LOG)"
fi
grep -E '^(STEP [0-9]+/|install\.sh |--> Using cache)' "$BUILD_LOG" || true
new=$(podman image inspect --format '{{.Id}}' "$IMAGE")
if [[ -n $old && $old != "$new" ]]; then
  podman rmi "$old" >/dev/null 2>&1 || true  # the previous build's image, now untagged
fi
# The layers of earlier builds that no image uses any more (each run would add ~1 GB)
podman image prune -f >/dev/null
say "$IMAGE: $(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{ printf "%.2f GB", $1 / 1e9 }')"
fi
if [[ $MODE == build ]]; then
  say "$IMAGE built in $SECONDS s (build-and-test.sh try tries it)"
  exit 0
fi

# Inside the image, as its user ("student", its home, its PATH): nothing of CI's environment.
in_image() {
  podman run --rm --network=host "$@"
}

# --- as the user -------------------------------------------------------------------------------

step "as the user: idrrun doctor"
doctor=$(in_image "$IMAGE" idrrun doctor)
echo "$doctor"
for line in 'compiler gcc c +OK' 'compiler gcc fortran +OK' 'gcc offloading +OK' 'MPI +OK' \
    "gcc version +info +GCC $GCC\\." "gcc runtime +info +libgomp of GCC $GCC "; do
  grep -Eq "^$line" <<<"$doctor" || die "idrrun doctor in the image does not say: $line"
done
[[ $(in_image "$IMAGE" id -un) == student ]] || die "the image's user is not student"

step "as the user: a C and a Fortran notebook, executed in the image's kernel"
# shellcheck disable=SC2016  # expanded in the image
in_image "$IMAGE" bash -euc '
  for lang in C Fortran; do
    jupyter nbconvert --to notebook --execute --ExecutePreprocessor.kernel_name=python3 \
      --ExecutePreprocessor.timeout=300 --output-dir ~/executed/$lang \
      ~/course/notebooks/$lang/00_how_to_use.ipynb
  done
  ls ~/executed/*/00_how_to_use.ipynb'

step "as the user: the students' course, and nothing of the teacher's"
# shellcheck disable=SC2016  # expanded in the image
in_image "$IMAGE" bash -euc '
  ls ~/course/examples/intro_saxpy.toml ~/course/examples/C/intro_saxpy_exercise.c
  if compgen -G "$HOME/course/examples/*/*_solution.*"; then echo "solutions in ~/course" >&2; exit 1; fi
  if cat /opt/idrrun/src/examples/intro_saxpy.toml 2>/dev/null; then echo "the teacher course is readable" >&2; exit 1; fi
  if idrrun grade intro_saxpy ~/course/examples/C/intro_saxpy_exercise.c 2>&1; then echo "graded with the students copy" >&2; exit 1; fi'

step "as root: idrrun grade intro_saxpy /home/student/submissions/* (a folder of this machine mounted)"
mkdir -p "$WORK/submissions/alice" "$WORK/submissions/bob" "$WORK/submissions/carol" \
  "$WORK/submissions/dave" "$WORK/grades"
cp examples/C/intro_saxpy_solution.c "$WORK/submissions/alice/saxpy.c"
cp examples/Fortran/intro_saxpy_solution.f90 "$WORK/submissions/bob/saxpy.f90"
# Two who reach for the teacher's solution where the image keeps it: through a macro the
# include filter never saw, and by reading it while the program runs (exit 7 when it could).
SOLUTION=/opt/idrrun/src/examples/C/intro_saxpy_solution.c
printf '#define S "%s"\n#include S\n' "$SOLUTION" > "$WORK/submissions/carol/saxpy.c"
sed "/^int main(/,/^{/ s|^{\$|{ if (leaked()) return 7;|; s|^int main(|static int leaked(void) { FILE *f = fopen(\"$SOLUTION\", \"r\"); if (f) fclose(f); return f != NULL; }\nint main(|" \
  examples/C/intro_saxpy_solution.c > "$WORK/submissions/dave/saxpy.c"
grep -q 'if (leaked()) return 7;' "$WORK/submissions/dave/saxpy.c"
# Without namespaces a box reads whatever other users may: the class is the teacher's alone.
chmod -R go-rwx "$WORK/submissions"
# Root grades: the teacher's course in /opt/idrrun/src is root's alone (root's config names it).
# systempaths=unconfined: bubblewrap mounts a /proc for each box's PID namespace, which the
# kernel refuses while podman masks parts of the container's own /proc (docker/README.md);
# without it the grader falls back to a fresh uid per box (the "uid" level): graded both ways.
for level in namespaces uid; do
  options=(--user root -v "$WORK/submissions:/home/student/submissions" -v "$WORK/grades:/home/student/grades")
  [[ $level == namespaces ]] && options+=(--security-opt systempaths=unconfined)
  in_image "${options[@]}" "$IMAGE" bash -c "idrrun doctor | grep -E 'grading sandbox|exercises' &&
    idrrun grade intro_saxpy /home/student/submissions/* --report /home/student/grades/$level.csv \
      --feedback /home/student/grades/$level"
  cat "$WORK/grades/$level.csv"
  python3 - "$WORK/grades/$level.csv" "$level" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
students = sorted(r["student"] for r in rows)
assert students == ["alice", "bob", "carol", "dave"], f"students graded: {students}"
verdicts = {r["student"]: (r["verdict"], r["reasons"]) for r in rows}
assert verdicts["alice"][0] == verdicts["bob"][0] == "pass", f"the two solutions must pass: {verdicts}"
assert verdicts["carol"][0] == "fail", f"an include of the teacher's solution must fail: {verdicts}"
# dave computes as the solution does, and stops with exit code 7 if he could read it: he passes
# only where he could not.
assert verdicts["dave"][0] == "pass" and "exit code 7" not in verdicts["dave"][1], \
    f"the teacher's solution must not be readable from a box: {verdicts}"
boxes = {r["student"]: r["sandbox"] for r in rows}
assert set(boxes.values()) == {sys.argv[2]}, f"graded at the {sys.argv[2]} level: {boxes}"
EOF
done
ls "$WORK/grades/namespaces" "$WORK/grades/uid"

step "as root: idrrun course check --json (each solution passes its checks, each start file fails them)"
# The teacher's course, with GCC $GCC; hidden argument sets drawn from one seed, the same in every
# image, so that two images' rows compare (docker/same_rows.py; .ci/run compares Debian 12's with
# Debian 13's).
ROWS=${IDRRUN_IMAGE_ROWS:-$WORK/rows.json}
in_image --user root -e IDRRUN_GRADING_SEED=idrrun-ci-course-check "$IMAGE" \
  idrrun course check --json -j 2 >"$ROWS" || { python3 docker/same_rows.py "$ROWS" || true; die "idrrun course check failed in $IMAGE"; }
python3 docker/same_rows.py "$ROWS"

# --- JupyterLab: its token, and nothing without it ---------------------------------------------

step "JupyterLab in the image: the token opens it, no token does not"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
# As a user runs it (docker/README.md), on a free port of this machine's loopback.
cid=$(podman run -d -p "127.0.0.1:$port:8888" -e JUPYTER_TOKEN="$token" "$IMAGE")
CONTAINERS+=("$cid")
status() {  # TOKEN (may be empty): the HTTP status of /api/status
  python3 - "$port" "$1" <<'EOF'
import sys, urllib.error, urllib.request
request = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/api/status")
if sys.argv[2]:
    request.add_header("Authorization", f"token {sys.argv[2]}")
try:
    with urllib.request.urlopen(request, timeout=5) as response:
        print(response.status)
except urllib.error.HTTPError as exc:
    print(exc.code)
except OSError:
    print("none")
EOF
}
for _ in $(seq 120); do
  [[ $(status "$token") == none ]] || break
  [[ $(podman inspect --format '{{.State.Running}}' "$cid") == true ]] || { podman logs "$cid"; die "JupyterLab stopped"; }
  sleep 0.5
done
with=$(status "$token") without=$(status "") wrong=$(status "not-$token")
podman logs "$cid" 2>&1 | grep '^lab\.sh:'
say "with the token: $with, without: $without, with a wrong one: $wrong"
[[ $with == 200 && $without == 403 && $wrong == 403 ]] || { podman logs "$cid"; die "JupyterLab's token is not enforced as it should"; }

# Later: the built-in tracer's CUPTI from PyPI is tried here in the same way (`idrrun doctor`
# naming CUPTI).

step "done"
say "image $IMAGE built and tried in $SECONDS s"
