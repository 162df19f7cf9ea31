// An MLP classifier: linear layers with ReLU between them, softmax cross-entropy on the last.
// Same style as the GPT: one flat buffer with a tensor table, per-layer forward and backward.
#pragma once

#include <cstdint>
#include <vector>

#include "trainers/common/tensor_table.h"

namespace weft::trainers {

struct MlpConfig {
  int inputs = 784;
  std::vector<int> hidden = {128, 64};
  int classes = 10;
};

// Layer i (from 0) is "fc<i>.weight" [out, in] and "fc<i>.bias" [out]; weights are drawn from
// N(0, sqrt(2/in)) (He initialisation, for ReLU), biases are zero.
TensorTable mlp_tensor_table(const MlpConfig& config);

template <typename T>
class Mlp {
 public:
  explicit Mlp(const MlpConfig& config);

  const MlpConfig& config() const { return config_; }
  const TensorTable& table() const { return table_; }
  std::vector<T>& params() { return params_; }
  const std::vector<T>& params() const { return params_; }
  std::vector<T>& grads() { return grads_; }
  const std::vector<T>& grads() const { return grads_; }
  int num_layers() const { return static_cast<int>(widths_.size()) - 1; }
  int width(int i) const { return widths_[i]; }  // width(0) inputs, width(num_layers()) classes

  void initialize(uint64_t seed) { initialize_tensors(table_, seed, params_.data()); }
  void zero_grads();

  // Layer i: pre = x W^T + b, out = relu(pre) except on the last layer (out = pre, the logits).
  void layer_forward(int layer, const T* x, int rows, T* pre, T* out) const;
  // Adds into grads() and dx (dx may be null on the first layer).
  void layer_backward(int layer, const T* x, const T* pre, const T* dout, T* dx, int rows);

  // The whole model: inputs [rows, inputs], labels [rows]; returns the mean loss.
  T forward(const T* inputs, const int32_t* labels, int rows);
  void backward();  // after forward: adds the mean loss's gradients into grads()

  const std::vector<T>& logits() const { return outs_.back(); }
  // Rows of the last forward whose largest logit is the label.
  int correct() const;

 private:
  MlpConfig config_;
  TensorTable table_;
  std::vector<int> widths_;
  std::vector<size_t> weight_offsets_, bias_offsets_;
  std::vector<T> params_, grads_;

  int rows_ = 0;
  std::vector<T> inputs_;
  std::vector<int32_t> labels_;
  std::vector<std::vector<T>> pres_, outs_;
  std::vector<T> probs_, losses_;
};

}  // namespace weft::trainers
