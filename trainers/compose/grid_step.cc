#include "trainers/compose/grid_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace weft::trainers {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

template <typename T>
GridTrainer<T>::GridTrainer(const LocalModel<T>& model, const Grid& grid, const AdamWConfig& adamw,
                            const GridDataParallel& dp)
    : model_(model), grid_(grid) {
  if (!model_.counted.empty() && model_.counted.size() != model_.table->tensors().size())
    throw std::invalid_argument("GridTrainer: one counted flag per tensor");
  if (model_.counted.empty()) model_.counted.assign(model_.table->tensors().size(), true);
  const auto& tensors = model_.table->tensors();
  const auto [first, last] = model_.tensor_range;
  if (first >= last) throw std::invalid_argument("GridTrainer: the rank trains no tensor");
  GridDataParallel config = dp;
  config.first_layer = tensors[first].layer;
  config.last_layer = tensors[last - 1].layer;
  // Sequence parallelism's fix-up sums replicated gradients over tp before they may be reduced
  // over dp, so the buckets wait for the end of backward.
  if (model_.reduce_replicated) config.overlap = false;
  dp_ = std::make_unique<DataParallel<T>>(config, adamw, *model_.table, model_.params, model_.grads,
                                          grid.dp());
  if (dp_->layout().range() != model_.range)
    throw std::invalid_argument("GridTrainer: the range is not the layers' range");
  if (model_.set_layer_hooks) model_.set_layer_hooks(dp_.get());
}

template <typename T>
GridTrainer<T>::~GridTrainer() {
  if (model_.set_layer_hooks) model_.set_layer_hooks(nullptr);
}

template <typename T>
void GridTrainer<T>::owned_params_to_flat(T* params) const {
  dp_->owned_params_to_flat(params);
}

template <typename T>
void GridTrainer<T>::owned_state_to_flat(T* params, T* m, T* v) const {
  dp_->owned_params_to_flat(params);
  dp_->owned_moments_to_flat(m, v);
}

template <typename T>
void GridTrainer<T>::load_state(const T* m, const T* v, int64_t steps) {
  dp_->params_changed();
  dp_->moments_from_flat(m, v);
  dp_->optimizer().set_steps(steps);
}

template <typename T>
GridStepStats GridTrainer<T>::step(const std::function<LocalPass()>& pass) {
  const double start = now_s();
  const LocalPass local = pass();
  double comm = local.comm_s;

  double t0 = now_s();
  if (model_.reduce_replicated) model_.reduce_replicated();
  comm += now_s() - t0;
  DataParallelStep dp_step;
  dp_->reduce_gradients(dp_step);

  const auto& tensors = model_.table->tensors();
  reduced_.assign(tensors.size() + 1, 0.0);
  for (size_t i = model_.tensor_range.first; i < model_.tensor_range.second; ++i)
    if (model_.counted[i])
      reduced_[i] = dp_->owned_square_sum(tensors[i].offset, tensors[i].offset + tensors[i].size);
  reduced_.back() = local.loss_share;
  t0 = now_s();
  check_nccl(ncclAllReduce(reduced_.data(), reduced_.data(), reduced_.size(), ncclFloat64, ncclSum,
                           grid_.world(), nullptr),
             "all-reduce of the gradient norm", grid_.world());
  comm += now_s() - t0;
  double square_sum = 0;
  for (size_t i = 0; i < tensors.size(); ++i) square_sum += reduced_[i];

  GridStepStats stats;
  stats.loss = reduced_.back();
  stats.grad_norm = std::sqrt(square_sum);
  dp_->apply_update(clip_coefficient(stats.grad_norm, adamw().clip_norm), dp_step);
  // The data-parallel engine's waits: the reductions backward did not hide, ZeRO-3's layer
  // gathers, ZeRO-1/2's parameter all-gathers.
  stats.comm_s = comm + dp_step.comm_wait_s;
  stats.optimizer_s = dp_step.optimizer_s;
  stats.compute_s = now_s() - start - stats.comm_s;
  return stats;
}

template class GridTrainer<float>;
template class GridTrainer<double>;

}  // namespace weft::trainers
