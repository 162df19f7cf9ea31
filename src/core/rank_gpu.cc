#include "src/core/rank_gpu.h"

#include "src/core/communicator.h"
#include "src/cuda/driver_api.h"

namespace weft::core {

// Whether GPU `ordinal` (bus id `mine`) can store into the memory of the GPU at bus id `theirs`:
// the same GPU, or peer access between them.
bool gpuReaches(int ordinal, const std::string& mine, const std::string& theirs) {
  if (theirs == mine) return true;
  const cuda::DriverApi* api = cuda::driver().api.get();
  if (!api || !api->deviceGet || !api->deviceGetByPciBusId || !api->deviceCanAccessPeer)
    return false;
  cuda::CuDevice self = -1, peer = -1;
  int can = 0;
  return api->deviceGet(&self, ordinal) == cuda::kCuSuccess &&
         api->deviceGetByPciBusId(&peer, theirs.c_str()) == cuda::kCuSuccess &&
         api->deviceCanAccessPeer(&can, self, peer) == cuda::kCuSuccess && can != 0;
}

void noteCudaDevice(CommConfig* cfg, int ordinal) {
  cfg->cudaDevice = -1;
  cfg->cudaBusId.clear();
  const cuda::DriverApi* api = cuda::driver().api.get();
  if (!api || !api->ctxGetCurrent || !api->ctxGetDevice || !api->deviceGetPciBusId ||
      !api->deviceGet)
    return;
  cuda::CuDevice device = -1;
  if (ordinal == -2) {
    cuda::CuContext ctx = nullptr;
    if (api->ctxGetCurrent(&ctx) != cuda::kCuSuccess || !ctx) return;
    if (api->ctxGetDevice(&device) != cuda::kCuSuccess) return;
  } else if (ordinal < 0 || api->deviceGet(&device, ordinal) != cuda::kCuSuccess) {
    return;
  }
  char busId[20] = {};
  if (api->deviceGetPciBusId(busId, sizeof(busId) - 1, device) != cuda::kCuSuccess) return;
  cfg->cudaDevice = ordinal == -2 ? device : ordinal;
  cfg->cudaBusId = busId;
}

}  // namespace weft::core
