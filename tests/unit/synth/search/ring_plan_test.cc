#include "synth/search/ring_plan.h"

#include <gtest/gtest.h>

#include "search_test_util.h"
#include "src/common/error.h"
#include "synth/model/bounds.h"
#include "synth/search/link_load.h"

namespace weft::synth {
namespace {

using plan::Collective;
using test::goldenFabric;
using test::verifyAtCounts;

const Collective kRingColls[] = {Collective::kAllGather, Collective::kReduceScatter,
                                 Collective::kAllReduce, Collective::kBroadcast,
                                 Collective::kReduce};

TEST(RingPlan, EveryCollectiveVerifiesOnEveryReferenceMachine) {
  for (const char* name :
       {"dgx1-v100", "dgx-a100", "dgx2", "pcie-8gpu", "ndv2-x2", "dgx-a100-x2"}) {
    const Fabric f = goldenFabric(name);
    const auto rings = searchRings(f);
    for (Collective c : kRingColls) {
      RingPlanOptions o;
      o.root = f.nranks - 1;
      const plan::ChunkPlan cp = ringPlan(c, rings, o);
      EXPECT_EQ(verifyAtCounts(cp), "") << name;
    }
  }
}

TEST(RingPlan, SmallAndOddRankCounts) {
  for (int n : {1, 2, 3, 5, 7}) {
    const Fabric f = fullyConnectedFabric(n, 10);
    const auto rings = searchRings(f);
    for (Collective c : kRingColls)
      for (int root : {0, n - 1}) {
        RingPlanOptions o;
        o.root = root;
        EXPECT_EQ(verifyAtCounts(ringPlan(c, rings, o)), "") << n;
      }
  }
}

TEST(RingPlan, DataFollowsRingBandwidth) {
  // DGX-1: rings of 50, 50, 25, 25 GB/s get 2:2:1:1 shares.
  const Fabric f = goldenFabric("dgx1-v100");
  const auto rings = searchRings(f);
  const auto shares = ringShares(rings, {});
  ASSERT_EQ(shares.size(), rings.size());
  EXPECT_EQ(shares[0], 2 * shares[2]);
  EXPECT_EQ(shares[1], 2 * shares[3]);
  // Bottleneck arithmetic: ring allgather reaches the per-GPU ingress bound, busbw 150 GB/s;
  // allreduce busbw 150 GB/s too (each ring runs reduce-scatter then allgather).
  const auto ag = ringPlan(Collective::kAllGather, rings);
  EXPECT_NEAR(bottleneckAlgBw(ag, f) * busBwFactor(Collective::kAllGather, 8), 150, 1e-6);
  const auto ar = ringPlan(Collective::kAllReduce, rings);
  EXPECT_NEAR(bottleneckAlgBw(ar, f) * busBwFactor(Collective::kAllReduce, 8), 150, 1e-6);
  const auto bc = ringPlan(Collective::kBroadcast, rings);
  EXPECT_NEAR(bottleneckAlgBw(bc, f), 150, 1e-6);
}

TEST(RingPlan, PcieBusBandwidthIsTheSocketLink) {
  const Fabric f = goldenFabric("pcie-8gpu");
  const auto ag = ringPlan(Collective::kAllGather, searchRings(f));
  EXPECT_NEAR(bottleneckAlgBw(ag, f) * busBwFactor(Collective::kAllGather, 8), 10, 1e-9);
}

TEST(RingPlan, RejectsBadRequests) {
  const auto rings = searchRings(fullyConnectedFabric(4, 10));
  EXPECT_THROW(ringPlan(Collective::kAlltoAll, rings), Error);
  RingPlanOptions bad;
  bad.root = 4;
  EXPECT_THROW(ringPlan(Collective::kBroadcast, rings, bad), Error);
  EXPECT_THROW(ringPlan(Collective::kAllGather, {}), Error);
  std::vector<Ring> broken = {{{0, 1, 1, 3}, 5.0}};
  EXPECT_THROW(ringPlan(Collective::kAllGather, broken), Error);
}

}  // namespace
}  // namespace weft::synth
