// One optimizer step of a pipeline-parallel run on its own (no dp or tp): the schedule over the
// micro-batches, gradient clipping by the global norm across stages, AdamW on the stage's range.
// Test support: tests/trainers/pp_test.cc checks the pipeline alone with it; weft-train runs
// every layout through trainers/compose's GridTrainer, which sums the norm the same way.
//
// The global norm is the square root of the sum, in table order, of every tensor's
// grad_square_sum. Each stage computes its own tensors' sums; one all-reduce over the pipeline
// communicator of a vector with one slot per tensor (every slot has one non-zero contributor, so
// the sum is exact in any order) gives every rank all of them, and every rank adds them in table
// order: bitwise the norm that one process computes with tensorwise_square_sum over the whole
// buffer. The last stage's loss rides in one more slot of the same all-reduce.
#pragma once

#include <memory>
#include <vector>

#include "nccl.h"
#include "trainers/common/adamw.h"
#include "trainers/pp/schedule.h"

namespace weft::trainers {

// Sum over the table's tensors, in table order, of grad_square_sum of each: the squared global
// norm as the pipeline computes it.
template <typename T>
double tensorwise_square_sum(const TensorTable& table, const T* grads);

struct PipelineStepStats {
  double loss = 0.0;       // the global batch's mean loss (every rank)
  double grad_norm = 0.0;  // before clipping (every rank)
  double wait_seconds = 0.0;
  double step_seconds = 0.0;
  int peak_in_flight = 0;
};

template <typename T>
class PipelineTrainer {
 public:
  // stage and pp are not owned. The optimizer owns m and v of the stage's range.
  PipelineTrainer(PipelineStage<T>& stage, ncclComm_t pp, PipelineSchedule schedule,
                  const AdamWConfig& adamw);

  // Zeroes the stage's gradients, runs the schedule, clips and steps. Every rank of pp calls it
  // with the same micro-batch shapes.
  PipelineStepStats step(const std::vector<MicroBatch>& micros);

  AdamW<T>& optimizer() { return adamw_; }
  PipelineRunner<T>& runner() { return runner_; }

 private:
  PipelineStage<T>& stage_;
  ncclComm_t pp_;
  PipelineRunner<T> runner_;
  AdamW<T> adamw_;
  std::vector<double> reduced_;  // per tensor square sums, then the loss
};

}  // namespace weft::trainers
