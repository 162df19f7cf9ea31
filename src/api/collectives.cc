// Collectives, point-to-point, groups and reduction-op entry points.
#include <cstring>

#include "src/api/handle.h"
#include "src/common/datatype.h"
#include "src/core/group.h"
#include "src/cuda/memory_kind.h"
#include "src/exec/host_stream.h"

using namespace weft;
using plan::Collective;
using weft::api::guard;

namespace {

// Elements each rank's receive buffer spans, per NCCL's rules (for overflow checks).
uint64_t spanMultiplier(Collective c, int nranks) {
  switch (c) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAlltoAll:
    case Collective::kGather:
    case Collective::kScatter:
      return static_cast<uint64_t>(nranks);
    default:
      return 1;
  }
}

bool needsOp(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}

bool hasRoot(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

Status enqueue(core::Call& call, ncclComm_t comm, std::string* why) {
  core::Communicator* impl = api::communicator(comm);
  call.comm = impl;
  const int n = impl->size(), me = impl->rank();
  if (!isValid(call.type))
    fail(Status::kInvalidArgument,
         "invalid datatype " + std::to_string(static_cast<int>(call.type)));
  if (needsOp(call.coll) && !impl->validOp(call.op, call.type, why))
    return Status::kInvalidArgument;
  if ((hasRoot(call.coll) || call.coll == Collective::kSendRecv) &&
      (call.root < 0 || call.root >= n))
    fail(Status::kInvalidArgument,
         std::string(call.coll == Collective::kSendRecv ? "peer " : "root ") +
             std::to_string(call.root) + " out of range [0, " + std::to_string(n) + ")");
  const uint64_t es = dataTypeSize(call.type);
  const uint64_t span = spanMultiplier(call.coll, n);
  uint64_t bytes = 0;  // overflow builtins, not divisions: every call pays this check
  if (__builtin_mul_overflow(call.count, es * span, &bytes) ||
      bytes > (uint64_t(1) << 48))  // beyond any x86-64 / arm64 user address space
    fail(Status::kInvalidArgument,
         "count " + std::to_string(call.count) + " overflows the buffer size");
  // Which buffers this rank reads / writes, so NULL is caught only where it matters.
  const core::BufferUse use = core::bufferUse(call, me, n);
  const bool readsSend = use.readsSend, writesRecv = use.writesRecv;
  if (readsSend && !call.send) fail(Status::kInvalidArgument, "sendbuff is NULL");
  if (writesRecv && !call.recv) fail(Status::kInvalidArgument, "recvbuff is NULL");
  // Host or device memory, decided per call (src/cuda/memory_kind.h).
  const cuda::CallBuffer buffers[] = {{"sendbuff", readsSend ? call.send : nullptr},
                                      {"recvbuff", writesRecv ? call.recv : nullptr}};
  cuda::Route route;
  const bool hostStream = call.stream && exec::HostStream::isLive(call.stream);
  if (Status st = cuda::chooseRoute(cuda::driver(), buffers, call.stream, hostStream, &route, why);
      st != Status::kSuccess)
    return st;
  if (route.path == cuda::ExecPath::kDevice) {
    const std::string missing =
        cuda::missingEntryPoint(cuda::driver().api.get(), cuda::DriverFeature::kStaged);
    if (!missing.empty()) {
      *why = "the CUDA driver lacks " + missing + ", which calls on device memory need (GPU " +
             std::to_string(route.device) + ")";
      return Status::kInvalidUsage;
    }
    call.device = true;
  }
  if ((call.device ? impl->pollAsyncError() : impl->asyncError()) != Status::kSuccess) {
    *why = "communicator is in an error state: " + impl->lastError();
    return impl->asyncError();
  }
  return core::submit(call, why);
}

// The value a caller passed for an enum parameter, read as its bytes: a value outside the enum's
// range (an invalid datatype, say) is checked later, never loaded as the enum (undefined).
template <typename Enum>
int rawValue(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "NCCL's enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

ncclResult_t collective(const char* fn, Collective coll, const void* send, void* recv, size_t count,
                        ncclDataType_t datatype, int op, int root, ncclComm_t comm,
                        cudaStream_t stream, bool isSend = false) {
  const auto type = static_cast<DataType>(rawValue(datatype));
  const api::HandleUse use(comm);
  // A blocking call repeating the thread's last one goes straight through when it can complete
  // at once (core::repeatStraight): its arguments were checked then, and only the handle's
  // state can have changed since.
  core::Communicator* ready = stream || isSend ? nullptr : api::readyCommunicator(comm);
  if (ready) {
    Status st;
    if (core::repeatStraight(core::Call{.comm = ready,
                                        .coll = coll,
                                        .send = send,
                                        .recv = recv,
                                        .count = count,
                                        .type = type,
                                        .op = op,
                                        .root = root},
                             &st))
      return st == Status::kSuccess ? ncclSuccess : guard(fn, [&](std::string* why) {
        *why = ready->lastError();
        return st;
      });
  }
  return guard(fn, [&](std::string* why) {
    core::Call c{.coll = coll,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .type = type,
                 .op = op,
                 .root = root,
                 .isSend = isSend,
                 .stream = stream};
    return enqueue(c, comm, why);
  });
}

}  // namespace

WEFT_API(ncclResult_t, ncclAllReduce,
         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)) {
  return collective("ncclAllReduce", Collective::kAllReduce, sendbuff, recvbuff, count, datatype,
                    op, 0, comm, stream);
}

WEFT_API(ncclResult_t, ncclReduce,
         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)) {
  return collective("ncclReduce", Collective::kReduce, sendbuff, recvbuff, count, datatype, op,
                    root, comm, stream);
}

WEFT_API(ncclResult_t, ncclBroadcast,
         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
          ncclComm_t comm, cudaStream_t stream)) {
  return collective("ncclBroadcast", Collective::kBroadcast, sendbuff, recvbuff, count, datatype, 0,
                    root, comm, stream);
}

WEFT_API(ncclResult_t, ncclBcast,
         (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          cudaStream_t stream)) {
  return collective("ncclBcast", Collective::kBroadcast, buff, buff, count, datatype, 0, root, comm,
                    stream);
}

WEFT_API(ncclResult_t, ncclReduceScatter,
         (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)) {
  return collective("ncclReduceScatter", Collective::kReduceScatter, sendbuff, recvbuff, recvcount,
                    datatype, op, 0, comm, stream);
}

WEFT_API(ncclResult_t, ncclAllGather,
         (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream)) {
  return collective("ncclAllGather", Collective::kAllGather, sendbuff, recvbuff, sendcount,
                    datatype, 0, 0, comm, stream);
}

WEFT_API(ncclResult_t, ncclAlltoAll,
         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream)) {
  return collective("ncclAlltoAll", Collective::kAlltoAll, sendbuff, recvbuff, count, datatype, 0,
                    0, comm, stream);
}

WEFT_API(ncclResult_t, ncclGather,
         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
          ncclComm_t comm, cudaStream_t stream)) {
  return collective("ncclGather", Collective::kGather, sendbuff, recvbuff, count, datatype, 0, root,
                    comm, stream);
}

WEFT_API(ncclResult_t, ncclScatter,
         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
          ncclComm_t comm, cudaStream_t stream)) {
  return collective("ncclScatter", Collective::kScatter, sendbuff, recvbuff, count, datatype, 0,
                    root, comm, stream);
}

WEFT_API(ncclResult_t, ncclSend,
         (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          cudaStream_t stream)) {
  return collective("ncclSend", Collective::kSendRecv, sendbuff, nullptr, count, datatype, 0, peer,
                    comm, stream, true);
}

WEFT_API(ncclResult_t, ncclRecv,
         (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          cudaStream_t stream)) {
  return collective("ncclRecv", Collective::kSendRecv, nullptr, recvbuff, count, datatype, 0, peer,
                    comm, stream, false);
}

WEFT_API(ncclResult_t, ncclGroupStart, ()) {
  return guard("ncclGroupStart", [&](std::string*) {
    core::groupStart();
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclGroupEnd, ()) {
  return guard("ncclGroupEnd", [&](std::string* why) { return core::groupEnd(why); });
}

WEFT_API(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo)) {
  return guard("ncclGroupSimulateEnd", [&](std::string* why) {
    // As NCCL: the struct must come from NCCL_SIM_INFO_INITIALIZER (size and magic).
    if (!simInfo) {
      *why = "ncclGroupSimulateEnd: simInfo must not be NULL";
      return Status::kInvalidArgument;
    }
    if (simInfo->magic != 0x74685283u || simInfo->size < sizeof(ncclSimInfo_t)) {
      *why = "ncclGroupSimulateEnd: simInfo was not set up with NCCL_SIM_INFO_INITIALIZER (size " +
             std::to_string(simInfo->size) + ", magic " + std::to_string(simInfo->magic) + ")";
      return Status::kInvalidArgument;
    }
    double us = 0;
    const Status st = core::groupSimulateEnd(&us, why);
    if (st == Status::kSuccess) simInfo->estimatedTime = static_cast<float>(us);
    return st;
  });
}

WEFT_API(ncclResult_t, ncclRedOpCreatePreMulSum,
         (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
          ncclComm_t comm)) {
  const api::HandleUse use(comm);
  return guard("ncclRedOpCreatePreMulSum", [&](std::string*) {
    core::Communicator* impl = api::communicator(comm);
    if (!op || !scalar) fail(Status::kInvalidArgument, "op and scalar must not be NULL");
    if (!isValid(static_cast<DataType>(datatype)))
      fail(Status::kInvalidArgument, "invalid datatype " + std::to_string(datatype));
    if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
      fail(Status::kInvalidArgument, "invalid scalar residence");
    // Host mode: a "device" scalar in host memory is read now, as a host one is.
    if (cuda::classifyPointer(cuda::driver().api.get(), scalar).kind == cuda::MemoryKind::kDevice)
      fail(Status::kInvalidUsage,
           "a PreMulSum scalar in device memory is not supported yet by Weft");
    *op = static_cast<ncclRedOp_t>(impl->createPreMulSum(scalar, static_cast<DataType>(datatype)));
    return Status::kSuccess;
  });
}

WEFT_API(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm)) {
  const api::HandleUse use(comm);
  return guard("ncclRedOpDestroy", [&](std::string*) {
    api::communicator(comm)->destroyOp(op);
    return Status::kSuccess;
  });
}
