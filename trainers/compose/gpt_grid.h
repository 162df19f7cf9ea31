// The rank's part of the GPT on a dp x tp x pp grid: its pipeline stage's layers (split_gpt_layers
// over Grid::pp()), tensor parallel over Grid::tp() when tp > 1 (TpGptStage, optionally sequence
// parallel) or whole tensors (GptStage), with what the composed step (grid_step.h) and the
// whole-tensor gathers (grid_state.h) need, and one step's forward and backward: the rank's dp
// share of the global batch in micro-batches through the pipeline schedule.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "trainers/common/data.h"
#include "trainers/common/gpt.h"
#include "trainers/compose/grid_state.h"
#include "trainers/compose/grid_step.h"
#include "trainers/parallel/grid.h"
#include "trainers/pp/schedule.h"

namespace weft::trainers {

template <typename T>
class GridGpt {
 public:
  // Collective over the grid's tp communicator. Throws std::invalid_argument for a layout the
  // model does not allow (more stages than blocks, tp not dividing the heads).
  GridGpt(const GptConfig& config, const Grid& grid, bool sequence_parallel);

  PipelineStage<T>& stage() { return *stage_; }
  const LocalModel<T>& local() const { return local_; }
  const WholeLayout<T>& layout() const { return layout_; }
  const TensorTable& whole_table() const { return whole_table_; }
  // Every tensor's initial values as Gpt<T>::initialize; the rank keeps its part. Before the
  // GridTrainer is made (ZeRO-3 takes its shard of the parameters then).
  void initialize(uint64_t seed) { initialize_(seed); }

  // The pass of one step for GridTrainer::step: this dp rank's rows of the global batch
  // [global_rows, seq] of `batches` at `step`, in `microbatches` micro-batches through the
  // schedule. global_rows must be a multiple of dp x microbatches.
  LocalPass forward_backward(const TextBatcher& batches, int64_t step, int global_rows, int seq,
                             int microbatches, PipelineSchedule schedule);

 private:
  const Grid& grid_;
  GptConfig config_;
  TensorTable whole_table_;
  std::unique_ptr<PipelineStage<T>> stage_;
  std::unique_ptr<PipelineRunner<T>> runner_;
  PipelineSchedule runner_schedule_ = PipelineSchedule::kOneFOneB;
  LocalModel<T> local_;
  WholeLayout<T> layout_;
  std::function<void(uint64_t)> initialize_;
  std::vector<int32_t> inputs_, targets_;
  std::vector<MicroBatch> micros_;
};

}  // namespace weft::trainers
