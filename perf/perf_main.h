// The entry point of every perf tool: nccl-tests' flags, sweep, timing, data check and output,
// for the collective a tool describes (perf/common.h).
#pragma once
#include "perf/common.h"

namespace weft::perf {

// Parses nccl-tests' flags, runs the sweep, prints the table; returns the exit status.
int perfMain(int argc, char** argv, const Collective& coll);

}  // namespace weft::perf
