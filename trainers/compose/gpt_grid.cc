#include "trainers/compose/gpt_grid.h"

#include <algorithm>
#include <stdexcept>

#include "trainers/compose/tp_stage.h"
#include "trainers/pp/gpt_stage.h"

namespace weft::trainers {

template <typename T>
GridGpt<T>::GridGpt(const GptConfig& config, const Grid& grid, bool sequence_parallel)
    : grid_(grid), config_(config), whole_table_(gpt_tensor_table(config)) {
  const GridCoords at = grid.coords();
  const StageLayers layers = split_gpt_layers(config.layers, grid.shape().pp, at.pp_rank);
  layout_.whole = &whole_table_;
  if (grid.shape().tp > 1) {
    auto tp_stage = std::make_unique<TpGptStage<T>>(config, layers, grid.tp(), sequence_parallel);
    TpGptStage<T>* s = tp_stage.get();
    const TpLayout& tl = s->model().layout();
    layout_.place = [&tl](const T* local, T* whole) { tl.place(local, whole, tl.tp_rank() == 0); };
    layout_.extract = [&tl](const T* whole, T* local) { tl.extract(whole, local); };
    for (const TpShardMap& map : tl.maps())
      local_.counted.push_back(!map.replicated || at.tp_rank == 0);
    if (sequence_parallel) local_.reduce_replicated = [s] { s->model().reduce_replicated_grads(); };
    initialize_ = [s](uint64_t seed) { s->initialize(seed); };
    stage_ = std::move(tp_stage);
  } else {
    auto plain = std::make_unique<GptStage<T>>(config, layers);
    GptStage<T>* s = plain.get();
    const size_t total = whole_table_.total();
    layout_.place = [total](const T* local, T* whole) { std::copy(local, local + total, whole); };
    layout_.extract = layout_.place;
    initialize_ = [s](uint64_t seed) { s->initialize(seed); };
    stage_ = std::move(plain);
  }
  local_.table = &stage_->table();
  local_.params = stage_->params().data();
  local_.grads = stage_->grads().data();
  local_.range = stage_->range();
  local_.tensor_range = stage_->tensor_range();
  PipelineStage<T>* stage = stage_.get();
  local_.set_layer_hooks = [stage](LayerHooks* hooks) { stage->set_layer_hooks(hooks); };
}

template <typename T>
LocalPass GridGpt<T>::forward_backward(const TextBatcher& batches, int64_t step, int global_rows,
                                       int seq, int microbatches, PipelineSchedule schedule) {
  const int dp = grid_.shape().dp;
  if (global_rows % (dp * microbatches) != 0)
    throw std::invalid_argument("the batch must be a multiple of dp x micro-batches");
  const int rows = global_rows / dp, micro_rows = rows / microbatches;
  if (!runner_ || runner_schedule_ != schedule) {
    runner_ = std::make_unique<PipelineRunner<T>>(*stage_, grid_.pp(), schedule);
    runner_schedule_ = schedule;
  }
  const size_t n = static_cast<size_t>(rows) * seq;
  inputs_.resize(n);
  targets_.resize(n);
  micros_.clear();
  const double loss_scale = 1.0 / (static_cast<double>(global_rows) * seq);
  for (int i = 0; i < microbatches; ++i) {
    const size_t first = static_cast<size_t>(i) * micro_rows * seq;
    micros_.push_back(
        MicroBatch{inputs_.data() + first, targets_.data() + first, micro_rows, seq, loss_scale});
  }
  batches.batch(step, grid_.coords().dp_rank * rows, rows, inputs_.data(), targets_.data());
  const PipelineRunStats run = runner_->run(micros_);
  // run.loss is the mean over this dp rank's rows (on the last stage); the global batch's mean is
  // the average over the dp ranks, reported once per tp group.
  const bool reports = stage_->is_last() && grid_.coords().tp_rank == 0;
  return LocalPass{reports ? run.loss / dp : 0.0, run.wait_seconds};
}

template class GridGpt<float>;
template class GridGpt<double>;

}  // namespace weft::trainers
