#!/usr/bin/env bash
# Part of tests/gpu/prepare_carry.sh (also run alone, after it): puts NVIDIA's nccl-tests into
# the carried folder as a real NCCL client of the library built there.
#   OUT/nccl-tests/bin      all_reduce_perf and all_gather_perf, thread mode (no MPI), built here
#                           with perf/build_nccl_tests.sh against OUT's include/nccl.h and
#                           lib/libnccl.so (OUT is the NCCL_HOME), for ARCH only
#   OUT/nccl-tests/source   the files nccl-tests' Makefile needs for those two, so that
#                           tests/gpu/run.sh can build the MPI flavour (MPI=1) on the GPU machine;
#                           the binaries here are built from this copy, which proves it complete
#   OUT/nccl-tests/lib      libone_gpu_ordinals.so (tests/gpu/one_gpu_ordinals.c): run.sh preloads
#                           it so the thread mode puts all its ranks on the one GPU
#   OUT/include             nccl_device.h and nccl_device/ from CUDA's include (NVIDIA's device
#                           API headers, which nccl-tests includes for NCCL >= 2.28 and Weft does
#                           not provide), so that the GPU machine's build needs nothing else
# nccl-tests comes from ../shared/third_party/nccl-tests beside the checkout (NCCL_TESTS_SOURCE
# to choose another). Without it, says so and carries none; a failed build is written to
# OUT/nccl-tests/BUILD_FAILED (run.sh reports it) instead of failing the carry.
# Usage: tests/gpu/carry_nccl_tests.sh ARCH OUT BUILD_DIR
#   ARCH: CMake CUDA architectures (e.g. 90-real); OUT: the carried folder (with lib/libnccl.so
#   and include/nccl.h already there); BUILD_DIR: where the objects go.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: tests/gpu/carry_nccl_tests.sh ARCH OUT BUILD_DIR" >&2
  exit 2
fi
arch=$1
out=$(cd "$2" && pwd)
mkdir -p "$3"
build_dir=$(cd "$3" && pwd)
cd "$(dirname "$0")/../.."
source_dir=${NCCL_TESTS_SOURCE:-../shared/third_party/nccl-tests}
cuda=${CUDA_HOME:-/usr/local/cuda}
dest=$out/nccl-tests
rm -rf "$dest"

if [ ! -f "$source_dir/src/Makefile" ]; then
  echo "carry_nccl_tests: no nccl-tests at $source_dir (../shared absent?): nccl-tests is not" \
    "carried and run.sh skips it"
  exit 0
fi
mkdir -p "$dest/bin" "$dest/lib" "$dest/source/src" "$dest/source/os" "$dest/source/verifiable"

# nvcc's -gencode for each CMake architecture: 90-real -> sm_90; 90-virtual -> PTX; 90 -> both.
gencode=""
for a in ${arch//;/ }; do
  number=${a%%-*}
  case $a in
    *-real) gencode+=" -gencode=arch=compute_$number,code=sm_$number" ;;
    *-virtual) gencode+=" -gencode=arch=compute_$number,code=compute_$number" ;;
    *) gencode+=" -gencode=arch=compute_$number,code=sm_$number"
       gencode+=" -gencode=arch=compute_$number,code=compute_$number" ;;
  esac
done

# What src/Makefile reads to build all_reduce_perf and all_gather_perf: their sources, the
# shared test harness (common, util, timer), the OS layer and the data-verification object.
cp "$source_dir/LICENSE.txt" "$dest/source/"
for f in Makefile common.mk common.cu common.h util.cu util.h timer.cc timer.h nccl1_compat.h \
  all_reduce.cu all_gather.cu vector_types.h multimem_ops.h; do
  cp "$source_dir/src/$f" "$dest/source/src/"
done
for f in Makefile linux.cc os.h; do cp "$source_dir/os/$f" "$dest/source/os/"; done
for f in verifiable.mk verifiable.cu verifiable.h; do
  cp "$source_dir/verifiable/$f" "$dest/source/verifiable/"
done
if [ -f "$cuda/include/nccl_device.h" ]; then
  rm -rf "$out/include/nccl_device"
  cp -r "$cuda/include/nccl_device.h" "$cuda/include/nccl_device" "$out/include/"
fi

failed() {
  echo "carry_nccl_tests: $*" | tee "$dest/BUILD_FAILED" >&2
  rm -rf "${dest:?}/bin" "${dest:?}/lib"
  exit 0
}
rm -rf "${build_dir:?}"/*
if ! NCCL_TESTS_BINARIES="all_reduce all_gather" NVCC_GENCODE="${gencode# }" \
  JOBS="$(nproc)" MPI=0 perf/build_nccl_tests.sh "$dest/source" "$out" "$build_dir" \
  >"$build_dir/build.log" 2>&1; then
  tail -n 30 "$build_dir/build.log" >&2
  failed "building nccl-tests against $out failed (log: $build_dir/build.log)"
fi
grep -E '^  (header|/)' "$build_dir/build.log" || true
for name in all_reduce_perf all_gather_perf; do
  # The preloaded ordinals library replaces functions of the shared CUDA runtime only.
  readelf -d "$build_dir/$name" | grep -q 'Shared library: \[libcudart\.so' ||
    failed "$name does not load the shared CUDA runtime (libcudart.so), which" \
      "one_gpu_ordinals needs"
  cp "$build_dir/$name" "$dest/bin/"
done
strip --strip-unneeded "$dest/bin/"*
cc -shared -fPIC -O2 -I"$cuda/include" tests/gpu/one_gpu_ordinals.c \
  -o "$dest/lib/libone_gpu_ordinals.so" -ldl || failed "one_gpu_ordinals.c did not build"
echo "carry_nccl_tests: all_reduce_perf and all_gather_perf built against $out; source for MPI=1" \
  "in $dest/source"
