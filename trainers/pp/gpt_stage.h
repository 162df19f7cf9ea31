// The default pipeline stage: a GPT's layers [first, last] run through Gpt<T>'s per-layer API
// (embed_*, block_*, head_*), one set of activations per micro-batch in flight (ModelStage).
//
// The stage keeps a whole Gpt<T> (its flat buffers hold every tensor, so that offsets, names and
// initialisation match the single-process model) but reads, writes and reports only its layers'
// range of them.
#pragma once

#include "trainers/common/gpt.h"
#include "trainers/pp/model_stage.h"

namespace weft::trainers {

template <typename T>
class GptStage final : public ModelStage<Gpt<T>> {
 public:
  GptStage(const GptConfig& config, StageLayers layers)
      : ModelStage<Gpt<T>>("GptStage", layers, config) {}
};

}  // namespace weft::trainers
