// weft-train's tensor-parallel GPT path (--tp N [--sp]): one process per rank, started by a
// launcher (build/perf/weftrun -n N, or torchrun-style variables), the world communicator from
// weftCommInitFromEnv, a dp 1 x tp N x pp 1 Grid. Every rank trains its shards on the same
// batches; rank 0 prints and logs, and writes the one-process checkpoint file.
#pragma once

#include "trainers/options.h"

namespace weft::trainers {

void run_tp_gpt(const TrainOptions& options);

}  // namespace weft::trainers
