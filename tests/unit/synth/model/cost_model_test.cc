#include "synth/model/cost_model.h"

#include <gtest/gtest.h>

#include "src/common/error.h"
#include "synth/model/max_flow.h"

namespace weft::synth {
namespace {

TEST(CostModel, TransferIsLatencyPlusBytesOverBandwidth) {
  Fabric f = fullyConnectedFabric(2, 25.0, 1.5);
  // 25 GB/s moves 25000 bytes per microsecond.
  EXPECT_DOUBLE_EQ(transferTimeUs(f, 0, 1, 250000), 1.5 + 10.0);
  EXPECT_DOUBLE_EQ(transferTimeUs(f, 1, 1, 250000), 0.0);
}

TEST(CostModel, FlowsOnOneLinkShareItEvenly) {
  const std::vector<double> r = maxMinFairRates({30.0}, {{0}, {0}, {0}});
  ASSERT_EQ(r.size(), 3u);
  for (double x : r) EXPECT_DOUBLE_EQ(x, 10.0);
}

TEST(CostModel, MaxMinGivesLeftoverToUnconstrainedFlows) {
  // Link 0 (10 GB/s) carries flows A and B; link 1 (100 GB/s) carries B and C. A and B get 5
  // each on link 0; C takes what B leaves of link 1: 95.
  const std::vector<double> r = maxMinFairRates({10.0, 100.0}, {{0}, {0, 1}, {1}});
  EXPECT_DOUBLE_EQ(r[0], 5.0);
  EXPECT_DOUBLE_EQ(r[1], 5.0);
  EXPECT_DOUBLE_EQ(r[2], 95.0);
}

TEST(CostModel, TiedBottlenecksSettleTogether) {
  // Links 0 and 1 (10 GB/s, two flows each) tie at 5; link 2 (30) keeps 20 for its own flow.
  const std::vector<double> r =
      maxMinFairRates({10.0, 10.0, 30.0}, {{0}, {0, 2}, {1}, {1, 2}, {2}});
  const std::vector<double> want = {5, 5, 5, 5, 20};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(r[i], want[i]) << "flow " << i;
}

TEST(CostModel, WeightedSharingSplitsByWeight) {
  // Link 0 (40 GB/s): weights 1 and 3 get 10 and 30. Link 1 (100) also carries a weight-3 flow
  // limited to 30 by link 0 and a weight-1 flow that takes the remaining 70.
  FairShare share({40.0, 100.0});
  const std::vector<int> a = {0}, b = {0, 1}, c = {1};
  const std::vector<double> w = {1, 3, 1};
  std::vector<double> r;
  share.compute({&a, &b, &c}, r, 1e12, &w);
  EXPECT_DOUBLE_EQ(r[0], 10.0);
  EXPECT_DOUBLE_EQ(r[1], 30.0);
  EXPECT_DOUBLE_EQ(r[2], 70.0);
  // Equal weights are plain max-min.
  const std::vector<double> ones = {1, 1, 1};
  share.compute({&a, &b, &c}, r, 1e12, &ones);
  EXPECT_DOUBLE_EQ(r[0], 20.0);
  EXPECT_DOUBLE_EQ(r[1], 20.0);
  EXPECT_DOUBLE_EQ(r[2], 80.0);
}

TEST(CostModel, FlowWithoutLinksIsUnbounded) {
  const std::vector<double> r = maxMinFairRates({10.0}, {{}, {0}}, 1e9);
  EXPECT_DOUBLE_EQ(r[0], 1e9);
  EXPECT_DOUBLE_EQ(r[1], 10.0);
}

TEST(MaxFlow, ClassicNetworkAndItsMinCut) {
  // s=0, t=3: 0->1 (3), 0->2 (2), 1->2 (1), 1->3 (2), 2->3 (3): max flow 5.
  MaxFlow g(4);
  g.addArc(0, 1, 3);
  g.addArc(0, 2, 2);
  g.addArc(1, 2, 1);
  g.addArc(1, 3, 2);
  g.addArc(2, 3, 3);
  EXPECT_DOUBLE_EQ(g.solve(0, 3), 5.0);
  const std::vector<bool> side = g.sourceSide();
  EXPECT_TRUE(side[0]);
  EXPECT_FALSE(side[3]);
  EXPECT_THROW(g.addArc(0, 7, 1), Error);
  EXPECT_THROW(g.addArc(0, 1, -1), Error);
  EXPECT_THROW(g.solve(1, 1), Error);
}

TEST(MaxFlow, UnreachableSinkHasZeroFlow) {
  MaxFlow g(3);
  g.addArc(0, 1, 4);
  EXPECT_DOUBLE_EQ(g.solve(0, 2), 0.0);
}

}  // namespace
}  // namespace weft::synth
