// The device interpreter's kernel: blockIdx.x is the lane, and the block's threads run it
// together through the shared source in device_interp.h.
#include <cuda_runtime.h>

#include "src/cuda/device_interp_kernel.h"

namespace weft::cuda {
namespace {

__global__ void __launch_bounds__(512) interpretKernel(DeviceRunArgs args) {
  __shared__ LaneShared shared;
  runLane(args, blockIdx.x, threadIdx.x, blockDim.x, shared);
}

}  // namespace

int launchDeviceInterp(const DeviceRunArgs& args, uint32_t lanes, void* stream, uint32_t threads) {
  if (lanes == 0) return cudaSuccess;
  if (threads == 0 || threads > 512 || !args.plan) return cudaErrorInvalidValue;
  interpretKernel<<<lanes, threads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  return cudaGetLastError();
}

}  // namespace weft::cuda
