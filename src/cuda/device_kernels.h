// Calls on device memory among ranks of one host that all use one GPU (threads of one process,
// or processes), or GPUs that all reach each other's memory (peer access): run by the device
// interpreter's kernel (src/cuda/device_interp.h) on the caller's stream, reading and writing
// the user's buffers in place, with FIFOs between the ranks in GPU memory. No host thread takes
// part once the launch is queued, so the call costs what the kernel costs. A FIFO lives in its
// receiver's GPU memory (src/cuda/device_world.h): a sender on another GPU of the process stores
// into it through peer access; for a sender in another process the receiver exports it through
// the bootstrap the first time a plan uses it (CUDA IPC, transports/cuda/ipc.h) and the sender
// maps it.
//
// Every rank of such a communicator takes this path for every call on device memory, decided at
// the first one from what init exchanged (host, GPUs, peer access): ranks never mix it with the
// staged path (src/cuda/device_calls.h), whose messages would never meet theirs. A launch captured
// into a CUDA graph replays as the next call of its ranks: the run count that orders the lanes'
// counters lives in device memory.
//
// A launch carries the calls of up to cuda::kMaxLaunchRanks ranks that share a stream (a group
// driving several ranks from one thread): their lanes run side by side in one grid, since a
// kernel of one rank waiting for a later kernel of its peer on the same stream would never end.
// Where CUDA does not promise that the kernels of a process's ranks on one GPU run side by side
// (CUDA_DEVICE_MAX_CONNECTIONS=1, the legacy NULL stream), those ranks meet on the host and one
// kernel carries them all; ranks sharing a stream across threads get a clear error
// (src/cuda/launch_meeting.h has the rule). Processes sharing a GPU take this path only under
// MPS (src/cuda/gpu_path.h). Memory is reserved when the ranks join, never allocated or freed
// under running kernels (src/cuda/device_world.h).
//
// Failures: a lane that times out (the communicator's timeout), finds a mismatched call or sees
// the abort raises the abort word of every rank of the communicator in its process and records why
// in its rank's status (pinned host memory); the communicator reads it as its asynchronous error.
// ncclCommAbort raises the same word. Destroy waits, within the timeout, for the rank's launches
// to finish before it frees their memory; memory a launch that never finished may still use is
// left allocated.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "src/common/error.h"
#include "src/common/tuning.h"
#include "src/core/call.h"
#include "src/core/comm_view.h"
#include "src/cuda/device_plan.h"
#include "src/cuda/direct_rank.h"
#include "src/cuda/driver_api.h"
#include "src/cuda/interp_launch.h"

namespace weft::cuda {

using core::Call;
using core::Communicator;
using core::CommView;

class DeviceWorld;
struct LaunchDone;

// One rank's state on the kernel path: its lowered plans in device memory, its lane counters and
// scratch, its status word, and the launches not yet known to be finished.
class DeviceKernelRank {
 public:
  // The rank's state, or null with `why` set where this communicator cannot take the kernel path
  // (ranks on other hosts or other GPUs, a driver without the entry points, a build without the
  // kernel's image, WEFT_DEVICE_KERNELS=0). Every rank of the communicator gets the same answer.
  // `busIds`: every rank's GPU at init, by PCI bus id ("" where it had none);
  // `gpusReachEachOther`: whether they all reach each other's memory, as the ranks agreed at init.
  static std::unique_ptr<DeviceKernelRank> make(const cuda::DriverApi& api, CommView& comm,
                                                int device, const std::vector<std::string>& busIds,
                                                bool gpusReachEachOther, std::string* why);
  ~DeviceKernelRank();
  DeviceKernelRank(const DeviceKernelRank&) = delete;
  DeviceKernelRank& operator=(const DeviceKernelRank&) = delete;

  // One unit of a launch (a collective call, or the point-to-point calls of a group), planned:
  // plan() takes the unit's Work from the communicator (its operator lowered there, as for the
  // host executor), encodes it for the device once per BlobKey (cuda::encodeForDevice) and
  // exports the FIFOs it receives on from ranks in other processes; then
  // prepare() maps the FIFOs it sends on to such ranks (waiting for their exports) and fills
  // `args`, with `lanes` the unit's block count. A launch plans all its units before it prepares
  // any, so ranks driven by one thread never wait for an export their own thread has still to
  // make. Nothing changes until committed.
  //
  // What names an encoded plan in the rank's caches, built without strings: a collective's
  // plan (the cache keeps it alive, so its address names it) with the element type and the
  // operator its Work was lowered to; a group's point-to-point calls (whose plan is made anew
  // for every group) by their shape.
  struct BlobKey {
    const plan::Plan* plan = nullptr;  // null for point-to-point calls
    int type = 0;
    int op = 0;           // the Work's lowered operator
    uint64_t scalar = 0;  // its PreMulSum factor's bytes
    uint64_t divisor = 0;
    std::vector<uint64_t> p2p;  // per call: send bit << 32 | peer, then bytes
    bool operator<(const BlobKey& o) const {
      return std::tie(plan, type, op, scalar, divisor, p2p) <
             std::tie(o.plan, o.type, o.op, o.scalar, o.divisor, o.p2p);
    }
  };
  struct Unit {
    BlobKey key;
    // The call's Work as the communicator built it for the host executor too (its operator
    // lowered there): what is encoded for the device. Left empty for point-to-point calls whose
    // shape is already encoded.
    exec::Work work;
    std::vector<char*> buffers;  // by plan buffer id (scratch filled by prepare)
    size_t scratchBytes = 0;
    bool pointToPoint = false;  // a group's sends and receives (else one collective call)
    bool direct = false;        // runs in the direct kernel (src/cuda/direct_rank.h): `launch`
    cuda::DirectLaunch launch{};
  };
  Status plan(const std::vector<Call>& calls, Unit* unit, std::string* why);
  Status prepare(const Unit& unit, cuda::DeviceRunArgs* args, uint32_t* lanes, std::string* why);
  // The launch holding the prepared unit (a collective one where `collective`) was queued;
  // `done` is recorded after it (null for a launch captured into a graph).
  void committed(const std::shared_ptr<LaunchDone>& done, bool collective);

  // How many collective units this rank committed: the number of its next one, 0 first.
  uint64_t callNumber() const;
  int rank() const;
  // Whether rank `r` of the communicator is in this process on this GPU (this rank included),
  // and how many are.
  bool localPeer(int r) const;
  size_t ranksHere() const;
  // The ranks a planned unit sends to or receives from.
  std::vector<int> peersOf(const Unit& unit) const;
  int maxConnections() const;  // CUDA_DEVICE_MAX_CONNECTIONS, as init read it
  std::chrono::milliseconds timeout() const;
  DeviceWorld& world() const { return *world_; }

  // The last launch this rank committed (null before the first): a launch on another stream
  // waits for it, as NCCL orders a communicator's calls.
  std::shared_ptr<LaunchDone> lastLaunch() const;

  const cuda::InterpModule& module() const;
  // The direct kernel (where the communicator takes the direct path).
  const cuda::DirectKernel& directKernel() const { return direct_->kernel(); }
  // The context of the rank's GPU (its launches and set-up run there).
  cuda::CuContext context() const;
  const cuda::DriverApi& api() const { return *api_; }
  uint32_t threads() const { return threads_; }

  // The first failure a launch of this rank recorded: kSuccess, or an error with `why` set.
  Status failure(std::string* why) const;

 private:
  DeviceKernelRank() = default;
  struct Impl;
  const cuda::DriverApi* api_ = nullptr;
  uint32_t threads_ = 256;
  std::shared_ptr<DeviceWorld> world_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<cuda::DirectRank> direct_;  // null: every call on the interpreter
};

// Queues `calls` (on device memory, each of a communicator with a DeviceKernelRank, on any
// streams) as launches of the interpreter: per stream, round j holds the j-th unit of every
// communicator calling on it. `ranks[i]`: the kernel rank of calls[i]'s communicator. Returns at
// once.
Status launchKernels(const std::vector<Call>& calls, const std::vector<DeviceKernelRank*>& ranks,
                     std::string* why);

}  // namespace weft::cuda
