// The NVLink / NVSwitch / PCIe map between GPUs and the access mode it picks, from recorded
// NVML link lists (CUDA ordinals in another order than NVML's, matched by bus id).
#include "transports/cuda/peer_links.h"

#include <gtest/gtest.h>

namespace weft::transport::cuda {
namespace {

using topo::probe::NvLinkPeer;
using topo::probe::NvmlGpu;

NvmlGpu gpu(int index, const std::string& bus, std::vector<NvLinkPeer> links) {
  NvmlGpu g;
  g.index = index;
  g.busId = bus;
  g.nvlinks = std::move(links);
  return g;
}

TEST(PeerLinks, DirectNvLinkSwitchAndPcie) {
  // NVML: GPU a (07) -- 2 links -- GPU b (0a); GPU c (0d) has no NVLink; GPU d (10) has one
  // link to a (remote type unknown).
  const std::vector<NvmlGpu> nvml = {
      gpu(0, "00000000:07:00.0",
          {{0, "00000000:0A:00.0", 0}, {1, "00000000:0A:00.0", 0}, {2, "00000000:10:00.0", -1}}),
      gpu(1, "00000000:0A:00.0", {{0, "00000000:07:00.0", 0}, {1, "00000000:07:00.0", 0}}),
      gpu(2, "00000000:0D:00.0", {}),
      gpu(3, "00000000:10:00.0", {{0, "00000000:07:00.0", -1}}),
  };
  // CUDA order: b, a, c, d.
  const std::vector<std::string> cuda = {"0000:0a:00.0", "0000:07:00.0", "0000:0d:00.0",
                                         "0000:10:00.0"};
  const auto p2p = [](int a, int b) { return !(a == 2 || b == 2) || (a + b == 2); };
  const PeerLinkMap m = PeerLinkMap::build(nvml, cuda, p2p);
  ASSERT_EQ(m.devices(), 4);
  EXPECT_EQ(m.link(0, 1).path, PeerPath::kNvLink);
  EXPECT_EQ(m.link(0, 1).nvlinks, 2);
  EXPECT_EQ(m.link(1, 0).nvlinks, 2);
  EXPECT_EQ(m.link(1, 3).path, PeerPath::kNvLink);
  EXPECT_EQ(m.link(1, 3).nvlinks, 1);
  EXPECT_EQ(m.access(0, 1), PeerAccess::kLoadStore);
  EXPECT_EQ(m.link(0, 2).path, PeerPath::kPcie);  // 0 + 2 == 2: P2P over PCIe
  EXPECT_EQ(m.access(0, 2), PeerAccess::kCopyEngine);
  EXPECT_EQ(m.link(2, 3).path, PeerPath::kNone);
  EXPECT_EQ(m.access(2, 3), PeerAccess::kHostStaged);
  EXPECT_EQ(m.link(0, 3).path, PeerPath::kPcie);  // no link between b and d
  EXPECT_EQ(m.link(2, 2).path, PeerPath::kSame);
  EXPECT_EQ(m.access(2, 2), PeerAccess::kLoadStore);
  EXPECT_EQ(m.link(-1, 0).path, PeerPath::kNone);
  EXPECT_EQ(m.link(0, 4).path, PeerPath::kNone);
  EXPECT_NE(m.describe().find("GPU 0 -> GPU 1: NVLink x2, load/store"), std::string::npos)
      << m.describe();
}

TEST(PeerLinks, NvSwitchFabricNeedsBothEndsOnIt) {
  const std::string sw = "00000000:C1:00.0";  // not a GPU: a switch
  const std::vector<NvmlGpu> nvml = {
      gpu(0, "0000:01:00.0", {{0, sw, 2}, {1, sw, 2}, {2, sw, 2}}),
      gpu(1, "0000:02:00.0", {{0, sw, 2}, {1, "0000:c2:00.0", -1}}),
      gpu(2, "0000:03:00.0", {}),
  };
  const PeerLinkMap m = PeerLinkMap::build(nvml, {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0"},
                                           [](int, int) { return true; });
  EXPECT_EQ(m.link(0, 1).path, PeerPath::kNvSwitch);
  EXPECT_EQ(m.link(0, 1).nvlinks, 2);  // GPU 1 has two switch links (one of unknown type)
  EXPECT_EQ(m.access(1, 0), PeerAccess::kLoadStore);
  EXPECT_EQ(m.link(0, 2).path, PeerPath::kPcie);
}

TEST(PeerLinks, NvLinkWithoutPeerAccessIsNotUsed) {
  const std::vector<NvmlGpu> nvml = {gpu(0, "0000:01:00.0", {{0, "0000:02:00.0", 0}}),
                                     gpu(1, "0000:02:00.0", {{0, "0000:01:00.0", 0}})};
  const PeerLinkMap m =
      PeerLinkMap::build(nvml, {"0000:01:00.0", "0000:02:00.0"}, [](int, int) { return false; });
  EXPECT_EQ(m.link(0, 1).path, PeerPath::kNone);
  EXPECT_EQ(m.access(0, 1), PeerAccess::kHostStaged);
}

TEST(PeerLinks, NoDriverGivesAnEmptyMapAndAReason) {
  std::string why;
  const PeerLinkMap m = probePeerLinks(nullptr, &why);
  EXPECT_EQ(m.devices(), 0);
  EXPECT_NE(why.find("no CUDA driver"), std::string::npos) << why;
}

}  // namespace
}  // namespace weft::transport::cuda
