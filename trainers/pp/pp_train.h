// weft-train's pipeline-parallel path: --pp N stages (one process each, under weftrun -n N,
// the world communicator from weftCommInitFromEnv), --schedule gpipe|1f1b, --microbatches M.
// With --pp 1 and M > 1 it runs the same stage code in one process: the single-process run
// accumulating the same micro-batches, whose losses and norms the pipeline reproduces bit for
// bit.
#pragma once

#include "trainers/options.h"

namespace weft::trainers {

// Trains the GPT on the KJV text as TrainOptions say; world rank 0 prints each step's loss,
// gradient norm and measured bubble next to (p-1)/(m+p-1), and every stage's bubble at the end.
void run_gpt_pipeline(const TrainOptions& options);

}  // namespace weft::trainers
