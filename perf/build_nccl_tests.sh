#!/bin/sh
# Usage: perf/build_nccl_tests.sh NCCL_TESTS_CHECKOUT [PREFIX] [OUT_DIR]
# Builds NVIDIA's nccl-tests against an installed Weft (cmake --install build --prefix PREFIX;
# default /usr/local), the way its README says to build against any NCCL: NCCL_HOME=PREFIX.
# The checkout is only read: objects and binaries go to OUT_DIR (default ./nccl-tests-build).
#
# Then checks what was built: nccl.h came from PREFIX/include (not CUDA's or NVIDIA's copy), and
# every binary needs libnccl.so.2 and loads PREFIX/lib's by itself (RUNPATH PREFIX/lib, then
# CUDA's lib64 for libcudart). Linking already proved that Weft defines every NCCL symbol the
# binaries call: the link line sees no other libnccl (CUDA's lib64 is offered without it).
#
# Environment:
#   CUDA_HOME            CUDA toolkit (default /usr/local/cuda; nvcc is required)
#   NVCC_GENCODE         GPU architectures (default sm_90 only: H100/H200, and a quicker build)
#   NCCL_TESTS_BINARIES  which *_perf to build, e.g. "all_reduce sendrecv" (default all_reduce;
#                        "all": every one)
#   JOBS                 parallel make jobs (default 2)
#   MPI=1 MPI_HOME=...   passed on to nccl-tests' Makefile (multi-process binaries)
# The binaries need a GPU to run (nccl-tests allocates device memory before any NCCL call).
# nccl-tests built for NCCL >= 2.28 also includes nccl_device.h, NCCL's device API header, which
# Weft does not install: it comes from CUDA_HOME/include where NVIDIA's NCCL put it.
set -eu
usage() {
  sed -n '2,3p' "$0" >&2
  exit 2
}
[ $# -ge 1 ] || usage
checkout=$(cd "$1" && pwd)
prefix=$(cd "${2:-/usr/local}" && pwd)
out=${3:-$PWD/nccl-tests-build}
cuda=${CUDA_HOME:-/usr/local/cuda}
gencode=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}
binaries=${NCCL_TESTS_BINARIES:-all_reduce}
jobs=${JOBS:-2}

fail() {
  echo "build_nccl_tests: $*" >&2
  exit 1
}
[ -f "$checkout/src/Makefile" ] || fail "$checkout is not an nccl-tests checkout (no src/Makefile)"
[ -f "$prefix/include/nccl.h" ] && [ -e "$prefix/lib/libnccl.so" ] ||
  fail "$prefix is not an installed Weft (no include/nccl.h, lib/libnccl.so)"
[ -x "$cuda/bin/nvcc" ] || fail "no nvcc in $cuda/bin (set CUDA_HOME)"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# CUDA's lib64 without any libnccl it may hold (NVIDIA's NCCL installs there): nccl-tests puts
# -L$CUDA_LIB before -L$NCCL_HOME/lib, so otherwise -lnccl would link NVIDIA's library.
cuda_lib=$out/cuda-lib-without-nccl
rm -rf "$cuda_lib"
mkdir -p "$cuda_lib"
for file in "$cuda"/lib64/*; do
  case ${file##*/} in
    libnccl*) ;;
    *) ln -s "$file" "$cuda_lib/" ;;
  esac
done

if [ "$binaries" = all ]; then
  targets=build
else
  targets=
  for name in $binaries; do targets="$targets $out/${name}_perf"; done
fi
echo "building nccl-tests ($binaries) against $prefix into $out"
# LD_RUN_PATH becomes the binaries' RUNPATH (the Makefile passes no -rpath of its own);
# NVCC_APPEND_FLAGS=-MD writes each object's header list next to it, for the check below.
# shellcheck disable=SC2086
LD_RUN_PATH="$prefix/lib:$cuda/lib64" NVCC_APPEND_FLAGS="-MD" \
  make -C "$checkout/src" -j "$jobs" BUILDDIR="$out" NCCL_HOME="$prefix" CUDA_HOME="$cuda" \
  CUDA_LIB="$cuda_lib" NVCC_GENCODE="$gencode" $targets

echo "checking the build"
headers=$(cat "$out"/*.d | tr ' \\' '\n\n' | grep -E '/nccl(_device)?\.h$' | sort -u)
echo "$headers" | sed 's/^/  header: /'
echo "$headers" | grep -E '/nccl\.h$' | grep -qvxF "$prefix/include/nccl.h" &&
  fail "some objects include an nccl.h other than $prefix/include/nccl.h"
echo "$headers" | grep -qxF "$prefix/include/nccl.h" ||
  fail "no object includes $prefix/include/nccl.h"
built=0
for binary in "$out"/*_perf; do
  [ -x "$binary" ] || continue
  readelf -d "$binary" | grep -q 'Shared library: \[libnccl.so.2\]' ||
    fail "$binary does not need libnccl.so.2"
  loaded=$(env -u LD_LIBRARY_PATH ldd "$binary" | awk '$1 == "libnccl.so.2" {print $3}')
  [ "$(cd "$(dirname "$loaded")" && pwd -P)" = "$(cd "$prefix/lib" && pwd -P)" ] ||
    fail "$binary loads libnccl.so.2 from '$loaded', not $prefix/lib"
  echo "  $binary: libnccl.so.2 => $loaded"
  built=$((built + 1))
done
[ "$built" -gt 0 ] || fail "no *_perf binary was built"
echo "nccl-tests built against Weft: $built binaries in $out (running them needs a GPU)"
