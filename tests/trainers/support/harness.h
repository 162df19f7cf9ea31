// Shared setup of the trainer tests (tests/trainers): ranks as threads of this process on a grid,
// synthetic text, and the one-process run with clipped AdamW that the parallel runs are checked
// against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "trainers/common/adamw.h"
#include "trainers/common/data.h"
#include "trainers/common/gpt.h"
#include "trainers/parallel/grid.h"

namespace weft::trainers {

// Runs body(grid) on shape.size() threads, each a rank of a Grid of that shape over a world
// communicator from ncclCommInitAll, and waits for them; fails the test with the rank and message
// of any exception a rank threw.
void run_grid_ranks(const GridShape& shape, const std::function<void(Grid&)>& body);

// `length` tokens below vocab with runs of repeats (every third one drawn from Rng(seed), the
// others repeating the one before), so a model has something to learn besides frequencies.
std::vector<int32_t> repeating_text(int vocab, uint64_t seed, size_t length = 4000);

// AdamW with weight decay and a clipping norm below the first steps' gradient norms, so that
// clipping scales the gradients.
AdamWConfig clipping_adamw();

// After backward: clips the gradients by their global norm (one sum over the whole buffer, as
// one process computes it) and steps; returns the norm before clipping.
template <typename T>
double clip_and_step(std::vector<T>& params, std::vector<T>& grads, AdamW<T>& optimizer);

template <typename T>
struct OneProcessRun {
  std::vector<double> losses, norms;  // per step; norms before clipping
  std::vector<T> first_grads;         // the gradients of step 0, before clipping
  std::vector<T> params;              // after the last step
};

// `steps` steps of one Gpt<T> from initialize(seed): step s trains on batcher's global batch s of
// [rows, seq] and clips and steps with clip_and_step.
template <typename T>
OneProcessRun<T> train_gpt_one_process(const GptConfig& config, const AdamWConfig& adamw,
                                       uint64_t seed, const TextBatcher& batcher, int rows, int seq,
                                       int steps);

}  // namespace weft::trainers
