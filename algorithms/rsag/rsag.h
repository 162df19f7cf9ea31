// Reduce-scatter then allgather, every block moved directly between its owner and each peer
// ("rsag"). Rank r owns block r: slice by slice it adds every peer's part of the block to its
// own, in a cache-sized scratch slice that only the last addition writes out, and (allreduce)
// then hands the finished slice to every peer. With ranks that read each other's memory this
// moves the least data through memory a single-copy allreduce can: per byte 3n-1 reads and
// writes over all ranks (rhd: about 4n-1, ring: more), and n+1 for the reduce-scatter.
#pragma once
#include "algorithms/common/options.h"
#include "src/plan/plan.h"

namespace weft::algo {

plan::Plan buildRsag(const plan::Spec& spec, const Options& options);

}  // namespace weft::algo
