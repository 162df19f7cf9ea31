// ProcessGroupWeft: the c10d::ProcessGroup (PyTorch 1.13) behind torch.distributed's "weft"
// backend. CPU tensors only; every operation is queued on the group's Weft host stream and
// returns a WeftWork at once.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "python/weft_torch/channel.h"

namespace weft_torch {

class ProcessGroupWeft : public c10d::ProcessGroup {
 public:
  // Rendezvous through `store` (the group's own c10d PrefixStore): rank 0 creates the unique id
  // and sets it; the others get it, waiting up to the store's timeout.
  ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupWeft() override;

  // The creator torch.distributed.Backend.register_backend calls: (store, rank, size, timeout).
  static c10::intrusive_ptr<ProcessGroupWeft> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                     int rank, int size,
                                                     const std::chrono::duration<float>& timeout);

  const std::string getBackendName() const override { return "weft"; }

  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& works) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // A new work for an operation whose results are `outputs`, with the operation's timeout
  // (`requested`, or the group's when unset).
  c10::intrusive_ptr<WeftWork> makeWork(c10d::OpType type, std::vector<at::Tensor> outputs,
                                        std::chrono::milliseconds requested);
  // One NCCL group of sends and receives: this rank sends `sends[p]` to and receives `recvs[p]`
  // from every rank p, itself included (undefined or empty tensors are skipped).
  c10::intrusive_ptr<c10d::Work> exchange(c10::intrusive_ptr<WeftWork> work, const char* what,
                                          std::vector<at::Tensor> sends,
                                          std::vector<at::Tensor> recvs);

  std::shared_ptr<Channel> channel_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace weft_torch
