// A pipeline stage over a GPT's per-layer API: the layers [first, last] of a model (Gpt<T>, or
// TpGpt<T> over its tensor-parallel shards) run by the layer loops of
// trainers/common/layer_pass.h, one pass's activations per micro-batch in flight. GptStage
// (trainers/pp/gpt_stage.h) and TpGptStage (trainers/compose/tp_stage.h) are this with their
// model.
//
// The stage keeps the whole model object (its flat buffers hold every tensor, or every shard, so
// that offsets, names and initialisation match the single-process model) but reads, writes and
// reports only its layers' range of them. Boundary activations are the model's local_rows() rows
// of the residual stream.
#pragma once

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "trainers/common/layer_pass.h"
#include "trainers/pp/stage.h"

namespace weft::trainers {

// The indices into table.tensors() of the tensors of layers [first, last] (contiguous: the
// table is in layer order).
std::pair<size_t, size_t> stage_tensor_range(const TensorTable& table, StageLayers layers);

template <typename Model>
class ModelStage : public PipelineStage<typename Model::PassTypes::Value> {
 public:
  using T = typename Model::PassTypes::Value;

  // name: the stage's kind, for messages. model_args: the model's constructor's arguments.
  template <typename... ModelArgs>
  ModelStage(const char* name, StageLayers layers, ModelArgs&&... model_args)
      : name_(name), model_(std::forward<ModelArgs>(model_args)...), layers_(layers) {
    const int head = model_.config().layers + 1;
    if (layers.first < 0 || layers.last > head || layers.first > layers.last)
      throw std::invalid_argument(name_ + ": layers [" + std::to_string(layers.first) + ", " +
                                  std::to_string(layers.last) + "] outside [0, " +
                                  std::to_string(head) + "]");
    const TensorTable& table = model_.table();
    range_ = {table.layer_range(layers.first).first, table.layer_range(layers.last).second};
    tensor_range_ = stage_tensor_range(table, layers);
  }

  // Initial values as the model's initialize (every tensor; the stage uses its own).
  void initialize(uint64_t seed) { model_.initialize(seed); }
  Model& model() { return model_; }
  const Model& model() const { return model_; }
  StageLayers layers() const { return layers_; }

  bool is_first() const override { return layers_.first == 0; }
  bool is_last() const override { return layers_.last == model_.config().layers + 1; }
  size_t boundary_elements(const MicroBatch& batch) const override {
    return static_cast<size_t>(model_.local_rows(batch.rows, batch.seq)) * model_.config().channels;
  }

  const T* forward(int micro, const MicroBatch& batch, const T* input) override {
    if (micros_.count(micro))
      throw std::logic_error(name_ + ": forward of a micro-batch in flight");
    if (is_first() != (input == nullptr))
      throw std::invalid_argument(name_ + ": the first stage (only) takes no input activation");
    return forward_layers(model_, layers_, batch.tokens, batch.targets, batch.rows, batch.seq,
                          input, micros_[micro], this->layer_hooks());
  }

  T micro_loss(int micro) const override {
    auto it = micros_.find(micro);
    if (it == micros_.end() || !is_last())
      throw std::logic_error(name_ + ": no loss for micro-batch " + std::to_string(micro));
    return it->second.loss;
  }

  const T* backward(int micro, const MicroBatch& batch, const T* output_grad) override {
    auto it = micros_.find(micro);
    if (it == micros_.end()) throw std::logic_error(name_ + ": backward without forward");
    if (is_last() != (output_grad == nullptr))
      throw std::invalid_argument(name_ + ": the last stage (only) takes no output gradient");
    const T* input_grad = backward_layers(model_, layers_, batch.tokens, batch.targets,
                                          static_cast<T>(batch.loss_scale), batch.rows, batch.seq,
                                          output_grad, it->second, grads_, this->layer_hooks());
    micros_.erase(it);
    return input_grad;
  }

  const TensorTable& table() const override { return model_.table(); }
  std::vector<T>& params() override { return model_.params(); }
  std::vector<T>& grads() override { return model_.grads(); }
  std::pair<size_t, size_t> range() const override { return range_; }
  std::pair<size_t, size_t> tensor_range() const override { return tensor_range_; }
  int in_flight() const override { return static_cast<int>(micros_.size()); }

 private:
  std::string name_;
  Model model_;
  StageLayers layers_;
  std::pair<size_t, size_t> range_, tensor_range_;
  std::map<int, typename Model::PassTypes::Pass> micros_;  // the micro-batches in flight
  typename Model::PassTypes::Gradients grads_;
};

}  // namespace weft::trainers
