// What the ranks of one communicator that share a process and a GPU share on the kernel path
// (src/cuda/device_kernels.h): the interpreter loaded into that GPU's primary context, the FIFOs
// these ranks receive on (a FIFO lives in its receiver's GPU memory: senders on the same GPU use
// it directly, senders on another GPU of the process through peer access, senders in other
// processes map it through CUDA IPC), the abort word every launch of theirs watches, and the
// device memory of each rank's plans, counters and scratch. One per communicator, process and
// GPU, joined by its ranks' first calls on device memory (or by a sender on another GPU) and
// freed when the last of them leaves.
//
// Every driver call runs with the world's context current (and the caller's restored after).
// Device memory is set up through a private non-blocking stream and that stream alone is
// waited for: a copy ordered after the legacy default stream, or a free, would wait for kernels
// that wait in turn for a launch this very thread has still to make.
//
// No allocation or free while a kernel that waits for peers may run: cuMemAlloc, cuMemFree,
// cuMemHostAlloc and cuMemFreeHost synchronise the device, so one made while a rank's kernel
// spins for a peer whose launch this very call would precede never returns. The first rank to
// join therefore allocates everything the world needs up front: the pinned staging of the set-up
// copies (Tuning::deviceStagingBytes, never grown: larger copies go in pieces), the pinned
// abort word and every rank's status slot, and a device arena (Tuning::deviceArenaBytes) that
// FIFOs, plans, counters and scratch are carved from and never returned to. The arena grows
// only while the world is quiescent (every launch of every rank of it in this process finished,
// and no rank of it in another process shares the GPU, whose kernels this process cannot see);
// otherwise a request that does not fit fails with an error naming the knob. Memory is freed
// only when the world ends, after its ranks' launches finished.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "src/common/error.h"
#include "src/cuda/device_fifo.h"
#include "src/cuda/driver_api.h"
#include "src/cuda/interp_launch.h"
#include "src/cuda/launch_meeting.h"
#include "transports/cuda/ipc.h"

namespace weft::cuda {

// Makes `ctx` current on this thread for the scope (where it is not already), as driver calls
// that allocate, copy, map or launch act on the current context.
class ContextScope {
 public:
  ContextScope(const cuda::DriverApi& api, cuda::CuContext ctx);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const cuda::DriverApi& api_;
  cuda::CuContext previous_ = nullptr;
  bool switched_ = false;
};

// One queued launch: an event recorded after it, shared by the ranks it carries.
struct LaunchDone {
  const cuda::DriverApi* api = nullptr;
  cuda::CuEvent event = nullptr;
  cuda::CuStream stream = nullptr;
  // The ranks the launch carries, each with its unit's number among that rank's launches.
  std::vector<std::pair<int, uint64_t>> units;
  std::vector<cuda::CuEvent> keep;  // events the launch's streams wait for
  ~LaunchDone() {
    if (event) api->eventDestroy(event);
    for (cuda::CuEvent e : keep) api->eventDestroy(e);
  }
  bool finished() const { return api->eventQuery(event) == cuda::kCuSuccess; }
};

class DeviceWorld {
 public:
  struct Config {
    uint32_t slots = 8, slotBytes = 131072;  // FIFO geometry
    uint64_t arenaBytes = 268435456;         // device memory reserved at join (and per growth)
    uint64_t stagingBytes = 1048576;         // pinned staging of the set-up copies
    bool sharedWithOtherProcesses = false;   // ranks of the communicator in other processes
  };
  // The world of communicator `commHash` in this process, made by its first rank. Null with
  // `why` where the interpreter cannot be loaded into the current context (the same answer for
  // every rank of the process). Throws weft::Error where a driver call fails.
  static std::shared_ptr<DeviceWorld> join(const cuda::DriverApi& api, uint64_t commHash,
                                           const std::string& busId, int device,
                                           const Config& config, std::string* why);
  ~DeviceWorld();
  DeviceWorld(const DeviceWorld&) = delete;
  DeviceWorld& operator=(const DeviceWorld&) = delete;

  const cuda::InterpModule& module() const { return *module_; }
  cuda::CuContext context() const { return ctx_; }

  // Lets this GPU's kernels store into `peer`'s memory (once per pair). Throws weft::Error.
  void reach(const DeviceWorld& peer);

  // The FIFO from rank `from` to rank `to` on `channel`, allocated here and zeroed on first use
  // (both ranks in this process, or `to`, its receiver, here and the sender elsewhere).
  cuda::DeviceFifo fifo(int from, int to, int channel);
  // Whether that FIFO is known here yet (made by fifo() or imported), and its view.
  bool findFifo(int from, int to, int channel, cuda::DeviceFifo* out);
  // Bytes of one FIFO's memory (what a receiver exports to a sender in another process).
  size_t fifoBytes() const { return cuda::fifoBytes(slots_, slotBytes_); }
  // A FIFO whose receiver lives in another process: its memory mapped from the receiver's
  // export (transports/cuda/ipc.h). Throws weft::Error where it cannot be mapped.
  cuda::DeviceFifo importFifo(int from, int to, int channel,
                              const transport::cuda::IpcDescriptor& d);
  // Device memory (from the arena) holding a copy of `bytes` bytes at `host`.
  cuda::CuDevicePtr upload(const void* host, size_t bytes);
  // Device memory of `bytes` from the arena, zeroed when `zero`. Throws weft::Error where it
  // does not fit and the world is not quiescent.
  cuda::CuDevicePtr allocate(size_t bytes, bool zero);
  // Pinned host memory the device reaches (zeroed): the host reads what the kernel writes there.
  struct HostBlock {
    void* host = nullptr;
    cuda::CuDevicePtr device = 0;
  };
  // Pinned memory of `bytes` (zeroed). Allocating synchronises the device: only before any
  // launch of this world (the direct kernels' statuses, made with their first rank's state).
  HostBlock hostBlock(size_t bytes);
  // Rank `rank`'s status slot (rank < cuda::kMaxLaunchRanks), allocated at join.
  HostBlock statusOf(int rank) const;
  // A launch carrying ranks of this world was queued: it counts until it finished.
  void launched(const std::shared_ptr<LaunchDone>& done);
  // The unfinished launches of this world's ranks.
  std::vector<std::shared_ptr<LaunchDone>> running();
  // Device memory allocations made so far (the arena's growths included).
  size_t allocations();

  // The abort word of every rank's launches (pinned host memory): raised by a failing lane or by
  // ncclCommAbort of any rank of the communicator on this GPU.
  uint32_t* abortHost() const { return static_cast<uint32_t*>(abort_.host); }
  uint32_t* abortDevice() const {
    return reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(abort_.device));
  }
  void raiseAbort();
  // Raises the abort word of communicator `commHash`'s world in this process, where there is
  // one (an aborted rank that never called on device memory still stops its peers' launches).
  static void raiseAbortOf(uint64_t commHash);

  // Where its ranks meet for calls they run as one kernel (src/cuda/launch_meeting.h).
  LaunchMeeting& meeting() { return meeting_; }

  // A rank could not tell that its launches ended: the memory stays allocated at the end.
  void keepMemory() { keepMemory_ = true; }

 private:
  DeviceWorld(const cuda::DriverApi& api, int device, const Config& config);
  friend class ContextScope;
  void check(cuda::CuResult rc, const char* what) const;
  // A fresh arena chunk of at least `bytes` (the caller holds mu_).
  void grow(size_t bytes);
  bool quiescentLocked();
  // Copies `bytes` from host memory (zeroes where `host` is null) into `dst` through the staging
  // (in pieces) and waits for it.
  void copyIn(cuda::CuDevicePtr dst, const void* host, size_t bytes);

  const cuda::DriverApi* api_;
  int device_;
  cuda::CuContext ctx_ = nullptr;  // the GPU's primary context (retained), else the caller's
  bool retained_ = false;
  std::vector<cuda::CuContext> reached_;  // peers' contexts this one has peer access to
  uint32_t slots_, slotBytes_;
  Config config_;
  std::unique_ptr<transport::cuda::IpcImporter> importer_;  // made at the first import
  std::mutex mu_;
  std::unique_ptr<cuda::InterpModule> module_;
  cuda::CuStream setup_ = nullptr;  // non-blocking: set-up copies wait for nothing else
  void* staging_ = nullptr;         // pinned, for the set-up copies
  size_t stagingBytes_ = 0;
  cuda::CuDevicePtr arenaNext_ = 0;  // the free part of the newest arena chunk
  size_t arenaLeft_ = 0;
  std::vector<std::shared_ptr<LaunchDone>> running_;
  LaunchMeeting meeting_;
  HostBlock statuses_;  // kMaxLaunchRanks slots of kStatusSlotBytes
  HostBlock abort_;
  std::shared_ptr<DeviceWorld> abortOwner_;  // the world whose abort word this one shares
  std::map<std::tuple<int, int, int>, cuda::DeviceFifo> fifos_;
  std::vector<cuda::CuDevicePtr> allocations_;
  std::vector<void*> hostBlocks_;
  bool keepMemory_ = false;
};

}  // namespace weft::cuda
