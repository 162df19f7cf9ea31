// The object behind ncclComm_t, and the guard every entry point runs its body in.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "nccl.h"
#include "src/common/error.h"
#include "src/common/log.h"
#include "src/core/communicator.h"

// Destroyed handles are marked dead and kept as tombstones for the next few hundred destroys
// (retireHandle), so a call on a destroyed communicator reads a tombstone and fails cleanly
// instead of touching freed memory.
struct ncclComm {
  static constexpr uint64_t kLive = 0x57454654434f4d4dull;  // "WEFTCOMM"
  static constexpr uint64_t kDead = 0x4445414444454144ull;
  std::atomic<uint64_t> magic{kLive};
  // Set by the one Destroy or Abort that frees the communicator; a second one (another thread's)
  // fails instead of freeing it twice.
  std::atomic<bool> closing{false};
  std::atomic<int> state{0};  // 0 ready, 1 initialising, 2 init failed
  // Atomic: ncclCommAbort clears it while another thread's call may be reading it (a watchdog
  // aborting a blocked collective).
  std::atomic<weft::core::Communicator*> impl{nullptr};
  // API calls of any thread between reading impl and returning (HandleUse): destroy clears impl
  // first and frees it only once none is left.
  std::atomic<int> inUse{0};
  weft::Status initStatus = weft::Status::kSuccess;
  std::string initError;
  std::thread initThread;  // non-blocking init
  // Non-blocking split / shrink jobs of children that still read this (parent) handle's
  // communicator; destroy waits for them.
  std::atomic<int> childJobs{0};
  // Non-blocking work on this communicator itself (a revoke waiting for calls to leave, the
  // exchange of a NCCL_SPLIT_NOCOLOR split): ncclCommGetAsyncError says ncclInProgress meanwhile.
  std::thread sideThread;
  std::atomic<bool> sideBusy{false};
  weft::Status sideStatus = weft::Status::kSuccess;  // written by sideThread before !sideBusy
  std::string sideError;
};

namespace weft::api {

#define WEFT_EXPORT extern "C" __attribute__((visibility("default")))
// Defines ncclX and its profiling twin pncclX (an alias of the same code).
#define WEFT_API(ret, name, params)                             \
  WEFT_EXPORT ret p##name params __attribute__((alias(#name))); \
  WEFT_EXPORT ret name params

inline ncclResult_t toResult(Status s) { return static_cast<ncclResult_t>(s); }

void setLastError(const std::string& message);
const char* lastErrorText();

// Runs `body` (returning Status), turning exceptions into codes and recording the message.
template <typename F>
ncclResult_t guard(const char* fn, F&& body) {
  std::string why;
  Status st;
  try {
    st = body(&why);
  } catch (const Error& e) {
    st = e.code();
    why = e.what();
  } catch (const std::bad_alloc&) {
    st = Status::kSystemError;
    why = "out of memory";
  } catch (const std::exception& e) {
    st = Status::kInternalError;
    why = e.what();
  }
  if (st != Status::kSuccess && st != Status::kInProgress) {
    std::string msg = std::string(fn) + ": " + why;
    setLastError(msg);
    WEFT_WARN(INIT, "%s", msg.c_str());
  }
  return toResult(st);
}

// Keeps a destroyed handle (marked dead, its communicator freed, its init thread joined) as a
// tombstone, and frees the oldest one kept once there are enough of them (retired_handles.cc).
void retireHandle(ncclComm* comm);

// Validates a handle and waits for a pending non-blocking init; throws on a bad handle.
core::Communicator* communicator(ncclComm_t comm);

// The communicator's settings from a user's ncclConfig_t over `base` (the environment's, or a
// parent's for split and shrink); a NULL config gives `base`. Throws on a malformed config.
core::CommConfig toConfig(const ncclConfig_t* config, const core::CommConfig& base);

// Builds handle->impl with `create`: at once when `blocking` (or collected by an open group and
// run at its End), else on the handle's own thread, returning kInProgress (the outcome then
// shows through ncclCommGetAsyncError). `create` may return null (the rank joins no
// communicator). On failure the handle records why and stays an invalid communicator.
Status startCommJob(ncclComm* handle, bool blocking,
                    std::function<core::Communicator*(std::string*)> create, std::string* why);

// Joins the handle's non-blocking jobs, and waits (bounded) for children's jobs that read it.
void settleJobs(ncclComm* handle);

// The communicator of a live, initialised handle, else nullptr: no wait, no throw (for paths
// that leave every other case to communicator()).
inline core::Communicator* readyCommunicator(ncclComm_t comm) {
  return comm && comm->magic.load(std::memory_order_relaxed) == ncclComm::kLive &&
                 comm->state.load(std::memory_order_relaxed) == 0
             ? comm->impl.load(std::memory_order_acquire)
             : nullptr;
}

// Marks an API call on `comm` in progress while it may read the communicator: ncclCommDestroy
// or Abort of another thread clears the handle's communicator, then waits for such calls to
// leave before freeing it (a call that starts after the clearing finds no communicator).
class HandleUse {
 public:
  explicit HandleUse(ncclComm_t comm)
      : comm_(comm && comm->magic.load(std::memory_order_relaxed) == ncclComm::kLive ? comm
                                                                                     : nullptr) {
    if (comm_) comm_->inUse.fetch_add(1);  // ordered before the call reads impl
  }
  ~HandleUse() {
    if (comm_) comm_->inUse.fetch_sub(1, std::memory_order_release);
  }
  HandleUse(const HandleUse&) = delete;
  HandleUse& operator=(const HandleUse&) = delete;

 private:
  ncclComm_t comm_;
};

}  // namespace weft::api
