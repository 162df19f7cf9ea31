#include "synth/search/tree_search.h"

#include <algorithm>
#include <string>

#include "algorithms/tree/tree.h"
#include "src/common/error.h"
#include "synth/search/forest_plan.h"

namespace weft::synth {
namespace {

Tree fromShape(const algo::TreeShape& shape, const std::vector<int>& order) {
  const int n = static_cast<int>(order.size());
  Tree t;
  t.parent.assign(n, -1);
  for (int pos = 0; pos < n; ++pos)
    if (shape.parent[pos] >= 0) t.parent[order[pos]] = order[shape.parent[pos]];
  t.root = order[shape.root];
  return t;
}

void checkOrder(const std::vector<int>& order) {
  const int n = static_cast<int>(order.size());
  if (n < 1) throw Error(Status::kInvalidArgument, "trees: empty rank order");
  std::vector<char> seen(n, 0);
  for (int r : order) {
    if (r < 0 || r >= n || seen[r])
      throw Error(Status::kInvalidArgument, "trees: order is not a permutation of the ranks");
    seen[r] = 1;
  }
}

}  // namespace

std::vector<Tree> doubleBinaryTrees(const std::vector<int>& order) {
  checkOrder(order);
  const auto shapes = algo::doubleBinaryTree(static_cast<int>(order.size()));
  return {fromShape(shapes[0], order), fromShape(shapes[1], order)};
}

std::vector<Tree> hostTrees(const Fabric& f, const std::vector<int>& order) {
  checkOrder(order);
  if (static_cast<int>(order.size()) != f.nranks)
    throw Error(Status::kInvalidArgument, "trees: order does not cover the fabric's ranks");
  // Chains per host, in ring order; hosts in order of their first rank in the ring.
  std::vector<int> hostIds;
  std::vector<std::vector<int>> chains;
  for (int r : order) {
    const int h = f.hostOf.at(r);
    size_t i = 0;
    while (i < hostIds.size() && hostIds[i] != h) ++i;
    if (i == hostIds.size()) hostIds.push_back(h), chains.emplace_back();
    chains[i].push_back(r);
  }
  const int hosts = static_cast<int>(chains.size());
  const auto shapes = algo::doubleBinaryTree(hosts);
  std::vector<Tree> trees;
  for (int t = 0; t < 2; ++t) {
    Tree tree;
    tree.parent.assign(f.nranks, -1);
    std::vector<int> head(hosts), tail(hosts);
    for (int h = 0; h < hosts; ++h) {
      std::vector<int> chain = chains[h];
      if (t == 1) std::reverse(chain.begin(), chain.end());
      head[h] = chain.front();
      tail[h] = chain.back();
      for (size_t i = 1; i < chain.size(); ++i) tree.parent[chain[i]] = chain[i - 1];
    }
    for (int h = 0; h < hosts; ++h) {
      const int up = shapes[t].parent[h];
      if (up >= 0) tree.parent[head[h]] = head[up];
    }
    tree.root = head[shapes[t].root];
    trees.push_back(std::move(tree));
  }
  return trees;
}

std::vector<Tree> searchTrees(const Fabric& f, const RingSearchOptions& options) {
  RingSearchOptions one = options;
  one.maxRings = 1;
  one.minRings = 1;
  const std::vector<Ring> rings = searchRings(f, one);
  if (rings.empty()) throw Error(Status::kInvalidArgument, "trees: no ring over the fabric");
  bool severalHosts = false;
  for (int r = 0; r < f.nranks; ++r) severalHosts |= f.hostOf.at(r) != f.hostOf.at(0);
  return severalHosts ? hostTrees(f, rings[0].order) : doubleBinaryTrees(rings[0].order);
}

plan::ChunkPlan treePlan(plan::Collective coll, const std::vector<Tree>& trees, uint64_t pieces) {
  if (coll != plan::Collective::kAllReduce)
    throw Error(Status::kInvalidArgument, std::string("tree plan: no tree schedule for ") +
                                              plan::collectiveName(coll) + " (allreduce only)");
  if (trees.empty() || pieces == 0)
    throw Error(Status::kInvalidArgument, "tree plan: needs trees and at least one piece");
  const int n = static_cast<int>(trees[0].parent.size());
  std::vector<TreeJob> jobs;
  for (size_t t = 0; t < trees.size(); ++t) {
    if (static_cast<int>(trees[t].parent.size()) != n || treeRoot(trees[t].parent) < 0)
      throw Error(Status::kInvalidArgument,
                  "tree plan: tree " + std::to_string(t) + " is not a spanning tree");
    TreeJob j;
    j.parent = trees[t].parent;
    j.first = t * pieces;
    j.count = pieces;
    jobs.push_back(std::move(j));
  }
  return forestPlan(coll, n, 0, pieces * trees.size(), jobs, "tree-allreduce");
}

}  // namespace weft::synth
