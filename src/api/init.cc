// Communicator lifetime, identity and error queries.
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "src/api/handle.h"
#include "src/bootstrap/bootstrap.h"
#include "src/common/clock.h"
#include "src/common/env.h"
#include "src/core/group.h"
#include "src/cuda/rank_gpu.h"

namespace weft::api {

namespace {
std::mutex gErrMu;
std::string gLastError;

bootstrap::UniqueIdBytes toId(const ncclUniqueId& id) {
  bootstrap::UniqueIdBytes b;
  static_assert(sizeof(b.bytes) == sizeof(id.internal));
  std::memcpy(b.bytes, id.internal, sizeof(b.bytes));
  return b;
}

}  // namespace

core::CommConfig toConfig(const ncclConfig_t* config, const core::CommConfig& base) {
  core::CommConfig c = base;
  if (!config) return c;
  // Callers compiled against other headers pass their own struct size: read only what both know.
  ncclConfig_t local = NCCL_CONFIG_INITIALIZER;
  if (config->magic != 0xcafebeef)
    fail(Status::kInvalidArgument, "ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER");
  size_t n = std::min(config->size, sizeof(local));
  if (n < offsetof(ncclConfig_t, blocking))
    fail(Status::kInvalidArgument,
         "ncclConfig_t size " + std::to_string(config->size) + " is too small");
  std::memcpy(&local, config, n);
  if (local.blocking != NCCL_CONFIG_UNDEF_INT) c.blocking = local.blocking != 0;
  if (local.commName) c.name = local.commName;
  return c;
}

Status startCommJob(ncclComm* handle, bool blocking,
                    std::function<core::Communicator*(std::string*)> create, std::string* why) {
  handle->state = 1;
  auto job = [handle, create = std::move(create)](std::string* msg) {
    try {
      handle->impl = create(msg);
      if (!handle->impl) handle->magic.store(ncclComm::kDead);  // joined no communicator
      handle->state = 0;
      return Status::kSuccess;
    } catch (const Error& e) {
      handle->initStatus = e.code();
      handle->initError = e.what();
      *msg = e.what();
    } catch (const std::exception& e) {
      handle->initStatus = Status::kInternalError;
      handle->initError = e.what();
      *msg = e.what();
    }
    handle->state = 2;
    return handle->initStatus;
  };
  if (!blocking && core::groupDepth() == 0) {
    handle->initThread = std::thread([job] {
      std::string msg;
      job(&msg);
    });
    return Status::kInProgress;
  }
  return core::deferOrRun(job, why);
}

// How long destroy and abort wait for the non-blocking jobs of children that read a parent.
constexpr std::chrono::milliseconds kChildJobWait{30000};

void settleJobs(ncclComm* handle) {
  if (handle->initThread.joinable()) handle->initThread.join();
  if (handle->sideThread.joinable()) handle->sideThread.join();
  const Deadline deadline(kChildJobWait);
  while (handle->childJobs.load() > 0 && !deadline.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

namespace {

// `device`: the rank's GPU (ncclCommInitAll's devlist entry), -2 for the calling thread's.
Status initRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                const ncclConfig_t* config, std::string* why, int device = -2) {
  if (!out) fail(Status::kInvalidArgument, "comm pointer is NULL");
  if (nranks < 1)
    fail(Status::kInvalidArgument, "nranks must be >= 1, got " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    fail(Status::kInvalidArgument,
         "rank " + std::to_string(rank) + " out of range [0, " + std::to_string(nranks) + ")");
  core::CommConfig cfg = toConfig(config, core::configFromEnv());
  cuda::noteCudaDevice(&cfg, device);  // here: the init may run on another thread
  bootstrap::describe(toId(id));       // rejects a malformed id before anything starts
  auto* handle = new ncclComm;
  *out = handle;
  const bootstrap::UniqueIdBytes raw = toId(id);
  Status st = startCommJob(
      handle, cfg.blocking,
      [raw, rank, nranks, cfg](std::string*) {
        return new core::Communicator(raw, rank, nranks, cfg);
      },
      why);
  if (st != Status::kSuccess && st != Status::kInProgress) *out = nullptr;
  return st;
}

}  // namespace

void setLastError(const std::string& message) {
  std::lock_guard<std::mutex> lock(gErrMu);
  gLastError = message;
}

const char* lastErrorText() {
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(gErrMu);
  copy = gLastError;
  return copy.c_str();
}

core::Communicator* communicator(ncclComm_t comm) {
  if (!comm) fail(Status::kInvalidArgument, "communicator is NULL");
  uint64_t m = comm->magic.load();
  if (m == ncclComm::kDead) fail(Status::kInvalidArgument, "communicator was already destroyed");
  if (m != ncclComm::kLive) fail(Status::kInvalidArgument, "not a valid communicator");
  if (comm->state.load() == 1 && comm->initThread.joinable()) comm->initThread.join();
  if (comm->state.load() == 1)
    fail(Status::kInvalidUsage,
         "communicator is still being initialised (call ncclGroupEnd first)");
  if (comm->state.load() == 2)
    fail(comm->initStatus, "communicator failed to initialise: " + comm->initError);
  return comm->impl;
}

}  // namespace weft::api

using namespace weft;
using weft::api::guard;

WEFT_API(ncclResult_t, ncclGetVersion, (int* version)) {
  return guard("ncclGetVersion", [&](std::string*) {
    if (!version) fail(Status::kInvalidArgument, "version is NULL");
    *version = NCCL_VERSION_CODE;
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId)) {
  return guard("ncclGetUniqueId", [&](std::string*) {
    if (!uniqueId) fail(Status::kInvalidArgument, "uniqueId is NULL");
    bootstrap::UniqueIdBytes id = bootstrap::generateUniqueId(core::configFromEnv().tuning);
    std::memcpy(uniqueId->internal, id.bytes, sizeof(id.bytes));
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommInitRankConfig,
         (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config)) {
  return guard("ncclCommInitRankConfig", [&](std::string* why) {
    return api::initRank(comm, nranks, commId, rank, config, why);
  });
}

WEFT_API(ncclResult_t, ncclCommInitRank,
         (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank)) {
  return guard("ncclCommInitRank", [&](std::string* why) {
    return api::initRank(comm, nranks, commId, rank, nullptr, why);
  });
}

WEFT_API(ncclResult_t, ncclCommInitRankScalable,
         (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
          ncclConfig_t* config)) {
  return guard("ncclCommInitRankScalable", [&](std::string* why) {
    if (nId < 1 || !commIds) fail(Status::kInvalidArgument, "need at least one unique id");
    // Every rank meets at the first root; the others exist to spread load at very large scale.
    return api::initRank(newcomm, nranks, commIds[0], myrank, config, why);
  });
}

WEFT_API(ncclResult_t, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int* devlist)) {
  return guard("ncclCommInitAll", [&](std::string* why) {
    if (!comms) fail(Status::kInvalidArgument, "comms is NULL");
    if (ndev < 1) fail(Status::kInvalidArgument, "ndev must be >= 1, got " + std::to_string(ndev));
    ncclUniqueId id;
    bootstrap::UniqueIdBytes raw = bootstrap::generateUniqueId(core::configFromEnv().tuning);
    std::memcpy(id.internal, raw.bytes, sizeof(raw.bytes));
    core::groupStart();
    Status st = Status::kSuccess;
    for (int i = 0; i < ndev && st == Status::kSuccess; ++i)
      st = api::initRank(&comms[i], ndev, id, i, nullptr, why, devlist ? devlist[i] : -2);
    std::string endWhy;
    Status endSt = core::groupEnd(&endWhy);
    if (st != Status::kSuccess) return st;
    *why = endWhy;
    return endSt;
  });
}

WEFT_API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm)) {
  const api::HandleUse use(comm);
  return guard("ncclCommFinalize", [&](std::string*) {
    if (api::communicator(comm)->revoked())
      fail(Status::kInvalidUsage, "a revoked communicator cannot be finalized (destroy it)");
    return Status::kSuccess;  // all work is complete when blocking calls return
  });
}

// How long ncclCommAbort waits for another thread's call on the communicator to see the abort.
constexpr std::chrono::milliseconds kAbortWait{10000};

static Status destroyHandle(ncclComm_t comm, bool abortFirst) {
  if (!comm) fail(Status::kInvalidArgument, "communicator is NULL");
  if (comm->magic.load() != ncclComm::kLive)
    fail(Status::kInvalidArgument, "communicator was already destroyed or is invalid");
  if (comm->closing.exchange(true))
    fail(Status::kInvalidArgument, "communicator is being destroyed by another thread");
  // An abort first unblocks the jobs of children still exchanging over this bootstrap.
  core::Communicator* live = comm->state.load() == 0 ? comm->impl.load() : nullptr;
  if (abortFirst && live) live->abort();
  api::settleJobs(comm);
  comm->magic.store(ncclComm::kDead);
  core::Communicator* impl = comm->impl.exchange(nullptr);
  if (!impl) {
    api::retireHandle(comm);
    return Status::kSuccess;
  }
  if (abortFirst) impl->abort();
  // A call of another thread may still run on it (a watchdog aborting a blocked collective):
  // it sees the abort flag and returns within the executor's longest sleep; a destroy waits
  // for calls to finish as they would. What such a call uses is freed only once it has left,
  // and once every API call that may have read the communicator before it was cleared has.
  const auto wait = abortFirst ? kAbortWait : impl->tuning().timeout;
  const Deadline deadline(wait);
  while (comm->inUse.load() != 0 && !deadline.expired())
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  if (comm->inUse.load(std::memory_order_acquire) != 0 || !impl->waitForRuns(wait)) {
    WEFT_WARN(INIT, "%s: a call on rank %d still runs after %lld ms; its resources stay allocated",
              abortFirst ? "ncclCommAbort" : "ncclCommDestroy", impl->rank(),
              static_cast<long long>(wait.count()));
    return Status::kSuccess;
  }
  // A clean destroy first lets the peers read what this rank sent them (as NCCL's finalize
  // flushes): a peer may open the link only after this rank's last call has returned.
  if (!abortFirst && !impl->flushSends(impl->tuning().timeout))
    WEFT_WARN(INIT, "ncclCommDestroy: rank %d's peers left its messages unread for %lld ms",
              impl->rank(), static_cast<long long>(impl->tuning().timeout.count()));
  delete impl;
  api::retireHandle(comm);
  return Status::kSuccess;
}

WEFT_API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm)) {
  return guard("ncclCommDestroy", [&](std::string*) { return destroyHandle(comm, false); });
}

WEFT_API(ncclResult_t, ncclCommAbort, (ncclComm_t comm)) {
  return guard("ncclCommAbort", [&](std::string*) {
    if (!comm) return Status::kSuccess;  // NCCL accepts a NULL comm here
    return destroyHandle(comm, true);
  });
}

WEFT_API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count)) {
  const api::HandleUse use(comm);
  return guard("ncclCommCount", [&](std::string*) {
    if (!count) fail(Status::kInvalidArgument, "count is NULL");
    *count = api::communicator(comm)->size();
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank)) {
  const api::HandleUse use(comm);
  return guard("ncclCommUserRank", [&](std::string*) {
    if (!rank) fail(Status::kInvalidArgument, "rank is NULL");
    *rank = api::communicator(comm)->rank();
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device)) {
  const api::HandleUse use(comm);
  return guard("ncclCommCuDevice", [&](std::string*) {
    if (!device) fail(Status::kInvalidArgument, "device is NULL");
    api::communicator(comm);
    *device = -1;  // host-memory communicator: no CUDA device
    return Status::kSuccess;
  });
}

WEFT_API(const char*, ncclGetErrorString, (ncclResult_t result)) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the Weft developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

WEFT_API(const char*, ncclGetLastError, (ncclComm_t comm)) {
  const api::HandleUse use(comm);
  core::Communicator* impl = comm ? comm->impl.load() : nullptr;
  if (impl && comm->magic.load() == ncclComm::kLive) {
    static thread_local std::string copy;
    copy = impl->lastError();
    if (!copy.empty()) return copy.c_str();
  }
  return api::lastErrorText();
}

WEFT_API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError)) {
  const api::HandleUse use(comm);
  return guard("ncclCommGetAsyncError", [&](std::string*) {
    if (!asyncError) fail(Status::kInvalidArgument, "asyncError is NULL");
    if (!comm || comm->magic.load() != ncclComm::kLive)
      fail(Status::kInvalidArgument, "not a valid communicator");
    int state = comm->state.load();
    if (comm->sideBusy.load()) {
      *asyncError = ncclInProgress;
    } else if (state == 0 && comm->sideStatus != Status::kSuccess) {
      *asyncError = api::toResult(comm->sideStatus);
    } else if (state == 1) {
      *asyncError = ncclInProgress;
    } else if (state == 2) {
      *asyncError = api::toResult(comm->initStatus);
    } else {
      if (comm->initThread.joinable()) comm->initThread.join();
      *asyncError = api::toResult(comm->impl.load()->pollAsyncError());
    }
    return Status::kSuccess;
  });
}
