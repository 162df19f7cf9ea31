// The roofline model of the perf tools (perf/roofline.h): the traffic of each collective against
// its derivation, the allreduce kernels against each other, the HBM bandwidth from the driver's
// clock and bus width, and the bound in microseconds.
#include "perf/roofline.h"

#include <gtest/gtest.h>

namespace weft::perf {
namespace {

TEST(Roofline, AllReduceMinimumReadsAndWritesEachByteOnce) {
  for (int n : {1, 2, 3, 4, 8}) {
    const Traffic t = directTraffic(Pattern::kAllReduce, n, false);
    EXPECT_DOUBLE_EQ(t.read, 1);
    EXPECT_DOUBLE_EQ(t.write, 1);
    // In place the same bytes move.
    EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAllReduce, n, true).total(), 2);
    // The pushed two-shot kernel is the minimum.
    EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAllReduce, n, false, Kernel::kTwoShotPush).total(), 2);
  }
}

TEST(Roofline, AllReduceKernels) {
  // One-shot with 4 ranks: each rank reads the 4 inputs, writes its output.
  Traffic one = directTraffic(Pattern::kAllReduce, 4, false, Kernel::kOneShot);
  EXPECT_DOUBLE_EQ(one.read, 4);
  EXPECT_DOUBLE_EQ(one.write, 1);
  // Two-shot pulling, 4 ranks: its part of the 4 inputs (1) + the 3 other reduced parts (3/4).
  Traffic pull = directTraffic(Pattern::kAllReduce, 4, false, Kernel::kTwoShotPull);
  EXPECT_DOUBLE_EQ(pull.read, 1.75);
  EXPECT_DOUBLE_EQ(pull.write, 1);
  // With one rank every kernel is a copy.
  for (Kernel k : {Kernel::kOneShot, Kernel::kTwoShotPull, Kernel::kTwoShotPush})
    EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAllReduce, 1, false, k).total(), 2);
  // The order: push <= pull <= one-shot, equal only at n = 1.
  for (int n : {2, 3, 4, 8}) {
    const double push = directTraffic(Pattern::kAllReduce, n, false, Kernel::kTwoShotPush).total();
    const double pl = directTraffic(Pattern::kAllReduce, n, false, Kernel::kTwoShotPull).total();
    const double os = directTraffic(Pattern::kAllReduce, n, false, Kernel::kOneShot).total();
    EXPECT_LT(push, pl);
    EXPECT_LT(pl, os);
  }
}

TEST(Roofline, OtherCollectives) {
  // allgather, 4 ranks, N = output: read N/4, write N; in place the own quarter stays.
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAllGather, 4, false).read, 0.25);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAllGather, 4, false).write, 1);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAllGather, 4, true).write, 0.75);
  // reduce-scatter, N = input: read N, write N/n.
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kReduceScatter, 4, false).read, 1);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kReduceScatter, 4, false).write, 0.25);
  // broadcast: the root's input once over n ranks; every output written.
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kBroadcast, 2, false).total(), 1.5);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kBroadcast, 2, true).total(), 1.0);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kReduce, 2, false).total(), 1.5);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAlltoall, 4, false).total(), 2);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAlltoall, 4, true).total(), 1.5);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kSendRecv, 3, false).total(), 2);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kGather, 4, false).total(), 0.5);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kScatter, 2, true).total(), 0.5);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kNone, 4, false).total(), 0);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kAllReduce, 0, false).total(), 0);
}

TEST(Roofline, TrafficPerByteOfOutput) {
  // allgather: (n+1)/n per byte of output; reduce-scatter: n+1.
  const int n = 4;
  EXPECT_DOUBLE_EQ(
      directTraffic(Pattern::kAllGather, n, false).total() / outputFactor(Pattern::kAllGather, n),
      1.25);
  EXPECT_DOUBLE_EQ(directTraffic(Pattern::kReduceScatter, n, false).total() /
                       outputFactor(Pattern::kReduceScatter, n),
                   5);
  EXPECT_DOUBLE_EQ(outputFactor(Pattern::kAllReduce, n), 1);
  EXPECT_DOUBLE_EQ(outputFactor(Pattern::kNone, n), 0);
}

TEST(Roofline, GoalScriptAgrees) {
  // tests/gpu/memory_bound_goal.py's bounds, from the copy rate X (bytes copied per us, so 2X of
  // traffic): allreduce n*S/X, allgather (n+1)*T/(2X). The same from the model at 2X.
  const double x = 2000;  // GB/s copied
  const double s = 256.0 * (1 << 20);
  for (int n : {2, 3, 4}) {
    EXPECT_NEAR(boundUs(directTraffic(Pattern::kAllReduce, n, false), s, n, 2 * x),
                n * s / (x * 1e3), 1e-6);
    EXPECT_NEAR(boundUs(directTraffic(Pattern::kAllGather, n, false), s, n, 2 * x),
                (n + 1) * s / (2 * x * 1e3), 1e-6);
  }
}

TEST(Roofline, HbmFromTheDriver) {
  // An H200: 3201 MHz, 6144-bit bus, two transfers per clock: 4917 GB/s.
  EXPECT_NEAR(hbmGBps(3201000, 6144), 4916.7, 0.1);
  // An H100 SXM: 2619 MHz x 5120 bit = 3352 GB/s.
  EXPECT_NEAR(hbmGBps(2619000, 5120), 3352.3, 0.1);
  EXPECT_EQ(hbmGBps(0, 6144), 0);
  EXPECT_EQ(hbmGBps(3201000, -1), 0);
}

TEST(Roofline, BoundAndFraction) {
  // 2 ranks on one GPU of 4000 GB/s (4e6 bytes per us), allreduce of 256 MiB: 2 x 2 x 256 MiB
  // moved, 268.4 us.
  const double bytes = 256.0 * (1 << 20);
  const double us = boundUs(directTraffic(Pattern::kAllReduce, 2, false), bytes, 2, 4000);
  EXPECT_NEAR(us, 4 * bytes / 4e6, 1e-9);
  EXPECT_NEAR(us, 268.435, 1e-3);
  EXPECT_NEAR(boundFraction(us, us / 0.8), 0.8, 1e-12);
  EXPECT_EQ(boundFraction(us, 0), 0);
  EXPECT_EQ(boundUs(Traffic{1, 1}, bytes, 2, 0), 0);
  EXPECT_EQ(boundUs(Traffic{}, bytes, 2, 4000), 0);
  EXPECT_EQ(boundUs(Traffic{1, 1}, bytes, 0, 4000), 0);
}

TEST(Roofline, LineStatesTheModel) {
  const std::string line = rooflineLine(Pattern::kAllReduce, 4, 4, 4917, "driver: x");
  EXPECT_NE(line.find("HBM 4917 GB/s (driver: x)"), std::string::npos) << line;
  EXPECT_NE(line.find("4 rank(s) on the GPU"), std::string::npos) << line;
  EXPECT_NE(line.find("read 1.000 + write 1.000 = 2.000"), std::string::npos) << line;
  EXPECT_NE(line.find("one-shot moves 5.000, two-shot pulling 2.750"), std::string::npos) << line;
  const std::string ag = rooflineLine(Pattern::kAllGather, 2, 2, 100, "--hbm-gbs");
  EXPECT_NE(ag.find("(1.500 per byte of output)"), std::string::npos) << ag;
  EXPECT_EQ(ag.find("one-shot"), std::string::npos) << ag;
}

}  // namespace
}  // namespace weft::perf
