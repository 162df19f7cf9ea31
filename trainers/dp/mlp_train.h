// The MLP classifier on Fashion-MNIST trained data parallel: one process per rank under
// `weftrun -n N` (the world communicator from weftCommInitFromEnv; --dp 1 runs alone without a
// launcher), with --zero 0-3 and --bucket-mb as the GPT's --dp. Rank 0 prints every step's loss,
// compute time and the communication the compute did not hide, and the test accuracy on the
// whole Fashion-MNIST test set every --eval-every steps and at the end; --csv gets
// step,loss,val_loss,tokens_per_s,comm_s,compute_s,step_s,test_accuracy (tokens_per_s counts
// images, val_loss is the test set's mean loss).
#pragma once

#include "trainers/options.h"

namespace weft::trainers {

struct MlpDataParallelControls {
  // false: every gradient bucket is reduced after backward (DataParallelConfig::overlap), the
  // baseline of the overlap benchmark.
  bool overlap = true;
  // Steps at the start left out of the timing summary printed at the end (first-touch page
  // faults and connection set-up).
  int warmup_steps = 2;
};

void run_mlp_data_parallel(const TrainOptions& options, const MlpDataParallelControls& controls);

}  // namespace weft::trainers
