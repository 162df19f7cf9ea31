// ChunkPlans over rings found by searchRings(): one lane per ring and rank, channel = ring index.
// The data is split across rings in proportion to their bandwidth, in whole chunks: `units`
// shares are apportioned to the rings, and each unit is one chunk per rank (allgather,
// reduce-scatter), n chunks (allreduce: one per ring position) or one chunk (broadcast, reduce).
#pragma once
#include <cstdint>
#include <vector>

#include "src/plan/chunk_plan.h"
#include "synth/search/ring_search.h"

namespace weft::synth {

struct RingPlanOptions {
  int root = 0;                 // broadcast / reduce
  uint64_t maxUnits = 16;       // most shares the data is split into across rings
  double minEfficiency = 0.99;  // smallest share count whose rounding keeps this much bandwidth
};

// Ring allgather, reduce-scatter, allreduce (reduce-scatter then allgather on each ring),
// broadcast (a chain along each ring from the root) or reduce (a chain ending at the root).
// Throws weft::Error(kInvalidArgument) for other collectives, no rings, rings that are not
// permutations of the same ranks, or a bad root.
plan::ChunkPlan ringPlan(plan::Collective coll, const std::vector<Ring>& rings,
                         const RingPlanOptions& options = {});

// The units each ring gets (for tests and tools): apportioned by bandwidth.
std::vector<uint64_t> ringShares(const std::vector<Ring>& rings, const RingPlanOptions& options);

}  // namespace weft::synth
