// ChunkPlans from tree packings: each root's data is cut into whole chunks split across its
// trees in proportion to their weights (a bounded number of chunks per rank, accepting a small
// rounding loss), and every tree becomes a job of synth/search/forest_plan.h: sends along tree
// edges, pipelined chunk by chunk, on lanes and channels of its own.
#pragma once
#include <cstdint>

#include "src/plan/chunk_plan.h"
#include "synth/pack/packing.h"

namespace weft::synth {

// How the packed allreduce runs: reduce up and broadcast down the same trees (kTrees), the
// packed reduce-scatter followed by the packed allgather (kRsAg), or whichever of the two the
// simulator finds faster at `chooseBytes` (kBest; see there).
enum class AllReduceShape { kBest, kTrees, kRsAg };

struct PackPlanOptions {
  uint64_t maxChunksPerRank = 64;  // chunks of one root's data (all of it for broadcast / reduce)
  double minEfficiency = 0.99;     // fewest chunks whose rounding keeps this share of the rate
  uint64_t minPieces = 16;         // chunks per tree to aim for, so trees pipeline
  // Packings of unevenly weighted trees (fineNeeded) cut each root's data into
  // `fineChunksPerRank` chunks. The default layout is one job per tree (see treeSteadyPieces);
  // the older layouts below run each tree as concurrent jobs in proportion to its weight (about
  // `unitsPerRoot` per root), for links that share bandwidth per transfer, in ramped pieces
  // (about `steadyPieces` large ones per job between doubling / halving ramps).
  uint64_t fineChunksPerRank = 512;
  // With chooseBytes > 0 (weft-synth) fine plans use this many chunks per root instead (0: keep
  // fineChunksPerRank): finer pieces at the pipeline's ends and a finer rounding of the tree
  // weights gain a little in the simulator (see perf/README.md, "Simulated plan
  // layouts"), but a count must then split into 4096 chunks per rank for the plan to apply.
  uint64_t chooseChunksPerRank = 4096;
  uint64_t unitsPerRoot = 8;
  // The other layouts (oldLayouts): fair-share job counts move one job at a time (at most
  // unitMoves times, up to maxUnitsPerRoot per root); equal jobs take the fewest per root from
  // unitsPerRoot to maxUnitsPerRoot that keep minEfficiency of the rate.
  uint64_t maxUnitsPerRoot = 16;
  int unitMoves = 200;
  uint64_t steadyPieces = 4;
  // The default layout: one job per tree, its chunks in proportion to the tree's weight, cut
  // into ramped pieces with about `treeSteadyPieces` large ones. Its lanes get the job's chunk
  // count as plan::Lane::share, so links shared by weight make the trees finish together. With
  // chooseBytes: the faster in the simulator of the packing for the rate alone and the shallow
  // one (shallowTrade) at twice treeSteadyPieces, then of that packing at 1, 2 and 4 times
  // treeSteadyPieces; then, for
  // `balanceRounds` rounds, each root's chunks moved between its jobs by their simulated rates
  // (the fastest kept; 0 by default: the gain is small and each round costs one more simulation,
  // see perf/README.md, "Simulated plan layouts"); with `oldLayouts` the three
  // layouts above compete too.
  uint64_t treeSteadyPieces = 64;
  // The shallow packing's PackOptions::depthTrade (0: not raced).
  double shallowTrade = 1e-4;
  int balanceRounds = 0;
  bool oldLayouts = false;
  AllReduceShape allReduce = AllReduceShape::kBest;
  // Where > 0: the fine allgather / reduce-scatter / broadcast / reduce plan takes the fastest
  // of its candidate layouts (above) and the allreduce the faster shape (each with per-tree
  // jobs), simulated at this many bytes (seconds to tens of seconds for 16 ranks at 1 GiB).
  // 0: per-tree jobs with treeSteadyPieces, and the allreduce shape whose packings have the
  // higher rate (ties: reduce-scatter + allgather).
  uint64_t chooseBytes = 0;
  PackOptions pack;
};

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
