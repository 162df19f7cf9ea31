// Preloaded into an unmodified nccl-tests binary (LD_PRELOAD) so that its thread mode puts several
// ranks on one GPU. nccl-tests gives thread t of `-t N -g 1` the device ordinal
// NCCL_TESTS_DEVICE + t (src/common.cu) and refuses ordinals past cudaGetDeviceCount
// (src/util.cu), so on a machine with one GPU thread 1 would fail with "invalid device ordinal".
// With WEFT_GPU_ORDINALS=N set, this library makes the CUDA runtime report at least N devices and
// maps every ordinal the program passes to the visible device (ordinal % real count): all N ranks
// use the one GPU, each with its own stream and buffers, as nccl-tests arranges them.
// Only the calls nccl-tests makes with an ordinal are covered: cudaGetDeviceCount, cudaSetDevice,
// cudaDeviceGetAttribute and cudaGetDeviceProperties. cudaGetDevice reports the real ordinal, so
// the NCCL library under test sees the true device. Needs the shared CUDA runtime (libcudart.so):
// the real functions are found with dlsym(RTLD_NEXT).
// Build: cc -shared -fPIC -O2 -I$CUDA_HOME/include one_gpu_ordinals.c -o libone_gpu_ordinals.so
// -ldl
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>

typedef cudaError_t (*CountFn)(int*);
typedef cudaError_t (*SetFn)(int);
typedef cudaError_t (*AttributeFn)(int*, enum cudaDeviceAttr, int);
typedef cudaError_t (*PropertiesFn)(struct cudaDeviceProp*, int);

static void* realFunction(const char* name) { return dlsym(RTLD_NEXT, name); }

// The ordinals the program may use: WEFT_GPU_ORDINALS, or 0 when unset (no change).
static int presentedOrdinals(void) {
  const char* value = getenv("WEFT_GPU_ORDINALS");
  return value ? atoi(value) : 0;
}

static cudaError_t realDeviceCount(int* count) {
  CountFn real = (CountFn)realFunction("cudaGetDeviceCount");
  return real ? real(count) : cudaErrorUnknown;
}

// The visible device an ordinal stands for; ordinals the real runtime knows are kept.
static int mappedOrdinal(int ordinal) {
  int count = 0;
  if (ordinal < 0 || realDeviceCount(&count) != cudaSuccess || count <= 0) return ordinal;
  return ordinal % count;
}

cudaError_t cudaGetDeviceCount(int* count) {
  cudaError_t status = realDeviceCount(count);
  const int presented = presentedOrdinals();
  if (status == cudaSuccess && *count > 0 && *count < presented) *count = presented;
  return status;
}

cudaError_t cudaSetDevice(int device) {
  SetFn real = (SetFn)realFunction("cudaSetDevice");
  return real ? real(mappedOrdinal(device)) : cudaErrorUnknown;
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  AttributeFn real = (AttributeFn)realFunction("cudaDeviceGetAttribute");
  return real ? real(value, attr, mappedOrdinal(device)) : cudaErrorUnknown;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  PropertiesFn real = (PropertiesFn)realFunction("cudaGetDeviceProperties");
  return real ? real(prop, mappedOrdinal(device)) : cudaErrorUnknown;
}
