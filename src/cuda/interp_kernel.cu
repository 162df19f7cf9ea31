// The library's kernels as it carries them: compiled by nvcc into one fatbin
// (cmake/WeftCudaImage.cmake), embedded as bytes and loaded with cuModuleLoadData
// (src/cuda/interp_launch.cc), so the library links no CUDA runtime and one module load serves
// both kernels.
//  - weftInterpret, the device interpreter: one launch runs lanes of up to kMaxLaunchRanks
//    ranks; block b runs lane b - firstBlock[r] of rank r = launchRankOf(p, b).
//  - weftDirect, the direct peer-memory collectives (src/cuda/direct_kernels.h): blocks
//    [k * blocks, (k + 1) * blocks) run rank p.rank[k]. Its parameter is read in place from the
//    constant bank (__grid_constant__), never copied to local memory.
#include "src/cuda/direct_kernels.h"
#include "src/cuda/interp_launch.h"

// WEFT_DIRECT_ONLY: the direct kernel alone (the SASS test's cubin, without the interpreter's
// long machine-code compile).
#if !defined(WEFT_DIRECT_ONLY)
extern "C" __global__ void __launch_bounds__(weft::cuda::kMaxInterpThreads)
    weftInterpret(weft::cuda::InterpLaunch p) {
  __shared__ weft::cuda::LaneShared shared;
  const uint32_t rank = weft::cuda::launchRankOf(p, blockIdx.x);
  weft::cuda::runLane(p.args[rank], blockIdx.x - p.firstBlock[rank], threadIdx.x, blockDim.x,
                      shared);
}
#endif

extern "C" __global__ void __launch_bounds__(weft::cuda::kDirectThreads)
    weftDirect(const __grid_constant__ weft::cuda::DirectLaunch p) {
  __shared__ weft::cuda::DirectShared shared;
  weft::cuda::runDirectBlock(p, blockIdx.x, threadIdx.x, blockDim.x, shared);
}
