#include "python/weft_torch/process_group.h"

#include <Python.h>

#include <cstring>
#include <stdexcept>

namespace weft_torch {
namespace {

// The store key under which rank 0 publishes the communicator's unique id. The store torch
// hands a backend is already prefixed with the group's name, so one key per group suffices.
constexpr const char* kUniqueIdKey = "weft/unique_id";

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "weft: ", what, ": the tensor is undefined");
  TORCH_CHECK(t.device().is_cpu(), "weft: ", what, " supports CPU tensors only, got one on ",
              t.device());
  TORCH_CHECK(t.layout() == c10::kStrided, "weft: ", what,
              " supports dense (strided) tensors only, got layout ", t.layout());
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "weft: ", what, " takes exactly one tensor per process, got ",
              tensors.size());
  checkTensor(tensors[0], what);
  return tensors[0];
}

void checkList(const std::vector<at::Tensor>& list, size_t count, const at::Tensor& like,
               const char* what) {
  TORCH_CHECK(list.size() == count, "weft: ", what, " expects a list of ", count,
              " tensors (one per rank), got ", list.size());
  for (const auto& t : list) {
    checkTensor(t, what);
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "weft: ", what,
                ": every tensor of the list must have ", like.numel(), " elements of type ",
                like.scalar_type(), ", got ", t.numel(), " of ", t.scalar_type());
  }
}

size_t bytesOf(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// Weft moves contiguous memory: a non-contiguous tensor travels as a contiguous copy, and a
// result lands in one and is copied back when the operation completes.
at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// The tensors of `list`, flattened one after the other into one new contiguous buffer.
at::Tensor concatenated(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const auto& t : list) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// c10d::ReduceOp's names, indexed by RedOpType.
constexpr const char* kReduceOpNames[] = {"SUM",  "AVG", "PRODUCT", "MIN",        "MAX",
                                          "BAND", "BOR", "BXOR",    "PREMUL_SUM", "UNUSED"};

const char* opName(c10d::ReduceOp::RedOpType op) {
  return op <= c10d::ReduceOp::UNUSED ? kReduceOpNames[op] : "unknown";
}

// How NCCL reduces a tensor: its element type, the operation, and the element count.
struct Reduction {
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
};

Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& reduceOp, const char* what) {
  const auto red = reduceOp.op_;
  Reduction r{ncclFloat32, ncclSum, static_cast<size_t>(t.numel())};
  switch (red) {
    case c10d::ReduceOp::SUM:
      r.op = ncclSum;
      break;
    case c10d::ReduceOp::AVG:
      r.op = ncclAvg;
      break;
    case c10d::ReduceOp::PRODUCT:
      r.op = ncclProd;
      break;
    case c10d::ReduceOp::MIN:
      r.op = ncclMin;
      break;
    case c10d::ReduceOp::MAX:
      r.op = ncclMax;
      break;
    default:
      TORCH_CHECK(false, "weft: ", what, ": ReduceOp.", opName(red),
                  " is not supported (SUM, AVG, PRODUCT, MIN and MAX are)");
  }
  switch (t.scalar_type()) {
    case at::kChar:
      r.type = ncclInt8;
      break;
    case at::kByte:
      r.type = ncclUint8;
      break;
    case at::kInt:
      r.type = ncclInt32;
      break;
    case at::kLong:
      r.type = ncclInt64;
      break;
    case at::kHalf:
      r.type = ncclFloat16;
      break;
    case at::kBFloat16:
      r.type = ncclBfloat16;
      break;
    case at::kFloat:
      r.type = ncclFloat32;
      break;
    case at::kDouble:
      r.type = ncclFloat64;
      break;
    case at::kBool:
      // As ProcessGroupNCCL: a bool is a byte, SUM is a logical or and PRODUCT a logical and.
      TORCH_CHECK(red != c10d::ReduceOp::AVG, "weft: ", what,
                  ": ReduceOp.AVG has no meaning for bool");
      r.type = ncclUint8;
      if (red == c10d::ReduceOp::SUM) r.op = ncclMax;
      if (red == c10d::ReduceOp::PRODUCT) r.op = ncclMin;
      break;
    case at::kComplexFloat:
    case at::kComplexDouble:
      // A complex sum is the sum of its real and imaginary parts, reduced as pairs of reals.
      TORCH_CHECK(red == c10d::ReduceOp::SUM || red == c10d::ReduceOp::AVG, "weft: ", what,
                  ": complex tensors reduce with SUM or AVG only, got ", opName(red));
      r.type = t.scalar_type() == at::kComplexFloat ? ncclFloat32 : ncclFloat64;
      r.count *= 2;
      break;
    default:
      TORCH_CHECK(false, "weft: ", what, ": dtype ", t.scalar_type(),
                  " cannot be reduced (int8, uint8, int32, int64, float16, bfloat16, float32, "
                  "float64, bool and complex can)");
  }
  return r;
}

}  // namespace

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size), timeout_(timeout) {
  ncclUniqueId id;
  if (rank == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    TORCH_CHECK(result == ncclSuccess, "weft: ncclGetUniqueId failed: ", ncclGetErrorString(result),
                ": ", ncclGetLastError(nullptr));
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store->set(kUniqueIdKey, std::vector<uint8_t>(bytes, bytes + sizeof id));
  } else {
    const std::vector<uint8_t> bytes = store->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof id, "weft: the store holds a ", bytes.size(),
                "-byte unique id under '", kUniqueIdKey, "', expected ", sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  channel_ = std::make_shared<Channel>(id, rank, size);
  init();
}

ProcessGroupWeft::~ProcessGroupWeft() {
  // The channel completes its queued works before it goes; a completion may run a Python comm
  // hook that needs the GIL, so a Python caller lets go of it meanwhile.
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState* state = PyEval_SaveThread();
    channel_.reset();
    PyEval_RestoreThread(state);
  } else {
    channel_.reset();
  }
}

c10::intrusive_ptr<ProcessGroupWeft> ProcessGroupWeft::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<ProcessGroupWeft>(
      store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

c10::intrusive_ptr<WeftWork> ProcessGroupWeft::makeWork(c10d::OpType type,
                                                        std::vector<at::Tensor> outputs,
                                                        std::chrono::milliseconds requested) {
  const auto limit = requested == c10d::kUnsetTimeout ? timeout_ : requested;
  return c10::make_intrusive<WeftWork>(rank_, type, channel_, std::move(outputs), limit);
}

void ProcessGroupWeft::startCoalescing() { channel_->beginGroup(); }

void ProcessGroupWeft::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  channel_->endGroup();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "weft: broadcast: root ", root, " is not a rank");
  at::Tensor buf = dense(t);
  auto work = makeWork(c10d::OpType::BROADCAST, tensors, opts.timeout);
  if (!buf.is_same(t)) work->setFinisher([t, buf]() mutable { t.copy_(buf); });
  work->keepAlive({buf});
  channel_->launch(work, "broadcast", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buf.data_ptr(), buf.data_ptr(), bytesOf(buf), ncclUint8, root, comm,
                         stream);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "allreduce");
  const Reduction r = reduction(t, opts.reduceOp, "allreduce");
  at::Tensor buf = dense(t);
  auto work = makeWork(c10d::OpType::ALLREDUCE, tensors, opts.timeout);
  if (!buf.is_same(t)) work->setFinisher([t, buf]() mutable { t.copy_(buf); });
  work->keepAlive({buf});
  channel_->launch(work, "allreduce", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(buf.data_ptr(), buf.data_ptr(), r.count, r.type, r.op, comm, stream);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "weft: reduce: root ", root, " is not a rank");
  const Reduction r = reduction(t, opts.reduceOp, "reduce");
  at::Tensor buf = dense(t);
  auto work = makeWork(c10d::OpType::REDUCE, tensors, opts.timeout);
  if (!buf.is_same(t) && rank_ == root) work->setFinisher([t, buf]() mutable { t.copy_(buf); });
  work->keepAlive({buf});
  channel_->launch(work, "reduce", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclReduce(buf.data_ptr(), buf.data_ptr(), r.count, r.type, r.op, root, comm, stream);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "weft: allgather takes one output list per process, got ",
              outputs.size());
  checkList(outputs[0], size_, in, "allgather");
  at::Tensor src = dense(in);
  // Every rank sends its input to every rank, each part straight into its output tensor: no
  // staging buffer to allocate and copy out of, which costs more than the exchange itself.
  std::vector<at::Tensor> recvs;
  for (const auto& out : outputs[0]) recvs.push_back(dense(out));
  auto work = makeWork(c10d::OpType::ALLGATHER, outputs[0], opts.timeout);
  work->setFinisher([outs = outputs[0], recvs]() mutable {
    for (size_t i = 0; i < outs.size(); ++i)
      if (!recvs[i].is_same(outs[i])) outs[i].copy_(recvs[i]);
  });
  return exchange(work, "allgather", std::vector<at::Tensor>(size_, src), std::move(recvs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  checkTensor(input, "_allgather_base");
  checkTensor(output, "_allgather_base");
  TORCH_CHECK(
      output.numel() == size_ * input.numel() && output.scalar_type() == input.scalar_type(),
      "weft: _allgather_base: the output must hold world_size (", size_, ") x ", input.numel(),
      " elements of ", input.scalar_type(), ", got ", output.numel(), " of ", output.scalar_type());
  at::Tensor src = dense(input);
  at::Tensor dst = dense(output);
  auto work = makeWork(c10d::OpType::_ALLGATHER_BASE, {output}, opts.timeout);
  if (!dst.is_same(output)) work->setFinisher([output, dst]() mutable { output.copy_(dst); });
  work->keepAlive({src, dst});
  channel_->launch(work, "_allgather_base", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllGather(src.data_ptr(), dst.data_ptr(), bytesOf(src), ncclUint8, comm, stream);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "weft: gather: root ", root, " is not a rank");
  // Each rank sends its input to the root, which receives every part straight into its list.
  std::vector<at::Tensor> sends(size_), recvs(size_), results;
  sends[root] = dense(in);
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1, "weft: gather: the root takes one output list, got ",
                outputs.size());
    checkList(outputs[0], size_, in, "gather");
    results = outputs[0];
    for (int peer = 0; peer < size_; ++peer) recvs[peer] = dense(results[peer]);
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "weft: gather: only the root passes output tensors");
  }
  auto work = makeWork(c10d::OpType::GATHER, results, opts.timeout);
  work->setFinisher([results, recvs]() mutable {
    for (size_t i = 0; i < results.size(); ++i)
      if (!recvs[i].is_same(results[i])) results[i].copy_(recvs[i]);
  });
  return exchange(work, "gather", std::move(sends), std::move(recvs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "weft: scatter: root ", root, " is not a rank");
  // The root sends every rank its part straight from its list; each rank receives its own.
  std::vector<at::Tensor> sends(size_), recvs(size_);
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1, "weft: scatter: the root takes one input list, got ",
                inputs.size());
    checkList(inputs[0], size_, out, "scatter");
    for (int peer = 0; peer < size_; ++peer) sends[peer] = dense(inputs[0][peer]);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "weft: scatter: only the root passes input tensors");
  }
  at::Tensor dst = dense(out);
  recvs[root] = dst;
  auto work = makeWork(c10d::OpType::SCATTER, outputs, opts.timeout);
  if (!dst.is_same(out)) work->setFinisher([out, dst]() mutable { out.copy_(dst); });
  return exchange(work, "scatter", std::move(sends), std::move(recvs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "weft: reduce_scatter takes one input list per process, got ",
              inputs.size());
  checkList(inputs[0], size_, out, "reduce_scatter");
  const Reduction r = reduction(out, opts.reduceOp, "reduce_scatter");
  at::Tensor flat = concatenated(inputs[0]);
  at::Tensor dst = dense(out);
  auto work = makeWork(c10d::OpType::REDUCE_SCATTER, outputs, opts.timeout);
  if (!dst.is_same(out)) work->setFinisher([out, dst]() mutable { out.copy_(dst); });
  work->keepAlive({flat, dst});
  channel_->launch(work, "reduce_scatter", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclReduceScatter(flat.data_ptr(), dst.data_ptr(), r.count, r.type, r.op, comm, stream);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "_reduce_scatter_base");
  checkTensor(output, "_reduce_scatter_base");
  TORCH_CHECK(
      input.numel() == size_ * output.numel() && output.scalar_type() == input.scalar_type(),
      "weft: _reduce_scatter_base: the input must hold world_size (", size_, ") x ", output.numel(),
      " elements of ", output.scalar_type(), ", got ", input.numel(), " of ", input.scalar_type());
  const Reduction r = reduction(output, opts.reduceOp, "_reduce_scatter_base");
  at::Tensor src = dense(input);
  at::Tensor dst = dense(output);
  auto work = makeWork(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, opts.timeout);
  if (!dst.is_same(output)) work->setFinisher([output, dst]() mutable { output.copy_(dst); });
  work->keepAlive({src, dst});
  channel_->launch(work, "_reduce_scatter_base", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclReduceScatter(src.data_ptr(), dst.data_ptr(), r.count, r.type, r.op, comm, stream);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::exchange(c10::intrusive_ptr<WeftWork> work,
                                                          const char* what,
                                                          std::vector<at::Tensor> sends,
                                                          std::vector<at::Tensor> recvs) {
  std::vector<at::Tensor> alive = sends;
  alive.insert(alive.end(), recvs.begin(), recvs.end());
  work->keepAlive(std::move(alive));
  channel_->launch(work, what, [&](ncclComm_t comm, cudaStream_t stream) {
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return first;
    for (int peer = 0; peer < size_; ++peer) {
      ncclResult_t result = ncclSuccess;
      if (sends[peer].defined() && bytesOf(sends[peer]) > 0)
        result =
            ncclSend(sends[peer].data_ptr(), bytesOf(sends[peer]), ncclUint8, peer, comm, stream);
      if (first == ncclSuccess) first = result;
      if (recvs[peer].defined() && bytesOf(recvs[peer]) > 0)
        result =
            ncclRecv(recvs[peer].data_ptr(), bytesOf(recvs[peer]), ncclUint8, peer, comm, stream);
      if (first == ncclSuccess) first = result;
    }
    const ncclResult_t end = ncclGroupEnd();
    return first != ncclSuccess ? first : end;
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall_base(at::Tensor& output,
                                                               at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions& opts) {
  checkTensor(input, "alltoall_base");
  checkTensor(output, "alltoall_base");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "weft: alltoall_base: input is ",
              input.scalar_type(), " but output is ", output.scalar_type());
  at::Tensor src = dense(input);
  at::Tensor dst = dense(output);
  auto work = makeWork(c10d::OpType::ALLTOALL_BASE, {output}, opts.timeout);
  if (!dst.is_same(output)) work->setFinisher([output, dst]() mutable { output.copy_(dst); });
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0,
                "weft: alltoall_base: input and output need the same number of elements, a "
                "multiple of world_size (",
                size_, "); got ", input.numel(), " and ", output.numel());
    work->keepAlive({src, dst});
    channel_->launch(work, "alltoall_base", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAlltoAll(src.data_ptr(), dst.data_ptr(), bytesOf(src) / size_, ncclUint8, comm,
                          stream);
    });
    return work;
  }
  // Uneven splits count rows of dimension 0, one entry per rank (empty: equal parts).
  auto parts = [this](const at::Tensor& t, const std::vector<int64_t>& splits, const char* side) {
    TORCH_CHECK(t.dim() > 0, "weft: alltoall_base: the ", side, " tensor is a scalar");
    std::vector<int64_t> rows = splits;
    if (rows.empty()) {
      TORCH_CHECK(t.size(0) % size_ == 0, "weft: alltoall_base: ", t.size(0), " ", side,
                  " rows do not split into ", size_, " equal parts");
      rows.assign(size_, t.size(0) / size_);
    }
    TORCH_CHECK(rows.size() == static_cast<size_t>(size_), "weft: alltoall_base: ", side,
                "_split_sizes has ", rows.size(), " entries for ", size_, " ranks");
    std::vector<at::Tensor> slices;
    int64_t offset = 0;
    for (int64_t n : rows) {
      TORCH_CHECK(n >= 0 && offset + n <= t.size(0), "weft: alltoall_base: ", side,
                  "_split_sizes exceed the tensor's ", t.size(0), " rows");
      slices.push_back(t.narrow(0, offset, n));
      offset += n;
    }
    TORCH_CHECK(offset == t.size(0), "weft: alltoall_base: ", side, "_split_sizes sum to ", offset,
                ", the tensor has ", t.size(0), " rows");
    return slices;
  };
  return exchange(work, "alltoall_base", parts(src, inputSplits, "input"),
                  parts(dst, outputSplits, "output"));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(
      inputs.size() == static_cast<size_t>(size_) && outputs.size() == static_cast<size_t>(size_),
      "weft: alltoall takes one input and one output tensor per rank (", size_, "), got ",
      inputs.size(), " and ", outputs.size());
  std::vector<at::Tensor> sends, recvs;
  for (int peer = 0; peer < size_; ++peer) {
    checkTensor(inputs[peer], "alltoall");
    checkTensor(outputs[peer], "alltoall");
    TORCH_CHECK(inputs[peer].scalar_type() == outputs[peer].scalar_type(),
                "weft: alltoall: inputs and outputs must have one dtype");
    sends.push_back(dense(inputs[peer]));
    recvs.push_back(dense(outputs[peer]));
  }
  auto work = makeWork(c10d::OpType::ALLTOALL, outputs, opts.timeout);
  work->setFinisher([outputs, recvs]() mutable {
    for (size_t i = 0; i < outputs.size(); ++i)
      if (!recvs[i].is_same(outputs[i])) outputs[i].copy_(recvs[i]);
  });
  return exchange(work, "alltoall", std::move(sends), std::move(recvs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                      int tag) {
  const at::Tensor& t = single(tensors, "send");
  TORCH_CHECK(dstRank >= 0 && dstRank < size_, "weft: send: ", dstRank, " is not a rank");
  at::Tensor src = dense(t);
  auto work = makeWork(c10d::OpType::SEND, tensors, c10d::kUnsetTimeout);
  work->keepAlive({src});
  channel_->launch(work, "send", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclSend(src.data_ptr(), bytesOf(src), ncclUint8, dstRank, comm, stream);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                      int tag) {
  const at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK(srcRank >= 0 && srcRank < size_, "weft: recv: ", srcRank, " is not a rank");
  at::Tensor dst = dense(t);
  auto work = makeWork(c10d::OpType::RECV, tensors, c10d::kUnsetTimeout);
  if (!dst.is_same(t)) work->setFinisher([t, dst]() mutable { t.copy_(dst); });
  work->keepAlive({dst});
  channel_->launch(work, "recv", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclRecv(dst.data_ptr(), bytesOf(dst), ncclUint8, srcRank, comm, stream);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::barrier(const c10d::BarrierOptions& opts) {
  // An allreduce of one byte: no rank leaves before every rank has arrived.
  at::Tensor token = at::zeros({1}, at::kByte);
  auto work = makeWork(c10d::OpType::BARRIER, {}, opts.timeout);
  work->keepAlive({token});
  channel_->launch(work, "barrier", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(token.data_ptr(), token.data_ptr(), 1, ncclUint8, ncclSum, comm, stream);
  });
  return work;
}

}  // namespace weft_torch
