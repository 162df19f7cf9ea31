// Memory allocation, buffer registration, windows and host streams.
#include <algorithm>
#include <cstring>
#include <string>

#include "src/api/handle.h"
#include "src/common/clock.h"
#include "src/cuda/memory.h"
#include "src/exec/executor.h"
#include "src/exec/host_stream.h"
#include "weft/weft.h"

using namespace weft;
using weft::api::guard;

WEFT_API(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size)) {
  return guard("ncclMemAlloc", [&](std::string*) {
    if (!ptr) fail(Status::kInvalidArgument, "ptr is NULL");
    *ptr = cuda::memAlloc(size);
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclMemFree, (void* ptr)) {
  return guard("ncclMemFree", [&](std::string*) {
    if (!ptr) return Status::kSuccess;
    cuda::memFree(ptr);
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommRegister,
         (const ncclComm_t comm, void* buff, size_t size, void** handle)) {
  const api::HandleUse use(comm);
  return guard("ncclCommRegister", [&](std::string*) {
    core::Communicator* impl = api::communicator(comm);
    if (!handle) fail(Status::kInvalidArgument, "handle is NULL");
    if (!buff && size > 0) fail(Status::kInvalidArgument, "buff is NULL");
    // Device buffers also get the descriptor peers map them with; host buffers keep the
    // communicator's record alone. The handle is the buffer either way.
    const bool device = cuda::registerDeviceBuffer(impl, cuda::driver().api.get(), buff, size);
    try {
      *handle = impl->registerBuffer(buff, size);
    } catch (...) {
      if (device) cuda::deregisterDeviceBuffer(impl, buff);
      throw;
    }
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle)) {
  const api::HandleUse use(comm);
  return guard("ncclCommDeregister", [&](std::string*) {
    core::Communicator* impl = api::communicator(comm);
    impl->deregisterBuffer(handle);
    cuda::deregisterDeviceBuffer(impl, handle);
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclCommWindowRegister,
         (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags)) {
  return guard("ncclCommWindowRegister", [&](std::string* why) {
    *why = "symmetric windows are not supported yet by Weft";
    return Status::kInvalidUsage;
  });
}

WEFT_API(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win)) {
  return guard("ncclCommWindowDeregister", [&](std::string* why) {
    *why = "symmetric windows are not supported yet by Weft";
    return Status::kInvalidUsage;
  });
}

WEFT_EXPORT const char* weftVersionString(void) { return "0.1.0"; }

WEFT_EXPORT uint64_t weftLandedSlices(void) { return exec::landedSlices(); }

WEFT_EXPORT uint64_t weftStraightCalls(ncclComm_t comm) {
  const api::HandleUse use(comm);
  core::Communicator* ready = api::readyCommunicator(comm);
  return ready ? ready->straightCalls() : 0;
}

WEFT_EXPORT size_t weftCommTuning(ncclComm_t comm, char* out, size_t bytes) {
  const api::HandleUse use(comm);
  core::Communicator* ready = api::readyCommunicator(comm);
  if (!ready) return 0;
  const std::string text = ready->tuning().describe();
  if (out && bytes > 0) {
    const size_t n = std::min(bytes - 1, text.size());
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return text.size();
}

static exec::HostStream* hostStream(cudaStream_t stream) {
  if (!stream || !exec::HostStream::isLive(stream))
    fail(Status::kInvalidArgument, "not a live Weft host stream");
  return reinterpret_cast<exec::HostStream*>(stream);
}

WEFT_EXPORT ncclResult_t weftStreamCreate(cudaStream_t* stream) {
  return guard("weftStreamCreate", [&](std::string*) {
    if (!stream) fail(Status::kInvalidArgument, "stream is NULL");
    // Tuning's defaults until a communicator's call brings its own (HostStream::enqueue).
    *stream = reinterpret_cast<cudaStream_t>(new exec::HostStream(Tuning{}));
    return Status::kSuccess;
  });
}

WEFT_EXPORT ncclResult_t weftStreamDestroy(cudaStream_t stream) {
  return guard("weftStreamDestroy", [&](std::string*) {
    delete hostStream(stream);
    return Status::kSuccess;
  });
}

WEFT_EXPORT ncclResult_t weftStreamSynchronize(cudaStream_t stream) {
  return guard("weftStreamSynchronize", [&](std::string* why) {
    // Each queued run has its own progress timeout; this bound only catches a wedged stream.
    return hostStream(stream)->synchronize(std::chrono::hours(24), why);
  });
}

WEFT_EXPORT ncclResult_t weftStreamQuery(cudaStream_t stream) {
  return guard("weftStreamQuery", [&](std::string*) {
    return hostStream(stream)->idle() ? Status::kSuccess : Status::kInProgress;
  });
}
