// A pipeline stage: a contiguous run of a model's layers on one rank, driven micro-batch by
// micro-batch by a schedule (trainers/pp/schedule.h).
//
// The stage owns its layers' parameters and gradients (its range [begin, end) of a flat buffer
// laid out by its table) and every activation it needs for a micro-batch's backward, from that
// micro-batch's forward until its backward. Activations cross stage boundaries as buffers of
// boundary_elements(micro-batch) values ([rows * seq, channels] for the GPT); the schedule moves
// them between neighbouring ranks. ModelStage (trainers/pp/model_stage.h) implements it over a
// model's per-layer API: GptStage over the one-process GPT, TpGptStage (trainers/compose) over the
// tensor-parallel one's shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "trainers/common/layer_hooks.h"
#include "trainers/common/layer_pass.h"
#include "trainers/common/tensor_table.h"

namespace weft::trainers {

// One micro-batch of a step's global batch: tokens and targets [rows, seq] (the first stage
// reads the tokens, the last the targets) and the loss's gradient per position, 1 / (the global
// batch's positions), so that micro-batches' gradients sum to the global batch's mean-loss ones.
struct MicroBatch {
  const int32_t* tokens = nullptr;
  const int32_t* targets = nullptr;
  int rows = 0;
  int seq = 0;
  double loss_scale = 0.0;
};

template <typename T>
class PipelineStage {
 public:
  virtual ~PipelineStage() = default;

  virtual bool is_first() const = 0;
  virtual bool is_last() const = 0;
  // Values of the activation entering (and the one leaving) this stage for one micro-batch.
  virtual size_t boundary_elements(const MicroBatch& batch) const = 0;

  // Forward of micro-batch `micro`. input is the previous stage's output (nullptr on the first
  // stage, which embeds batch.tokens) and must stay valid until backward(micro) returns. Returns
  // this stage's output, valid until backward(micro); nullptr on the last stage, which computes
  // the micro-batch's mean loss instead (micro_loss).
  virtual const T* forward(int micro, const MicroBatch& batch, const T* input) = 0;
  // The mean loss of a micro-batch whose forward ran on the last stage.
  virtual T micro_loss(int micro) const = 0;
  // Backward of micro-batch `micro`: output_grad is the gradient of this stage's output (nullptr
  // on the last stage, which starts from the loss with batch.loss_scale). Adds the parameters'
  // gradients into grads() and releases the micro-batch's activations. Returns the gradient of
  // the stage's input, valid until the next backward; nullptr on the first stage.
  virtual const T* backward(int micro, const MicroBatch& batch, const T* output_grad) = 0;

  // The flat buffers this stage's layers live in, their table, and the stage's range of them.
  virtual const TensorTable& table() const = 0;
  virtual std::vector<T>& params() = 0;
  virtual std::vector<T>& grads() = 0;
  virtual std::pair<size_t, size_t> range() const = 0;
  // The indices into table().tensors() of the tensors in range(), in table order.
  virtual std::pair<size_t, size_t> tensor_range() const = 0;

  // Micro-batches whose forward ran and whose backward has not: the activations held.
  virtual int in_flight() const = 0;

  // Calls hooks around every layer the stage runs from now on (nullptr: none). Not owned.
  void set_layer_hooks(LayerHooks* hooks) { hooks_ = hooks; }

 protected:
  LayerHooks* layer_hooks() const { return hooks_; }

 private:
  LayerHooks* hooks_ = nullptr;
};

// Splits a GPT's layers (0 the embeddings, 1..blocks the blocks, blocks + 1 the head) over
// `stages` stages: the blocks as evenly as possible (the earlier stages take one more when they do
// not divide), the embeddings with stage 0 and the head with the last stage. Throws
// std::invalid_argument unless 1 <= stages <= blocks.
StageLayers split_gpt_layers(int blocks, int stages, int stage);

}  // namespace weft::trainers
