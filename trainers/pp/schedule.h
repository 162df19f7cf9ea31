// Pipeline schedules and the runner that drives a stage through one.
//
// A schedule is, for each stage, the order of its micro-batch forwards (F) and backwards (B):
//
//   GPipe: F0 F1 ... F(m-1) B0 B1 ... B(m-1)         (every micro-batch in flight at once)
//   1F1B:  min(p-s-1, m) warm-up forwards, then alternately one forward and one backward, then
//          the remaining backwards (PipeDream-Flush / Megatron-LM): stage s holds at most p - s
//          micro-batches' activations.
//
// Both run each stage's backwards in micro-batch order, so a stage adds the micro-batches'
// gradient contributions in the same order as a single process accumulating them one by one.
//
// The runner moves activations forward and their gradients backward with ncclSend/ncclRecv
// over the pipeline communicator (rank = stage). After each operation it posts, in one group,
// the send of what the operation produced and the receive of what the next operation needs
// (Megatron's send_forward_recv_backward and send_backward_recv_forward), so neighbours that send
// to each other at the same time never wait on each other. Time spent in these groups is time
// the stage waits for its neighbours: the measured pipeline bubble.
#pragma once

#include <string>
#include <vector>

#include "nccl.h"
#include "trainers/pp/stage.h"

namespace weft::trainers {

enum class PipelineSchedule { kGPipe, kOneFOneB };

// "gpipe" or "1f1b"; throws std::invalid_argument on anything else.
PipelineSchedule parse_pipeline_schedule(const std::string& name);
const char* pipeline_schedule_name(PipelineSchedule schedule);

struct PipelineOp {
  enum Kind { kForward, kBackward };
  Kind kind = kForward;
  int micro = 0;
  bool operator==(const PipelineOp&) const = default;
};

// The operations of stage `stage` of `stages` over `micros` micro-batches, in order.
std::vector<PipelineOp> pipeline_ops(PipelineSchedule schedule, int stages, int stage, int micros);

// The idle fraction of an ideal pipeline with equal stages: (p - 1) / (m + p - 1).
double ideal_bubble_fraction(int stages, int micros);

struct PipelineRunStats {
  double loss = 0.0;          // the global batch's mean loss, on the last stage (0 elsewhere)
  double wait_seconds = 0.0;  // time in sends and receives: waiting for neighbours
  double run_seconds = 0.0;   // the whole schedule
  int peak_in_flight = 0;     // the most micro-batches held at once
};

template <typename T>
class PipelineRunner {
 public:
  // pp: the pipeline communicator (not owned); this rank is stage ncclCommUserRank(pp).
  PipelineRunner(PipelineStage<T>& stage, ncclComm_t pp, PipelineSchedule schedule);

  // Runs every micro-batch's forward and backward, adding the gradients into the stage's
  // grads(). Every rank of pp calls it with the same micro-batch shapes. Throws
  // std::runtime_error when a send or receive fails (NCCL's timeout included).
  PipelineRunStats run(const std::vector<MicroBatch>& micros);

  // The operations the last run executed, in order (for tests and traces).
  const std::vector<PipelineOp>& executed() const { return executed_; }
  int stage_index() const { return rank_; }
  int stages() const { return size_; }

 private:
  PipelineStage<T>& stage_;
  ncclComm_t pp_;
  PipelineSchedule schedule_;
  int rank_ = 0, size_ = 1;
  std::vector<std::vector<T>> inputs_;  // per micro-batch, received activations
  std::vector<T> output_grad_;          // the gradient received for the next backward
  std::vector<PipelineOp> executed_;
};

}  // namespace weft::trainers
