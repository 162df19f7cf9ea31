// Data parallelism over one rank's flat parameter and gradient buffers: plain DP with gradient
// buckets reduced while backward runs, and ZeRO stages 1, 2 and 3.
//
// The engine works on whatever a rank holds (a whole model, a tensor-parallel shard, a pipeline
// stage's layers): the flat buffers and their TensorTable, the layers it trains, and the dp
// communicator of a Grid. The caller runs the model layer by layer and tells the engine around
// each layer (LayerHooks, once per micro-batch):
//
//   before_forward(l) layer l forward  after_forward(l)     for the layers in forward order
//   before_backward(l) layer l backward after_backward(l)   in reverse order
//   finish_step()                                           clipping, AdamW, parameters ready
//
// finish_step is reduce_gradients(), the norm, apply_update(): a caller whose norm spans more
// than the dp group (the composed step, trainers/compose/grid_step.h) calls the three itself.
//
// Gradients (see shard_layout.h): when the last micro-batch's backward finishes the first layer
// of a bucket, the bucket is packed into its staging buffer and its reduce-scatter is queued on a
// Weft host stream, so it runs while earlier layers compute; plain DP queues an all-gather after
// it. reduce_gradients waits for the stream. Every stage reduces with the same reduce-scatter
// calls, and the clipping norm is summed the same way (each rank's owned elements, then an
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
#include "trainers/common/layer_hooks.h"
#include "trainers/common/tensor_table.h"
#include "trainers/dp/memory.h"
#include "trainers/dp/shard_layout.h"

namespace weft::trainers {

struct DataParallelConfig {
  int zero_stage = 0;               // 0 (plain DP), 1, 2 or 3
  size_t bucket_bytes = 25u << 20;  // cap of one gradient bucket
  bool overlap = true;              // false: queue every bucket after backward
  int microbatches = 1;             // backwards of each layer per step (a bucket is ready after
                                    // the last)
  int first_layer = 0, last_layer = -1;  // the table layers trained (-1: to the last)
};

struct DataParallelStep {
  double grad_norm = 0;    // global norm before clipping
  double compute_s = 0;    // forward and backward between the hooks
  double comm_wait_s = 0;  // communication the compute did not hide: waits and gathers
  double optimizer_s = 0;  // clipping and AdamW
};

template <typename T>
class DataParallel final : public LayerHooks {
 public:
  // params and grads: the rank's flat buffers (table.total() elements), which the model reads
  // and writes; every rank starts with the same parameters, and the gradients of the layers
  // trained with zeros. Stages 2 and 3 give the pages they do not hold back to the kernel (the
  // buffers stay allocated and addressable).
  DataParallel(const DataParallelConfig& config, const AdamWConfig& adamw, const TensorTable& table,
               T* params, T* grads, ncclComm_t dp);
  ~DataParallel() override;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  void before_forward(int layer) override;
  void after_forward(int layer) override;
  void before_backward(int layer) override;
  void after_backward(int layer) override;
  // Waits for the gradient reductions, clips, steps AdamW, makes the parameters current
  // (stages 0-2: the full buffer; stage 3: the shard) and zeroes the gradients.
  DataParallelStep finish_step();

  // finish_step in parts. reduce_gradients queues the buckets not queued yet and waits for all:
  // afterwards owned_square_sum reads the summed gradients of the owned elements (fills
  // compute_s and comm_wait_s). apply_update(coefficient) scales them by the clipping
  // coefficient, steps AdamW, makes the parameters current and zeroes the gradients (adds to
  // comm_wait_s, fills optimizer_s).
  void reduce_gradients(DataParallelStep& out);
  // Square sum of the summed gradients of the elements of [lo, hi) this rank owns; [lo, hi) lies
  // in one layer (a tensor).
  double owned_square_sum(size_t lo, size_t hi) const;
  void apply_update(double coefficient, DataParallelStep& out);

  // The parameters in the flat buffer were rewritten (initialised, loaded): stage 3 takes its
  // shard of them and gives the rest back.
  void params_changed();
  // The elements this rank owns (its slice of every layer), from whichever buffer holds them,
  // into `flat` (table.total() elements; nothing else is written): parameters, AdamW's m and v.
  // Over the dp ranks every element of the layers is written exactly once.
  void owned_params_to_flat(T* flat) const;
  void owned_moments_to_flat(T* m, T* v) const;
  // AdamW's m and v of the owned elements from whole-layout buffers (table.total() elements);
  // stage 0 takes the layers' whole range.
  void moments_from_flat(const T* m, const T* v);

  // Sum over the dp ranks of a value (blocking; not between the first after_backward and
  // finish_step, while the stream owns the communicator).
  double sum_over_ranks(double value) const;
  // The whole current parameters into out (stage 3 gathers its layers; every rank must call).
  void gather_params(T* out);

  const ShardLayout& layout() const { return layout_; }
  const DataParallelConfig& config() const { return config_; }
  // Buckets in the order their reductions were queued during the last step, and how many layers
  // were still to run backward when each was queued.
  const std::vector<int>& launch_order() const { return launch_order_; }
  const std::vector<int>& layers_left_at_launch() const { return layers_left_at_launch_; }
  MemoryReport memory() const;
  const AdamW<T>& optimizer() const { return *optimizer_; }
  AdamW<T>& optimizer() { return *optimizer_; }

 private:
  void gather_layer(int layer);
  void free_layer(int layer);
  void launch_bucket(int bucket);
  void mark_compute_start();
  // Zeroes the layers' range of a flat buffer and gives its pages back.
  void release_range(T* buffer);
  // The table layer of the tensor holding a flat element (-1: none).
  int table_layer_of(size_t element) const;

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
  std::vector<int> backwards_done_;  // per layer index, this step
  int layers_done_backward_ = 0;
  size_t transient_bytes_ = 0;
  size_t staged_bytes_ = 0;  // the staging buffers of the step being finished
  // Timing of the current step.
  bool step_started_ = false;
  double step_start_ = 0, hook_s_ = 0, gather_s_ = 0;
};

}  // namespace weft::trainers
