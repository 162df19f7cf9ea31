// Calls that the ranks of one process on one GPU run as one kernel (src/cuda/device_kernels.h):
// the kernels of ranks that wait for each other must run at the same time, and where CUDA cannot
// promise it the ranks meet on the host instead and one of them launches a kernel carrying all.
//
// The rule, decided per call and per GPU of a communicator in a process (a DeviceWorld):
//   - ranks driven by one thread inside a group on one stream already share one launch;
//   - a collective call meets when more than one rank of the communicator is in this process on
//     this GPU and co-residency is not assured: CUDA_DEVICE_MAX_CONNECTIONS=1 (every stream
//     feeds one hardware queue, so a kernel waiting for a peer holds back the peer's launch
//     queued behind it; known at init, the same for every rank), or the call is on the legacy
//     NULL stream (which serialises with every blocking stream), or another rank already waits
//     at the meeting of that call;
//   - at a meeting every rank records an event on its stream and waits (bounded by the
//     communicator's timeout) until the last one arrives; that one launches a single kernel
//     carrying every rank's part on its own stream after waiting for the others' events, then
//     makes every other rank's stream wait for the launch, so later work on any of the streams
//     comes after it. A thread that drives several ranks must call them inside one group (as
//     NCCL requires): a meeting that is not complete within the timeout fails with an error
//     naming the cause, and nothing is launched;
//   - point-to-point groups never meet (a rank's partners change from group to group); where
//     co-residency is not assured they must not wait for a rank of this process on this GPU
//     outside their launch, and fail with an error naming the cause instead;
//   - ranks calling on one stream from different threads (or one thread outside a group) would
//     queue one kernel behind another that waits for it: a launch that would queue behind an
//     unfinished launch of another rank of its world at the same or a later call fails with an
//     error naming the cause, and the world's abort word ends the earlier launch.
// Ranks on other GPUs run on other hardware queues; ranks in other processes on this GPU take
// this path only under MPS (src/cuda/gpu_path.h), whose clients' kernels run side by side.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/error.h"
#include "src/cuda/driver_api.h"
#include "src/cuda/interp_launch.h"

namespace weft::cuda {

class DeviceKernelRank;
struct LaunchDone;

// One rank's prepared part of a call that meets.
struct MeetingPart {
  DeviceKernelRank* rank = nullptr;
  int commRank = -1;
  uint64_t seq = 0;  // the call's number among the rank's collective calls
  DeviceRunArgs args;
  uint32_t lanes = 0;
  CuStream stream = nullptr;
  CuEvent ready = nullptr;  // recorded on `stream` at arrival; kept by the launch
};

class LaunchMeeting {
 public:
  // Brings `parts` (ranks of one world at call `seq`) to that call's meeting, `expected` ranks
  // in all. Returns once the call's kernel is queued (by this thread or another's) or failed:
  // not complete within `timeout`, or a launch failed. `cause` names why the ranks meet.
  // `launch` queues the kernel of the complete meeting's parts (called with the meeting held).
  using Launcher = std::function<Status(std::vector<MeetingPart>& parts, std::string* why)>;
  Status arrive(const DriverApi& api, uint64_t seq, std::vector<MeetingPart> parts, size_t expected,
                std::chrono::milliseconds timeout, const std::string& cause, const Launcher& launch,
                std::string* why);
  // Whether a rank waits at the meeting of call `seq`.
  bool open(uint64_t seq);

 private:
  struct Table {
    std::vector<MeetingPart> parts;
    size_t inside = 0;  // threads waiting here
    bool launched = false, failed = false;
    std::string why;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Table> tables_;
};

}  // namespace weft::cuda
