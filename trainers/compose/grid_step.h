// One optimizer step of a dp x tp x pp run (trainers/parallel/grid.h): whatever produces the
// rank's gradients (a pipeline schedule over a stage, plain or tensor parallel; a data-parallel
// MLP's forward and backward), then
//
//   1. the tensor-parallel fix-up of replicated gradients (sequence parallelism leaves them
//      partial: TpGpt::reduce_replicated_grads);
//   2. data parallelism over Grid::dp() (trainers/dp/data_parallel.h, the stage's layers only):
//      gradient buckets reduce-scattered on a Weft host stream while backward runs (queued by
//      the stage's layer hooks once the last micro-batch's backward has finished the bucket;
//      all after backward with --overlap 0, or under sequence parallelism, whose fix-up of step 1
//      must come first), each dp rank owning one slice of every layer. ZeRO-0 all-gathers the
//      sums back; ZeRO-1 keeps AdamW's moments for the owned slices, ZeRO-2 also the summed
//      gradients only, ZeRO-3 also the parameters only, gathering a layer over dp just before
//      each forward or backward that uses it (every micro-batch) and freeing it after;
//   3. the clipping norm: one all-reduce over the world communicator of a vector with a slot per
//      tensor of the table (every rank's table has the model's tensors in the same order) and one
//      for the loss. A rank puts into slot i the square sum of the part of tensor i it answers
//      for: its owned slice of its stage's tensors, and replicated tensors only on tp rank 0, so
//      every element of the model counts once. Every rank adds the slots in table order;
//   4. clipping and AdamW on the owned slices (ZeRO-1/2: then the parameters are all-gathered
//      over dp) or the whole range (ZeRO-0).
//
// Every ZeRO stage reduces with the same calls and sums the same per-rank square sums, and AdamW
// is elementwise, so their parameters are bitwise equal to plain DP's. With one dp and one tp
// rank every slot has one contributor, so the norm is bitwise the one-process tensor-by-tensor
// square sum and a pipeline stays bitwise equal to one process accumulating its micro-batches.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "trainers/common/adamw.h"
#include "trainers/common/layer_hooks.h"
#include "trainers/common/tensor_table.h"
#include "trainers/dp/data_parallel.h"
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
  // Installs (nullptr: removes) the hooks the model calls around each layer it runs.
  std::function<void(LayerHooks*)> set_layer_hooks;
};

// How the step reduces over dp: DataParallelConfig's zero_stage, bucket_bytes, overlap and
// microbatches (the layer range comes from the model).
using GridDataParallel = DataParallelConfig;

struct GridStepStats {
  double loss = 0;         // the global batch's mean loss (every rank)
  double grad_norm = 0;    // before clipping (every rank)
  double comm_s = 0;       // communication the computation did not hide: waits for the
                           // reductions, ZeRO gathers, the norm, pipeline neighbours
  double compute_s = 0;    // the rest of the step
  double optimizer_s = 0;  // of compute_s: clipping and AdamW
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
  // The model's buffers and the grid are not owned and must outlive the trainer; the model's
  // parameters must be initialised or loaded (ZeRO-3 keeps its shard of them), and its
  // gradients zero. Installs the data-parallel hooks with model.set_layer_hooks.
  GridTrainer(const LocalModel<T>& model, const Grid& grid, const AdamWConfig& adamw,
              const GridDataParallel& dp);
  ~GridTrainer();
  GridTrainer(const GridTrainer&) = delete;
  GridTrainer& operator=(const GridTrainer&) = delete;

  // Calls pass() to fill the gradients (the hooks reduce them as backward goes), reduces, clips
  // and steps. Collective over the whole grid.
  GridStepStats step(const std::function<LocalPass()>& pass);

  // The rank's part of whole-tensor gathers: the parameters and AdamW's m and v of the elements
  // it owns (its dp slice of its stage's layers) in its local flat layout (table->total()
  // elements; nothing else written). Over the dp ranks every element of the range is written once.
  void owned_state_to_flat(T* params, T* m, T* v) const;
  void owned_params_to_flat(T* params) const;
  // Loads the rank's part from whole local-layout buffers (parameters already in model.params).
  void load_state(const T* m, const T* v, int64_t steps);

  int64_t steps() const { return dp_->optimizer().steps(); }
  const AdamWConfig& adamw() const { return dp_->optimizer().config(); }
  int zero_stage() const { return dp_->config().zero_stage; }
  const LocalModel<T>& model() const { return model_; }
  // For layers run outside a pipeline stage (the MLP's step).
  LayerHooks& hooks() { return *dp_; }
  // The data-parallel engine (its bucket launch order, for tests and traces).
  const DataParallel<T>& data_parallel() const { return *dp_; }
  // Memory held against the ZeRO formulas (trainers/dp/memory.h), Psi = the stage's elements.
  MemoryReport memory() const { return dp_->memory(); }

 private:
  LocalModel<T> model_;
  const Grid& grid_;
  std::unique_ptr<DataParallel<T>> dp_;
  std::vector<double> reduced_;  // per tensor square sums, then the loss
};

}  // namespace weft::trainers
