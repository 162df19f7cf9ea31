// A communicator's calls on device memory: the part of the communicator that owns the device
// side, so the communicator itself never touches CUDA. It holds every rank's GPU as init found
// it and whether they reach each other's memory, the staged path's workers and staging
// (src/core/device_calls.h) and the kernel path's rank state (src/core/device_kernels.h), and it
// raises the device abort word and drops device registrations for the communicator.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/error.h"

namespace weft::cuda {
struct DriverApi;
}
namespace weft::bootstrap {
class Bootstrap;
}

namespace weft::core {

class CommView;
class DeviceCallState;
class DeviceKernelRank;

class GpuPath {
 public:
  // `comm` outlives this; `cudaDevice` and `cudaBusId`: the rank's GPU (CommConfig).
  GpuPath(CommView& comm, int cudaDevice, std::string cudaBusId);
  ~GpuPath();
  GpuPath(const GpuPath&) = delete;
  GpuPath& operator=(const GpuPath&) = delete;

  // At init, once every rank's GPU is known (`busIds` by rank, "" where none): where every rank
  // has one, each asks whether its GPU reaches every other's and all agree on the table through
  // `boot` (an allgather every rank takes part in); else nothing is exchanged.
  void agreeOnGpus(std::vector<std::string> busIds, bootstrap::Bootstrap& boot);
  // Rank `r`'s GPU at init by PCI bus id ("" where none); whether every rank's GPU can reach
  // every other's memory (false unless every rank has a GPU).
  const std::string& cudaBusIdOf(int r) const { return busIds_[r]; }
  bool gpusReachEachOther() const { return reachEachOther_; }

  // The staged path's workers and staging, made at the first call with the CUDA driver `api`.
  DeviceCallState& stagedCalls(const cuda::DriverApi& api);
  // The kernel path, decided at the first call on device memory: null where this communicator
  // stages its calls instead.
  DeviceKernelRank* kernels(const cuda::DriverApi& api);
  // The decision's result once made (null before, or where staged).
  DeviceKernelRank* kernelRank();
  // Ends both paths: waits (bounded) for jobs still on their streams, joins the workers, and
  // for the kernel path's launches. Destroy calls it before the links go.
  void end();
  // The first failure the kernel path's launches recorded: kSuccess, or an error with `why`.
  Status failure(std::string* why);

  // Raises the device abort word of this communicator's ranks in this process, so their
  // launches end (an aborted rank that never called on device memory still stops its peers').
  void raiseAbort();
  // Forgets the device buffers registered under `owner` (the communicator), as NCCL does at
  // destroy.
  static void dropRegistrations(const void* owner);

 private:
  CommView& comm_;
  const int cudaDevice_;
  const std::string cudaBusId_;
  std::vector<std::string> busIds_;
  bool reachEachOther_ = false;

  std::mutex mu_;
  std::unique_ptr<DeviceCallState> staged_;
  bool kernelsDecided_ = false;
  std::unique_ptr<DeviceKernelRank> kernels_;
};

}  // namespace weft::core
