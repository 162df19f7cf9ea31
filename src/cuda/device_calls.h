// Calls on device memory, in order on the caller's CUDA stream. Each launch (one call, or a
// group's calls on one stream) becomes a job queued on the stream as:
//   copies device -> pinned host staging of every range the calls read,
//   a host function that hands the job to a worker thread (the proxy) and returns at once,
//   a stream wait until the worker has run the calls on the staging buffers with the host
//   executor (any transport: local, shm, tcp, ib) and raised the job's flag,
//   copies staging -> device of every range the calls write, then the flag lowered again.
// So the call returns at once, later work on the stream sees the results, and a stream being
// captured records the same sequence into its graph: every replay runs the job again (captured
// jobs keep their staging until the communicator goes). A failed job still raises its flag, so
// the stream never hangs on it; the failure is the communicator's async error, as in NCCL.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "src/common/error.h"
#include "src/common/tuning.h"
#include "src/core/call.h"
#include "src/core/device_path.h"
#include "src/cuda/driver_api.h"

namespace weft::cuda {

using core::BufferUse;
using core::BufferUser;
using core::Call;
using core::HostRunner;

// Per communicator: the worker threads (one per CUDA stream it was called on) and the pinned
// staging blocks. Destroying it waits, within the tuning's timeout, for jobs still on their
// streams, then frees the staging; blocks of jobs that did not end in time stay allocated (a
// stream may still write them).
class DeviceCallState {
 public:
  DeviceCallState(const cuda::DriverApi& api, const Tuning& tuning, int rank);
  ~DeviceCallState();
  DeviceCallState(const DeviceCallState&) = delete;
  DeviceCallState& operator=(const DeviceCallState&) = delete;

  // Queues `calls` (device = true, all on one stream) on that stream; see above. `useOf` tells
  // which ranges of device memory a call stages.
  Status launch(std::vector<Call> calls, HostRunner runHost, BufferUser useOf, std::string* why);

  struct Shared;  // what jobs on a stream share with this state (outlives it if they do)

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace weft::cuda
