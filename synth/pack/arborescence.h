// Minimum-cost spanning arborescence (Chu-Liu / Edmonds) on a complete directed graph: the
// pricing step of the tree packing.
#pragma once
#include <vector>

namespace weft::synth {

// parent[v] for the cheapest out-tree rooted at `root` spanning nodes 0..n-1, where an edge
// u -> v costs cost[u][v] (non-negative; infinity = no edge). parent[root] = -1. Throws
// weft::Error(kInvalidArgument) when no spanning arborescence exists or the matrix is not n x n.
std::vector<int> minArborescence(const std::vector<std::vector<double>>& cost, int root);

// A cheap out-tree of at most two hops: the root feeds a set of hubs, every other node hangs
// off the root or the hub it is cheapest from; the hubs chosen by local search (add, drop or
// swap one while that lowers the cost), an uncapacitated facility location. Not optimal in
// general; the pricing of the packing takes it where it beats the deeper optimum's reduced
// cost with its shorter drain.
std::vector<int> twoLevelTree(const std::vector<std::vector<double>>& cost, int root);

}  // namespace weft::synth
