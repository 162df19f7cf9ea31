#include "trainers/dp/mlp_step.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "trainers/common/kernels.h"

namespace weft::trainers {

template <typename T>
double MlpDataParallelStep<T>::forward_backward(Mlp<T>& model, LayerHooks& dp, const T* inputs,
                                                const int32_t* labels, int rows, int global_rows) {
  const int layers = model.num_layers(), classes = model.config().classes;
  for (int n = 0; n < rows; ++n)
    if (labels[n] < 0 || labels[n] >= classes)
      throw std::invalid_argument("mlp dp: label outside the classes");
  pres_.resize(layers);
  outs_.resize(layers);
  const T* x = inputs;
  for (int l = 0; l < layers; ++l) {
    const size_t n = static_cast<size_t>(rows) * model.width(l + 1);
    pres_[l].assign(n, T(0));
    outs_[l].assign(n, T(0));
    dp.before_forward(l);
    model.layer_forward(l, x, rows, pres_[l].data(), outs_[l].data());
    dp.after_forward(l);
    x = outs_[l].data();
  }
  const std::vector<T>& logits = outs_.back();
  probs_.assign(logits.size(), T(0));
  losses_.assign(rows, T(0));
  cross_entropy_forward(losses_.data(), probs_.data(), logits.data(), labels, rows, classes);
  double loss_sum = 0;
  for (T loss : losses_) loss_sum += loss;
  correct_ = 0;
  for (int n = 0; n < rows; ++n) {
    const T* row = logits.data() + static_cast<size_t>(n) * classes;
    if (std::max_element(row, row + classes) - row == labels[n]) ++correct_;
  }

  // Scaled by the global batch, not this rank's rows: the ranks' gradients then sum to the
  // gradient of the global batch's mean loss.
  dout_.assign(logits.size(), T(0));
  cross_entropy_backward(dout_.data(), probs_.data(), labels, T(1) / static_cast<T>(global_rows),
                         rows, classes);
  for (int l = layers - 1; l >= 0; --l) {
    const T* input = l == 0 ? inputs : outs_[l - 1].data();
    dx_.assign(l == 0 ? 0 : static_cast<size_t>(rows) * model.width(l), T(0));
    dp.before_backward(l);
    model.layer_backward(l, input, pres_[l].data(), dout_.data(), l == 0 ? nullptr : dx_.data(),
                         rows);
    dp.after_backward(l);
    std::swap(dx_, dout_);
  }
  return loss_sum;
}

template class MlpDataParallelStep<float>;
template class MlpDataParallelStep<double>;

}  // namespace weft::trainers
