// The packing's building blocks: minimum arborescences against brute force, and the simplex.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "src/common/error.h"
#include "synth/pack/arborescence.h"
#include "synth/pack/lp.h"
#include "synth/search/forest_plan.h"

namespace weft::synth {
namespace {

double treeCost(const std::vector<std::vector<double>>& cost, const std::vector<int>& parent) {
  double c = 0;
  for (size_t v = 0; v < parent.size(); ++v)
    if (parent[v] >= 0) c += cost[parent[v]][v];
  return c;
}

TEST(Arborescence, MatchesBruteForceOnRandomGraphs) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> w(0, 9);
  const int n = 5;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0));
    for (auto& row : cost)
      for (double& c : row) c = w(rng);
    const int root = trial % n;
    const auto got = minArborescence(cost, root);
    ASSERT_EQ(treeRoot(got), root);
    // Every parent array over the other nodes, keeping the spanning trees.
    double best = INFINITY;
    std::vector<int> parent(n, 0);
    for (int code = 0; code < static_cast<int>(std::pow(n, n - 1)); ++code) {
      int x = code, k = 0;
      for (int v = 0; v < n; ++v) {
        if (v == root) {
          parent[v] = -1;
          continue;
        }
        parent[v] = x % n;
        x /= n;
        ++k;
      }
      if (treeRoot(parent) == root) best = std::min(best, treeCost(cost, parent));
    }
    EXPECT_DOUBLE_EQ(treeCost(cost, got), best) << "trial " << trial;
  }
}

TEST(Arborescence, RejectsUnreachableNodes) {
  const double inf = INFINITY;
  EXPECT_THROW(minArborescence({{0, 1, inf}, {1, 0, inf}, {inf, inf, 0}}, 0), Error);
  EXPECT_THROW(minArborescence({{0, 1}, {1, 0}}, 2), Error);
}

// The two-hop tree: a spanning tree of depth <= 2 at most as costly as the star, and on a
// switch-like matrix (root edges dear, one cheap hub) it takes the hub.
TEST(Arborescence, TwoLevelTreeIsShallowAndNoDearerThanTheStar) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> w(1, 9);
  const int n = 7;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0));
    for (auto& row : cost)
      for (double& c : row) c = w(rng);
    const int root = trial % n;
    const auto got = twoLevelTree(cost, root);
    ASSERT_EQ(treeRoot(got), root);
    std::vector<int> star(n, root);
    star[root] = -1;
    EXPECT_LE(treeCost(cost, got), treeCost(cost, star));
    EXPECT_GE(treeCost(cost, got), treeCost(cost, minArborescence(cost, root)) - 1e-12);
    for (int v = 0; v < n; ++v)
      if (got[v] >= 0) EXPECT_TRUE(got[v] == root || got[got[v]] == root) << "trial " << trial;
  }
  std::vector<std::vector<double>> hub(5, std::vector<double>(5, 1));
  for (int v = 2; v < 5; ++v) hub[0][v] = 10;
  EXPECT_EQ(twoLevelTree(hub, 0), (std::vector<int>{-1, 0, 1, 1, 1}));
  EXPECT_THROW(twoLevelTree(hub, 5), Error);
}

TEST(PackingLp, SolvesAndReportsDuals) {
  // max x + y  s.t.  x <= 2, y <= 3, x + y <= 4.
  PackingLp lp({2, 3, 4});
  const int x = lp.addColumn(1, {1, 0, 1});
  const int y = lp.addColumn(1, {0, 1, 1});
  EXPECT_NEAR(lp.solve(), 4, 1e-12);
  EXPECT_NEAR(lp.value(x) + lp.value(y), 4, 1e-12);
  const auto d = lp.duals();
  EXPECT_NEAR(d[2], 1, 1e-12);  // only the joint row binds
  EXPECT_NEAR(d[0] + d[1], 0, 1e-12);
  // A column added later re-optimizes from the current basis: z counts twice.
  const int z = lp.addColumn(2, {0, 0, 1});
  EXPECT_NEAR(lp.solve(), 8, 1e-12);
  EXPECT_NEAR(lp.value(z), 4, 1e-12);
  EXPECT_THROW(PackingLp({-1}), Error);
  // Steepest-edge entering reaches the same optimum.
  PackingLp steep({2, 3, 4});
  steep.addColumn(1, {1, 0, 1});
  steep.addColumn(2, {0, 1, 1});
  EXPECT_NEAR(steep.solve(100000, true), 7, 1e-12);
  PackingLp unbounded({1});
  unbounded.addColumn(1, {0});
  EXPECT_THROW(unbounded.solve(), Error);
}

}  // namespace
}  // namespace weft::synth
