// NCCL_IB_HCA filters and the automatic GID choice of transports/ib (no device needed).
#include "transports/ib/devices.h"

#include <gtest/gtest.h>

namespace weft::ib {
namespace {

TEST(HcaFilter, EmptyAllowsEverything) {
  HcaFilter f = parseHcaFilter("");
  EXPECT_TRUE(hcaAllowed(f, "mlx5_0", 1));
  EXPECT_TRUE(hcaAllowed(f, "rxe0", 2));
}

TEST(HcaFilter, PrefixesAndPorts) {
  HcaFilter f = parseHcaFilter("mlx5_1:2,rxe");
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_FALSE(f.exclude);
  EXPECT_FALSE(f.exact);
  EXPECT_TRUE(hcaAllowed(f, "mlx5_1", 2));
  EXPECT_FALSE(hcaAllowed(f, "mlx5_1", 1));
  EXPECT_FALSE(hcaAllowed(f, "mlx5_0", 2));
  EXPECT_TRUE(hcaAllowed(f, "rxe0", 1));     // a prefix
  EXPECT_TRUE(hcaAllowed(f, "mlx5_10", 2));  // NCCL matches prefixes too
}

TEST(HcaFilter, ExactMatch) {
  HcaFilter f = parseHcaFilter("=mlx5_1");
  EXPECT_TRUE(f.exact);
  EXPECT_TRUE(hcaAllowed(f, "mlx5_1", 1));
  EXPECT_FALSE(hcaAllowed(f, "mlx5_10", 1));
}

TEST(HcaFilter, Exclusion) {
  HcaFilter f = parseHcaFilter("^=mlx5_0:1");
  EXPECT_TRUE(f.exclude);
  EXPECT_TRUE(f.exact);
  EXPECT_FALSE(hcaAllowed(f, "mlx5_0", 1));
  EXPECT_TRUE(hcaAllowed(f, "mlx5_0", 2));
  EXPECT_TRUE(hcaAllowed(f, "mlx5_00", 1));
}

TEST(ChooseGid, PrefersRoceV2OfAnIpv4Address) {
  std::vector<GidEntry> t = {
      {0, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1"},
      {1, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2"},
      {2, "0000:0000:0000:0000:0000:ffff:c612:0001", "IB/RoCE v1"},
      {3, "0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2"},
  };
  EXPECT_EQ(chooseGid(t), 3);
  t.pop_back();
  EXPECT_EQ(chooseGid(t), 1);  // no IPv4 one: the first RoCE v2
}

TEST(ChooseGid, SkipsEmptyEntries) {
  std::vector<GidEntry> t = {{0, "0000:0000:0000:0000:0000:0000:0000:0000", ""},
                             {1, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1"}};
  EXPECT_EQ(chooseGid(t), 1);
  EXPECT_EQ(chooseGid({}), -1);
}

}  // namespace
}  // namespace weft::ib
