// Two ranks' allreduce with landing: each rank offers its output to the peer, which stores its
// reduced half there as it makes it (one pass over both inputs writes both outputs). Every op,
// several types and counts whose blocks start off 64-byte lines, in and out of place, and
// results stored cached (small outputs) and streamed (large ones); out of place, slices must
// actually land.
#include <gtest/gtest.h>

#include <cstdlib>

#include "nccl.h"
#include "weft/weft.h"
#include "tests/support/collective_check.h"

using namespace weft::test;

namespace {

class LandedAllReduce : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    // Read once per process: every run of receives is offered, every slice is large enough to
    // land, and outputs from 64 KiB on are streamed.
    setenv("WEFT_LANDING_BYTES", "1", 1);
    setenv("WEFT_RDV_BYTES", "64", 1);
    setenv("WEFT_STREAM_LANDED_BYTES", "65536", 1);
  }
  void SetUp() override {
    comms_.resize(2);
    setenv("NCCL_ALGO", "rsag", 1);
    ASSERT_EQ(ncclCommInitAll(comms_.data(), 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    unsetenv("NCCL_ALGO");
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
          if (inPlace) EXPECT_EQ(landed, 0u) << describe(c, 2);
          else landedOutOfPlace += landed;
          // One thread driving both ranks offers before the peer can forward anything; with a
          // thread per rank, a sender may run ahead of the offer (it then sends by reference).
          if (!inPlace && !threads && count >= 1031) EXPECT_GT(landed, 0u) << describe(c, 2);
        }
  EXPECT_GT(landedOutOfPlace, 0u);
}

INSTANTIATE_TEST_SUITE_P(Ranks, LandedAllReduce, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "threads" : "group"; });

}  // namespace
