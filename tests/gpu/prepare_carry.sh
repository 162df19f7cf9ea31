#!/usr/bin/env bash
# Builds here everything the GPU machine runs, from the repository's own build, since that machine
# has nvcc but none of the -dev libraries the library links (hwloc, pugixml), and since its check
# (tests/gpu/run.sh) has 6 minutes in all, which a build there would eat into: libnccl.so.2 for the
# H100/H200's sm_90 with the shared libraries it needs that a bare CUDA machine lacks, the CUDA test
# programs (kernels, device interpreter, IPC, calls through the API, the hazard cases, the copy
# bandwidth) and the perf tools, into ./gpu-carry (ignored by git). Hand that folder to
# the device tool with the checkout (carry: ["gpu-carry"]); tests/gpu/run.sh finds it there.
# Also NVIDIA's nccl-tests as a real NCCL client of the library, from ../shared/third_party:
# all_reduce_perf and all_gather_perf built here without MPI against the library just built
# (gpu-carry/nccl-tests/bin), the part of its source their Makefile needs (nccl-tests/source) for
# an MPI build on the GPU machine, and tests/gpu/one_gpu_ordinals.c's library (nccl-tests/lib),
# which lets the thread mode put its ranks on one GPU. Without ../shared they are left out (said
# so, not a failure); a failed build of them is written to gpu-carry/nccl-tests/BUILD_FAILED,
# which run.sh reports as a failed check, so the other checks still travel.
# Usage: tests/gpu/prepare_carry.sh [ARCH]   (ARCH: CMake CUDA architectures, default 90-real)
set -euo pipefail
cd "$(dirname "$0")/../.."
arch="${1:-90-real}"
build=build-gpu-carry
out=gpu-carry
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# Without MPI: the carried tools run their ranks as threads there, and a carried libmpi would
# stand in front of the GPU machine's own MPI (LD_LIBRARY_PATH) in nccl-tests' MPI flavour.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
tools=(all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf
  alltoall_perf sendrecv_perf gather_perf scatter_perf weftrun)
gpu_tests=(device_calls_gpu_test hazard_gpu_check kernels_gpu_test device_interp_gpu_test
  cuda_ipc_gpu_test d2d_bandwidth)
cmake --build "$build" -j "$(nproc)" --target nccl "${gpu_tests[@]}" "${tools[@]}"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp -L "$build/src/api/libnccl.so.2" "$out/lib/libnccl.so.2"
ln -s libnccl.so.2 "$out/lib/libnccl.so"
for t in "${gpu_tests[@]}"; do cp "$build/tests/gpu/$t" "$out/bin/"; done
for t in "${tools[@]}"; do cp "$build/perf/$t" "$out/bin/"; done
# The header beside the library: gpu-carry is an installed NCCL (NCCL_HOME) for nccl-tests.
mkdir -p "$out/include"
cp include/nccl.h "$out/include/"
tests/gpu/carry_nccl_tests.sh "$arch" "$out" "$build/nccl-tests"
strip --strip-unneeded "$out/lib/libnccl.so.2" "$out/bin/"*
# Every library the binaries load that is not part of the C runtime or CUDA itself.
for f in "$out/lib/libnccl.so.2" "$out/bin/"* "$out"/nccl-tests/bin/*; do
  [ -f "$f" ] || continue
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.* | libm.so.* | libgcc_s.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
      ld-linux*.so.* | libcuda.so.* | libcudart.so.* | libnccl.so.*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
git rev-parse HEAD >"$out/COMMIT"
du -sh "$out"
size=$(du -sm "$out" | cut -f1)
if [ "$size" -gt 56 ]; then
  echo "gpu-carry is $size MiB: more than the device tool carries beside the checkout" >&2
  exit 1
fi
