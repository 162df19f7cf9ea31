// Launching the device interpreter through the driver API: the kernel is compiled into the
// library as an embedded image (built when nvcc is found) and loaded into the caller's context
// with cuModuleLoadData, so the library needs no CUDA runtime and a driver library given through
// WEFT_CUDA_DRIVER (the tests' fake, whose "kernels" run the interpreter's host build on host
// threads) sees every launch.
//
// One launch runs up to kMaxLaunchRanks ranks of one process together: ranks whose calls share
// a stream must run in one kernel, since a kernel of one rank waiting for a later kernel of its
// peer on the same stream would never end.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "src/cuda/device_interp.h"
#include "src/cuda/driver_api.h"

namespace weft::cuda {

inline constexpr uint32_t kMaxLaunchRanks = 8;
// Threads per block at most (the kernel's __launch_bounds__).
inline constexpr uint32_t kMaxInterpThreads = 512;
// The kernel's symbol in the image (extern "C": no mangling).
inline constexpr const char* kInterpKernelName = "weftInterpret";

// The kernel's one parameter, passed by value (so a launch keeps no host memory alive). Block b
// runs lane b - firstBlock[r] of rank r, where firstBlock[r] <= b < firstBlock[r + 1]; the grid
// has firstBlock[ranks] blocks.
struct InterpLaunch {
  uint32_t ranks = 0;
  uint32_t firstBlock[kMaxLaunchRanks + 1] = {};
  DeviceRunArgs args[kMaxLaunchRanks];
};
static_assert(sizeof(InterpLaunch) <= 4096, "kernel parameters are limited to 4 KiB");

// Which rank and lane block `block` of a launch runs (host and device code).
WEFT_HD_INLINE uint32_t launchRankOf(const InterpLaunch& p, uint32_t block) {
  uint32_t r = 0;
  while (r + 1 < p.ranks && block >= p.firstBlock[r + 1]) ++r;
  return r;
}

// Whether this build embedded the kernel's image (nvcc was found).
bool interpImageBuilt();

// The interpreter loaded into one CUDA context (the one current when load() ran). Launches go
// to streams of that context.
class InterpModule {
 public:
  // Loads the image into the current context. Null, with `why` set, where the driver lacks the
  // entry points (missingEntryPoint(kKernels)), the build has no image, or the load fails (an
  // image without code for this device).
  static std::unique_ptr<InterpModule> load(const DriverApi& api, std::string* why);
  // The same from a given image instead of the embedded one: for a driver that runs the kernel
  // itself (the tests' fake, which accepts any image), also in a build without nvcc.
  static std::unique_ptr<InterpModule> loadImage(const DriverApi& api, const void* image,
                                                 std::string* why);
  ~InterpModule();
  InterpModule(const InterpModule&) = delete;
  InterpModule& operator=(const InterpModule&) = delete;

  // Queues the launch on `stream` with `threads` threads per block (at most 512). Nothing is
  // queued for zero blocks. CUDA_ERROR_INVALID_VALUE, queueing nothing, for more than
  // kMaxLaunchRanks ranks, firstBlock not starting at 0 or decreasing, or a rank with blocks and
  // no plan.
  CuResult launch(const InterpLaunch& p, CuStream stream, uint32_t threads = 256) const;

  // The loaded module: its image also carries the direct kernel (src/cuda/direct_launch.h).
  CuModule module() const { return static_cast<CuModule>(module_); }

 private:
  InterpModule() = default;
  const DriverApi* api_ = nullptr;
  void* module_ = nullptr;    // CUmodule
  void* function_ = nullptr;  // CUfunction
};

}  // namespace weft::cuda
