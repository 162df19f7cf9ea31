// A tensor-parallel pipeline stage: GPT layers [first, last] run through TpGpt's per-layer API,
// so that a pipeline of stages whose ranks each hold tensor-parallel (and optionally sequence-
// parallel) shards runs under the same schedules as GptStage (trainers/pp).
//
// Every rank of the stage's tp communicator runs the same schedule, so the collectives inside
// TpGpt's steps line up. Boundary activations are the rank's rows of the residual stream:
// rows * seq of them, or that over tp under sequence parallelism (the neighbouring stage's rank
// of the same tp_rank holds the same rows, since both use TpGpt's row split).
#pragma once

#include <map>

#include "trainers/pp/stage.h"
#include "trainers/tp/tp_gpt.h"

namespace weft::trainers {

template <typename T>
class TpGptStage final : public PipelineStage<T> {
 public:
  // tp: Grid::tp() (not owned). Collective over tp, as TpGpt's constructor.
  TpGptStage(const GptConfig& config, StageLayers layers, ncclComm_t tp, bool sequence_parallel);

  void initialize(uint64_t seed) { model_.initialize(seed); }
  TpGpt<T>& model() { return model_; }
  const TpGpt<T>& model() const { return model_; }
  StageLayers layers() const { return layers_; }

  bool is_first() const override { return layers_.first == 0; }
  bool is_last() const override { return layers_.last == model_.config().layers + 1; }
  size_t boundary_elements(const MicroBatch& batch) const override;
  const T* forward(int micro, const MicroBatch& batch, const T* input) override;
  T micro_loss(int micro) const override;
  const T* backward(int micro, const MicroBatch& batch, const T* output_grad) override;
  const TensorTable& table() const override { return model_.table(); }
  std::vector<T>& params() override { return model_.params(); }
  std::vector<T>& grads() override { return model_.grads(); }
  std::pair<size_t, size_t> range() const override { return range_; }
  std::pair<size_t, size_t> tensor_range() const override { return tensor_range_; }
  int in_flight() const override { return static_cast<int>(micros_.size()); }

 private:
  struct MicroState {
    const T* input = nullptr;  // the previous stage's output (not owned)
    std::vector<T> embedded;   // the first stage's embedding output
    std::vector<TpGptBlockActivations<T>> blocks;
    TpGptHeadActivations<T> head;
    T loss = T(0);
  };
  TpGpt<T> model_;
  StageLayers layers_;
  int first_block_ = 0, end_block_ = 0;  // block indices (from 0) of the stage's blocks
  std::pair<size_t, size_t> range_, tensor_range_;
  std::map<int, MicroState> micros_;
  TpGptScratch<T> scratch_;
  std::vector<T> dx_, dnext_;
};

}  // namespace weft::trainers
