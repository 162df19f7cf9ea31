// The device interpreter's kernel as the library carries it: compiled by nvcc to a fatbin
// (cmake/WeftCudaImage.cmake), embedded as bytes and loaded with cuModuleLoadData
// (src/cuda/interp_launch.cc), so the library links no CUDA runtime. One launch runs lanes of up
// to kMaxLaunchRanks ranks: block b runs lane b - firstBlock[r] of rank r = launchRankOf(p, b).
#include "src/cuda/interp_launch.h"

extern "C" __global__ void __launch_bounds__(weft::cuda::kMaxInterpThreads)
    weftInterpret(weft::cuda::InterpLaunch p) {
  __shared__ weft::cuda::LaneShared shared;
  const uint32_t rank = weft::cuda::launchRankOf(p, blockIdx.x);
  weft::cuda::runLane(p.args[rank], blockIdx.x - p.firstBlock[rank], threadIdx.x, blockDim.x,
                      shared);
}
