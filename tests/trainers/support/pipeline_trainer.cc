#include "tests/trainers/support/pipeline_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "trainers/parallel/grid.h"

namespace weft::trainers {

template <typename T>
double tensorwise_square_sum(const TensorTable& table, const T* grads) {
  double sum = 0;
  for (const TensorInfo& t : table.tensors()) sum += grad_square_sum(grads + t.offset, t.size);
  return sum;
}

template <typename T>
PipelineTrainer<T>::PipelineTrainer(PipelineStage<T>& stage, ncclComm_t pp,
                                    PipelineSchedule schedule, const AdamWConfig& adamw)
    : stage_(stage),
      pp_(pp),
      runner_(stage, pp, schedule),
      adamw_(adamw, stage.table(), stage.range().first, stage.range().second) {}

template <typename T>
PipelineStepStats PipelineTrainer<T>::step(const std::vector<MicroBatch>& micros) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto [begin, end] = stage_.range();
  T* grads = stage_.grads().data();
  std::fill(grads + begin, grads + end, T(0));
  const PipelineRunStats run = runner_.run(micros);

  const auto& tensors = stage_.table().tensors();
  reduced_.assign(tensors.size() + 1, 0.0);
  const auto [first_tensor, end_tensor] = stage_.tensor_range();
  for (size_t i = first_tensor; i < end_tensor; ++i)
    reduced_[i] = grad_square_sum(grads + tensors[i].offset, tensors[i].size);
  if (stage_.is_last()) reduced_.back() = run.loss;
  const auto t0 = Clock::now();
  check_nccl(ncclAllReduce(reduced_.data(), reduced_.data(), reduced_.size(), ncclFloat64, ncclSum,
                           pp_, nullptr),
             "pipeline: all-reduce of the square sums", pp_);
  const double reduce_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  double square_sum = 0;
  for (size_t i = 0; i < tensors.size(); ++i) square_sum += reduced_[i];

  PipelineStepStats stats;
  stats.loss = reduced_.back();
  stats.grad_norm = std::sqrt(square_sum);
  scale_grads(grads + begin, end - begin,
              clip_coefficient(stats.grad_norm, adamw_.config().clip_norm));
  adamw_.step(stage_.params().data(), grads);
  stats.wait_seconds = run.wait_seconds + reduce_seconds;
  stats.peak_in_flight = run.peak_in_flight;
  stats.step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

template double tensorwise_square_sum<float>(const TensorTable&, const float*);
template double tensorwise_square_sum<double>(const TensorTable&, const double*);
template class PipelineTrainer<float>;
template class PipelineTrainer<double>;

}  // namespace weft::trainers
