// One optimizer step of a dp x tp x pp run (trainers/parallel/grid.h): whatever produces the
// rank's gradients (a pipeline schedule over a stage, plain or tensor parallel; a data-parallel
// MLP's forward and backward), then
//
//   1. the tensor-parallel fix-up of replicated gradients (sequence parallelism leaves them
//      partial: TpGpt::reduce_replicated_grads);
//   2. data parallelism over Grid::dp(): the rank's range (a stage's layers, TP shards) is
//      padded to a multiple of dp and reduce-scattered in place, so dp rank r holds the summed
//      chunk r; ZeRO-0 all-gathers the sums back, ZeRO-1 keeps AdamW's moments for the chunk only;
//   3. the clipping norm: one all-reduce over the world communicator of a vector with a slot per
//      tensor of the table (every rank's table has the model's tensors in the same order) and one
//      for the loss. A rank puts into slot i the square sum of the part of tensor i it answers
//      for: its dp chunk of its stage's range, and replicated tensors only on tp rank 0, so every
//      element of the model counts once. Every rank adds the slots in table order;
//   4. clipping and AdamW on the chunk (ZeRO-1, then an in-place all-gather of the parameters
//      over dp) or the whole range (ZeRO-0).
//
// ZeRO-0 and ZeRO-1 reduce with the same calls and sum the same per-rank square sums, and AdamW
// is elementwise, so their parameters are bitwise equal. With one dp and one tp rank every slot
// has one contributor, so the norm is bitwise the one-process tensorwise_square_sum
// (trainers/pp/pp_step.h) and a pipeline stays bitwise equal to one process accumulating its
// micro-batches.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "trainers/common/adamw.h"
#include "trainers/common/tensor_table.h"
#include "trainers/parallel/grid.h"

namespace weft::trainers {

// The rank's part of the model as the composed step sees it.
template <typename T>
struct LocalModel {
  const TensorTable* table = nullptr;  // the rank's flat buffers (whole model, or its TP shards)
  T* params = nullptr;
  T* grads = nullptr;
  std::pair<size_t, size_t> range;         // the elements this rank trains (its stage's layers)
  std::pair<size_t, size_t> tensor_range;  // the indices of the tensors in range
  // Per tensor of the table: whether its square sum counts on this rank (TP replicated tensors:
  // tp rank 0 only). Empty: every tensor counts.
  std::vector<bool> counted;
  // Run after the gradients are complete and before the dp reduction; may be empty.
  std::function<void()> reduce_replicated;
};

struct GridStepStats {
  double loss = 0;       // the global batch's mean loss (every rank)
  double grad_norm = 0;  // before clipping (every rank)
  double comm_s = 0;     // time in communication calls (and waiting for pipeline neighbours)
  double compute_s = 0;  // the rest of the step
};

// What the gradient producer reports: its share of the global mean loss (the loss slot adds
// them over the ranks, so a rank whose loss another rank also reports passes 0) and the time it
// spent communicating.
struct LocalPass {
  double loss_share = 0;
  double comm_s = 0;
};

template <typename T>
class GridTrainer {
 public:
  // zero_stage 0 or 1 (throws std::invalid_argument otherwise). The model's buffers and the
  // grid are not owned.
  GridTrainer(const LocalModel<T>& model, const Grid& grid, const AdamWConfig& adamw,
              int zero_stage);

  // Zeroes the range's gradients, calls pass() to fill them, reduces, clips and steps. Collective
  // over the whole grid.
  GridStepStats step(const std::function<LocalPass()>& pass);

  AdamW<T>& optimizer() { return *optimizer_; }
  const AdamW<T>& optimizer() const { return *optimizer_; }
  // The elements this rank's optimizer steps: [begin, end) of the flat buffer.
  std::pair<size_t, size_t> owned() const { return owned_; }
  int zero_stage() const { return zero_stage_; }
  const LocalModel<T>& model() const { return model_; }

 private:
  // In-place reduce-scatter (sum) of the range over dp; rank r's chunk lands in grads.
  void reduce_scatter_grads();
  // In-place all-gather over dp of every rank's chunk of `buffer`'s range.
  void all_gather_range(T* buffer);

  LocalModel<T> model_;
  const Grid& grid_;
  int zero_stage_;
  int dp_ = 1, dp_rank_ = 0;
  size_t chunk_ = 0;  // elements per dp rank, the range padded to a multiple of dp
  std::pair<size_t, size_t> owned_;
  std::unique_ptr<AdamW<T>> optimizer_;
  std::vector<T> staging_;       // dp * chunk_
  std::vector<double> reduced_;  // per tensor square sums, then the loss
};

}  // namespace weft::trainers
