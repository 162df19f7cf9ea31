// Binary-tree algorithms. Allreduce uses NCCL's double binary tree: two complementary trees
// (the second mirrors the first for even rank counts and shifts it by one for odd counts), each
// reducing half of the data up to its root and broadcasting it back down, pipelined in chunks.
// Broadcast and reduce use one binary tree rooted at the spec's root, also pipelined.
#pragma once
#include <array>
#include <vector>

#include "algorithms/common/options.h"
#include "src/plan/plan.h"

namespace weft::algo {

struct TreeShape {
  std::vector<int> parent;                 // -1 at the root
  std::vector<std::vector<int>> children;  // at most two, lower rank first
  int root = 0;
};

// NCCL's in-order binary tree over ranks 0..n-1, rooted at 0 (which has one child).
TreeShape binaryTree(int nranks);
// The same tree with every rank r relabelled as (r + root) % n.
TreeShape rootedBinaryTree(int nranks, int root);
// NCCL's double binary tree.
std::array<TreeShape, 2> doubleBinaryTree(int nranks);

plan::Plan buildTree(const plan::Spec& spec, const Options& options);

}  // namespace weft::algo
