// weft-train --dp N: the GPT trained data parallel, one process per rank under
// `weftrun -n N` (the world communicator from weftCommInitFromEnv), with --zero 0-3 and
// --bucket-mb. Rank 0 prints the loss of every step as the single-process trainer does, with the
// step's compute time and the communication the compute did not hide; every rank prints the
// memory it holds next to the ZeRO formula at the end.
#pragma once

#include "trainers/options.h"

namespace weft::trainers {

void run_gpt_data_parallel(const TrainOptions& options);

}  // namespace weft::trainers
