// Whole tensors from and into the ranks of a dp x tp x pp grid, for checkpoints (whole tensors by
// name, trainers/README.md "Checkpoints") and for evaluating the whole model on one rank.
//
// Gathering: every rank writes the elements it answers for into a zeroed buffer laid out by the
// model's whole table (its dp slice of every layer of its stage, the parameters and AdamW moments
// from whichever buffer holds them: ZeRO-3's parameter shard, ZeRO-1/2/3's moment shards; under
// tensor parallelism its shards, the replicated tensors from tp rank 0 only) and one ncclReduce
// (sum) per buffer over the world communicator assembles them on world rank 0. Every element has
// exactly one non-zero contributor, so the sum is exact. Loading: every rank reads the whole
// tensors and keeps its part, so a checkpoint of any layout loads into any other.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "trainers/common/tensor_table.h"
#include "trainers/compose/grid_step.h"
#include "trainers/parallel/grid.h"

namespace weft::trainers {

// How the rank's flat buffers (LocalModel::table) map onto the whole model's.
template <typename T>
struct WholeLayout {
  const TensorTable* whole = nullptr;
  // Writes into whole (zeroed, whole->total()) the elements of local this rank answers for
  // across the tp group (TP: TpLayout::place with replicated tensors on tp rank 0; otherwise a
  // copy).
  std::function<void(const T* local, T* whole)> place;
  // local = this rank's part of whole (all of its table's tensors).
  std::function<void(const T* whole, T* local)> extract;
};

// The whole model's parameters and AdamW moments; complete on world rank 0 only.
template <typename T>
struct WholeState {
  std::vector<T> params, m, v;
  int64_t steps = 0;
};

// The whole parameters on world rank 0 (other ranks get a buffer of zeros and partial sums).
// Collective over the world.
template <typename T>
std::vector<T> gather_whole_params(const GridTrainer<T>& trainer, const WholeLayout<T>& layout,
                                   const Grid& grid);
// Parameters and the optimizer's moments and step. Collective over the world.
template <typename T>
WholeState<T> gather_whole_state(const GridTrainer<T>& trainer, const WholeLayout<T>& layout,
                                 const Grid& grid);
// Local: the rank's parameters (its whole local buffer), and its optimizer's moments and step.
template <typename T>
void load_whole_state(const WholeState<T>& state, const WholeLayout<T>& layout,
                      GridTrainer<T>& trainer);

}  // namespace weft::trainers
