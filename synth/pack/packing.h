// Blink / ForestColl-style tree packing on a Fabric. Data of a root reaches the other ranks over
// weighted spanning trees of ranks; a tree edge parent -> child is a send over the fabric route
// between the two ranks (switches, CPUs and NICs never hold data), so it loads every link of
// that route. The packing maximizes the rate each root gets (the same for all roots of an
// allgather) subject to link capacities: a linear program over trees, solved exactly by column
// generation, with the cheapest tree under the LP's link prices (Chu-Liu / Edmonds) as the
// pricing step. Its optimum is compared with the cut bounds of synth/model/bounds.h, which let
// data cross switches freely; the two agree wherever the fabric's routes do not restrict it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "synth/model/fabric.h"

namespace weft::synth {

// Which routes a tree edge parent -> child loads.
enum class TreeFlow : uint8_t {
  kDown,  // data flows parent -> child (broadcast, allgather)
  kUp,    // child -> parent (reduce, reduce-scatter: reversed trees)
  kBoth,  // both (allreduce: reduce up the tree, then broadcast down it)
};

struct PackedTree {
  int root = 0;
  std::vector<int> parent;  // per rank; -1 at the root
  double weight = 0;        // GB/s of the root's data this tree carries
};

struct PackOptions {
  int maxColumns = 2000;      // trees the column generation may add (its budget)
  double tolerance = 1e-7;    // relative optimality gap at which to stop
  bool seedWithRings = true;  // start from chains along searchRings() rings too
  // Shallow trees among (near-)optimal packings: a tree's column costs its drain (the summed
  // route latencies plus `hopUs` per hop from its root to its farthest rank) times a factor
  // that lets the rate drop by at most `depthTrade` (relative) for shallower trees; pricing
  // also offers each tree re-parented towards its root where that costs nothing at the current
  // prices (Edmonds breaks ties by rank order, which turns equal-cost stars into chains) and a
  // cheap tree of two hops. The last piece of a tree crosses every hop after its root sent it,
  // so deep trees (chains of 15 hops on two-node machines) end a collective late. 0: the rate
  // alone (column generation is then several times faster).
  double depthTrade = 0;
  double hopUs = 1.0;
};

struct PackResult {
  std::vector<PackedTree> trees;  // weight > 0; sorted by root, heaviest first
  double rate = 0;                // GB/s every root gets (sum of its trees' weights)
  bool optimal = false;           // column generation proved optimality (no better tree left)
  int columns = 0;                // trees generated
};

// Packs trees for every root in `roots` (all get the same rate). Throws
// weft::Error(kInvalidArgument) for bad roots or a fabric without routes.
PackResult packTrees(const Fabric& fabric, const std::vector<int>& roots, TreeFlow flow,
                     const PackOptions& options = {});

// All ranks as roots, data flowing down the trees: the allgather packing.
PackResult packAllGather(const Fabric& fabric, const PackOptions& options = {});
// One root: the broadcast packing.
PackResult packBroadcast(const Fabric& fabric, int root, const PackOptions& options = {});

// One line per tree: "root 0: 21.4 GB/s gpu0->gpu1 gpu1->gpu3 ..." (tree edges parent->child).
std::string describePack(const Fabric& fabric, const PackResult& pack);

// Per link: GB/s the packing puts on it (index = link).
std::vector<double> packLinkLoads(const Fabric& fabric, const std::vector<PackedTree>& trees,
                                  TreeFlow flow);

}  // namespace weft::synth
