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

std::pair<size_t, size_t> stage_tensor_range(const TensorTable& table, StageLayers layers) {
  const auto& tensors = table.tensors();
  size_t lo = tensors.size(), hi = 0;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].layer >= layers.first && tensors[i].layer <= layers.last) {
      lo = std::min(lo, i);
      hi = i + 1;
    }
  return {lo, hi};
}

template class ModelStage<Gpt<float>>;
template class ModelStage<Gpt<double>>;

}  // namespace weft::trainers
