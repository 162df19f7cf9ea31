// The host executor's turns per lane: equal lanes move 16 slices a turn; lanes whose plan gives
// them different shares move slices in proportion, the smallest share 16.
#include <gtest/gtest.h>

#include "src/exec/lower.h"

namespace weft::exec {
namespace {

plan::Program withShares(std::initializer_list<uint32_t> shares) {
  plan::Program p;
  for (uint32_t s : shares) {
    plan::Lane lane;
    lane.share = s;
    p.lanes.push_back(lane);
  }
  return p;
}

TEST(LaneBursts, EqualSharesKeepTheFairnessBurst) {
  EXPECT_EQ(laneBursts(withShares({1, 1, 1})), (std::vector<uint32_t>{16, 16, 16}));
  EXPECT_EQ(laneBursts(withShares({7, 7})), (std::vector<uint32_t>{16, 16}));
  EXPECT_TRUE(laneBursts(withShares({})).empty());
}

TEST(LaneBursts, UnequalSharesMoveSlicesInProportion) {
  EXPECT_EQ(laneBursts(withShares({1, 3, 2})), (std::vector<uint32_t>{16, 48, 32}));
  // Chunk counts as shares: 500 against 750 is 2 : 3.
  EXPECT_EQ(laneBursts(withShares({500, 750})), (std::vector<uint32_t>{16, 24}));
  // A lane of share 0 still moves a slice a turn; the smallest positive share sets the unit.
  EXPECT_EQ(laneBursts(withShares({0, 2, 4})), (std::vector<uint32_t>{1, 16, 32}));
  // Proportions past the cap are cut at 1024 slices a turn.
  EXPECT_EQ(laneBursts(withShares({1, 1000})), (std::vector<uint32_t>{16, 1024}));
}

}  // namespace
}  // namespace weft::exec
