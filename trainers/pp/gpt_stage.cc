#include "trainers/pp/gpt_stage.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace weft::trainers {

StageLayers split_gpt_layers(int blocks, int stages, int stage) {
  if (stages < 1 || stages > blocks || stage < 0 || stage >= stages)
    throw std::invalid_argument("pipeline: " + std::to_string(stages) +
                                " stages need 1 to the model's " + std::to_string(blocks) +
                                " blocks, stage " + std::to_string(stage) + " out of range");
  // Stage s takes blocks [s * q + min(s, r), (s + 1) * q + min(s + 1, r)), q = blocks / stages,
  // r = blocks % stages; block b is layer b + 1.
  const int q = blocks / stages, r = blocks % stages;
  const int begin = stage * q + std::min(stage, r);
  const int end = (stage + 1) * q + std::min(stage + 1, r);
  StageLayers layers{begin + 1, end};
  if (stage == 0) layers.first = 0;
  if (stage == stages - 1) layers.last = blocks + 1;
  return layers;
}

template <typename T>
GptStage<T>::GptStage(const GptConfig& config, StageLayers layers)
    : model_(config), layers_(layers) {
  const int head = config.layers + 1;
  if (layers.first < 0 || layers.last > head || layers.first > layers.last)
    throw std::invalid_argument("GptStage: layers [" + std::to_string(layers.first) + ", " +
                                std::to_string(layers.last) + "] outside [0, " +
                                std::to_string(head) + "]");
  first_block_ = std::max(layers.first, 1) - 1;
  end_block_ = std::min(layers.last, config.layers);
  const TensorTable& table = model_.table();
  range_ = {table.layer_range(layers.first).first, table.layer_range(layers.last).second};
  const auto& tensors = table.tensors();
  size_t lo = tensors.size(), hi = 0;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].layer >= layers.first && tensors[i].layer <= layers.last) {
      lo = std::min(lo, i);
      hi = i + 1;
    }
  tensor_range_ = {lo, hi};
}

template <typename T>
size_t GptStage<T>::boundary_elements(const MicroBatch& batch) const {
  return static_cast<size_t>(batch.rows) * batch.seq * model_.config().channels;
}

template <typename T>
const T* GptStage<T>::forward(int micro, const MicroBatch& batch, const T* input) {
  if (micros_.count(micro)) throw std::logic_error("GptStage: forward of a micro-batch in flight");
  if (is_first() != (input == nullptr))
    throw std::invalid_argument("GptStage: the first stage (only) takes no input activation");
  MicroState& s = micros_[micro];
  if (is_first()) {
    s.embedded.assign(boundary_elements(batch), T(0));
    this->before_forward(0);
    model_.embed_forward(batch.tokens, batch.rows, batch.seq, s.embedded.data());
    this->after_forward(0);
    input = s.embedded.data();
  }
  s.input = input;
  s.blocks.resize(end_block_ - first_block_);
  const T* x = input;
  for (int b = first_block_; b < end_block_; ++b) {
    GptBlockActivations<T>& a = s.blocks[b - first_block_];
    this->before_forward(b + 1);
    model_.block_forward(b, x, batch.rows, batch.seq, a);
    this->after_forward(b + 1);
    x = a.out.data();
  }
  if (!is_last()) return x;
  const int head = model_.config().layers + 1;
  this->before_forward(head);
  s.loss = model_.head_forward(x, batch.targets, batch.rows, batch.seq, s.head);
  this->after_forward(head);
  return nullptr;
}

template <typename T>
T GptStage<T>::micro_loss(int micro) const {
  auto it = micros_.find(micro);
  if (it == micros_.end() || !is_last())
    throw std::logic_error("GptStage: no loss for micro-batch " + std::to_string(micro));
  return it->second.loss;
}

template <typename T>
const T* GptStage<T>::backward(int micro, const MicroBatch& batch, const T* output_grad) {
  auto it = micros_.find(micro);
  if (it == micros_.end()) throw std::logic_error("GptStage: backward without forward");
  if (is_last() != (output_grad == nullptr))
    throw std::invalid_argument("GptStage: the last stage (only) takes no output gradient");
  MicroState& s = it->second;
  const size_t n = boundary_elements(batch);
  const int blocks = end_block_ - first_block_;
  // The input of block b of this stage: the stage input or the previous block's output.
  auto block_input = [&](int i) { return i == 0 ? s.input : s.blocks[i - 1].out.data(); };
  if (is_last()) {
    const T* x = blocks > 0 ? s.blocks.back().out.data() : s.input;
    dnext_.assign(n, T(0));
    const int head = model_.config().layers + 1;
    this->before_backward(head);
    model_.head_backward(x, s.head, batch.targets, static_cast<T>(batch.loss_scale), dnext_.data(),
                         batch.rows, batch.seq);
    this->after_backward(head);
  } else {
    dnext_.assign(output_grad, output_grad + n);
  }
  for (int i = blocks - 1; i >= 0; --i) {
    dx_.assign(n, T(0));
    this->before_backward(first_block_ + i + 1);
    model_.block_backward(first_block_ + i, block_input(i), s.blocks[i], dnext_.data(), dx_.data(),
                          batch.rows, batch.seq, scratch_);
    this->after_backward(first_block_ + i + 1);
    std::swap(dx_, dnext_);
  }
  if (is_first()) {
    this->before_backward(0);
    model_.embed_backward(batch.tokens, batch.rows, batch.seq, dnext_.data());
    this->after_backward(0);
  }
  micros_.erase(it);
  return is_first() ? nullptr : dnext_.data();
}

template class GptStage<float>;
template class GptStage<double>;

}  // namespace weft::trainers
