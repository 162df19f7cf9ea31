// Two ranks' allreduce with landing: each rank offers its output to the peer, which stores its
// reduced half there as it makes it (one pass over both inputs writes both outputs). Every op,
// several types and counts whose blocks start off 64-byte lines, in and out of place, and
// results stored cached (small outputs) and streamed (large ones); out of place, slices must
// actually land.
#include <gtest/gtest.h>

#include <cstdlib>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "weft/weft.h"

using namespace weft::test;

namespace {

// Read once per process, so set before any test runs: every run of receives is offered, every
// slice is large enough to land, and outputs from 64 KiB on are streamed.
const bool kLandingEnv = setenv("WEFT_LANDING_BYTES", "1", 1) == 0 &&
                         setenv("WEFT_RDV_BYTES", "64", 1) == 0 &&
                         setenv("WEFT_STREAM_LANDED_BYTES", "65536", 1) == 0;

class LandedAllReduce : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kLandingEnv);
    comms_.resize(2);
    ASSERT_EQ(initAllWithAlgo(comms_, "rsag"), ncclSuccess) << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    for (auto c : comms_)
      if (c) ncclCommDestroy(c);
  }
  std::vector<ncclComm_t> comms_;
};

TEST_P(LandedAllReduce, EveryOpIsExact) {
  const bool threads = GetParam();
  uint64_t landedOutOfPlace = 0;
  for (int op : {int(ncclSum), int(ncclProd), int(ncclMax), int(ncclMin), int(ncclAvg), -1})
    for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclBfloat16, ncclFloat64})
      for (size_t count : {size_t(17), size_t(1031), size_t(40009), size_t(100003)})
        for (bool inPlace : {false, true}) {
          if (op == -1 && t == ncclInt8) continue;  // PreMulSum is for floating types here
          const uint64_t before = weftLandedSlices();
          CheckCase c{Coll::kAllReduce, t, op, count, 0, inPlace, threads};
          CheckResult r = runCheck(comms_, c);
          ASSERT_EQ(r.status, ncclSuccess) << describe(c, 2) << ": " << r.message;
          ASSERT_EQ(r.wrong, 0u) << describe(c, 2) << ": " << r.message;
          // In place, the landing would overwrite what this rank still sends: never offered.
          const uint64_t landed = weftLandedSlices() - before;
          if (inPlace) {
            EXPECT_EQ(landed, 0u) << describe(c, 2);
          } else {
            landedOutOfPlace += landed;
          }
          // One thread driving both ranks offers before the peer can forward anything; with a
          // thread per rank, a sender may run ahead of the offer (it then sends by reference).
          if (!inPlace && !threads && count >= 1031) {
            EXPECT_GT(landed, 0u) << describe(c, 2);
          }
        }
  EXPECT_GT(landedOutOfPlace, 0u);
}

// Three ranks' rings end each chain in a plain receive, which is offered as a landing. A large
// broadcast's last rank offers its whole output while most slices are still to come, so the
// rank before it stores what it forwards (copy-send) straight there; allreduce and allgather,
// and a broadcast of one slice, reach their last receive once the peer has mostly forwarded
// already, so whether they land is up to timing, and only their results are checked.
TEST(LandedRing, ForwardsLandExactly) {
  ASSERT_TRUE(kLandingEnv);
  std::vector<ncclComm_t> comms(3);
  ASSERT_EQ(initAllWithAlgo(comms, "ring"), ncclSuccess) << ncclGetLastError(nullptr);
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kBroadcast})
    for (ncclDataType_t t : {ncclFloat32, ncclInt8})
      for (size_t count : {size_t(1031), size_t(100003)}) {
        const bool mustLand = coll == Coll::kBroadcast && count == 100003;
        const uint64_t before = weftLandedSlices();
        CheckCase c{coll, t, ncclSum, count, 1, false};
        CheckResult r = runCheck(comms, c);
        ASSERT_EQ(r.status, ncclSuccess) << describe(c, 3) << ": " << r.message;
        ASSERT_EQ(r.wrong, 0u) << describe(c, 3) << ": " << r.message;
        if (mustLand) {
          EXPECT_GT(weftLandedSlices() - before, 0u) << describe(c, 3);
        }
      }
  for (auto comm : comms) ncclCommDestroy(comm);
}

INSTANTIATE_TEST_SUITE_P(Ranks, LandedAllReduce, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "threads" : "group"; });

}  // namespace
