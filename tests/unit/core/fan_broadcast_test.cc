// Fan broadcasts: the root stores the first part of its data into every receiver's offered
// output itself, a slice to each in turn, and the receivers read the rest. Every type, roots,
// counts that end off a slice and below one, in and out of place, driven from one thread and
// with a thread per rank; with one thread, the receivers (polled before a last-rank root) have
// offered their outputs by the time it pushes, so slices must land.
#include <gtest/gtest.h>

#include <cstdlib>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "weft/weft.h"

using namespace weft::test;

namespace {

// Read once per process, so set before any test runs: small slots make many slices, every run
// of receives is offered, and slices from 64 bytes go by reference (or land).
const bool kFanEnv = setenv("WEFT_SLOT_BYTES", "4096", 1) == 0 &&
                     setenv("WEFT_LANDING_BYTES", "1", 1) == 0 &&
                     setenv("WEFT_RDV_BYTES", "64", 1) == 0;

class FanBroadcast : public ::testing::TestWithParam<bool> {};

TEST_P(FanBroadcast, EveryTypeIsExactAndPushedSlicesLand) {
  ASSERT_TRUE(kFanEnv);
  const bool threads = GetParam();
  for (int n : {4, 3, 7}) {
    std::vector<ncclComm_t> comms(n);
    ASSERT_EQ(initAllWithAlgo(comms, "fan"), ncclSuccess) << ncclGetLastError(nullptr);
    for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclBfloat16, ncclFloat64})
      for (size_t count : {size_t(17), size_t(1031), size_t(40009), size_t(100003)})
        for (int root : {n - 1, 0, 1})
          for (bool inPlace : {false, true}) {
            if (n != 4 && (t == ncclInt8 || t == ncclBfloat16)) continue;
            const uint64_t before = weftLandedSlices();
            CheckCase c{Coll::kBroadcast, t, ncclSum, count, root, inPlace, threads};
            CheckResult r = runCheck(comms, c);
            ASSERT_EQ(r.status, ncclSuccess) << describe(c, n) << ": " << r.message;
            ASSERT_EQ(r.wrong, 0u) << describe(c, n) << ": " << r.message;
            // A third of 100003 elements is several 4 KiB slices of any type.
            if (!threads && root == n - 1 && count == 100003) {
              EXPECT_GT(weftLandedSlices() - before, 0u) << describe(c, n);
            }
          }
    for (auto comm : comms) ncclCommDestroy(comm);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, FanBroadcast, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "threads" : "group"; });

}  // namespace
