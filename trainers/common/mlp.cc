#include "trainers/common/mlp.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainers/common/kernels.h"

namespace weft::trainers {

namespace {

std::vector<int> layer_widths(const MlpConfig& c) {
  std::vector<int> widths = {c.inputs};
  widths.insert(widths.end(), c.hidden.begin(), c.hidden.end());
  widths.push_back(c.classes);
  for (int w : widths)
    if (w <= 0) throw std::invalid_argument("MLP config: widths must be positive");
  return widths;
}

}  // namespace

TensorTable mlp_tensor_table(const MlpConfig& config) {
  const std::vector<int> widths = layer_widths(config);
  TensorTable table;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const std::string prefix = "fc" + std::to_string(i);
    const int layer = static_cast<int>(i);
    table.add(prefix + ".weight", {widths[i + 1], widths[i]}, layer, true, InitKind::kNormal,
              std::sqrt(2.0 / widths[i]));
    table.add(prefix + ".bias", {widths[i + 1]}, layer, false, InitKind::kZeros);
  }
  return table;
}

template <typename T>
Mlp<T>::Mlp(const MlpConfig& config)
    : config_(config), table_(mlp_tensor_table(config)), widths_(layer_widths(config)) {
  params_.assign(table_.total(), T(0));
  grads_.assign(table_.total(), T(0));
  for (int i = 0; i < num_layers(); ++i) {
    weight_offsets_.push_back(table_.find("fc" + std::to_string(i) + ".weight").offset);
    bias_offsets_.push_back(table_.find("fc" + std::to_string(i) + ".bias").offset);
  }
}

template <typename T>
void Mlp<T>::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <typename T>
void Mlp<T>::layer_forward(int layer, const T* x, int rows, T* pre, T* out) const {
  const int in = widths_[layer], out_width = widths_[layer + 1];
  linear_forward(pre, x, params_.data() + weight_offsets_[layer],
                 params_.data() + bias_offsets_[layer], rows, in, out_width);
  const size_t n = static_cast<size_t>(rows) * out_width;
  if (layer + 1 < num_layers())
    relu_forward(out, pre, n);
  else
    std::copy(pre, pre + n, out);
}

template <typename T>
void Mlp<T>::layer_backward(int layer, const T* x, const T* pre, const T* dout, T* dx, int rows) {
  const int in = widths_[layer], out_width = widths_[layer + 1];
  const size_t n = static_cast<size_t>(rows) * out_width;
  std::vector<T> dpre;
  const T* dlinear = dout;
  if (layer + 1 < num_layers()) {
    dpre.assign(n, T(0));
    relu_backward(dpre.data(), pre, dout, n);
    dlinear = dpre.data();
  }
  linear_backward(dx, grads_.data() + weight_offsets_[layer], grads_.data() + bias_offsets_[layer],
                  dlinear, x, params_.data() + weight_offsets_[layer], rows, in, out_width);
}

template <typename T>
T Mlp<T>::forward(const T* inputs, const int32_t* labels, int rows) {
  rows_ = rows;
  inputs_.assign(inputs, inputs + static_cast<size_t>(rows) * widths_[0]);
  labels_.assign(labels, labels + rows);
  for (int n = 0; n < rows; ++n)
    if (labels[n] < 0 || labels[n] >= config_.classes)
      throw std::invalid_argument("label outside the classes");
  pres_.resize(num_layers());
  outs_.resize(num_layers());
  const T* x = inputs_.data();
  for (int i = 0; i < num_layers(); ++i) {
    pres_[i].assign(static_cast<size_t>(rows) * widths_[i + 1], T(0));
    outs_[i].assign(pres_[i].size(), T(0));
    layer_forward(i, x, rows, pres_[i].data(), outs_[i].data());
    x = outs_[i].data();
  }
  probs_.assign(outs_.back().size(), T(0));
  losses_.assign(rows, T(0));
  cross_entropy_forward(losses_.data(), probs_.data(), outs_.back().data(), labels, rows,
                        config_.classes);
  double sum = 0;
  for (T loss : losses_) sum += loss;
  return static_cast<T>(sum / rows);
}

template <typename T>
void Mlp<T>::backward() {
  if (rows_ == 0) throw std::logic_error("backward needs a forward first");
  std::vector<T> dout(outs_.back().size(), T(0)), dx;
  cross_entropy_backward(dout.data(), probs_.data(), labels_.data(), T(1) / static_cast<T>(rows_),
                         rows_, config_.classes);
  for (int i = num_layers() - 1; i >= 0; --i) {
    const T* x = i == 0 ? inputs_.data() : outs_[i - 1].data();
    dx.assign(i == 0 ? 0 : static_cast<size_t>(rows_) * widths_[i], T(0));
    layer_backward(i, x, pres_[i].data(), dout.data(), i == 0 ? nullptr : dx.data(), rows_);
    std::swap(dx, dout);
  }
}

template <typename T>
int Mlp<T>::correct() const {
  int count = 0;
  const std::vector<T>& z = outs_.back();
  for (int n = 0; n < rows_; ++n) {
    const T* row = z.data() + static_cast<size_t>(n) * config_.classes;
    if (std::max_element(row, row + config_.classes) - row == labels_[n]) ++count;
  }
  return count;
}

template class Mlp<float>;
template class Mlp<double>;

}  // namespace weft::trainers
