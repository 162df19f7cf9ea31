// Data parallelism over one rank's flat parameter and gradient buffers: plain DP with gradient
// buckets reduced while backward runs, and ZeRO stages 1, 2 and 3.
//
// The engine works on whatever a rank holds (a whole model, a tensor-parallel shard, a pipeline
// stage's layers): the flat buffers and their TensorTable, and the dp communicator of a Grid.
// The caller runs the model layer by layer and tells the engine around each layer:
//
//   before_forward(l) layer l forward  after_forward(l)     for the layers in forward order
//   before_backward(l) layer l backward after_backward(l)   in reverse order
//   finish_step()                                           clipping, AdamW, parameters ready
//
// Gradients (see shard_layout.h): when backward finishes the first layer of a bucket, the
// bucket is packed into its staging buffer and its reduce-scatter is queued on a Weft host
// stream, so it runs while earlier layers compute; plain DP queues an all-gather after it.
// finish_step waits for the stream. Every stage reduces with the same reduce-scatter calls, and
// the clipping norm is summed the same way (each rank's owned elements in layer order, then an
// all-reduce of the doubles), so ZeRO-1/2/3 give parameters bitwise equal to plain DP.
//
//   stage 0  full parameters, gradients and AdamW state; reduce-scatter + all-gather per bucket
//   stage 1  AdamW state for the shard only; the updated shard is all-gathered into the
//            parameters after the step
//   stage 2  also gradients: each bucket's pages of the full gradient buffer are given back once
//            packed, the reduced shard is kept
//   stage 3  also parameters: the shard is kept, a layer is all-gathered (on a second
//            communicator split from dp) just before its forward or backward and freed after
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "nccl.h"
#include "trainers/common/adamw.h"
#include "trainers/common/tensor_table.h"
#include "trainers/dp/memory.h"
#include "trainers/dp/shard_layout.h"

namespace weft::trainers {

struct DataParallelConfig {
  int zero_stage = 0;               // 0 (plain DP), 1, 2 or 3
  size_t bucket_bytes = 25u << 20;  // cap of one gradient bucket
  bool overlap = true;              // false: queue every bucket after backward
};

struct DataParallelStep {
  double grad_norm = 0;    // global norm before clipping
  double compute_s = 0;    // forward and backward between the hooks
  double comm_wait_s = 0;  // communication the compute did not hide: waits and gathers
  double optimizer_s = 0;  // clipping and AdamW
};

template <typename T>
class DataParallel {
 public:
  // params and grads: the rank's flat buffers (table.total() elements), which the model reads
  // and writes; every rank starts with the same parameters. Stages 2 and 3 give the pages they
  // do not hold back to the kernel (the buffers stay allocated and addressable).
  DataParallel(const DataParallelConfig& config, const AdamWConfig& adamw, const TensorTable& table,
               T* params, T* grads, ncclComm_t dp);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  void before_forward(int layer);
  void after_forward(int layer);
  void before_backward(int layer);
  void after_backward(int layer);
  // Waits for the gradient reductions, clips, steps AdamW, makes the parameters current
  // (stages 0-2: the full buffer; stage 3: the shard) and zeroes the gradients.
  DataParallelStep finish_step();

  // Sum over the dp ranks of a value (blocking; not between the first after_backward and
  // finish_step, while the stream owns the communicator).
  double sum_over_ranks(double value) const;
  // The whole current parameters into out (stage 3 gathers them; every rank must call).
  void gather_params(T* out);

  const ShardLayout& layout() const { return layout_; }
  const DataParallelConfig& config() const { return config_; }
  // Buckets in the order their reductions were queued during the last step, and how many layers
  // were still to run backward when each was queued.
  const std::vector<int>& launch_order() const { return launch_order_; }
  const std::vector<int>& layers_left_at_launch() const { return layers_left_at_launch_; }
  MemoryReport memory() const;
  const AdamW<T>& optimizer() const { return *optimizer_; }

 private:
  void gather_layer(int layer);
  void free_layer(int layer);
  void launch_bucket(int bucket);
  void mark_compute_start();

  DataParallelConfig config_;
  TensorTable table_;
  T* params_;
  T* grads_;
  ncclComm_t dp_;
  ncclComm_t gather_comm_ = nullptr;  // stage 3: layer gathers, off the stream's communicator
  cudaStream_t stream_ = nullptr;
  ShardLayout layout_;
  std::unique_ptr<AdamW<T>> optimizer_;
  std::vector<T> shard_params_;          // stage 3
  std::vector<T> shard_grads_;           // stages 2, 3 (stage 1: during finish_step only)
  std::vector<std::vector<T>> staging_;  // per bucket, during a step
  std::vector<T> gathered_;              // stage 3: one padded layer
  std::vector<bool> launched_;
  std::vector<int> launch_order_, layers_left_at_launch_;
  int layers_done_backward_ = 0;
  size_t transient_bytes_ = 0;
  // Timing of the current step.
  bool step_started_ = false;
  double step_start_ = 0, hook_s_ = 0, gather_s_ = 0;
};

}  // namespace weft::trainers
