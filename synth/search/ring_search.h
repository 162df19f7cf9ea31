// NCCL-style ring search: Hamiltonian rings over the ranks of a Fabric, one channel at a time.
// Each ring maximizes its bottleneck bandwidth on the capacity left by the rings before it (a
// ring hop a -> b loads every directed link of the fabric route a -> b, so a link that several
// hops cross is shared among them), found by a depth-first search with backtracking,
// branch-and-bound on the bottleneck and an iteration budget, like NCCL's ncclTopoSearchRec.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "synth/model/fabric.h"

namespace weft::synth {

struct Ring {
  std::vector<int> order;  // ranks in ring order; order[i] sends to order[(i + 1) % n]
  double bw = 0;           // GB/s each hop of this ring gets (its share of the links)
};

struct RingSearchOptions {
  int maxRings = 8;                // channels to find at most
  int64_t maxIterations = 200000;  // DFS nodes per ring (the search-time budget)
  // Stop when a further ring would get less than this fraction of the first ring's bandwidth.
  double minFraction = 0.05;
  // Channels to return at least: rings are duplicated, splitting their bandwidth (NCCL's
  // dupChannels), until there are this many (capped by maxRings).
  int minRings = 1;
};

// Rings in the order found (best first). Throws weft::Error(kInvalidArgument) for a fabric
// without ranks or routes, or bad options.
std::vector<Ring> searchRings(const Fabric& fabric, const RingSearchOptions& options = {});

// How many times the ring's hops cross each directed link of the fabric (index = link).
std::vector<int> ringLinkUses(const Fabric& fabric, const std::vector<int>& order);

// The bottleneck bandwidth of one ring alone on the fabric: min over links of bw / uses.
double ringBottleneck(const Fabric& fabric, const std::vector<int>& order);

// Hops of the ring whose route crosses a link of kind `kind` (e.g. kSys: CPU-socket crossings).
int ringCrossings(const Fabric& fabric, const std::vector<int>& order, topo::LinkKind kind);

// Sum of the rings' bandwidths: what ring allgather / reduce-scatter busbw can reach.
double totalRingBw(const std::vector<Ring>& rings);

// One line per ring: "ring 0: 50 GB/s gpu0 gpu1 gpu3 ...", node names from the fabric (tools).
std::string describeRings(const Fabric& fabric, const std::vector<Ring>& rings);

}  // namespace weft::synth
