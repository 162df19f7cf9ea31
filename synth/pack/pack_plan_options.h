// The options of the packed plans (synth/pack/pack_plan.h): how each root's data is cut into
// chunks and jobs (synth/pack/job_layouts.h), and which layouts and allreduce shapes race.
#pragma once
#include <cstdint>

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

}  // namespace weft::synth
