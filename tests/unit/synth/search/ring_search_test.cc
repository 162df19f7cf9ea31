#include "synth/search/ring_search.h"

#include <gtest/gtest.h>

#include <set>

#include "search_test_util.h"
#include "src/common/error.h"

namespace weft::synth {
namespace {

using test::goldenFabric;

bool isPermutation(const std::vector<int>& order, int n) {
  std::set<int> s(order.begin(), order.end());
  return static_cast<int>(order.size()) == n && static_cast<int>(s.size()) == n &&
         *s.begin() == 0 && *s.rbegin() == n - 1;
}

// Every hop of the ring is a direct NVLink (one-link route of kind NVL).
bool nvlinkOnly(const Fabric& f, const std::vector<int>& order) {
  const int n = static_cast<int>(order.size());
  for (int i = 0; i < n; ++i) {
    const auto& route = f.routes[order[i]][order[(i + 1) % n]];
    if (route.size() != 1 || f.links[route[0]].kind != topo::LinkKind::kNvLink) return false;
  }
  return true;
}

// The rings never overcommit a link: summed bandwidth times uses stays within capacity.
void expectWithinCapacity(const Fabric& f, const std::vector<Ring>& rings) {
  std::vector<double> used(f.links.size(), 0);
  for (const Ring& r : rings) {
    const auto uses = ringLinkUses(f, r.order);
    for (size_t l = 0; l < uses.size(); ++l) used[l] += r.bw * uses[l];
  }
  for (size_t l = 0; l < used.size(); ++l) EXPECT_LE(used[l], f.links[l].bw * (1 + 1e-9)) << l;
}

TEST(RingSearch, Dgx1FindsNvlinkOnlyRingsUsingEveryLink) {
  const Fabric f = goldenFabric("dgx1-v100");
  const auto rings = searchRings(f);
  ASSERT_GE(rings.size(), 4u);
  for (const Ring& r : rings) {
    EXPECT_TRUE(isPermutation(r.order, 8));
    EXPECT_TRUE(nvlinkOnly(f, r.order));
  }
  // Two rings over the double links (50 GB/s), two over the single links (25 GB/s): all six
  // NVLinks of every GPU in both directions, 150 GB/s = the per-GPU ingress bound.
  EXPECT_DOUBLE_EQ(rings[0].bw, 50);
  EXPECT_DOUBLE_EQ(rings[1].bw, 50);
  EXPECT_DOUBLE_EQ(totalRingBw(rings), 150);
  expectWithinCapacity(f, rings);
  const std::string text = describeRings(f, rings);
  EXPECT_EQ(text.rfind("ring 0: 50 GB/s gpu0 ", 0), 0u) << text;
  EXPECT_NE(text.find("ring 3: 25 GB/s"), std::string::npos) << text;
}

TEST(RingSearch, NvSwitchMachinesTakeTheFullPortBandwidth) {
  for (const char* name : {"dgx-a100", "dgx2", "dgx-h100"}) {
    const Fabric f = goldenFabric(name);
    const auto rings = searchRings(f);
    ASSERT_FALSE(rings.empty()) << name;
    EXPECT_TRUE(isPermutation(rings[0].order, f.nranks)) << name;
    // One GPU port in and out per rank: any order gets the port bandwidth.
    double port = 0;
    for (int l : f.routes[0][1]) port = std::max(port, f.links[l].bw);
    EXPECT_DOUBLE_EQ(rings[0].bw, f.routeBw(0, 1)) << name;
    EXPECT_NEAR(totalRingBw(rings), f.routeBw(0, 1), 1e-9) << name;
    expectWithinCapacity(f, rings);
  }
}

TEST(RingSearch, PcieMachineCrossesTheSocketsTwice) {
  const Fabric f = goldenFabric("pcie-8gpu");
  const auto rings = searchRings(f);
  ASSERT_FALSE(rings.empty());
  EXPECT_EQ(ringCrossings(f, rings[0].order, topo::LinkKind::kSys), 2);
  EXPECT_DOUBLE_EQ(rings[0].bw, 10);  // the socket link, each way once
  // Every ring (including a naive 0..7 order with extra crossings) is no better.
  EXPECT_LT(ringBottleneck(f, {0, 4, 1, 5, 2, 6, 3, 7}), rings[0].bw);
  expectWithinCapacity(f, rings);
}

TEST(RingSearch, TwoHostsCrossTheNetworkTwicePerRing) {
  for (const char* name : {"ndv2-x2", "dgx-a100-x2"}) {
    const Fabric f = goldenFabric(name);
    const auto rings = searchRings(f);
    ASSERT_FALSE(rings.empty()) << name;
    for (const Ring& r : rings) {
      EXPECT_TRUE(isPermutation(r.order, 16)) << name;
      EXPECT_EQ(ringCrossings(f, r.order, topo::LinkKind::kNet), 2) << name;
    }
    expectWithinCapacity(f, rings);
  }
}

TEST(RingSearch, FullyConnectedAndTrivialFabrics) {
  const Fabric f = fullyConnectedFabric(5, 20);
  const auto rings = searchRings(f);
  // K5 splits into 4 link-disjoint directed Hamiltonian rings.
  EXPECT_DOUBLE_EQ(rings[0].bw, 20);
  // Greedy widest rings block each other after 3; the one-speed search backtracks to all 4.
  EXPECT_NEAR(totalRingBw(rings), 80, 1e-9);
  EXPECT_EQ(rings.size(), 4u);
  expectWithinCapacity(f, rings);
  const auto one = searchRings(fullyConnectedFabric(1, 20));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].order, std::vector<int>{0});
}

TEST(RingSearch, DuplicatesChannelsOnRequest) {
  RingSearchOptions o;
  o.minRings = 4;
  const auto rings = searchRings(goldenFabric("dgx-a100"), o);
  ASSERT_EQ(rings.size(), 4u);
  EXPECT_NEAR(totalRingBw(rings), 300, 1e-9);
}

TEST(RingSearch, RejectsBadInput) {
  RingSearchOptions o;
  o.maxRings = 0;
  EXPECT_THROW(searchRings(fullyConnectedFabric(3, 1), o), Error);
  EXPECT_THROW(searchRings(Fabric{}), Error);
}

}  // namespace
}  // namespace weft::synth
