#include "trainers/pp/schedule.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "trainers/parallel/grid.h"

namespace weft::trainers {

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "1f1b") return PipelineSchedule::kOneFOneB;
  throw std::invalid_argument("pipeline schedule '" + name + "': gpipe or 1f1b");
}

const char* pipeline_schedule_name(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kGPipe ? "gpipe" : "1f1b";
}

std::vector<PipelineOp> pipeline_ops(PipelineSchedule schedule, int stages, int stage, int micros) {
  if (stages < 1 || stage < 0 || stage >= stages || micros < 1)
    throw std::invalid_argument("pipeline_ops: stage outside [0, stages) or no micro-batches");
  std::vector<PipelineOp> ops;
  auto forward = [&](int micro) { ops.push_back({PipelineOp::kForward, micro}); };
  auto backward = [&](int micro) { ops.push_back({PipelineOp::kBackward, micro}); };
  if (schedule == PipelineSchedule::kGPipe) {
    for (int i = 0; i < micros; ++i) forward(i);
    for (int i = 0; i < micros; ++i) backward(i);
    return ops;
  }
  // 1F1B: the stage runs ahead of the last one by its distance to it, then alternates.
  const int warmup = std::min(stages - stage - 1, micros);
  for (int i = 0; i < warmup; ++i) forward(i);
  for (int i = 0; i < micros - warmup; ++i) {
    forward(warmup + i);
    backward(i);
  }
  for (int i = micros - warmup; i < micros; ++i) backward(i);
  return ops;
}

double ideal_bubble_fraction(int stages, int micros) {
  return static_cast<double>(stages - 1) / (micros + stages - 1);
}

namespace {

// Up to one send and one receive, posted as one group; blocking (null stream).
template <typename T>
struct P2pGroup {
  const T* send = nullptr;
  int send_peer = -1;
  size_t send_count = 0;
  T* recv = nullptr;
  int recv_peer = -1;
  size_t recv_count = 0;

  bool empty() const { return send == nullptr && recv == nullptr; }
  void run(ncclComm_t comm) const {
    if (empty()) return;
    check_nccl(ncclGroupStart(), "pipeline: ncclGroupStart", comm);
    if (send)
      check_nccl(ncclSend(send, send_count, nccl_type<T>(), send_peer, comm, nullptr),
                 "pipeline: ncclSend", comm);
    if (recv)
      check_nccl(ncclRecv(recv, recv_count, nccl_type<T>(), recv_peer, comm, nullptr),
                 "pipeline: ncclRecv", comm);
    check_nccl(ncclGroupEnd(), "pipeline: ncclGroupEnd", comm);
  }
};

}  // namespace

template <typename T>
PipelineRunner<T>::PipelineRunner(PipelineStage<T>& stage, ncclComm_t pp, PipelineSchedule schedule)
    : stage_(stage), pp_(pp), schedule_(schedule) {
  rank_ = comm_rank(pp, "pipeline");
  size_ = comm_size(pp, "pipeline");
  if (stage.is_first() != (rank_ == 0) || stage.is_last() != (rank_ == size_ - 1))
    throw std::invalid_argument("pipeline: the stage's layers do not fit its rank " +
                                std::to_string(rank_) + " of " + std::to_string(size_));
}

template <typename T>
PipelineRunStats PipelineRunner<T>::run(const std::vector<MicroBatch>& micros) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const int m = static_cast<int>(micros.size());
  const std::vector<PipelineOp> ops = pipeline_ops(schedule_, size_, rank_, m);
  const int prev = rank_ - 1, next = rank_ + 1;
  const bool first = stage_.is_first(), last = stage_.is_last();
  inputs_.resize(m);
  for (int i = 0; i < m; ++i)
    if (!first) inputs_[i].resize(stage_.boundary_elements(micros[i]));
  executed_.clear();
  PipelineRunStats stats;

  // The receive the operation needs before it runs: its input activation, or its output's
  // gradient.
  auto add_recv = [&](const PipelineOp& op, P2pGroup<T>& group) {
    const size_t n = stage_.boundary_elements(micros[op.micro]);
    if (op.kind == PipelineOp::kForward && !first) {
      group.recv = inputs_[op.micro].data();
      group.recv_peer = prev;
      group.recv_count = n;
    } else if (op.kind == PipelineOp::kBackward && !last) {
      output_grad_.resize(n);
      group.recv = output_grad_.data();
      group.recv_peer = next;
      group.recv_count = n;
    }
  };
  auto communicate = [&](const P2pGroup<T>& group) {
    const auto t0 = Clock::now();
    group.run(pp_);
    stats.wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  };

  double loss_sum = 0;
  P2pGroup<T> group;
  add_recv(ops.front(), group);
  communicate(group);
  for (size_t k = 0; k < ops.size(); ++k) {
    const PipelineOp& op = ops[k];
    const MicroBatch& batch = micros[op.micro];
    group = P2pGroup<T>{};
    if (op.kind == PipelineOp::kForward) {
      const T* out = stage_.forward(op.micro, batch, first ? nullptr : inputs_[op.micro].data());
      if (last) loss_sum += stage_.micro_loss(op.micro);
      if (!last) {
        group.send = out;
        group.send_peer = next;
      }
    } else {
      const T* input_grad = stage_.backward(op.micro, batch, last ? nullptr : output_grad_.data());
      if (!first) {
        group.send = input_grad;
        group.send_peer = prev;
      }
    }
    stats.peak_in_flight = std::max(stats.peak_in_flight, stage_.in_flight());
    executed_.push_back(op);
    group.send_count = stage_.boundary_elements(batch);
    if (k + 1 < ops.size()) add_recv(ops[k + 1], group);
    communicate(group);
  }
  if (last) stats.loss = loss_sum / m;
  stats.run_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

template class PipelineRunner<float>;
template class PipelineRunner<double>;

}  // namespace weft::trainers
