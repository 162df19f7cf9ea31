#!/usr/bin/env bash
# Checks tests/gpu/one_gpu_ordinals.c without a GPU: a stand-in CUDA runtime with one device
# (ordinal 0; any other ordinal is an error, as with a real single GPU) and a client that uses
# ordinals 0-3 the way nccl-tests' thread mode does. Without the preloaded library the client must
# fail; with it and WEFT_GPU_ORDINALS=4 it must see 4 devices, and each call must reach the
# runtime with ordinal 0. Needs a C compiler and CUDA's headers (CUDA_HOME, default
# /usr/local/cuda).
# Usage: tests/gpu/one_gpu_ordinals_check.sh [WORK_DIR]   Exit status 0: passed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=${1:-$(mktemp -d)}
mkdir -p "$work"
cc=${CC:-cc}

cat >"$work/fake_cudart.c" <<'EOF'
#include <cuda_runtime_api.h>
#include <string.h>
int fakeLastOrdinal = -1;  // the ordinal the last call passed
cudaError_t cudaGetDeviceCount(int* count) { *count = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) {
  fakeLastOrdinal = d; return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaDeviceGetAttribute(int* v, enum cudaDeviceAttr a, int d) {
  (void)a; fakeLastOrdinal = d; *v = 9; return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* p, int d) {
  fakeLastOrdinal = d; memset(p, 0, sizeof *p); strcpy(p->name, "fake GPU");
  return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
EOF
cat >"$work/client.c" <<'EOF'
#include <cuda_runtime_api.h>
#include <stdio.h>
extern int fakeLastOrdinal;
// Like nccl-tests with -t 4 -g 1: the count must cover ordinals 0-3, and each must work.
int main(void) {
  int count = 0, value = 0;
  struct cudaDeviceProp prop;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 4) {
    printf("count %d\n", count); return 1;
  }
  for (int d = 0; d < 4; ++d) {
    if (cudaSetDevice(d) != cudaSuccess || fakeLastOrdinal != 0) {
      printf("set %d\n", d); return 1;
    }
    if (cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess ||
        fakeLastOrdinal != 0) { printf("attribute %d\n", d); return 1; }
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess || fakeLastOrdinal != 0) {
      printf("properties %d\n", d); return 1;
    }
  }
  printf("4 ordinals on the one device\n");
  return 0;
}
EOF
"$cc" -shared -fPIC -I"$cuda/include" "$work/fake_cudart.c" -o "$work/libfakecudart.so"
"$cc" -I"$cuda/include" "$work/client.c" -o "$work/client" -L"$work" -lfakecudart \
  -Wl,-rpath,"$work"
"$cc" -shared -fPIC -O2 -I"$cuda/include" "$here/one_gpu_ordinals.c" \
  -o "$work/libone_gpu_ordinals.so" -ldl

if "$work/client" >"$work/without.txt"; then
  echo "one_gpu_ordinals_check: the client passed without the library (the check cannot fail)"
  exit 1
fi
if ! WEFT_GPU_ORDINALS=4 LD_PRELOAD="$work/libone_gpu_ordinals.so" "$work/client"; then
  echo "one_gpu_ordinals_check: FAILED"
  exit 1
fi
if WEFT_GPU_ORDINALS=2 LD_PRELOAD="$work/libone_gpu_ordinals.so" "$work/client" >/dev/null; then
  echo "one_gpu_ordinals_check: 2 presented ordinals let the client count 4 (FAILED)"
  exit 1
fi
echo "one_gpu_ordinals_check: passed"
