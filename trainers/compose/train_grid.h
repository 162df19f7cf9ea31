// weft-train's one code path: the GPT on any dp x tp x pp grid (the MLP data parallel), one
// process per rank (weftrun, mpirun or a torchrun-style environment; a plain start is the 1x1x1
// run), with checkpoints of whole tensors that any layout resumes.
#pragma once

#include "trainers/options.h"

namespace weft::trainers {

// Trains as the options say. On any error it prints the message (NCCL's last error names a dead
// peer), aborts every communicator and exits the process with status 1, so that the other ranks'
// calls fail fast instead of waiting on this one.
void run_grid_training(const TrainOptions& options);

}  // namespace weft::trainers
