// The smallest slice sent by reference: 4 KiB while every rank has a core, 32 KiB once ranks
// outnumber the cores or where the call writes again what it sends (in-place allreduce). Its own
// binary: how many ranks share the cores is process-wide and only ever grows.
#include <gtest/gtest.h>

#include <cstdlib>

#include "src/common/futex.h"
#include "src/exec/executor.h"

namespace weft::exec {
namespace {

TEST(RendezvousThreshold, SmallWithACorePerRankLargeWhenRanksShareCores) {
  ASSERT_EQ(unsetenv("WEFT_RDV_BYTES"), 0);
  noteRanksOnHost(2, 2);
  EXPECT_EQ(copyFootprint(1000), 1000u);  // two ranks: their own bytes (see the test below)
  EXPECT_EQ(rendezvousBytes(false), 4096u);
  EXPECT_EQ(rendezvousBytes(true), 32768u);
  noteRanksOnHost(4, 2);
  EXPECT_EQ(rendezvousBytes(false), 32768u);
  EXPECT_EQ(rendezvousBytes(true), 32768u);
}

// The footprint a copy collective weighs against WEFT_STREAM_BYTES grows with the ranks that
// share the host's caches, counted from the most any communicator had (the test above noted 4
// ranks already: the count only grows).
TEST(RendezvousThreshold, CopyFootprintCountsTheRanksSharingTheCaches) {
  noteRanksOnHost(4, 2);
  EXPECT_EQ(ranksOnHost(), 4);
  EXPECT_EQ(copyFootprint(1000), 2000u);
  noteRanksOnHost(3, 2);
  EXPECT_EQ(ranksOnHost(), 4);
  noteRanksOnHost(8, 8);
  EXPECT_EQ(copyFootprint(1000), 4000u);
}

}  // namespace
}  // namespace weft::exec
