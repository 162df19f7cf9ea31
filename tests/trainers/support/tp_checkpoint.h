// Checkpoints of a tensor-parallel GPT: the same file a one-process run writes (whole tensors by
// name, trainers/README.md "Checkpoints"), assembled from the ranks' shards, and loaded back by
// each rank keeping its shards, so any tp layout resumes from any other's checkpoint. Test
// support: tests/trainers/tp_test.cc checks a TP model's shards against the one-process file
// with it; weft-train writes and reads checkpoints of every layout through
// trainers/compose/grid_state.h.
#pragma once

#include <cstdint>

#include "trainers/common/adamw.h"
#include "trainers/common/tensor_file.h"
#include "trainers/tp/tp_gpt.h"

namespace weft::trainers {

// Collective over the model's tp communicator; every rank returns the whole file. The optimizer
// must cover the rank's whole shard buffer.
template <typename T>
TensorFile make_tp_checkpoint(const TpGpt<T>& model, const AdamW<T>& optimizer, uint64_t seed);
// Local: loads the rank's shards of the parameters and AdamW moments, and the step; returns the
// seed. Throws std::runtime_error for another model or configuration.
template <typename T>
uint64_t restore_tp_checkpoint(const TensorFile& file, TpGpt<T>& model, AdamW<T>& optimizer);

}  // namespace weft::trainers
