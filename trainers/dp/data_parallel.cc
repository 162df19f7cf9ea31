#include "trainers/dp/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "trainers/parallel/grid.h"
#include "weft/weft.h"

namespace weft::trainers {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename T>
size_t vector_bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

template <typename T>
void free_vector(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace

template <typename T>
DataParallel<T>::DataParallel(const DataParallelConfig& config, const AdamWConfig& adamw,
                              const TensorTable& table, T* params, T* grads, ncclComm_t dp)
    : config_(config),
      table_(table),
      params_(params),
      grads_(grads),
      dp_(dp),
      layout_(table, comm_size(dp, "dp"), comm_rank(dp, "dp"), config.bucket_bytes, sizeof(T),
              config.first_layer, config.last_layer) {
  if (config.zero_stage < 0 || config.zero_stage > 3)
    throw std::invalid_argument("dp: ZeRO stage must be 0, 1, 2 or 3");
  if (config.microbatches < 1) throw std::invalid_argument("dp: micro-batches must be >= 1");
  check_nccl(weftStreamCreate(&stream_), "dp: weftStreamCreate");
  const int stage = config.zero_stage;
  const auto [begin, end] = layout_.range();
  if (stage == 0) {
    optimizer_ = std::make_unique<AdamW<T>>(adamw, table_, begin, end);
  } else {
    const TensorTable shard = layout_.shard_table(table_);
    optimizer_ = std::make_unique<AdamW<T>>(adamw, shard);
  }
  if (stage >= 2) {
    shard_grads_.assign(layout_.shard_elements(), T(0));
    release_range(grads_);
  }
  if (stage == 3) {
    shard_params_.assign(layout_.shard_elements(), T(0));
    params_changed();
    size_t largest = 0;
    for (const LayerShard& s : layout_.layers()) largest = std::max(largest, s.slice);
    gathered_.assign(largest * layout_.ranks(), T(0));
    check_nccl(ncclCommSplit(dp_, 0, layout_.rank(), &gather_comm_, nullptr),
               "dp: split the gather communicator", dp_);
  }
  launched_.assign(layout_.buckets().size(), false);
  staging_.resize(layout_.buckets().size());
  backwards_done_.assign(layout_.layers().size(), 0);
}

template <typename T>
void DataParallel<T>::release_range(T* buffer) {
  const auto [begin, end] = layout_.range();
  release_memory(buffer + begin, (end - begin) * sizeof(T));
}

template <typename T>
void DataParallel<T>::params_changed() {
  if (config_.zero_stage != 3) return;
  layout_.flat_to_shard(params_, shard_params_.data());
  release_range(params_);
}

template <typename T>
void DataParallel<T>::owned_params_to_flat(T* flat) const {
  if (config_.zero_stage == 3) {
    layout_.shard_to_flat(shard_params_.data(), flat);
    return;
  }
  for (const LayerShard& s : layout_.layers())
    std::copy(params_ + s.owned_begin(layout_.rank()), params_ + s.owned_end(layout_.rank()),
              flat + s.owned_begin(layout_.rank()));
}

template <typename T>
void DataParallel<T>::owned_moments_to_flat(T* m, T* v) const {
  const AdamW<T>& opt = *optimizer_;
  if (config_.zero_stage >= 1) {
    layout_.shard_to_flat(opt.m().data(), m);
    layout_.shard_to_flat(opt.v().data(), v);
    return;
  }
  const int rank = layout_.rank();
  for (const LayerShard& s : layout_.layers()) {
    const size_t lo = s.owned_begin(rank), hi = s.owned_end(rank), at = lo - opt.begin();
    std::copy(opt.m().begin() + at, opt.m().begin() + at + (hi - lo), m + lo);
    std::copy(opt.v().begin() + at, opt.v().begin() + at + (hi - lo), v + lo);
  }
}

template <typename T>
void DataParallel<T>::moments_from_flat(const T* m, const T* v) {
  AdamW<T>& opt = *optimizer_;
  if (config_.zero_stage >= 1) {
    layout_.flat_to_shard(m, opt.m().data());
    layout_.flat_to_shard(v, opt.v().data());
    return;
  }
  std::copy(m + opt.begin(), m + opt.end(), opt.m().begin());
  std::copy(v + opt.begin(), v + opt.end(), opt.v().begin());
}

template <typename T>
DataParallel<T>::~DataParallel() {
  if (stream_) weftStreamDestroy(stream_);
  if (gather_comm_) ncclCommDestroy(gather_comm_);
}

template <typename T>
void DataParallel<T>::mark_compute_start() {
  if (step_started_) return;
  step_started_ = true;
  step_start_ = now_s();
  hook_s_ = gather_s_ = 0;
  layers_done_backward_ = 0;
  std::fill(backwards_done_.begin(), backwards_done_.end(), 0);
  launch_order_.clear();
  layers_left_at_launch_.clear();
}

template <typename T>
void DataParallel<T>::gather_layer(int layer) {
  const int index = layout_.layer_index(layer);
  if (index < 0) return;
  const double start = now_s();
  const LayerShard& s = layout_.layers()[index];
  check_nccl(ncclAllGather(shard_params_.data() + s.shard_offset, gathered_.data(), s.slice,
                           nccl_type<T>(), gather_comm_, nullptr),
             "dp: all-gather a layer", gather_comm_);
  layout_.unpack_layer(s, gathered_.data(), params_);
  gather_s_ += now_s() - start;
}

template <typename T>
void DataParallel<T>::free_layer(int layer) {
  const int index = layout_.layer_index(layer);
  if (index < 0) return;
  const LayerShard& s = layout_.layers()[index];
  release_memory(params_ + s.begin, (s.end - s.begin) * sizeof(T));
}

template <typename T>
void DataParallel<T>::before_forward(int layer) {
  mark_compute_start();
  if (config_.zero_stage == 3) gather_layer(layer);
}

template <typename T>
void DataParallel<T>::after_forward(int layer) {
  if (config_.zero_stage == 3) free_layer(layer);
}

template <typename T>
void DataParallel<T>::before_backward(int layer) {
  mark_compute_start();
  if (config_.zero_stage == 3) gather_layer(layer);
}

template <typename T>
void DataParallel<T>::after_backward(int layer) {
  const double start = now_s();
  if (config_.zero_stage == 3) free_layer(layer);
  const int index = layout_.layer_index(layer);
  // A layer is done when the last micro-batch's backward has run it; a bucket is complete when
  // its first (lowest) layer is done.
  if (index >= 0 && ++backwards_done_[index] == config_.microbatches) {
    ++layers_done_backward_;
    const int bucket = layout_.bucket_of(index);
    if (config_.overlap && layout_.buckets()[bucket].first_layer == index) launch_bucket(bucket);
  }
  hook_s_ += now_s() - start;
}

template <typename T>
void DataParallel<T>::launch_bucket(int bucket) {
  if (launched_[bucket]) throw std::logic_error("dp: a bucket completed twice in one step");
  const GradientBucket& b = layout_.buckets()[bucket];
  const int ranks = layout_.ranks(), rank = layout_.rank();
  std::vector<T>& staging = staging_[bucket];
  staging.resize(b.chunk * ranks);
  layout_.pack(b, grads_, staging.data());
  if (config_.zero_stage >= 2) release_memory(grads_ + b.begin, (b.end - b.begin) * sizeof(T));
  T* mine = staging.data() + static_cast<size_t>(rank) * b.chunk;
  check_nccl(
      ncclReduceScatter(staging.data(), mine, b.chunk, nccl_type<T>(), ncclSum, dp_, stream_),
      "dp: queue a bucket's reduce-scatter", dp_);
  if (config_.zero_stage == 0)
    check_nccl(ncclAllGather(mine, staging.data(), b.chunk, nccl_type<T>(), dp_, stream_),
               "dp: queue a bucket's all-gather", dp_);
  launched_[bucket] = true;
  launch_order_.push_back(bucket);
  layers_left_at_launch_.push_back(static_cast<int>(layout_.layers().size()) -
                                   layers_done_backward_);
}

template <typename T>
DataParallelStep DataParallel<T>::finish_step() {
  DataParallelStep out;
  reduce_gradients(out);
  // The norm: every stage sums its owned elements' squares layer by layer, then over the ranks.
  double square_sum = 0;
  const int rank = layout_.rank();
  for (const LayerShard& s : layout_.layers())
    square_sum += owned_square_sum(s.owned_begin(rank), s.owned_end(rank));
  out.grad_norm = std::sqrt(sum_over_ranks(square_sum));
  apply_update(clip_coefficient(out.grad_norm, optimizer_->config().clip_norm), out);
  return out;
}

template <typename T>
void DataParallel<T>::reduce_gradients(DataParallelStep& out) {
  mark_compute_start();
  const double wait_start = now_s();
  out.compute_s = wait_start - step_start_ - hook_s_ - gather_s_;
  for (size_t b = 0; b < launched_.size(); ++b)
    if (!launched_[b]) launch_bucket(static_cast<int>(b));
  check_nccl(weftStreamSynchronize(stream_), "dp: wait for the gradient reductions");
  const int stage = config_.zero_stage, rank = layout_.rank();
  const auto& buckets = layout_.buckets();
  staged_bytes_ = 0;
  for (const auto& s : staging_) staged_bytes_ += vector_bytes(s);
  if (stage == 1) shard_grads_.assign(layout_.shard_elements(), T(0));
  for (size_t i = 0; i < buckets.size(); ++i) {
    const GradientBucket& b = buckets[i];
    if (stage == 0) {
      layout_.unpack(b, staging_[i].data(), grads_);
    } else {
      const T* mine = staging_[i].data() + static_cast<size_t>(rank) * b.chunk;
      std::copy(mine, mine + b.chunk, shard_grads_.data() + b.shard_offset);
    }
  }
  out.comm_wait_s = now_s() - wait_start + gather_s_;
}

template <typename T>
double DataParallel<T>::owned_square_sum(size_t lo, size_t hi) const {
  const int index = layout_.layer_index(table_layer_of(lo));
  if (index < 0 || lo >= hi) return 0;
  const LayerShard& s = layout_.layers()[index];
  const size_t a = std::max(lo, s.owned_begin(layout_.rank()));
  const size_t b = std::min(hi, s.owned_end(layout_.rank()));
  if (a >= b) return 0;
  if (config_.zero_stage == 0) return grad_square_sum(grads_ + a, b - a);
  return grad_square_sum(shard_grads_.data() + s.shard_offset + (a - s.owned_begin(layout_.rank())),
                         b - a);
}

template <typename T>
void DataParallel<T>::apply_update(double coefficient, DataParallelStep& out) {
  const double optimizer_start = now_s();
  const int stage = config_.zero_stage;
  const auto& buckets = layout_.buckets();
  size_t staged = staged_bytes_;
  const auto [begin, end] = layout_.range();
  if (stage == 0) {
    scale_grads(grads_ + begin, end - begin, coefficient);
    optimizer_->step(params_, grads_);
  } else {
    scale_grads(shard_grads_.data(), shard_grads_.size(), coefficient);
    if (stage == 3) {
      optimizer_->step(shard_params_.data(), shard_grads_.data());
    } else {
      // The updated shard goes to every rank: all-gathered bucket by bucket into the staging
      // buffers, which have the shard layout's rank-major order.
      std::vector<T> shard(layout_.shard_elements());
      layout_.flat_to_shard(params_, shard.data());
      optimizer_->step(shard.data(), shard_grads_.data());
      out.optimizer_s = now_s() - optimizer_start;
      const double gather_start = now_s();
      for (size_t i = 0; i < buckets.size(); ++i)
        check_nccl(ncclAllGather(shard.data() + buckets[i].shard_offset, staging_[i].data(),
                                 buckets[i].chunk, nccl_type<T>(), dp_, stream_),
                   "dp: queue a parameter all-gather", dp_);
      check_nccl(weftStreamSynchronize(stream_), "dp: wait for the parameter all-gathers");
      for (size_t i = 0; i < buckets.size(); ++i)
        layout_.unpack(buckets[i], staging_[i].data(), params_);
      out.comm_wait_s += now_s() - gather_start;
      staged += vector_bytes(shard);
    }
  }
  if (out.optimizer_s == 0) out.optimizer_s = now_s() - optimizer_start;

  // Gradients back to zero for the next step; what a stage does not hold goes back to the kernel.
  if (stage >= 2)
    release_range(grads_);
  else
    std::fill(grads_ + begin, grads_ + end, T(0));
  if (stage == 3) release_range(params_);
  if (stage == 1) {
    staged += vector_bytes(shard_grads_);
    free_vector(shard_grads_);
  }
  transient_bytes_ = staged + vector_bytes(gathered_);
  for (auto& s : staging_) free_vector(s);
  launched_.assign(buckets.size(), false);
  step_started_ = false;
}

template <typename T>
int DataParallel<T>::table_layer_of(size_t element) const {
  for (const TensorInfo& t : table_.tensors())
    if (element >= t.offset && element < t.offset + t.size) return t.layer;
  return -1;
}

template <typename T>
double DataParallel<T>::sum_over_ranks(double value) const {
  double sum = 0;
  check_nccl(ncclAllReduce(&value, &sum, 1, ncclFloat64, ncclSum, dp_, nullptr),
             "dp: all-reduce a sum", dp_);
  return sum;
}

template <typename T>
void DataParallel<T>::gather_params(T* out) {
  std::copy(params_, params_ + table_.total(), out);
  if (config_.zero_stage < 3) return;
  for (const LayerShard& s : layout_.layers()) {
    check_nccl(ncclAllGather(shard_params_.data() + s.shard_offset, gathered_.data(), s.slice,
                             nccl_type<T>(), gather_comm_, nullptr),
               "dp: all-gather a layer", gather_comm_);
    layout_.unpack_layer(s, gathered_.data(), out);
  }
}

template <typename T>
MemoryReport DataParallel<T>::memory() const {
  MemoryReport r;
  r.formula.stage = config_.zero_stage;
  r.formula.ranks = layout_.ranks();
  const auto [begin, end] = layout_.range();
  r.formula.psi = end - begin;
  r.formula.shard = layout_.shard_elements();
  r.formula.element_bytes = sizeof(T);
  const size_t bytes = (end - begin) * sizeof(T);
  r.params = resident_bytes(params_ + begin, bytes) + vector_bytes(shard_params_);
  r.grads = resident_bytes(grads_ + begin, bytes) + vector_bytes(shard_grads_);
  r.optimizer = vector_bytes(optimizer_->m()) + vector_bytes(optimizer_->v());
  r.transient = transient_bytes_;
  return r;
}

template class DataParallel<float>;
template class DataParallel<double>;

}  // namespace weft::trainers
