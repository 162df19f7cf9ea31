// A communicator's calls on device memory as the core sees them. The core never touches CUDA:
// src/cuda/ implements this (src/cuda/gpu_path.h) and defines the functions below, and the
// communicator only holds the path, tells it about the ranks' GPUs, ends and aborts it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "src/common/error.h"
#include "src/core/call.h"

namespace weft::bootstrap {
class Bootstrap;
}

namespace weft::core {

class CommView;

class DevicePath {
 public:
  virtual ~DevicePath() = default;
  // At init, once every rank's GPU is known (`busIds` by rank, "" where none): where every rank
  // has one, the ranks agree through `boot` on whether their GPUs reach each other's memory (an
  // allgather every rank takes part in); else nothing is exchanged.
  virtual void agreeOnGpus(std::vector<std::string> busIds, bootstrap::Bootstrap& boot) = 0;
  // Ends the path: waits (bounded) for work still on its streams. Destroy calls it before the
  // links go.
  virtual void end() = 0;
  // The first failure of the path's device work: kSuccess, or an error with `why` set.
  virtual Status failure(std::string* why) = 0;
  // Stops the device work of this communicator's ranks in this process (abort).
  virtual void raiseAbort() = 0;
  // Forgets the device buffers registered with this communicator (destroy, as NCCL does).
  virtual void dropRegistrations() = 0;
};

// The device path of a communicator (src/cuda/gpu_path.cc). `comm` outlives it; `owner`: the
// communicator, the key of its device registrations; `cudaDevice` and `cudaBusId`: the rank's
// GPU at init (CommConfig), -1 and "" where none.
std::unique_ptr<DevicePath> makeDevicePath(CommView& comm, const void* owner, int cudaDevice,
                                           std::string cudaBusId);

// Runs calls on host pointers without a stream to the end on the calling thread (the staged
// device path's host side).
using HostRunner = Status (*)(std::vector<Call>& calls, std::string* why);
// Which of a call's buffers its rank reads and writes.
using BufferUser = BufferUse (*)(const Call& call);

// Queues calls on device memory (Call::device, each of a communicator made with a device path)
// on their CUDA streams and returns at once (src/cuda/gpu_path.cc). `runHost` and `useOf` serve
// the calls that are staged through host memory.
Status launchDeviceCalls(const std::vector<Call>& calls, HostRunner runHost, BufferUser useOf,
                         std::string* why);

}  // namespace weft::core
