#include "trainers/common/adamw.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace weft::trainers {

template <typename T>
double grad_square_sum(const T* g, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
  return sum;
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

template <typename T>
void scale_grads(T* g, size_t n, double coefficient) {
  if (coefficient == 1.0) return;
  const T c = static_cast<T>(coefficient);
  for (size_t i = 0; i < n; ++i) g[i] *= c;
}

template <typename T>
AdamW<T>::AdamW(const AdamWConfig& config, const TensorTable& table, size_t begin, size_t end)
    : config_(config), table_(table), begin_(begin), end_(end) {
  if (begin > end || end > table.total()) throw std::invalid_argument("AdamW: bad range");
  m_.assign(end - begin, T(0));
  v_.assign(end - begin, T(0));
}

template <typename T>
void AdamW<T>::step(T* params, const T* grads) {
  ++steps_;
  // torch.optim.AdamW (single-tensor path): decay, moments, bias-corrected update.
  const double bias1 = 1.0 - std::pow(config_.beta1, static_cast<double>(steps_));
  const double bias2 = 1.0 - std::pow(config_.beta2, static_cast<double>(steps_));
  const T step_size = static_cast<T>(config_.lr / bias1);
  const T bias2_sqrt = static_cast<T>(std::sqrt(bias2));
  const T beta1 = static_cast<T>(config_.beta1), beta2 = static_cast<T>(config_.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - config_.beta1);
  const T one_minus_beta2 = static_cast<T>(1.0 - config_.beta2);
  const T eps = static_cast<T>(config_.eps);
  for (const TensorInfo& t : table_.tensors()) {
    const size_t lo = std::max(begin_, t.offset), hi = std::min(end_, t.offset + t.size);
    if (lo >= hi) continue;
    const T decay = static_cast<T>(t.decay ? 1.0 - config_.lr * config_.weight_decay : 1.0);
    for (size_t i = lo; i < hi; ++i) {
      T& m = m_[i - begin_];
      T& v = v_[i - begin_];
      const T g = grads[i];
      params[i] *= decay;
      m = m * beta1 + g * one_minus_beta1;
      v = v * beta2 + g * g * one_minus_beta2;
      const T denom = std::sqrt(v) / bias2_sqrt + eps;
      params[i] -= step_size * (m / denom);
    }
  }
}

template double grad_square_sum<float>(const float*, size_t);
template double grad_square_sum<double>(const double*, size_t);
template void scale_grads<float>(float*, size_t, double);
template void scale_grads<double>(double*, size_t, double);
template class AdamW<float>;
template class AdamW<double>;

}  // namespace weft::trainers
