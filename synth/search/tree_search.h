// Trees for allreduce, NCCL style: a double binary tree over the order of the best ring (so tree
// edges follow the fast links the ring search found), or, on fabrics of several hosts, a chain
// through each host's ranks whose heads are joined by a double binary tree across hosts.
#pragma once
#include <cstdint>
#include <vector>

#include "src/plan/chunk_plan.h"
#include "synth/model/fabric.h"
#include "synth/search/ring_search.h"

namespace weft::synth {

struct Tree {
  std::vector<int> parent;  // per rank; -1 at the root
  int root = 0;
};

// NCCL's double binary tree over positions of `order` (position i is rank order[i]).
std::vector<Tree> doubleBinaryTrees(const std::vector<int>& order);

// Per host a chain in `order`'s order, heads joined across hosts by a double binary tree (two
// trees; both share the chains, reversed in the second so each chain link is used both ways).
std::vector<Tree> hostTrees(const Fabric& fabric, const std::vector<int>& order);

// hostTrees() over the first ring of searchRings() on fabrics of several hosts, else
// doubleBinaryTrees() over it.
std::vector<Tree> searchTrees(const Fabric& fabric, const RingSearchOptions& options = {});

// Allreduce over the trees: each tree reduces its share of the data to its root and broadcasts
// it back, `pieces` chunks per tree pipelined one after another. Throws
// weft::Error(kInvalidArgument) for other collectives or trees that do not span the same ranks.
plan::ChunkPlan treePlan(plan::Collective coll, const std::vector<Tree>& trees,
                         uint64_t pieces = 8);

}  // namespace weft::synth
