// A tensor-parallel pipeline stage: GPT layers [first, last] run through TpGpt's per-layer API
// (ModelStage), so that a pipeline of stages whose ranks each hold tensor-parallel (and optionally
// sequence-parallel) shards runs under the same schedules as GptStage (trainers/pp).
//
// Every rank of the stage's tp communicator runs the same schedule, so the collectives inside
// TpGpt's steps line up. Boundary activations are the rank's rows of the residual stream:
// rows * seq of them, or that over tp under sequence parallelism (the neighbouring stage's rank
// of the same tp_rank holds the same rows, since both use TpGpt's row split). The shard table
// keeps the whole table's tensor order and layers, so the stage's ranges are found the same way.
#pragma once

#include "trainers/pp/model_stage.h"
#include "trainers/tp/tp_gpt.h"

namespace weft::trainers {

template <typename T>
class TpGptStage final : public ModelStage<TpGpt<T>> {
 public:
  // tp: Grid::tp() (not owned). Collective over tp, as TpGpt's constructor.
  TpGptStage(const GptConfig& config, StageLayers layers, ncclComm_t tp, bool sequence_parallel)
      : ModelStage<TpGpt<T>>("TpGptStage", layers, config, tp, sequence_parallel) {}
};

}  // namespace weft::trainers
