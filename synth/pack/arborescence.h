// Minimum-cost spanning arborescence (Chu-Liu / Edmonds) on a complete directed graph: the
// pricing step of the tree packing.
#pragma once
#include <vector>

namespace weft::synth {

// parent[v] for the cheapest out-tree rooted at `root` spanning nodes 0..n-1, where an edge
// u -> v costs cost[u][v] (non-negative; infinity = no edge). parent[root] = -1. Throws
// weft::Error(kInvalidArgument) when no spanning arborescence exists or the matrix is not n x n.
std::vector<int> minArborescence(const std::vector<std::vector<double>>& cost, int root);

}  // namespace weft::synth
