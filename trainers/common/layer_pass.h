// One pass over a contiguous range of a GPT's layers (0 the embeddings, 1..L the blocks, L + 1
// the head) through a model's per-layer API: the loops and the activations they keep between a
// forward and its backward. The one-process Gpt and the tensor-parallel TpGpt run all their
// layers this way (their forward() and backward()); a pipeline stage runs its range, one pass per
// micro-batch in flight (trainers/pp/model_stage.h).
//
// The model provides config() (layers, channels), local_rows(batch, seq) (the rows of the
// residual stream it holds) and the per-layer steps embed_*, block_* and head_* of
// trainers/common/gpt.h; head_backward may take the block scratch as its last argument
// (TpGpt's does).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "trainers/common/layer_hooks.h"

namespace weft::trainers {

// The model layers [first, last] of a pass (a pipeline stage's), in the table's layer numbering.
struct StageLayers {
  int first = 0, last = 0;
};

// What one pass's backward needs from its forward.
template <typename T, typename BlockActivations, typename HeadActivations>
struct LayerPass {
  using Value = T;
  const T* input = nullptr;  // the first block's input: `embedded`, or the caller's (not owned)
  std::vector<T> embedded;   // the embeddings' output, when the pass runs layer 0
  std::vector<BlockActivations> blocks;
  HeadActivations head;
  T loss = T(0);  // the mean loss, when the pass runs the head
};

// Backward buffers, reused from pass to pass: the block scratch and the gradients of the current
// layer's input (dx) and output (dnext).
template <typename T, typename Scratch>
struct LayerPassGradients {
  Scratch scratch;
  std::vector<T> dx, dnext;
};

namespace layer_pass_detail {

// Block indices (from 0) [first, end) of the blocks among `layers`.
inline std::pair<int, int> blocks_of(StageLayers layers, int blocks) {
  return {std::max(layers.first, 1) - 1, std::min(layers.last, blocks)};
}

// Calls `step` for `layer` between the hooks' before and after calls for it (no hooks: nullptr).
template <typename Step>
void around_forward(LayerHooks* hooks, int layer, Step&& step) {
  if (hooks) hooks->before_forward(layer);
  step();
  if (hooks) hooks->after_forward(layer);
}

template <typename Step>
void around_backward(LayerHooks* hooks, int layer, Step&& step) {
  if (hooks) hooks->before_backward(layer);
  step();
  if (hooks) hooks->after_backward(layer);
}

}  // namespace layer_pass_detail

// Forward of `layers` on one batch (tokens and targets [batch, seq]; targets may be nullptr when
// the range ends before the head, or for logits only). input: the output of layer
// layers.first - 1 (nullptr when layers.first is 0), valid until the pass's backward. Returns the
// range's output, valid until the backward; nullptr when the range ends with the head, whose mean
// loss goes to pass.loss.
template <typename Model, typename Pass>
const typename Pass::Value* forward_layers(const Model& model, StageLayers layers,
                                           const int32_t* tokens, const int32_t* targets, int batch,
                                           int seq, const typename Pass::Value* input, Pass& pass,
                                           LayerHooks* hooks = nullptr) {
  using T = typename Pass::Value;
  const int head = model.config().layers + 1;
  if (layers.first == 0) {
    const size_t rows = static_cast<size_t>(model.local_rows(batch, seq));
    pass.embedded.assign(rows * model.config().channels, T(0));
    layer_pass_detail::around_forward(
        hooks, 0, [&] { model.embed_forward(tokens, batch, seq, pass.embedded.data()); });
    input = pass.embedded.data();
  }
  pass.input = input;
  const auto [first_block, end_block] = layer_pass_detail::blocks_of(layers, model.config().layers);
  pass.blocks.resize(end_block - first_block);
  const T* x = input;
  for (int b = first_block; b < end_block; ++b) {
    auto& a = pass.blocks[b - first_block];
    layer_pass_detail::around_forward(hooks, b + 1,
                                      [&] { model.block_forward(b, x, batch, seq, a); });
    x = a.out.data();
  }
  if (layers.last != head) return x;
  layer_pass_detail::around_forward(
      hooks, head, [&] { pass.loss = model.head_forward(x, targets, batch, seq, pass.head); });
  return nullptr;
}

// Backward of a pass whose forward ran: output_grad is the gradient of the range's output
// (nullptr when the range ends with the head, which starts from the loss: loss_scale is
// dloss/dlosses[n]). Adds the parameters' gradients into the model's grads(). Returns the
// gradient of the range's input (in grads.dnext, valid until the next backward with the same
// buffers); nullptr when the range starts with the embeddings.
template <typename Model, typename Pass, typename Gradients>
const typename Pass::Value* backward_layers(Model& model, StageLayers layers, const int32_t* tokens,
                                            const int32_t* targets, typename Pass::Value loss_scale,
                                            int batch, int seq,
                                            const typename Pass::Value* output_grad,
                                            const Pass& pass, Gradients& grads,
                                            LayerHooks* hooks = nullptr) {
  using T = typename Pass::Value;
  const int head = model.config().layers + 1;
  const size_t n = static_cast<size_t>(model.local_rows(batch, seq)) * model.config().channels;
  const auto [first_block, end_block] = layer_pass_detail::blocks_of(layers, model.config().layers);
  const int blocks = end_block - first_block;
  // The input of the pass's block i: the pass input or the previous block's output.
  auto block_input = [&](int i) { return i == 0 ? pass.input : pass.blocks[i - 1].out.data(); };
  if (layers.last == head) {
    const T* x = block_input(blocks);
    grads.dnext.assign(n, T(0));
    layer_pass_detail::around_backward(hooks, head, [&] {
      T* dx = grads.dnext.data();
      if constexpr (requires {
                      model.head_backward(x, pass.head, targets, loss_scale, dx, batch, seq,
                                          grads.scratch);
                    })
        model.head_backward(x, pass.head, targets, loss_scale, dx, batch, seq, grads.scratch);
      else
        model.head_backward(x, pass.head, targets, loss_scale, dx, batch, seq);
    });
  } else {
    if (output_grad == nullptr)
      throw std::invalid_argument("layers ending before the head need their output's gradient");
    grads.dnext.assign(output_grad, output_grad + n);
  }
  for (int i = blocks - 1; i >= 0; --i) {
    grads.dx.assign(n, T(0));
    layer_pass_detail::around_backward(hooks, first_block + i + 1, [&] {
      model.block_backward(first_block + i, block_input(i), pass.blocks[i], grads.dnext.data(),
                           grads.dx.data(), batch, seq, grads.scratch);
    });
    std::swap(grads.dx, grads.dnext);
  }
  if (layers.first != 0) return grads.dnext.data();
  layer_pass_detail::around_backward(
      hooks, 0, [&] { model.embed_backward(tokens, batch, seq, grads.dnext.data()); });
  return nullptr;
}

// A whole model's forward on one batch and, after it, the backward of the mean loss: the
// one-process forward() and backward() of Gpt and TpGpt. Keeps copies of the tokens and targets.
template <typename T, typename BlockActivations, typename HeadActivations, typename Scratch>
class WholeModelPass {
 public:
  // Returns the mean loss (0 without targets).
  template <typename Model>
  T forward(const Model& model, const int32_t* tokens, const int32_t* targets, int batch, int seq) {
    const size_t n = static_cast<size_t>(batch) * seq;
    batch_ = batch;
    seq_ = seq;
    tokens_.assign(tokens, tokens + n);
    if (targets != nullptr)
      targets_.assign(targets, targets + n);
    else
      targets_.clear();
    forward_layers(model, all_layers(model), tokens, targets, batch, seq, nullptr, pass_);
    return pass_.loss;
  }

  // After forward with targets: adds the mean loss's gradients into the model's grads().
  template <typename Model>
  void backward(Model& model) {
    if (targets_.empty()) throw std::logic_error("backward needs a forward with targets");
    const T loss_scale = T(1) / static_cast<T>(static_cast<size_t>(batch_) * seq_);
    backward_layers(model, all_layers(model), tokens_.data(), targets_.data(), loss_scale, batch_,
                    seq_, nullptr, pass_, grads_);
  }

  const HeadActivations& head() const { return pass_.head; }

 private:
  template <typename Model>
  static StageLayers all_layers(const Model& model) {
    return {0, model.config().layers + 1};
  }

  int batch_ = 0, seq_ = 0;
  std::vector<int32_t> tokens_, targets_;
  LayerPass<T, BlockActivations, HeadActivations> pass_;
  LayerPassGradients<T, Scratch> grads_;
};

// The types of a model's passes, from its activations and scratch: a model names them as
// `using PassTypes = LayerPassTypes<...>` (Gpt, TpGpt), and the stages and whole-model passes
// over it use them.
template <typename T, typename BlockActivations, typename HeadActivations, typename Scratch>
struct LayerPassTypes {
  using Value = T;
  using Pass = LayerPass<T, BlockActivations, HeadActivations>;
  using Gradients = LayerPassGradients<T, Scratch>;
  using Whole = WholeModelPass<T, BlockActivations, HeadActivations, Scratch>;
};

}  // namespace weft::trainers
