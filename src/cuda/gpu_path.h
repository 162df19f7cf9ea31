// A communicator's calls on device memory (the core's DevicePath, src/core/device_path.h): it
// holds every rank's GPU as init found it and whether they reach each other's memory, the staged
// path's workers and staging (src/cuda/device_calls.h) and the kernel path's rank state
// (src/cuda/device_kernels.h), and it raises the device abort word and drops device
// registrations for the communicator.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/error.h"
#include "src/core/device_path.h"

namespace weft::cuda {

struct DriverApi;
using core::CommView;
class DeviceCallState;
class DeviceKernelRank;

class GpuPath final : public core::DevicePath {
 public:
  // `comm` outlives this; `cudaDevice` and `cudaBusId`: the rank's GPU (CommConfig).
  // `owner`: the communicator, the key of its device registrations.
  GpuPath(CommView& comm, const void* owner, int cudaDevice, std::string cudaBusId);
  ~GpuPath() override;
  GpuPath(const GpuPath&) = delete;
  GpuPath& operator=(const GpuPath&) = delete;

  void agreeOnGpus(std::vector<std::string> busIds, bootstrap::Bootstrap& boot) override;
  // Rank `r`'s GPU at init by PCI bus id ("" where none); whether every rank's GPU can reach
  // every other's memory (false unless every rank has a GPU).
  const std::string& cudaBusIdOf(int r) const { return busIds_[r]; }
  bool gpusReachEachOther() const { return reachEachOther_; }

  // The staged path's workers and staging, made at the first call with the CUDA driver `api`.
  DeviceCallState& stagedCalls(const cuda::DriverApi& api);
  // The kernel path, decided at the first call on device memory: null where this communicator
  // stages its calls instead (also where ranks of separate processes share a GPU and not every
  // process runs under MPS, as agreed at init: time-sliced kernels that wait for each other
  // crawl or never finish, and the staged path needs no co-resident kernels).
  DeviceKernelRank* kernels(const cuda::DriverApi& api);
  // The decision's result once made (null before, or where staged).
  DeviceKernelRank* kernelRank();
  // Ends both paths: waits (bounded) for jobs still on their streams, joins the workers, and
  // for the kernel path's launches.
  void end() override;
  // The first failure the kernel path's launches recorded.
  Status failure(std::string* why) override;
  // Raises the device abort word of this communicator's ranks in this process, so their
  // launches end (an aborted rank that never called on device memory still stops its peers').
  void raiseAbort() override;
  // Forgets the device buffers registered under `owner`, the communicator this path serves.
  void dropRegistrations() override;

 private:
  CommView& comm_;
  const void* owner_;
  const int cudaDevice_;
  const std::string cudaBusId_;
  std::vector<std::string> busIds_;
  bool reachEachOther_ = false;
  // Ranks of separate processes share a GPU and not every process runs under MPS: the kernel
  // path, whose kernels wait for each other, would need them co-resident, so calls are staged.
  bool timeSliced_ = false;

  std::mutex mu_;
  std::unique_ptr<DeviceCallState> staged_;
  bool kernelsDecided_ = false;
  std::unique_ptr<DeviceKernelRank> kernels_;
};

}  // namespace weft::cuda
