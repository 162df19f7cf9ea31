#include "synth/model/bounds.h"

#include <gtest/gtest.h>

#include <cmath>

#include "src/common/error.h"
#include "synth/model/cost_model.h"
#include "tests/unit/synth/model/model_test_util.h"

namespace weft::synth {
namespace {

using plan::Collective;
using testing::chainFabric;
using testing::golden;
using testing::goldenFabric;
using testing::starFabric;

constexpr uint64_t kGiB = 1ull << 30;
constexpr double kM = static_cast<double>(kGiB);

// Microseconds to move `bytes` at `gbs` GB/s.
double us(double bytes, double gbs) { return bytes / (gbs * kBytesPerUsPerGBs); }

Fabric allLinks(const std::string& name) {
  FabricOptions o;
  o.allLinks = true;
  return fabricFromTopology(golden(name), o);
}

TEST(Bounds, FullyConnectedClosedForms) {
  const Fabric f = fullyConnectedFabric(4, 10.0, 1.0);
  // Every rank takes in 3 x 10 GB/s: allgather moves (N-1)/N * M into each rank.
  const Bound ag = lowerBound(Collective::kAllGather, f, kGiB);
  EXPECT_NEAR(ag.bandwidthUs, us(0.75 * kM, 30.0), 1e-6);
  EXPECT_NEAR(ag.busBw, 30.0, 1e-9);
  EXPECT_NEAR(ag.algBw, 40.0, 1e-9);
  EXPECT_DOUBLE_EQ(ag.latencyUs, 1.0);
  EXPECT_DOUBLE_EQ(ag.timeUs, ag.bandwidthUs);
  EXPECT_NE(ag.cut.text.find("ingress"), std::string::npos) << ag.cut.text;
  EXPECT_DOUBLE_EQ(ag.cut.bw, 30.0);
  const Bound rs = lowerBound(Collective::kReduceScatter, f, kGiB);
  EXPECT_NEAR(rs.bandwidthUs, ag.bandwidthUs, 1e-6);
  EXPECT_NE(rs.cut.text.find("egress"), std::string::npos) << rs.cut.text;
  // Allreduce: reduce-scatter then allgather, busbw = the per-rank bandwidth.
  const Bound ar = lowerBound(Collective::kAllReduce, f, kGiB);
  EXPECT_NEAR(ar.bandwidthUs, 2 * ag.bandwidthUs, 1e-6);
  EXPECT_NEAR(ar.busBw, 30.0, 1e-9);
  // Broadcast: the root reaches each rank directly and through the two others: 30 GB/s.
  const Bound bc = lowerBound(Collective::kBroadcast, f, kGiB, 2);
  EXPECT_NEAR(bc.bandwidthUs, us(kM, 30.0), 1e-6);
  const Bound rd = lowerBound(Collective::kReduce, f, kGiB, 1);
  EXPECT_NEAR(rd.bandwidthUs, us(kM, 30.0), 1e-6);
  // Alltoall: each rank sends 3/4 of its M bytes away over 30 GB/s.
  const Bound a2a = lowerBound(Collective::kAlltoAll, f, kGiB);
  EXPECT_NEAR(a2a.bandwidthUs, us(0.75 * kM, 30.0), 1e-6);
  // A tiny message is latency-bound.
  const Bound tiny = lowerBound(Collective::kAllGather, f, 64);
  EXPECT_DOUBLE_EQ(tiny.timeUs, 1.0);
}

TEST(Bounds, ChainCutsAndLatency) {
  // 0 - 1 - 2 - 3 at 10 GB/s, 2 us per hop.
  const Fabric f = chainFabric(4, 10.0, 2.0);
  // Allgather: the end rank takes in 3/4 M over one link; S = {0,1,2} has ratio 10/3.
  const Bound ag = lowerBound(Collective::kAllGather, f, kGiB);
  EXPECT_NEAR(ag.bandwidthUs, us(0.75 * kM, 10.0), 1e-6);
  EXPECT_DOUBLE_EQ(ag.latencyUs, 6.0);  // the diameter: three hops
  EXPECT_EQ(ag.cut.bw, 10.0);
  // Broadcast from an end: one link. Its latency is the root's eccentricity.
  const Bound bc = lowerBound(Collective::kBroadcast, f, kGiB, 0);
  EXPECT_NEAR(bc.bandwidthUs, us(kM, 10.0), 1e-6);
  EXPECT_DOUBLE_EQ(bc.latencyUs, 6.0);
  EXPECT_DOUBLE_EQ(lowerBound(Collective::kBroadcast, f, kGiB, 1).latencyUs, 4.0);
  // Alltoall: the middle cut carries 2 x 2 x M/4 bytes each way over 10 GB/s, more than any
  // single rank's ingress (3/4 M).
  const Bound a2a = lowerBound(Collective::kAlltoAll, f, kGiB);
  EXPECT_NEAR(a2a.bandwidthUs, us(kM, 10.0), 1e-6);
  EXPECT_EQ(a2a.cut.source.size(), 2u);
}

TEST(Bounds, SwitchNodesRelay) {
  // Five ranks on a switch: each rank's ingress is one 20 GB/s link.
  const Fabric f = starFabric(5, 20.0, 1.0);
  const Bound ag = lowerBound(Collective::kAllGather, f, kGiB);
  EXPECT_NEAR(ag.busBw, 20.0, 1e-9);
  EXPECT_NEAR(ag.bandwidthUs, us(0.8 * kM, 20.0), 1e-6);
  const Bound bc = lowerBound(Collective::kBroadcast, f, kGiB, 3);
  EXPECT_NEAR(bc.algBw, 20.0, 1e-9);
  EXPECT_EQ(maxFlowRate(f, 0, 4), 20.0);
}

// synth.md §4.2 with nominal 25 GB/s NVLink: the fabric of routes carries NVLink only.
TEST(Bounds, GoldenSingleNodeMatchResearchTable) {
  struct Row {
    const char* file;
    double agAlgBw, busBw;
  };
  for (const Row& row :
       {Row{"dgx1-v100.xml", 8 * 150.0 / 7, 150}, Row{"dgx2.xml", 160, 150},
        Row{"dgx-a100.xml", 8 * 300.0 / 7, 300}, Row{"dgx-h100.xml", 8 * 450.0 / 7, 450}}) {
    SCOPED_TRACE(row.file);
    const Fabric f = goldenFabric(row.file);
    const Bound ag = lowerBound(Collective::kAllGather, f, kGiB);
    EXPECT_NEAR(ag.algBw, row.agAlgBw, 1e-6 * row.agAlgBw);
    EXPECT_NEAR(ag.busBw, row.busBw, 1e-6 * row.busBw);
    // The binding cut is one GPU's ingress.
    EXPECT_EQ(ag.cut.text.rfind("gpu", 0), 0u) << ag.cut.text;
    EXPECT_NE(ag.cut.text.find("ingress"), std::string::npos) << ag.cut.text;
    EXPECT_NEAR(ag.cut.bw, row.busBw, 1e-9);
    const Bound ar = lowerBound(Collective::kAllReduce, f, kGiB);
    EXPECT_NEAR(ar.busBw, row.busBw, 1e-6 * row.busBw);
    const Bound rs = lowerBound(Collective::kReduceScatter, f, kGiB);
    EXPECT_NEAR(rs.busBw, row.busBw, 1e-6 * row.busBw);
    std::printf("%s: %s\n", row.file, ag.describe().c_str());
  }
}

TEST(Bounds, GoldenNdv2PairIsBoundByTheNodeEgress) {
  const Fabric f = goldenFabric("ndv2-x2.xml");
  ASSERT_EQ(f.nranks, 16);
  // One 12.5 GB/s NIC per node: T >= (M/16) * 8 / 12.5, algbw 25, busbw 23.4.
  const Bound ag = lowerBound(Collective::kAllGather, f, kGiB);
  EXPECT_NEAR(ag.algBw, 25.0, 1e-9);
  EXPECT_NEAR(ag.busBw, 25.0 * 15 / 16, 1e-9);
  EXPECT_EQ(ag.cut.text.rfind("host", 0), 0u) << ag.cut.text;
  EXPECT_DOUBLE_EQ(ag.cut.bw, 12.5);
  const Bound ar = lowerBound(Collective::kAllReduce, f, kGiB);
  EXPECT_NEAR(ar.busBw, 25.0 * 15 / 16, 1e-9);
  std::printf("ndv2-x2: %s\n", ag.describe().c_str());
}

// With every physical link, a GPU also takes data in over PCIe. The golden two-node files give
// each GPU a 24 GB/s (A100, PCIe gen4) or 48 GB/s (H100, gen5) path to a NIC, so the GPU ingress
// is 300 + 24 and 450 + 48 where synth.md §4.2 counts the NIC rate (300 + 25, 450 + 50).
TEST(Bounds, GoldenTwoNodesBoundByGpuIngressWithAllLinks) {
  for (auto [file, ingress] : {std::pair{"dgx-a100-x2.xml", 324.0}, {"dgx-h100-x2.xml", 498.0}}) {
    SCOPED_TRACE(file);
    const Fabric f = allLinks(file);
    const Bound ag = lowerBound(Collective::kAllGather, f, kGiB);
    EXPECT_NEAR(ag.busBw, ingress, 1e-6 * ingress);
    EXPECT_NEAR(ag.algBw, 16 * ingress / 15, 1e-6 * ingress);
    EXPECT_NE(ag.cut.text.find("gpu"), std::string::npos) << ag.cut.text;
    EXPECT_NE(ag.cut.text.find("ingress"), std::string::npos) << ag.cut.text;
    // The node cut (8 NIC paths of 24 or 48 GB/s) is not binding for allgather ...
    // ... but it is for broadcast: everything crosses to the other host.
    const Bound bc = lowerBound(Collective::kBroadcast, f, kGiB);
    EXPECT_NEAR(bc.algBw, 8 * (ingress - (file[4] == 'a' ? 300 : 450)), 1e-6);
    EXPECT_EQ(bc.cut.text.rfind("host", 0), 0u) << bc.cut.text;
    std::printf("%s (all links): %s\n", file, ag.describe().c_str());
  }
  // The routes give each GPU of a PCIe switch its own NIC (all 8 per host carry traffic), so
  // the fabric of routes is bound by the same GPU ingress as the machine, not by 4 NICs (192).
  for (auto [file, ingress] : {std::pair{"dgx-a100-x2.xml", 324.0}, {"dgx-h100-x2.xml", 498.0}}) {
    SCOPED_TRACE(file);
    const Bound routed = lowerBound(Collective::kAllGather, goldenFabric(file), kGiB);
    EXPECT_NEAR(routed.algBw, 16 * ingress / 15, 1e-6 * ingress) << routed.cut.text;
    EXPECT_NE(routed.cut.text.find("gpu"), std::string::npos) << routed.cut.text;
  }
}

TEST(Bounds, AllLinksAddsThePcieIngressOfADgx1Gpu) {
  // 6 NVLinks (150 GB/s) plus the GPU's PCIe gen3 x16 link (12 GB/s).
  const Bound ag = lowerBound(Collective::kAllGather, allLinks("dgx1-v100.xml"), kGiB);
  EXPECT_NEAR(ag.busBw, 162.0, 1e-6);
}

TEST(Bounds, ReduceMirrorsBroadcastOnASymmetricFabric) {
  const Fabric f = goldenFabric("dgx1-v100.xml");
  for (int root : {0, 5}) {
    const Bound bc = lowerBound(Collective::kBroadcast, f, kGiB, root);
    const Bound rd = lowerBound(Collective::kReduce, f, kGiB, root);
    EXPECT_NEAR(bc.bandwidthUs, rd.bandwidthUs, 1e-6);
    EXPECT_NEAR(bc.algBw, 150.0, 1e-6);  // the root's six NVLinks
  }
}

TEST(Bounds, BadInputIsRejected) {
  const Fabric f = fullyConnectedFabric(3, 10.0);
  EXPECT_THROW(lowerBound(Collective::kSendRecv, f, kGiB), Error);
  EXPECT_THROW(lowerBound(Collective::kBroadcast, f, kGiB, 3), Error);
  EXPECT_THROW(lowerBound(Collective::kReduce, f, kGiB, -1), Error);
  // A rank nobody can reach.
  Fabric cut = fullyConnectedFabric(3, 10.0);
  std::vector<FabricLink> kept;
  for (const FabricLink& l : cut.links)
    if (l.to != 2) kept.push_back(l);
  cut.links = kept;
  try {
    lowerBound(Collective::kAllGather, cut, kGiB);
    FAIL() << "no error for an unreachable rank";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank2"), std::string::npos) << e.what();
  }
}

TEST(Bounds, OneRankNeedsNoTime) {
  const Bound b = lowerBound(Collective::kAllReduce, fullyConnectedFabric(1, 10.0), kGiB);
  EXPECT_DOUBLE_EQ(b.timeUs, 0.0);
}

}  // namespace
}  // namespace weft::synth
