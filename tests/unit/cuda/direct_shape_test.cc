// The direct kernels' launch configuration (directShape, src/cuda/direct_launch.h): a pure
// function of the call, so every rank of a call chooses the same blocks and split.
#include <gtest/gtest.h>

#include "src/cuda/direct_launch.h"

namespace weft::cuda::test {
namespace {

using plan::Collective;

constexpr int kH100Sms = 132;  // H100 SXM and H200: 132 multiprocessors

DirectQuery allReduce(uint64_t bytes, DataType t, int nranks, int sms, int onGpu) {
  DirectQuery q;
  q.coll = Collective::kAllReduce;
  q.type = t;
  q.count = bytes / dataTypeSize(t);
  q.nranks = nranks;
  q.smCount = sms;
  q.ranksOnGpu = onGpu;
  q.slotsPerRank = static_cast<uint32_t>(sms);
  return q;
}

// A 256 MiB float allreduce of 2 ranks on one H100/H200 uses at least half its SMs in all, two-shot
// (each element reduced once), with 512 threads per block.
TEST(DirectShape, LargeAllReduceFillsTheGpu) {
  const Tuning t;
  const DirectShape s = directShape(allReduce(256ull << 20, DataType::kFloat32, 2, kH100Sms, 2), t);
  EXPECT_EQ(s.algo, DirectAlgo::kTwoShot);
  EXPECT_GE(2 * s.blocks, static_cast<uint32_t>(kH100Sms / 2));
  EXPECT_LE(2 * s.blocks, static_cast<uint32_t>(kH100Sms));  // co-resident: one block per SM
  EXPECT_EQ(s.threads, 512u);
  // Ranks on GPUs of their own each get the whole GPU.
  const DirectShape own =
      directShape(allReduce(256ull << 20, DataType::kFloat32, 2, kH100Sms, 1), t);
  EXPECT_EQ(own.blocks, static_cast<uint32_t>(kH100Sms));
}

// 8 bytes: one-shot, one block per rank.
TEST(DirectShape, TinyAllReduceIsOneShotWithFewBlocks) {
  const Tuning t;
  const DirectShape s = directShape(allReduce(8, DataType::kFloat32, 2, kH100Sms, 2), t);
  EXPECT_EQ(s.algo, DirectAlgo::kOneShot);
  EXPECT_EQ(s.blocks, 1u);
}

TEST(DirectShape, TheSwitchFollowsTheTuning) {
  Tuning t;
  t.directOneShotBytes = 4096;
  EXPECT_EQ(directShape(allReduce(4096, DataType::kInt8, 4, 8, 4), t).algo, DirectAlgo::kOneShot);
  EXPECT_EQ(directShape(allReduce(4100, DataType::kInt8, 4, 8, 4), t).algo, DirectAlgo::kTwoShot);
  // Blocks: one per directBlockBytes of the rank's share, at most SMs / ranks on the GPU.
  t.directBlockBytes = 1024;
  EXPECT_EQ(directShape(allReduce(8192, DataType::kInt8, 4, 64, 4), t).blocks, 2u);
  EXPECT_EQ(directShape(allReduce(1 << 20, DataType::kInt8, 4, 64, 4), t).blocks, 16u);
}

TEST(DirectShape, ZeroCountLaunchesNothingAndMailboxesCapBlocks) {
  const Tuning t;
  DirectQuery q = allReduce(0, DataType::kFloat32, 2, kH100Sms, 2);
  EXPECT_EQ(directShape(q, t).blocks, 0u);
  q = allReduce(1ull << 30, DataType::kFloat32, 2, kH100Sms, 2);
  q.slotsPerRank = 8;
  EXPECT_EQ(directShape(q, t).blocks, 8u);
  q.slotsPerRank = 0;
  EXPECT_EQ(directShape(q, t).blocks, 0u);
}

// Every collective the direct kernels run gets blocks for work, and the configuration does not
// depend on anything but the query (ranks of a call agree).
TEST(DirectShape, EveryCollectiveAndOnlyThose) {
  const Tuning t;
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce,
                       Collective::kAllGather, Collective::kReduceScatter, Collective::kAlltoAll}) {
    EXPECT_TRUE(directSupports(c, 4));
    DirectQuery q = allReduce(64ull << 20, DataType::kBfloat16, 4, kH100Sms, 4);
    q.coll = c;
    const DirectShape a = directShape(q, t), b = directShape(q, t);
    EXPECT_EQ(a.blocks, static_cast<uint32_t>(kH100Sms / 4)) << plan::collectiveName(c);
    EXPECT_EQ(a.blocks, b.blocks);
    EXPECT_EQ(a.algo, b.algo);
  }
  EXPECT_FALSE(directSupports(Collective::kSendRecv, 2));
  EXPECT_FALSE(directSupports(Collective::kGather, 2));
  EXPECT_FALSE(directSupports(Collective::kAllReduce, static_cast<int>(kMaxDirectRanks) + 1));
}

}  // namespace
}  // namespace weft::cuda::test
