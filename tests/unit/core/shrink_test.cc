// ncclCommRevoke and ncclCommShrink on ranks of one process: argument checks, the new ranks,
// results on the shrunk communicator, revoked communicators, and non-blocking shrink and split.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/support/scoped_env.h"

namespace {

ncclResult_t waitAsync(ncclComm_t comm) {
  ncclResult_t st = ncclInProgress;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end) {
    if (ncclCommGetAsyncError(comm, &st) != ncclSuccess) return ncclInvalidArgument;
    if (st != ncclInProgress) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ncclInProgress;
}

// Allreduce of (rank + 1) over `comms` (one thread drives them all): every rank must see n(n+1)/2.
void expectAllReduceOfRanks(const std::vector<ncclComm_t>& comms) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::vector<float>> buf(n, std::vector<float>(1001));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    int rank = -1;
    ASSERT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    buf[r].assign(buf[r].size(), static_cast<float>(rank + 1));
    ASSERT_EQ(ncclAllReduce(buf[r].data(), buf[r].data(), buf[r].size(), ncclFloat, ncclSum,
                            comms[r], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) EXPECT_EQ(buf[r][1000], static_cast<float>(n * (n + 1) / 2));
}

class FiveRanks : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ncclCommInitAll(comms_, kN, nullptr), ncclSuccess); }
  void TearDown() override {
    for (auto c : comms_)
      if (c) ncclCommDestroy(c);
  }
  static constexpr int kN = 5;
  ncclComm_t comms_[kN] = {};
};

TEST_F(FiveRanks, ShrinkRenumbersSurvivorsInOrder) {
  int excluded[2] = {3, 1};  // any order
  std::vector<ncclComm_t> shrunk(kN, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r : {0, 2, 4})
    ASSERT_EQ(ncclCommShrink(comms_[r], excluded, 2, &shrunk[r], nullptr, NCCL_SHRINK_DEFAULT),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  std::vector<ncclComm_t> live;
  for (int r : {0, 2, 4}) {
    int n = 0, rank = -1;
    ASSERT_EQ(ncclCommCount(shrunk[r], &n), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(shrunk[r], &rank), ncclSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(rank, r / 2);
    live.push_back(shrunk[r]);
  }
  expectAllReduceOfRanks(live);
  // The parent stays usable after a plain shrink: shrink it again without rank 0.
  int first = 0;
  std::vector<ncclComm_t> again(kN, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 1; r < kN; ++r)
    ASSERT_EQ(ncclCommShrink(comms_[r], &first, 1, &again[r], nullptr, NCCL_SHRINK_DEFAULT),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  expectAllReduceOfRanks({again.begin() + 1, again.end()});
  for (auto c : shrunk)
    if (c) {
      EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
    }
  for (auto c : again)
    if (c) {
      EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
    }
}

TEST_F(FiveRanks, ShrinkRejectsBadArguments) {
  ncclComm_t out = nullptr;
  int self = 0, outside = 5, negative = -1, twice[2] = {2, 2}, fine = 4;
  EXPECT_EQ(ncclCommShrink(comms_[0], &self, 1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms_[0], &outside, 1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms_[0], &negative, 1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms_[0], twice, 2, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms_[0], nullptr, 1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms_[0], &fine, -1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms_[0], &fine, 1, nullptr, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(comms_[0], &fine, 1, &out, nullptr, 7), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(nullptr, &fine, 1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(out, nullptr);
  expectAllReduceOfRanks({comms_, comms_ + kN});  // nothing changed
}

TEST_F(FiveRanks, RevokedCommunicatorRefusesCollectivesButShrinks) {
  EXPECT_EQ(ncclCommRevoke(nullptr, 0), ncclSuccess);
  EXPECT_EQ(ncclCommRevoke(comms_[0], 1), ncclInvalidArgument);
  for (auto c : comms_) ASSERT_EQ(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT), ncclSuccess);
  EXPECT_EQ(ncclCommRevoke(comms_[0], NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comms_[0], nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat, 1, comms_[0], nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclCommFinalize(comms_[0]), ncclInvalidUsage);
  ncclResult_t async = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(comms_[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  int last = kN - 1;
  std::vector<ncclComm_t> shrunk(kN - 1, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kN - 1; ++r)
    ASSERT_EQ(ncclCommShrink(comms_[r], &last, 1, &shrunk[r], nullptr, NCCL_SHRINK_ABORT),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  expectAllReduceOfRanks(shrunk);
  for (auto c : shrunk) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(CommRevoke, EndsACallBlockedInAnotherThread) {
  // Rank 0 blocks in an allreduce that rank 1 never joins; a revoke from another thread (a
  // watchdog) makes it return an error, and the revoke itself succeeds once the call has left.
  ncclComm_t comms[2] = {};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  std::vector<float> buf(1 << 16, 1.0f);
  ncclResult_t blocked = ncclSuccess;
  std::thread caller([&] {
    blocked =
        ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comms[0], nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT), ncclSuccess);
  caller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(blocked, ncclSuccess);
  ncclResult_t async = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);  // quiescent: ready to shrink or split
  for (auto c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(CommShrink, DifferentExcludeListsFailInsteadOfHanging) {
  // Rank 2 excludes rank 1 where the others exclude rank 4: the offer of rank 0 (the lowest
  // survivor either way) does not match rank 2's list, and the others wait for rank 2 at the new
  // rendezvous until its timeout.
  weft::test::ScopedEnv env({{"WEFT_BOOTSTRAP_TIMEOUT_MS", "3000"}, {"WEFT_TIMEOUT_MS", "3000"}});
  ncclComm_t comms[5] = {};
  ASSERT_EQ(ncclCommInitAll(comms, 5, nullptr), ncclSuccess);
  int four = 4, one = 1;
  ncclComm_t out[4] = {};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 4; ++r)
    ncclCommShrink(comms[r], r == 2 ? &one : &four, 1, &out[r], nullptr, 0);
  EXPECT_NE(ncclGroupEnd(), ncclSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  for (auto c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST_F(FiveRanks, NonBlockingShrinkAndSplitReportThroughAsyncError) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  int last = kN - 1;
  std::vector<ncclComm_t> shrunk(kN - 1, nullptr);
  for (int r = 0; r < kN - 1; ++r) {
    ASSERT_EQ(ncclCommShrink(comms_[r], &last, 1, &shrunk[r], &config, NCCL_SHRINK_DEFAULT),
              ncclInProgress);
    ASSERT_NE(shrunk[r], nullptr);
  }
  for (auto c : shrunk) ASSERT_EQ(waitAsync(c), ncclSuccess);
  expectAllReduceOfRanks(shrunk);
  // Split of the shrunk communicator (non-blocking, inherited): rank 3 takes no part.
  std::vector<ncclComm_t> split(kN - 1, nullptr);
  for (int r = 0; r < kN - 1; ++r)
    ASSERT_EQ(ncclCommSplit(shrunk[r], r == 3 ? NCCL_SPLIT_NOCOLOR : 0, 0, &split[r], nullptr),
              ncclInProgress);
  EXPECT_EQ(split[3], nullptr);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(waitAsync(split[r]), ncclSuccess);
  ASSERT_EQ(waitAsync(shrunk[3]), ncclSuccess);  // the NOCOLOR exchange ran on the parent
  expectAllReduceOfRanks({split.begin(), split.begin() + 3});
  for (auto c : split)
    if (c) {
      EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
    }
  for (auto c : shrunk) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
