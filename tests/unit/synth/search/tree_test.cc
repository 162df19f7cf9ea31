#include <gtest/gtest.h>

#include "search_test_util.h"
#include "src/common/error.h"
#include "synth/search/forest_plan.h"
#include "synth/search/link_load.h"
#include "synth/search/tree_search.h"

namespace weft::synth {
namespace {

using plan::Collective;
using test::goldenFabric;
using test::verifyAtCounts;

int depth(const Tree& t, int r) {
  int d = 0;
  while (t.parent[r] >= 0) r = t.parent[r], ++d;
  return d;
}

TEST(Trees, DoubleBinaryTreesSpanAndStayShallow) {
  const std::vector<int> order = {3, 1, 4, 0, 6, 2, 7, 5};
  const auto trees = doubleBinaryTrees(order);
  ASSERT_EQ(trees.size(), 2u);
  for (const Tree& t : trees) {
    EXPECT_EQ(treeRoot(t.parent), t.root);
    for (int r = 0; r < 8; ++r) EXPECT_LE(depth(t, r), 3);
  }
  // Mirrored for even counts: a rank interior in one tree is a leaf in the other, except roots.
  int interiorBoth = 0;
  for (int r = 0; r < 8; ++r) {
    bool in0 = false, in1 = false;
    for (int c = 0; c < 8; ++c) in0 |= trees[0].parent[c] == r, in1 |= trees[1].parent[c] == r;
    interiorBoth += in0 && in1;
  }
  EXPECT_LE(interiorBoth, 2);
}

TEST(Trees, HostTreesChainInsideHosts) {
  const Fabric f = goldenFabric("dgx-a100-x2");
  const auto trees = searchTrees(f);
  ASSERT_EQ(trees.size(), 2u);
  for (const Tree& t : trees) {
    ASSERT_EQ(treeRoot(t.parent), t.root);
    int crossHost = 0;
    for (int r = 0; r < f.nranks; ++r)
      if (t.parent[r] >= 0) crossHost += f.hostOf[r] != f.hostOf[t.parent[r]];
    EXPECT_EQ(crossHost, 1);  // two hosts: one tree edge across
  }
}

TEST(Trees, HostTreesCrossTheNetworkOncePerTree) {
  // ndv2-x2: one 12.5 GB/s NIC per host. Rings cross it twice each way (allreduce algbw 6.7);
  // the two host trees cross it once each way each, reaching the bound (12.5).
  const Fabric f = goldenFabric("ndv2-x2");
  const plan::ChunkPlan tree = treePlan(Collective::kAllReduce, searchTrees(f), 4);
  EXPECT_NEAR(bottleneckAlgBw(tree, f), 12.5, 1e-9);
}

TEST(Trees, AllreducePlansVerify) {
  for (const char* name :
       {"dgx1-v100", "dgx-a100", "dgx2", "pcie-8gpu", "ndv2-x2", "dgx-a100-x2"}) {
    const Fabric f = goldenFabric(name);
    const plan::ChunkPlan cp = treePlan(Collective::kAllReduce, searchTrees(f), 4);
    EXPECT_EQ(verifyAtCounts(cp, {1, 3}), "") << name;
    EXPECT_GT(bottleneckAlgBw(cp, f), 0) << name;
  }
  for (int n : {1, 2, 3, 5, 6})
    EXPECT_EQ(verifyAtCounts(
                  treePlan(Collective::kAllReduce, searchTrees(fullyConnectedFabric(n, 5)), 3)),
              "")
        << n;
}

TEST(ForestPlan, EveryCollectiveOverHandMadeTrees) {
  // Two trees per root on 4 ranks: a chain and a star.
  const int n = 4;
  auto chainFrom = [&](int root) {
    std::vector<int> parent(n, -1);
    for (int k = 1; k < n; ++k) parent[(root + k) % n] = (root + k - 1) % n;
    return parent;
  };
  auto starFrom = [&](int root) {
    std::vector<int> parent(n, root);
    parent[root] = -1;
    return parent;
  };
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    std::vector<TreeJob> jobs;
    for (int r = 0; r < n; ++r) {
      jobs.push_back({chainFrom(r), r * 5ull, 3, 0});
      jobs.push_back({starFrom(r), r * 5ull + 3, 2, 1});
    }
    EXPECT_EQ(verifyAtCounts(forestPlan(c, n, 0, 20, jobs, "forest")), "");
  }
  for (Collective c : {Collective::kBroadcast, Collective::kReduce, Collective::kAllReduce}) {
    std::vector<TreeJob> jobs = {{chainFrom(2), 0, 4, 0}, {starFrom(2), 4, 3, 0}};
    EXPECT_EQ(verifyAtCounts(forestPlan(c, n, 2, 7, jobs, "forest")), "");
  }
  // Jobs that share directed pairs get different channels.
  const auto ch =
      forestChannels(Collective::kBroadcast,
                     {{chainFrom(0), 0, 1, 0}, {chainFrom(0), 1, 1, 0}, {starFrom(1), 2, 1, 0}});
  EXPECT_NE(ch[0], ch[1]);
}

// Jobs with explicit, non-contiguous ranges; every lane's share is its job's chunk count.
TEST(ForestPlan, RangesAndLaneShares) {
  const int n = 4;
  std::vector<int> chain(n, -1), star(n, 0);
  for (int k = 1; k < n; ++k) chain[k] = k - 1;
  star[0] = -1;
  for (Collective c : {Collective::kBroadcast, Collective::kReduce, Collective::kAllReduce}) {
    TreeJob a{chain, 0, 5, 0}, b{star, 0, 3, 0};
    a.ranges = {{0, 2}, {3, 2}, {7, 1}};  // chunks 0-1, 3-4, 7
    b.ranges = {{2, 1}, {5, 2}};          // chunks 2, 5-6
    std::vector<std::vector<int>> laneJobs;
    const plan::ChunkPlan cp = forestPlan(c, n, 0, 8, {a, b}, "ranges", &laneJobs);
    EXPECT_EQ(verifyAtCounts(cp, {1, 2}), "") << plan::collectiveName(c);
    for (int r = 0; r < n; ++r)
      for (size_t l = 0; l < cp.programs[r].lanes.size(); ++l)
        EXPECT_EQ(cp.programs[r].lanes[l].share, laneJobs[r][l] == 0 ? 5u : 3u);
  }
  {
    // Allreduce as reduce then broadcast over different jobs whose ranges interleave.
    TreeJob up{chain, 0, 4, 0}, down{star, 0, 4, 0};
    up.ranges = {{0, 1}, {2, 2}, {1, 1}};
    down.ranges = {{1, 1}, {0, 1}, {3, 1}, {2, 1}};
    EXPECT_EQ(verifyAtCounts(forestPlanAllReduce(n, 4, {up}, {down}, "rsag")), "");
  }
  TreeJob overlap{chain, 0, 3, 0};
  overlap.ranges = {{0, 2}, {1, 1}};
  EXPECT_THROW(forestPlan(Collective::kBroadcast, n, 0, 3, {overlap}, "x"), Error);
  TreeJob badSum{chain, 0, 3, 0};
  badSum.ranges = {{0, 2}};
  EXPECT_THROW(forestPlan(Collective::kBroadcast, n, 0, 2, {badSum}, "x"), Error);
}

TEST(ForestPlan, RejectsBrokenJobs) {
  const std::vector<int> chain = {-1, 0, 1};
  EXPECT_THROW(forestPlan(Collective::kBroadcast, 3, 0, 2, {{chain, 0, 1, 0}}, "x"), Error);
  EXPECT_THROW(forestPlan(Collective::kBroadcast, 3, 1, 1, {{chain, 0, 1, 0}}, "x"), Error);
  EXPECT_THROW(forestPlan(Collective::kBroadcast, 3, 0, 1, {{{-1, 2, 1}, 0, 1, 0}}, "x"), Error);
  EXPECT_THROW(forestPlan(Collective::kAllGather, 3, 0, 3,
                          {{chain, 0, 1, 0}, {chain, 1, 1, 0}, {chain, 2, 1, 0}}, "x"),
               Error);  // blocks of ranks 1 and 2 carried by trees rooted at 0
  EXPECT_THROW(treePlan(Collective::kAllGather, doubleBinaryTrees({0, 1, 2})), Error);
}

}  // namespace
}  // namespace weft::synth
