// The device interpreter's kernel (device_interp_kernel.cu, built when nvcc is found): one thread
// block per lane of a rank's DevicePlan, launched on the caller's stream, so the collective runs
// in order with the stream's other work.
#pragma once
#include <cstdint>

#include "src/cuda/device_interp.h"

namespace weft::cuda {

// Threads per block unless the caller asks otherwise.
inline constexpr uint32_t kInterpThreads = 256;

// Launches the interpreter for one rank on `stream` (a cudaStream_t; null: the legacy default
// stream): `lanes` blocks (the plan's lane count, which the host knows from the blob it lowered)
// of `threads` threads (at most 512). Every pointer in `args` must be readable by the device
// (device, managed or mapped host memory); `args` itself is copied into the launch. No plan lanes:
// nothing is launched. Returns a cudaError_t as int (the launch's; a run's failure shows in
// args.status).
int launchDeviceInterp(const DeviceRunArgs& args, uint32_t lanes, void* stream,
                       uint32_t threads = kInterpThreads);

}  // namespace weft::cuda
