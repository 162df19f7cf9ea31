#include "trainers/dp/gpt_step.h"

#include <utility>

namespace weft::trainers {

template <typename T>
double GptDataParallelStep<T>::forward_backward(Gpt<T>& model, DataParallel<T>& dp,
                                                const int32_t* tokens, const int32_t* targets,
                                                int rows, int seq, int global_rows) {
  const int L = model.config().layers, head_layer = L + 1;
  const size_t N = static_cast<size_t>(rows) * seq, C = model.config().channels;
  embedded_.assign(N * C, T(0));
  dp.before_forward(0);
  model.embed_forward(tokens, rows, seq, embedded_.data());
  dp.after_forward(0);
  blocks_.resize(L);
  const T* x = embedded_.data();
  for (int l = 0; l < L; ++l) {
    dp.before_forward(l + 1);
    model.block_forward(l, x, rows, seq, blocks_[l]);
    dp.after_forward(l + 1);
    x = blocks_[l].out.data();
  }
  dp.before_forward(head_layer);
  model.head_forward(x, targets, rows, seq, head_);
  dp.after_forward(head_layer);
  double loss_sum = 0;
  for (T loss : head_.losses) loss_sum += loss;

  dnext_.assign(N * C, T(0));
  const T loss_scale = T(1) / static_cast<T>(static_cast<double>(global_rows) * seq);
  dp.before_backward(head_layer);
  model.head_backward(x, head_, targets, loss_scale, dnext_.data(), rows, seq);
  dp.after_backward(head_layer);
  for (int l = L - 1; l >= 0; --l) {
    const T* input = l == 0 ? embedded_.data() : blocks_[l - 1].out.data();
    dx_.assign(N * C, T(0));
    dp.before_backward(l + 1);
    model.block_backward(l, input, blocks_[l], dnext_.data(), dx_.data(), rows, seq, scratch_);
    dp.after_backward(l + 1);
    std::swap(dx_, dnext_);
  }
  dp.before_backward(0);
  model.embed_backward(tokens, rows, seq, dnext_.data());
  dp.after_backward(0);
  return loss_sum;
}

template class GptDataParallelStep<float>;
template class GptDataParallelStep<double>;

}  // namespace weft::trainers
