// Ring algorithms (NCCL style): allreduce (reduce-scatter then allgather around the ring),
// allgather and reduce-scatter rings, and pipelined chains for broadcast and reduce.
#pragma once
#include "algorithms/common/options.h"
#include "src/plan/plan.h"

namespace weft::algo {

plan::Plan buildRing(const plan::Spec& spec, const Options& options);

}  // namespace weft::algo
