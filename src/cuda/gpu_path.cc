#include "src/cuda/gpu_path.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "src/bootstrap/bootstrap.h"
#include "src/common/log.h"
#include "src/core/comm_view.h"
#include "src/core/communicator.h"
#include "src/cuda/device_calls.h"
#include "src/cuda/device_kernels.h"
#include "src/cuda/device_world.h"
#include "src/cuda/driver_api.h"
#include "src/cuda/memory.h"

namespace weft::cuda {
namespace {

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

// Whether the CUDA MPS control daemon serves this process: its pipe directory (the knob
// CUDA_MPS_PIPE_DIRECTORY, as the CUDA runtime reads it) holds its control pipe.
bool mpsRunning(const std::string& pipeDirectory) {
  struct stat st {};
  return !pipeDirectory.empty() && ::stat((pipeDirectory + "/control").c_str(), &st) == 0;
}

}  // namespace

GpuPath::GpuPath(CommView& comm, const void* owner, int cudaDevice, std::string cudaBusId)
    : comm_(comm), owner_(owner), cudaDevice_(cudaDevice), cudaBusId_(std::move(cudaBusId)) {}

GpuPath::~GpuPath() { end(); }

void GpuPath::agreeOnGpus(std::vector<std::string> busIds, bootstrap::Bootstrap& boot) {
  busIds_ = std::move(busIds);
  // Each rank asks for its own GPU, and all agree on the table (asked only where every rank has
  // a GPU, so every rank takes part). A rank's row: whether its GPU reaches each rank's, then
  // whether its process runs under MPS, then whether it shares its GPU with a rank of another
  // process.
  if (std::any_of(busIds_.begin(), busIds_.end(), [](const std::string& b) { return b.empty(); }))
    return;
  const int nranks = static_cast<int>(busIds_.size());
  const size_t row = static_cast<size_t>(nranks) + 2;
  std::vector<uint8_t> table(row * nranks, 0);
  uint8_t* mine = table.data() + row * comm_.rank();
  for (int r = 0; r < nranks; ++r) {
    mine[r] = gpuReaches(cudaDevice_, cudaBusId_, busIds_[r]) ? 1 : 0;
    if (busIds_[r] == busIds_[comm_.rank()] && !comm_.peerInThisProcess(r)) mine[nranks + 1] = 1;
  }
  mine[nranks] = mpsRunning(comm_.tuning().mpsPipeDirectory) ? 1 : 0;
  boot.allgather(table.data(), row);
  reachEachOther_ = true;
  bool allMps = true, shared = false;
  for (int r = 0; r < nranks; ++r) {
    const uint8_t* x = table.data() + row * r;
    reachEachOther_ = reachEachOther_ && std::all_of(x, x + nranks, [](uint8_t v) { return v; });
    allMps = allMps && x[nranks];
    shared = shared || x[nranks + 1];
  }
  timeSliced_ = shared && !allMps;
}

DeviceCallState& GpuPath::stagedCalls(const cuda::DriverApi& api) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!staged_) staged_ = std::make_unique<DeviceCallState>(api, comm_.tuning(), comm_.rank());
  return *staged_;
}

DeviceKernelRank* GpuPath::kernels(const cuda::DriverApi& api) {
  std::lock_guard<std::mutex> lock(mu_);
  if (kernelsDecided_) return kernels_.get();
  std::string why;
  if (timeSliced_) {
    why = "ranks in separate processes share a GPU without MPS (CUDA_MPS_PIPE_DIRECTORY=" +
          comm_.tuning().mpsPipeDirectory +
          " has no control pipe): their kernels would be time-sliced, and one spinning for "
          "another process's kernel could take forever";
  } else {
    kernels_ = DeviceKernelRank::make(api, comm_, cudaDevice_, busIds_, reachEachOther_, &why);
  }
  kernelsDecided_ = true;
  if (kernels_)
    WEFT_INFO(INIT, "rank %d: calls on device memory run in the device interpreter's kernel",
              comm_.rank());
  else
    WEFT_INFO(INIT, "rank %d: calls on device memory are staged through host memory: %s",
              comm_.rank(), why.c_str());
  return kernels_.get();
}

DeviceKernelRank* GpuPath::kernelRank() {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_.get();
}

void GpuPath::end() {
  std::unique_ptr<DeviceCallState> staged;
  std::unique_ptr<DeviceKernelRank> kernels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    staged = std::move(staged_);
    kernels = std::move(kernels_);
  }
}

Status GpuPath::failure(std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_ ? kernels_->failure(why) : Status::kSuccess;
}

void GpuPath::raiseAbort() { DeviceWorld::raiseAbortOf(comm_.commHash()); }

void GpuPath::dropRegistrations() { dropDeviceRegistrations(owner_); }

}  // namespace weft::cuda

namespace weft::core {

std::unique_ptr<DevicePath> makeDevicePath(CommView& comm, const void* owner, int cudaDevice,
                                           std::string cudaBusId) {
  return std::make_unique<cuda::GpuPath>(comm, owner, cudaDevice, std::move(cudaBusId));
}

// Communicators whose ranks all use this GPU (or GPUs reaching each other) run their calls in the
// device kernels (src/cuda/device_kernels.h), all streams at once so that ranks driven by this
// thread set up together; the rest are staged through host memory, a job per stream
// (src/cuda/device_calls.h).
Status launchDeviceCalls(const std::vector<Call>& calls, HostRunner runHost, BufferUser useOf,
                         std::string* why) {
  const cuda::DriverApi* api = cuda::driver().api.get();
  if (!api) {
    *why = "no CUDA device: " + cuda::driver().why;
    return Status::kInvalidArgument;
  }
  try {
    std::vector<Call> kernel;
    std::vector<cuda::DeviceKernelRank*> kernelRanks;
    std::vector<void*> streamOrder;
    std::map<void*, std::vector<Call>> staged;
    for (const Call& c : calls) {
      auto& gpu = static_cast<cuda::GpuPath&>(c.comm->gpu());
      if (cuda::DeviceKernelRank* k = gpu.kernels(*api)) {
        kernel.push_back(c);
        kernelRanks.push_back(k);
        continue;
      }
      if (!staged.count(c.stream)) streamOrder.push_back(c.stream);
      staged[c.stream].push_back(c);
    }
    Status first = Status::kSuccess;
    if (!kernel.empty()) first = cuda::launchKernels(kernel, kernelRanks, why);
    for (void* stream : streamOrder) {
      std::vector<Call>& batch = staged[stream];
      std::string msg;
      auto& gpu = static_cast<cuda::GpuPath&>(batch.front().comm->gpu());
      const Status st = gpu.stagedCalls(*api).launch(std::move(batch), runHost, useOf, &msg);
      if (st != Status::kSuccess && first == Status::kSuccess) {
        first = st;
        *why = msg;
      }
    }
    return first;
  } catch (const Error& e) {
    *why = e.what();
    return e.code();
  }
}

}  // namespace weft::core
