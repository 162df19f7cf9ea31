// How a tree packing's chunks become TreeJobs (synth/search/forest_plan.h): how many chunks
// each tree of a root carries, rounded to whole chunks, and how they are cut into jobs. The
// layouts pack_plan.cc builds and races: even (few chunks, one job per tree), per-tree (the
// default for unevenly weighted packings), and the older weight, fair-share and equal layouts.
#pragma once
#include <cstdint>
#include <vector>

#include "synth/model/fabric.h"
#include "synth/pack/pack_plan_options.h"
#include "synth/pack/packing.h"
#include "synth/search/forest_plan.h"

namespace weft::synth::layouts {

struct FineJob {
  size_t tree = 0;
  uint64_t count = 0;
};
using FineJobs = std::vector<std::vector<FineJob>>;  // per root

// Few chunks per root: the fewest whose rounding keeps minEfficiency of the rate (else the best
// up to maxChunksPerRank), scaled for pipelining; one job per tree. Returns chunks per root.
uint64_t evenJobs(const Fabric& f, const PackResult& pack, TreeFlow flow, const PackPlanOptions& o,
                  bool perRootData, double* rateOut, std::vector<TreeJob>* jobs);

// Fair-share jobs: the links share bandwidth per transfer, so every job of every tree gets its
// max-min fair rate whatever the tree's LP weight. The job counts per tree start from the
// weights (about unitsPerRoot per root) and move one job at a time (add, drop, or move within a
// root) while that raises the roots' fair rates in leximin order; each root's chunks then go to
// its jobs in proportion to their fair rates. *rateOut: the slowest root's fair rate.
FineJobs fineJobs(const Fabric& f, const PackResult& pack, TreeFlow flow, const PackPlanOptions& o,
                  double* rateOut);

// The TreeJobs of `fine`: each root's jobs one after another over its C chunks.
std::vector<TreeJob> treeJobs(const PackResult& pack, const FineJobs& fine, uint64_t C,
                              bool perRootData, uint64_t steadyPieces);

// Each tree's chunks in proportion to its LP weight (the packing's rate by bottleneck
// arithmetic), cut into about unitsPerRoot x weight jobs per root.
FineJobs weightJobs(const Fabric& f, const PackResult& pack, TreeFlow flow,
                    const PackPlanOptions& o, double* rateOut);

// One job per tree, its chunks in proportion to the tree's LP weight (rounded as weightJobs).
// With lane shares (plan::Lane::share = a job's chunks) the links share bandwidth per job in
// proportion to its data, so one job per tree suffices and its jobs finish together.
FineJobs perTreeJobs(const Fabric& f, const PackResult& pack, TreeFlow flow,
                     const PackPlanOptions& o, double* rateOut);

// Jobs of equal data: U jobs per root spread over its trees like chunks (the fewest U from
// unitsPerRoot to maxUnitsPerRoot whose rounding keeps minEfficiency of the rate, else the best),
// so every job needs the same fair share.
FineJobs equalJobs(const Fabric& f, const PackResult& pack, TreeFlow flow,
                   const PackPlanOptions& o);

}  // namespace weft::synth::layouts
