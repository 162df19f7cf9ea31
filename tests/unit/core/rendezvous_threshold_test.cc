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
  EXPECT_EQ(rendezvousBytes(false), 4096u);
  EXPECT_EQ(rendezvousBytes(true), 32768u);
  noteRanksOnHost(4, 2);
  EXPECT_EQ(rendezvousBytes(false), 32768u);
  EXPECT_EQ(rendezvousBytes(true), 32768u);
}

}  // namespace
}  // namespace weft::exec
