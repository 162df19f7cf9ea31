// One rank's side of the direct peer-memory collectives (src/cuda/direct_kernels.h) on the kernel
// path (src/cuda/device_kernels.h): a communicator whose ranks all live in this process on one
// GPU runs allreduce, broadcast, reduce, allgather, reduce-scatter and alltoall in the direct
// kernel (unless WEFT_DIRECT=0); everything else (point-to-point groups, gather, scatter) stays on
// the device interpreter. Every rank makes the same choice for a call, from the call alone.
//
// The mailboxes (one slot per rank and block, sized for the GPU's multiprocessors) and the ranks'
// statuses are allocated once per communicator and GPU, by the first of its ranks to join, before
// any of them launches a direct kernel, and live as long as the world: nothing is allocated or
// freed while a direct kernel may wait. The kernels watch the world's abort word.
#pragma once
#include <memory>
#include <string>

#include "src/common/error.h"
#include "src/core/call.h"
#include "src/core/comm_view.h"
#include "src/cuda/direct_launch.h"
#include "src/cuda/driver_api.h"

namespace weft::cuda {

class DeviceWorld;
struct DirectMailboxes;

class DirectRank {
 public:
  // The rank's direct path, or null with `why` set where its communicator cannot take it (the
  // same answer on every rank): WEFT_DIRECT=0, ranks in other processes or on other GPUs, more
  // than kMaxDirectRanks ranks, or an image without the direct kernel. Throws weft::Error where
  // a driver call fails.
  static std::unique_ptr<DirectRank> make(const DriverApi& api, core::CommView& comm,
                                          const std::shared_ptr<DeviceWorld>& world, int device,
                                          bool oneGpu, std::string* why);
  ~DirectRank();
  DirectRank(const DirectRank&) = delete;
  DirectRank& operator=(const DirectRank&) = delete;

  // Whether `c` (a call of this rank's communicator) runs in the direct kernel.
  bool takes(const core::Call& c) const;
  // The launch of `c` for this rank alone (ranks = 1): ranks of one stream whose launches have
  // the same common part (launchesMerge) go into one launch.
  DirectLaunch launchOf(const core::Call& c) const;
  const DirectKernel& kernel() const { return *kernel_; }

  // The first failure a direct launch of this rank recorded: kSuccess, or kRemoteError with
  // `why` set.
  Status failure(std::string* why) const;

 private:
  DirectRank() = default;
  core::CommView* comm_ = nullptr;
  int rank_ = 0;
  int sms_ = 1;
  int ranksOnGpu_ = 1;
  uint64_t timeoutNs_ = 0;
  Tuning tuning_;
  std::shared_ptr<DirectMailboxes> boxes_;
  std::unique_ptr<DirectKernel> kernel_;
};

// Whether two one-rank launches can share a grid: the same call of the same communicator (the
// same mailboxes), with room for another rank.
bool launchesMerge(const DirectLaunch& a, const DirectLaunch& b);

}  // namespace weft::cuda
