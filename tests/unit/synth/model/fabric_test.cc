#include "synth/model/fabric.h"

#include <gtest/gtest.h>

#include <set>

#include "src/common/error.h"
#include "src/topo/xml_reader.h"

namespace weft::synth {
namespace {

FabricOptions gpus(std::vector<int> list) {
  FabricOptions o;
  o.gpus = std::move(list);
  return o;
}

topo::Topology golden(const std::string& name) {
  return topo::readTopologyFile(std::string(WEFT_SOURCE_DIR) + "/tests/golden/topologies/" + name);
}

TEST(Fabric, Dgx1HasDirectNvlinkNeighboursAndRelayedOthers) {
  Fabric f = fabricFromTopology(golden("dgx1-v100.xml"));
  ASSERT_EQ(f.nranks, 8);
  // GPU0-GPU1: two NVLink2 links, one hop, 50 GB/s.
  ASSERT_EQ(f.routes[0][1].size(), 1u);
  EXPECT_DOUBLE_EQ(f.routeBw(0, 1), 50.0);
  EXPECT_DOUBLE_EQ(f.routeBw(0, 2), 25.0);
  // GPU0-GPU5 have no direct NVLink: relayed through a GPU (two hops).
  EXPECT_EQ(f.routes[0][5].size(), 2u);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      if (a != b) {
        ASSERT_FALSE(f.routes[a][b].empty());
        EXPECT_EQ(f.links[f.routes[a][b].front()].from, a);
        EXPECT_EQ(f.links[f.routes[a][b].back()].to, b);
      }
}

// Two GPUs and two NICs share each PCIe switch of a DGX: every GPU sends to the other host
// through its own NIC and receives through the peer's own NIC, so all 8 NICs carry traffic.
TEST(Fabric, TwoNodeDgxRoutesUseEveryNic) {
  for (const char* file : {"dgx-a100-x2.xml", "dgx-h100-x2.xml"}) {
    SCOPED_TRACE(file);
    const Fabric f = fabricFromTopology(golden(file));
    ASSERT_EQ(f.nranks, 16);
    auto netOf = [&](const std::vector<int>& route, bool first) {
      std::string name;
      for (int l : route) {
        const int v = f.links[l].to;
        if (f.nodes[v].kind == topo::NodeKind::kNet) {
          name = f.nodes[v].name;
          if (first) break;
        }
      }
      return name;
    };
    std::set<std::string> out, in;
    for (int a = 0; a < 8; ++a) {
      out.insert(netOf(f.routes[a][8 + a], true));
      in.insert(netOf(f.routes[8 + a][a], false));
      // The port a GPU uses does not depend on the peer.
      EXPECT_EQ(netOf(f.routes[a][8], true), netOf(f.routes[a][15], true));
    }
    EXPECT_EQ(out.size(), 8u);
    EXPECT_EQ(in.size(), 8u);
  }
}

TEST(Fabric, SubsetOfGpusKeepsRankOrder) {
  Fabric f = fabricFromTopology(golden("dgx1-v100.xml"), gpus({0, 1, 3}));
  ASSERT_EQ(f.nranks, 3);
  EXPECT_DOUBLE_EQ(f.routeBw(1, 2), 50.0);  // GPU1-GPU3: double link
  EXPECT_DOUBLE_EQ(f.routeBw(0, 2), 25.0);  // GPU0-GPU3: single link
  EXPECT_THROW(fabricFromTopology(golden("dgx1-v100.xml"), gpus({0, 8})), Error);
}

TEST(Fabric, NvSwitchIsASharedNode) {
  Fabric f = fabricFromTopology(golden("dgx-a100.xml"));
  ASSERT_EQ(f.nranks, 8);
  EXPECT_EQ(f.routes[0][1].size(), 2u);  // gpu -> nvswitch -> gpu
  EXPECT_GT(f.nodeCount(), 8);
}

TEST(Fabric, TwoHostsCrossTheNetwork) {
  Fabric f = fabricFromTopology(golden("dgx-a100-x2.xml"));
  ASSERT_EQ(f.nranks, 16);
  EXPECT_EQ(f.hostOf[0], 0);
  EXPECT_EQ(f.hostOf[15], 1);
  bool crossesNet = false;
  for (int l : f.routes[0][15]) crossesNet |= f.links[l].kind == topo::LinkKind::kNet;
  EXPECT_TRUE(crossesNet);
}

TEST(Fabric, HostRanksWithoutGpus) {
  FabricOptions o;
  o.hostRanksPerHost = 4;
  Fabric f = fabricFromTopology(golden("build-vm.xml"), o);
  ASSERT_EQ(f.nranks, 4);
  EXPECT_EQ(f.routes[0][3].size(), 2u);  // rank -> cpu -> rank
  EXPECT_DOUBLE_EQ(f.routeBw(0, 3), 10.0);
}

TEST(Fabric, FullyConnected) {
  Fabric f = fullyConnectedFabric(4, 20.0);
  EXPECT_EQ(f.links.size(), 12u);
  EXPECT_DOUBLE_EQ(f.routeBw(2, 3), 20.0);
}

}  // namespace
}  // namespace weft::synth
