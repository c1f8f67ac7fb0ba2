#!/usr/bin/env bash
# A minimal Debian 13 (trixie) root file system with GCC 14 and its nvptx offloading, for
# idrrun's course on a machine whose own system has no GCC 14 (the GPU machine: Ubuntu, no
# registry) and for tests/test_gcc_versions.py (IDRRUN_GCC14_ROOT). As root, from the project's
# root, on a Debian machine that reaches deb.debian.org and PyPI:
#
#   bash benchmarks/gcc14_root.sh DIR                     # unpacked: IDRRUN_GCC14_ROOT=DIR
#   bash benchmarks/gcc14_root.sh .gpu14/gcc14-root.tar.xz   # packed for the GPU machine (xz -9)
#   bash benchmarks/gcc14_root.sh .gpu14/gcc14-root.tar.zst  # the same with zstd -19 (larger, faster)
#   GCC14_ROOT_MPI=1 bash benchmarks/gcc14_root.sh ...    # with Open MPI (multigpu_integral)
#
# Measured 2026-12-02 (2 shared cores): 280 MiB unpacked; xz -9 58.4 MiB in 4 min 18 s, zstd -19
# --long=27 65.6 MiB in 1 min 54 s; with Open MPI (GCC14_ROOT_MPI=1, UCX's ROCm transports left
# out) 339 MiB, xz 70 MiB in 3 min (2026-12-03). With the working tree (~9 MiB) neither fits one 64 MiB carry:
# a tarball over PART_MIB (default 40) is also written as parts of that size, OUT.part-aa, -ab,
# with OUT.sha256, each part carried in a call of its own (benchmarks/gcc14_gpu.sh says how).
# Inside the checkout, OUT's folder is added to git's info/exclude (a carry takes ignored paths).
#
# It holds gcc-14, gfortran-14, gcc-14-offload-nvptx, libgomp-plugin-nvptx1 and python3 (3.13),
# with idrrun's run-time dependencies for that Python in /opt/idrrun-site (downloaded by this
# machine's pip: PyPI is reached from here only). idrrun itself is not in it: the working tree,
# bound into the root, is (benchmarks/gcc14_gpu.sh). Left out, as the course needs none of
# them: documentation, manuals, locales, the sanitizers' libraries, static libraries beside
# their shared ones, perl, Python's byte code (made again when it runs). The NVIDIA driver's
# libraries and devices come from the machine it runs on (gcc14_gpu.sh binds them in).
# It prints the size of what it made.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:?usage: gcc14_root.sh DIR | FILE.tar.zst | FILE.tar.xz}
(( EUID == 0 )) || { echo "gcc14_root.sh: run as root (mmdebstrap)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "gcc14_root.sh: apt-get install mmdebstrap" >&2; exit 1; }

packages=gcc-14,gfortran-14,gcc-14-offload-nvptx,libgomp-plugin-nvptx1,gcc,gfortran,python3
[[ ${GCC14_ROOT_MPI:-0} == 1 ]] && packages+=,openmpi-bin,libopenmpi-dev

work=$(mktemp -d /var/tmp/gcc14-root.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root

# Of idrrun's run-time dependencies (pyproject.toml's), those `idrrun course check` and `idrrun
# run` import (measured with python -X importtime: Pillow, google-re2, rich, tomlkit), with
# theirs, as wheels for CPython 3.13; the notebook's (IPython, ipykernel, nbformat) are not needed
# in the root and take 20 MB.
deps=$(python3 -c 'import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(" ".join(d for d in deps if re.match(r"(pillow|google-re2|rich|tomlkit)\b", d)))')
# shellcheck disable=SC2086  # one requirement per word, none with a space
python3 -m pip download -q --only-binary=:all: --python-version 3.13 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d "$work/wheels" $deps

echo "gcc14_root.sh: mmdebstrap trixie ($packages)"
mmdebstrap --quiet --variant=minbase --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  trixie "$root" http://deb.debian.org/debian

# The wheels unpacked for the root's Python (a wheel is a zip: no pip needed inside).
mkdir -p "$root/opt/idrrun-site"
for wheel in "$work"/wheels/*.whl; do
  python3 -m zipfile -e "$wheel" "$root/opt/idrrun-site"
done

# What the course never uses: the host's LTO compiler and dumper (offloading runs the nvptx
# lto1 only; -flto is left out), static C libraries (-static), the sanitizers, perl, apt,
# gprofng, iconv's character sets (Python and gcc read UTF-8 without them).
lib=$root/usr/lib/x86_64-linux-gnu
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* \
  "$root"/usr/share/{doc,man,info,locale,lintian,perl5}/* "$root"/usr/bin/*lto-dump* \
  "$root"/usr/libexec/gcc/x86_64-linux-gnu/14/lto1 \
  "$lib"/perl-base "$lib"/perl "$root"/usr/bin/perl* "$root"/usr/share/perl \
  "$root"/usr/bin/apt* "$root"/usr/lib/apt "$lib"/libapt-* "$root"/usr/bin/*gprofng* "$lib"/libgprofng* \
  "$root"/usr/lib/x86_64-linux-gnu/gprofng "$lib"/gconv \
  "$lib"/libc.a "$lib"/libm-2.*.a "$lib"/libmvec.a "$lib"/libresolv.a "$lib"/libBrokenLocale.a
find "$root/usr/lib/gcc/x86_64-linux-gnu/14" -maxdepth 1 \
  \( -name 'lib[atl]san*' -o -name 'libhwasan*' -o -name 'libubsan*' -o -name 'libgfortran.a' \
     -o -name 'libstdc++*.a' -o -name 'libsupc++.a' -o -name 'libitm.a' -o -name 'libgomp.a' \) -delete
rm -f "$lib"/lib{asan,tsan,lsan,hwasan,ubsan}.so*
if [[ ${GCC14_ROOT_MPI:-0} == 1 ]]; then
  # Debian 13's Open MPI brings UCX's ROCm transports, and with them HIP, HSA, comgr, LLVM 17 and
  # Z3 (240 MiB): only those plugins load them (readelf -d: no other library needs them), and
  # UCX skips a transport whose plugin is absent. The -dev packages' static libraries go too,
  # except glibc's (its libpthread.a, libdl.a... are what -lpthread links against since 2.34).
  rm -f "$lib"/ucx/*rocm* "$lib"/libLLVM-*.so* "$lib"/libamd_comgr.so* "$lib"/libamdhip64.so* \
    "$lib"/libhsa-runtime64.so* "$lib"/libz3.so*
  find "$lib" -name '*.a' -type f -print | sed "s|^$root||" \
    | grep -vxF -f <(grep '\.a$' "$root"/var/lib/dpkg/info/libc6-dev:amd64.list) \
    | sed "s|^|$root|" | xargs -r -d '\n' rm -f
fi
find "$root/usr/lib/python3" "$root/usr/lib/python3.13" "$root/opt/idrrun-site" -name __pycache__ -type d -prune -exec rm -rf {} +

echo "gcc14_root.sh: $(du -sh --apparent-size "$root" | cut -f1) unpacked"
mkdir -p "$(dirname "$OUT")"
case $OUT in
  *.tar.zst) tar -C "$root" --numeric-owner -cf - . | zstd -q -19 --long=27 -T0 -o "$OUT" -f ;;
  *.tar.xz) tar -C "$root" --numeric-owner -cf - . | xz -9 -T0 >"$OUT" ;;
  *)
    rm -rf "$OUT" && mkdir -p "$(dirname "$OUT")" && mv "$root" "$OUT"
    echo "gcc14_root.sh: $OUT (IDRRUN_GCC14_ROOT=$OUT)"
    exit 0 ;;
esac
size=$(stat -c %s "$OUT")
(cd "$(dirname "$OUT")" && sha256sum "$(basename "$OUT")" >"$(basename "$OUT").sha256")
echo "gcc14_root.sh: $OUT: $(( size / 1048576 )) MiB ($size bytes), $OUT.sha256"
folder=$(cd "$(dirname "$OUT")" && pwd)
if [[ $folder == "$PWD"/* ]]; then
  exclude=$(git rev-parse --git-path info/exclude)
  entry=/${folder#"$PWD"/}/
  mkdir -p "$(dirname "$exclude")"
  grep -qxF "$entry" "$exclude" 2>/dev/null || echo "$entry" >>"$exclude"
fi
PART_MIB=${PART_MIB:-40}
rm -f "$OUT".part-*
if (( size > PART_MIB * 1048576 )); then
  split -b "${PART_MIB}M" "$OUT" "$OUT.part-"
  echo "gcc14_root.sh: over $PART_MIB MiB: carried in parts, one per call: $(cd "$(dirname "$OUT")" && echo "$(basename "$OUT")".part-*)"
fi
