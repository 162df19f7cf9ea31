// Ranks that outnumber the cores pass a plain send's slices by reference as one message of
// several slices (WEFT_SHARED_REF_BYTES), which the receiver takes a slice at a time and releases
// once. Lowered here so that messages of 4 slices of 4 KiB run through every collective with a
// plain send, and a receiver whose count differs reports the mismatch. The ranks share cores for
// real: the process runs on one CPU.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "tests/support/ranks_algo_fixture.h"
#include "weft/weft.h"

using namespace weft::test;

namespace {

class SharedCoreReference : public RanksAlgoTest {
 protected:
  static void SetUpTestSuite() {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    setenv("WEFT_SLOT_BYTES", "4096", 1);
    setenv("WEFT_RDV_BYTES", "64", 1);
    if (!getenv("WEFT_SHARED_REF_BYTES")) setenv("WEFT_SHARED_REF_BYTES", "16384", 1);
    setenv("WEFT_TIMEOUT_MS", "10000", 1);  // read once: a mismatch must be seen long before
  }
};

TEST_P(SharedCoreReference, EveryCollectiveIsExact) {
  const int n = std::get<0>(GetParam());
  for (ncclComm_t c : comms_) {
    char tuning[1024];
    weftCommTuning(c, tuning, sizeof(tuning));
    ASSERT_NE(std::string(tuning).find("sharing cores"), std::string::npos) << tuning;
  }
  // 40009 floats: several whole messages and a ragged last one; 5000: one message and a part.
  for (Coll coll : {Coll::kBroadcast, Coll::kAllGather, Coll::kAlltoAll, Coll::kGather,
                    Coll::kScatter, Coll::kSendRecv, Coll::kAllReduce, Coll::kReduceScatter})
    for (ncclDataType_t t : {ncclFloat32, ncclInt8})
      for (size_t count : {size_t(17), size_t(5000), size_t(40009)})
        for (bool inPlace : {false, true}) {
          if (inPlace && !supportsInPlace(coll)) continue;
          CheckCase c{coll, t, ncclSum, count, n - 1, inPlace, /*threads=*/true};
          CheckResult r = runCheck(comms_, c);
          ASSERT_EQ(r.status, ncclSuccess) << describe(c, n) << ": " << r.message;
          ASSERT_EQ(r.wrong, 0u) << describe(c, n) << ": " << r.message;
        }
}

// The root sends more than a receiver expects: the receiver takes the first slices of the large
// message, then finds it runs past its step's end and reports the mismatch (no hang, no write
// past its buffer).
TEST_P(SharedCoreReference, LargerMessageThanTheReceiverExpectsIsAMismatch) {
  const int n = std::get<0>(GetParam());
  const size_t big = 12000, small = 9000;  // floats: 47 KiB sent in messages of 16 KiB
  std::vector<std::vector<float>> bufs(n, std::vector<float>(big + 64, 1.0f));
  for (int r = 1; r < n; ++r)
    for (size_t i = small; i < bufs[r].size(); ++i) bufs[r][i] = -7.0f;  // must stay untouched
  std::vector<ncclResult_t> res(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      res[r] = ncclBroadcast(bufs[r].data(), bufs[r].data(), r == 0 ? big : small, ncclFloat, 0,
                             comms_[r], nullptr);
    });
  for (auto& t : threads) t.join();
  bool someoneSaw = false;
  for (int r = 0; r < n; ++r) {
    // Every rank learns of the failure from a peer, none by waiting out its timeout (a rank the
    // failed one had no link with yet included).
    EXPECT_NE(res[r], ncclSuccess) << "rank " << r;
    EXPECT_EQ(std::string(ncclGetLastError(comms_[r])).find("timed out"), std::string::npos)
        << "rank " << r << ": " << ncclGetLastError(comms_[r]);
  }
  for (int r = 1; r < n; ++r) {
    if (res[r] != ncclSuccess &&
        std::string(ncclGetLastError(comms_[r])).find("mismatch") != std::string::npos)
      someoneSaw = true;
    for (size_t i = small; i < bufs[r].size(); ++i)
      ASSERT_EQ(bufs[r][i], -7.0f) << "rank " << r << " element " << i << " written";
  }
  EXPECT_TRUE(someoneSaw);
}

INSTANTIATE_TEST_SUITE_P(Threads, SharedCoreReference,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values("ring", "tree", "direct", "rsag")),
                         ranksAlgoName);

}  // namespace
