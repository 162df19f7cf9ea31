// What the executor's policies learn from a plan about a rank's buffers (src/plan/traits.h).
#include "src/plan/traits.h"

#include <gtest/gtest.h>

namespace weft::plan {
namespace {

RankTraits of(Collective coll, int rank, int root = 0) {
  Spec s;
  s.coll = coll;
  s.nranks = 4;
  s.root = root;
  s.count = 100;
  return rankTraits(s, rank);
}

TEST(RankTraits, OnlyTheRootReadsItsInputWhereTheRootAloneHasData) {
  for (Collective c : {Collective::kBroadcast, Collective::kScatter}) {
    EXPECT_TRUE(of(c, 2, 2).readsOwnInput);
    EXPECT_FALSE(of(c, 1, 2).readsOwnInput);
  }
  for (Collective c : {Collective::kAllReduce, Collective::kReduce, Collective::kGather,
                       Collective::kAllGather, Collective::kAlltoAll, Collective::kReduceScatter})
    EXPECT_TRUE(of(c, 1, 2).readsOwnInput);
}

TEST(RankTraits, OutputsByHowTheyComeAbout) {
  EXPECT_EQ(of(Collective::kAllReduce, 0).output, OutputUse::kReducedAndReread);
  EXPECT_EQ(of(Collective::kReduceScatter, 0).output, OutputUse::kReduced);
  EXPECT_EQ(of(Collective::kReduce, 0).output, OutputUse::kReduced);
  for (Collective c : {Collective::kBroadcast, Collective::kAllGather, Collective::kAlltoAll,
                       Collective::kGather, Collective::kScatter})
    EXPECT_EQ(of(c, 0).output, OutputUse::kCopied);
}

TEST(RankTraits, WhatStaysPutAndWhatIsReducedIntoInPlace) {
  EXPECT_TRUE(of(Collective::kBroadcast, 0).sentDataStaysPut);
  EXPECT_TRUE(of(Collective::kBroadcast, 3).sentDataStaysPut);
  EXPECT_FALSE(of(Collective::kAllGather, 0).sentDataStaysPut);
  EXPECT_TRUE(of(Collective::kAllReduce, 1).reducesIntoWhatItSendsInPlace);
  EXPECT_FALSE(of(Collective::kReduceScatter, 1).reducesIntoWhatItSendsInPlace);
}

}  // namespace
}  // namespace weft::plan
