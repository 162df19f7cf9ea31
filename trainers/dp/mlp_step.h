// One training step of the MLP classifier: this rank's rows of the global batch,
// layer by layer, with the LayerHooks (DataParallel) around every layer (table layer i = fc<i>), so
// that gradient buckets are reduced while backward continues and ZeRO-3 gathers each layer just
// before it runs. weft-train's MLP runs it (trainers/compose/train_grid.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "trainers/common/layer_hooks.h"
#include "trainers/common/mlp.h"

namespace weft::trainers {

template <typename T>
class MlpDataParallelStep {
 public:
  // Forward and backward of `rows` images of a global batch of global_rows images: the loss is
  // the mean over the global batch, so the gradients the ranks sum are the global batch's.
  // Returns the sum of this rank's per-image losses (sum it over the ranks after finish_step and
  // divide by global_rows for the batch's mean loss).
  double forward_backward(Mlp<T>& model, LayerHooks& dp, const T* inputs, const int32_t* labels,
                          int rows, int global_rows);

  // Rows of the last forward whose largest logit is the label.
  int correct() const { return correct_; }

 private:
  std::vector<std::vector<T>> pres_, outs_;
  std::vector<T> probs_, losses_, dout_, dx_;
  int correct_ = 0;
};

}  // namespace weft::trainers
