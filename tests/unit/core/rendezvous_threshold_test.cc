// The smallest slice sent by reference: 4 KiB while every rank has a core, 32 KiB once ranks
// outnumber the cores or where the call writes again what it sends (in-place allreduce); and the
// footprint a copy collective weighs against the streaming threshold. Both follow the
// communicator's Tuning, never another communicator's.
#include <gtest/gtest.h>

#include <cstdlib>

#include "src/common/tuning.h"

namespace weft {
namespace {

TEST(RendezvousThreshold, SmallWithACorePerRankLargeWhenRanksShareCores) {
  Tuning t;
  t.ranksOnHost = 2;
  EXPECT_EQ(t.copyFootprint(1000), 1000u);  // two ranks: their own bytes (see the test below)
  EXPECT_EQ(t.rendezvousBytes(false), 4096u);
  EXPECT_EQ(t.rendezvousBytes(true), 32768u);
  t.ranksOnHost = 4;
  t.sharedCores = true;
  EXPECT_EQ(t.rendezvousBytes(false), 32768u);
  EXPECT_EQ(t.rendezvousBytes(true), 32768u);
}

TEST(RendezvousThreshold, SetByWeftRdvBytes) {
  ASSERT_EQ(setenv("WEFT_RDV_BYTES", "12345", 1), 0);
  Tuning t = Tuning::fromEnvironment();
  EXPECT_EQ(t.rendezvousBytes(false), 12345u);
  t.sharedCores = true;
  EXPECT_EQ(t.rendezvousBytes(true), 12345u);
  ASSERT_EQ(setenv("WEFT_RDV_BYTES", "auto", 1), 0);
  EXPECT_EQ(Tuning::fromEnvironment().rendezvousBytes(false), 4096u);
  ASSERT_EQ(setenv("WEFT_RDV_BYTES", "lots", 1), 0);  // neither: a warning, and auto
  EXPECT_EQ(Tuning::fromEnvironment().rendezvousBytes(false), 4096u);
  unsetenv("WEFT_RDV_BYTES");
}

// The footprint a copy collective weighs against WEFT_STREAM_BYTES grows with the ranks that
// share the host's caches.
TEST(RendezvousThreshold, CopyFootprintCountsTheRanksSharingTheCaches) {
  Tuning t;
  t.ranksOnHost = 4;
  EXPECT_EQ(t.copyFootprint(1000), 2000u);
  t.ranksOnHost = 3;
  EXPECT_EQ(t.copyFootprint(1000), 1500u);
  t.ranksOnHost = 8;
  EXPECT_EQ(t.copyFootprint(1000), 4000u);
}

}  // namespace
}  // namespace weft
