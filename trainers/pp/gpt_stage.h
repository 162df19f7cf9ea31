// The default pipeline stage: a GPT's layers [first, last] run through Gpt<T>'s per-layer API
// (embed_*, block_*, head_*), one set of activations per micro-batch in flight.
//
// The stage keeps a whole Gpt<T> (its flat buffers hold every tensor, so that offsets, names and
// initialisation match the single-process model) but reads, writes and reports only its layers'
// range of them.
#pragma once

#include <map>
#include <memory>

#include "trainers/common/gpt.h"
#include "trainers/pp/stage.h"

namespace weft::trainers {

template <typename T>
class GptStage final : public PipelineStage<T> {
 public:
  GptStage(const GptConfig& config, StageLayers layers);

  // Initial values as Gpt<T>::initialize (every tensor; the stage uses its own).
  void initialize(uint64_t seed) { model_.initialize(seed); }
  Gpt<T>& model() { return model_; }
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
  // What one micro-batch's backward needs.
  struct MicroState {
    const T* input = nullptr;  // the previous stage's output (not owned)
    std::vector<T> embedded;   // the first stage's embedding output
    std::vector<GptBlockActivations<T>> blocks;
    GptHeadActivations<T> head;
    T loss = T(0);
  };
  // Block indices (from 0) of the stage's blocks: [first_block_, end_block_).
  int first_block_ = 0, end_block_ = 0;

  Gpt<T> model_;
  StageLayers layers_;
  std::pair<size_t, size_t> range_, tensor_range_;
  std::map<int, MicroState> micros_;
  GptBlockScratch<T> scratch_;
  std::vector<T> dx_, dnext_;
};

}  // namespace weft::trainers
