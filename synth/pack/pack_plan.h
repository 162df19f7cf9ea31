// ChunkPlans from tree packings: each root's data is cut into whole chunks split across its
// trees in proportion to their weights (a bounded number of chunks per rank, accepting a small
// rounding loss), and every tree becomes a job of synth/search/forest_plan.h: sends along tree
// edges, pipelined chunk by chunk, on lanes and channels of its own.
#pragma once
#include <cstdint>

#include "src/plan/chunk_plan.h"
#include "synth/pack/pack_plan_options.h"
#include "synth/pack/packing.h"

namespace weft::synth {

// The packing a collective uses: allgather (every root, down), reduce-scatter (every root,
// up: reversed trees), allreduce (every root, up then down the same trees), broadcast (the root,
// down), reduce (the root, up).
PackResult packFor(plan::Collective coll, const Fabric& fabric, int root,
                   const PackOptions& options = {});

// Whether `pack` needs the fine plan: a root's trees differ in weight, or a tree has a rank with
// several children (that rank stores and forwards whole pieces to all but the first).
bool fineNeeded(const PackResult& pack);

struct PackedPlan {
  plan::ChunkPlan plan;
  PackResult pack;
  uint64_t chunksPerRoot = 0;
  double roundedRate = 0;  // GB/s per root after rounding to whole chunks (<= pack.rate)
};

// The plan for `coll` (allgather, reducescatter, allreduce, broadcast, reduce). Throws
// weft::Error(kInvalidArgument) for other collectives, a bad root or bad options.
PackedPlan packPlanDetailed(plan::Collective coll, const Fabric& fabric, int root = 0,
                            const PackPlanOptions& options = {});
plan::ChunkPlan packPlan(plan::Collective coll, const Fabric& fabric, int root = 0,
                         const PackPlanOptions& options = {});

}  // namespace weft::synth
