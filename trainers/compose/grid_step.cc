#include "trainers/compose/grid_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <type_traits>

namespace weft::trainers {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename T>
ncclDataType_t nccl_type() {
  return std::is_same_v<T, double> ? ncclFloat64 : ncclFloat32;
}

}  // namespace

template <typename T>
GridTrainer<T>::GridTrainer(const LocalModel<T>& model, const Grid& grid, const AdamWConfig& adamw,
                            int zero_stage)
    : model_(model), grid_(grid), zero_stage_(zero_stage) {
  if (zero_stage < 0 || zero_stage > 1)
    throw std::invalid_argument("the composed trainer runs ZeRO stage 0 or 1");
  if (!model_.counted.empty() && model_.counted.size() != model_.table->tensors().size())
    throw std::invalid_argument("GridTrainer: one counted flag per tensor");
  if (model_.counted.empty()) model_.counted.assign(model_.table->tensors().size(), true);
  dp_ = grid.shape().dp;
  dp_rank_ = grid.coords().dp_rank;
  const auto [begin, end] = model_.range;
  chunk_ = (end - begin + dp_ - 1) / dp_;
  owned_ = {std::min(end, begin + dp_rank_ * chunk_),
            std::min(end, begin + (dp_rank_ + 1) * chunk_)};
  const auto [lo, hi] = zero_stage == 1 ? owned_ : model_.range;
  optimizer_ = std::make_unique<AdamW<T>>(adamw, *model_.table, lo, hi);
}

template <typename T>
void GridTrainer<T>::reduce_scatter_grads() {
  const auto [begin, end] = model_.range;
  staging_.assign(chunk_ * dp_, T(0));
  std::copy(model_.grads + begin, model_.grads + end, staging_.begin());
  T* mine = staging_.data() + dp_rank_ * chunk_;
  check_nccl(ncclReduceScatter(staging_.data(), mine, chunk_, nccl_type<T>(), ncclSum, grid_.dp(),
                               nullptr),
             "data parallel: reduce-scatter of the gradients", grid_.dp());
  std::copy(mine, mine + (owned_.second - owned_.first), model_.grads + owned_.first);
}

template <typename T>
void GridTrainer<T>::all_gather_range(T* buffer) {
  const auto [begin, end] = model_.range;
  staging_.assign(chunk_ * dp_, T(0));
  T* mine = staging_.data() + dp_rank_ * chunk_;
  std::copy(buffer + owned_.first, buffer + owned_.second, mine);
  check_nccl(ncclAllGather(mine, staging_.data(), chunk_, nccl_type<T>(), grid_.dp(), nullptr),
             "data parallel: all-gather", grid_.dp());
  std::copy(staging_.begin(), staging_.begin() + (end - begin), buffer + begin);
}

template <typename T>
GridStepStats GridTrainer<T>::step(const std::function<LocalPass()>& pass) {
  const double start = now_s();
  const auto [begin, end] = model_.range;
  std::fill(model_.grads + begin, model_.grads + end, T(0));
  const LocalPass local = pass();
  double comm = local.comm_s;

  double t0 = now_s();
  if (model_.reduce_replicated) model_.reduce_replicated();
  if (dp_ > 1) {
    reduce_scatter_grads();
    if (zero_stage_ == 0) all_gather_range(model_.grads);
  }
  comm += now_s() - t0;

  const auto& tensors = model_.table->tensors();
  reduced_.assign(tensors.size() + 1, 0.0);
  for (size_t i = model_.tensor_range.first; i < model_.tensor_range.second; ++i) {
    if (!model_.counted[i]) continue;
    const size_t lo = std::max(owned_.first, tensors[i].offset);
    const size_t hi = std::min(owned_.second, tensors[i].offset + tensors[i].size);
    if (lo < hi) reduced_[i] = grad_square_sum(model_.grads + lo, hi - lo);
  }
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
  const double coefficient = clip_coefficient(stats.grad_norm, optimizer_->config().clip_norm);
  const size_t lo = optimizer_->begin(), hi = optimizer_->end();
  scale_grads(model_.grads + lo, hi - lo, coefficient);
  optimizer_->step(model_.params, model_.grads);
  if (zero_stage_ == 1 && dp_ > 1) {
    t0 = now_s();
    all_gather_range(model_.params);
    comm += now_s() - t0;
  }
  stats.comm_s = comm;
  stats.compute_s = now_s() - start - comm;
  return stats;
}

template class GridTrainer<float>;
template class GridTrainer<double>;

}  // namespace weft::trainers
