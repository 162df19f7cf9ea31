// AdamW (decoupled weight decay) and gradient clipping by global norm, as PyTorch 1.13 computes
// them (torch.optim.AdamW, torch.nn.utils.clip_grad_norm_), over a range of the flat buffer.
//
// The optimizer owns m and v for elements [begin, end) of the flat buffer: the whole model in a
// single process, one shard under ZeRO. Weight decay applies per tensor as the table says
// (TensorInfo::decay). Clipping is split in two so that sharded gradients can sum their squares
// across ranks first: global norm = sqrt(sum over ranks of grad_square_sum(shard)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "trainers/common/tensor_table.h"

namespace weft::trainers {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double clip_norm = 1.0;  // gradients are scaled to this global norm when above it; <= 0: never
};

// Sum of squares of g[0, n), accumulated in double.
template <typename T>
double grad_square_sum(const T* g, size_t n);

// The factor clip_grad_norm_ applies: min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0.
double clip_coefficient(double norm, double max_norm);

// g[0, n) *= coefficient.
template <typename T>
void scale_grads(T* g, size_t n, double coefficient);

template <typename T>
class AdamW {
 public:
  AdamW(const AdamWConfig& config, const TensorTable& table, size_t begin, size_t end);
  AdamW(const AdamWConfig& config, const TensorTable& table)
      : AdamW(config, table, 0, table.total()) {}

  // One step: params and grads point at the start of the flat buffers (not at begin).
  void step(T* params, const T* grads);

  const AdamWConfig& config() const { return config_; }
  void set_lr(double lr) { config_.lr = lr; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  // First and second moments of elements [begin, end).
  std::vector<T>& m() { return m_; }
  std::vector<T>& v() { return v_; }
  const std::vector<T>& m() const { return m_; }
  const std::vector<T>& v() const { return v_; }

 private:
  AdamWConfig config_;
  TensorTable table_;  // a copy: the optimizer outlives no model it was made for
  size_t begin_, end_;
  int64_t steps_ = 0;
  std::vector<T> m_, v_;
};

}  // namespace weft::trainers
