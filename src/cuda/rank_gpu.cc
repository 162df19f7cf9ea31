#include "src/cuda/rank_gpu.h"

#include "src/core/comm_config.h"
#include "src/cuda/driver_api.h"

namespace weft::cuda {

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

}  // namespace weft::cuda
