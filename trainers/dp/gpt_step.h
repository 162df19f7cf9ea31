// One data-parallel training step of the GPT: this rank's rows of the global batch, layer by
// layer, with the DataParallel hooks around every layer (table layer 0 = embeddings, 1..L the
// blocks, L+1 the head), so that gradient buckets are reduced while backward continues and
// ZeRO-3 gathers each layer just before it runs.
#pragma once

#include <cstdint>
#include <vector>

#include "trainers/common/gpt.h"
#include "trainers/dp/data_parallel.h"

namespace weft::trainers {

template <typename T>
class GptDataParallelStep {
 public:
  // Forward and backward of rows [rows, seq] of a global batch of global_rows rows: the loss is
  // the mean over the global batch's positions, so the gradients the ranks sum are the global
  // batch's. Returns the sum of this rank's per-position losses (sum it over the ranks after
  // finish_step and divide by global_rows * seq for the batch's mean loss).
  double forward_backward(Gpt<T>& model, DataParallel<T>& dp, const int32_t* tokens,
                          const int32_t* targets, int rows, int seq, int global_rows);

 private:
  std::vector<T> embedded_, dx_, dnext_;
  std::vector<GptBlockActivations<T>> blocks_;
  GptHeadActivations<T> head_;
  GptBlockScratch<T> scratch_;
};

}  // namespace weft::trainers
