#!/bin/sh
# Usage: nccl_tests_test.sh BUILD_DIR SOURCE_DIR NCCL_TESTS_CHECKOUT
# cmake --install to a scratch prefix, then perf/build_nccl_tests.sh builds NVIDIA's
# all_reduce_perf against it and checks its header and library came from the prefix. Running
# it needs a GPU, so this test stops at the build. Exits 77 (skipped) without the checkout or
# without nvcc.
set -eu
build=$1
source=$2
checkout=$3
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -f "$checkout/src/Makefile" ] || { echo "no nccl-tests checkout at $checkout: skipped"; exit 77; }
[ -x "$cuda/bin/nvcc" ] || { echo "no nvcc in $cuda/bin: skipped"; exit 77; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/weft-nccl-tests.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

"${CMAKE:-cmake}" --install "$build" --prefix "$scratch/prefix" >"$scratch/install.log" ||
  { cat "$scratch/install.log"; exit 1; }
sh "$source/perf/build_nccl_tests.sh" "$checkout" "$scratch/prefix" "$scratch/nccl-tests"
