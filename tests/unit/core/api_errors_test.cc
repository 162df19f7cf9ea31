// Bad input gets a clear error, changes nothing and never crashes or hangs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/bootstrap/bootstrap.h"
#include "tests/support/collective_check.h"
#include "weft/weft.h"

namespace {

class TwoRanks : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ncclCommInitAll(comms_, 2, nullptr), ncclSuccess); }
  void TearDown() override {
    for (auto c : comms_)
      if (c) ncclCommDestroy(c);
  }
  ncclComm_t comms_[2] = {nullptr, nullptr};
  float a_[64] = {}, b_[64] = {};
};

TEST_F(TwoRanks, NullBuffers) {
  EXPECT_EQ(ncclAllReduce(nullptr, b_, 8, ncclFloat, ncclSum, comms_[0], nullptr),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("sendbuff"), std::string::npos);
  EXPECT_EQ(ncclAllReduce(a_, nullptr, 8, ncclFloat, ncclSum, comms_[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclSend(nullptr, 8, ncclFloat, 1, comms_[0], nullptr), ncclInvalidArgument);
  // count 0 with NULL buffers is a legal no-op.
  ncclGroupStart();
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, comms_[0], nullptr),
            ncclSuccess);
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, comms_[1], nullptr),
            ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
}

TEST_F(TwoRanks, BadTypeOpRootPeer) {
  EXPECT_EQ(ncclAllReduce(a_, b_, 8, static_cast<ncclDataType_t>(12), ncclSum, comms_[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(a_, b_, 8, static_cast<ncclDataType_t>(-1), ncclSum, comms_[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(a_, b_, 8, ncclFloat, static_cast<ncclRedOp_t>(5), comms_[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(a_, b_, 8, ncclFloat, static_cast<ncclRedOp_t>(-3), comms_[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(a_, b_, 8, ncclFloat, 2, comms_[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclReduce(a_, b_, 8, ncclFloat, ncclSum, -1, comms_[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclSend(a_, 8, ncclFloat, 7, comms_[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclRecv(b_, 8, ncclFloat, -1, comms_[0], nullptr), ncclInvalidArgument);
}

TEST_F(TwoRanks, PreMulSumTypeMismatch) {
  float two = 2;
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat, ncclScalarHostImmediate, comms_[0]),
            ncclSuccess);
  EXPECT_EQ(ncclAllReduce(a_, b_, 8, ncclDouble, op, comms_[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpDestroy(op, comms_[0]), ncclSuccess);
  EXPECT_EQ(ncclRedOpDestroy(op, comms_[0]), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpDestroy(ncclSum, comms_[0]), ncclInvalidArgument);
}

TEST_F(TwoRanks, CountOverflow) {
  size_t huge = ~size_t(0) / 2;
  EXPECT_EQ(ncclAllReduce(a_, b_, huge, ncclFloat, ncclSum, comms_[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(a_, b_, ~size_t(0) / 4, ncclInt8, comms_[0], nullptr),
            ncclInvalidArgument);
}

TEST_F(TwoRanks, ForeignStream) {
  int notAStream;
  EXPECT_EQ(ncclAllReduce(a_, b_, 8, ncclFloat, ncclSum, comms_[0],
                          reinterpret_cast<cudaStream_t>(&notAStream)),
            ncclInvalidArgument);
}

TEST_F(TwoRanks, MismatchedCountsAreReportedNotHung) {
  setenv("WEFT_TIMEOUT_MS", "20000", 1);
  std::vector<float> s0(1000, 1), r0(1000), s1(3000, 1), r1(3000);
  ncclResult_t res[2];
  std::thread t0([&] {
    res[0] = ncclAllReduce(s0.data(), r0.data(), 1000, ncclFloat, ncclSum, comms_[0], nullptr);
  });
  std::thread t1([&] {
    res[1] = ncclAllReduce(s1.data(), r1.data(), 3000, ncclFloat, ncclSum, comms_[1], nullptr);
  });
  t0.join();
  t1.join();
  EXPECT_NE(res[0], ncclSuccess);
  EXPECT_NE(res[1], ncclSuccess);
  std::string e0 = ncclGetLastError(comms_[0]), e1 = ncclGetLastError(comms_[1]);
  EXPECT_TRUE(e0.find("mismatch") != std::string::npos || e1.find("mismatch") != std::string::npos)
      << e0 << " | " << e1;
  ncclResult_t async;
  EXPECT_EQ(ncclCommGetAsyncError(comms_[0], &async), ncclSuccess);
  EXPECT_NE(async, ncclSuccess);
}

// A tree broadcast of mismatched counts: a rank near the root sees the mismatch before it ever
// opened its link to a rank further down. That rank must learn of the failure at once, not when
// its own timeout ends.
TEST(FourRanks, RanksAFailedRankNeverLinkedToFailAtOnce) {
  setenv("WEFT_TIMEOUT_MS", "60000", 1);
  std::vector<ncclComm_t> comms(4);
  ASSERT_EQ(weft::test::initAllWithAlgo(comms, "tree"), ncclSuccess);
  const size_t big = 300000, small = 200000;  // floats: many slices, so ranks differ early
  std::vector<std::vector<float>> bufs(4, std::vector<float>(big, 1.0f));
  std::vector<ncclResult_t> res(4);
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      res[r] = ncclBroadcast(bufs[r].data(), bufs[r].data(), r == 0 ? big : small, ncclFloat, 0,
                             comms[r], nullptr);
    });
  for (auto& t : threads) t.join();
  const auto waited = std::chrono::steady_clock::now() - start;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(res[r], ncclSuccess) << "rank " << r;
    EXPECT_EQ(std::string(ncclGetLastError(comms[r])).find("timed out"), std::string::npos)
        << "rank " << r << ": " << ncclGetLastError(comms[r]);
  }
  EXPECT_LT(waited, std::chrono::seconds(50));
  for (auto c : comms) ncclCommDestroy(c);
  unsetenv("WEFT_TIMEOUT_MS");
}

TEST_F(TwoRanks, MismatchedCollectivesAreReported) {
  std::vector<float> s(256, 1), r(512);
  ncclResult_t res[2];
  std::thread t0([&] {
    res[0] = ncclAllReduce(s.data(), r.data(), 256, ncclFloat, ncclSum, comms_[0], nullptr);
  });
  std::thread t1(
      [&] { res[1] = ncclBroadcast(s.data(), r.data(), 256, ncclFloat, 0, comms_[1], nullptr); });
  t0.join();
  t1.join();
  EXPECT_TRUE(res[0] != ncclSuccess || res[1] != ncclSuccess);
}

TEST(Api, CommUseAfterDestroy) {
  ncclComm_t c;
  ASSERT_EQ(ncclCommInitAll(&c, 1, nullptr), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("destroyed"), std::string::npos);
  int n;
  EXPECT_EQ(ncclCommCount(c, &n), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(c), ncclInvalidArgument);
  EXPECT_EQ(ncclCommCount(nullptr, &n), ncclInvalidArgument);
}

TEST(Api, InitArguments) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  EXPECT_EQ(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&c, 2, id, -1), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument);
  ncclUniqueId garbage;
  std::memset(garbage.internal, 0x7b, sizeof(garbage.internal));
  EXPECT_EQ(ncclCommInitRank(&c, 1, garbage, 0), ncclInvalidArgument);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument);
}

TEST(Api, VersionAndStrings) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_STREQ(ncclGetErrorString(static_cast<ncclResult_t>(99)), "unknown result code");
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
}

TEST(Api, UnsupportedFeaturesSayNo) {
  ncclComm_t c;
  ASSERT_EQ(ncclCommInitAll(&c, 1, nullptr), ncclSuccess);
  ncclWindow_t w;
  float x;
  EXPECT_EQ(ncclCommWindowRegister(c, &x, 4, &w, 0), ncclInvalidUsage);
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(Api, GroupEndWithoutStart) { EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage); }

TEST(Api, StrangerOnBootstrapPortDoesNotBreakInit) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  weft::bootstrap::UniqueIdBytes raw;
  std::memcpy(raw.bytes, id.internal, sizeof(raw.bytes));
  std::string addr = weft::bootstrap::describe(raw).rootAddress;
  std::string host = addr.substr(0, addr.rfind(':'));
  int port = std::stoi(addr.substr(addr.rfind(':') + 1));
  if (host.front() == '[') GTEST_SKIP() << "IPv6 root";
  // A stranger connects first and sends garbage.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  char junk[300];
  std::memset(junk, 0x41, sizeof(junk));
  (void)!write(fd, junk, sizeof(junk));
  ncclComm_t comms[2];
  ncclGroupStart();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(ncclCommInitRank(&comms[r], 2, id, r), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  close(fd);
  for (auto c : comms) ncclCommDestroy(c);
}

TEST(Api, CommSplitByParity) {
  const int n = 5;
  ncclComm_t comms[n], sub[n];
  ASSERT_EQ(ncclCommInitAll(comms, n, nullptr), ncclSuccess);
  ncclGroupStart();
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclCommSplit(comms[r], r == 4 ? NCCL_SPLIT_NOCOLOR : r % 2, -r, &sub[r], nullptr),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(sub[4], nullptr);
  int count, rank;
  ASSERT_EQ(ncclCommCount(sub[0], &count), ncclSuccess);
  EXPECT_EQ(count, 2);  // ranks 0 and 2
  ASSERT_EQ(ncclCommUserRank(sub[0], &rank), ncclSuccess);
  EXPECT_EQ(rank, 1);  // key -r puts rank 2 first
  // Allreduce within color 0 (parent ranks 0 and 2): sum of 1 and 3.
  float in[2][4], out[2][4];
  const int members[2] = {0, 2};
  ncclGroupStart();
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 4; ++i) in[j][i] = static_cast<float>(members[j] + 1);
    ncclAllReduce(in[j], out[j], 4, ncclFloat, ncclSum, sub[members[j]], nullptr);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int j = 0; j < 2; ++j) EXPECT_EQ(out[j][3], 4.0f);
  for (int r = 0; r < n; ++r) {
    if (sub[r]) ncclCommDestroy(sub[r]);
    ncclCommDestroy(comms[r]);
  }
}

TEST(Api, HostStreamsRunAsynchronouslyInOrder) {
  const int n = 2;
  ncclComm_t comms[n];
  ASSERT_EQ(ncclCommInitAll(comms, n, nullptr), ncclSuccess);
  cudaStream_t streams[n];
  for (auto& s : streams) ASSERT_EQ(weftStreamCreate(&s), ncclSuccess);
  std::vector<float> buf[n];
  for (int r = 0; r < n; ++r) buf[r].assign(100000, 1.0f);
  ncclGroupStart();
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < 3; ++k)  // three in-place sums in a row: 1 -> 2 -> 4 -> 8
      ASSERT_EQ(ncclAllReduce(buf[r].data(), buf[r].data(), buf[r].size(), ncclFloat, ncclSum,
                              comms[r], streams[r]),
                ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(weftStreamSynchronize(streams[r]), ncclSuccess);
    EXPECT_EQ(weftStreamQuery(streams[r]), ncclSuccess);
    EXPECT_EQ(buf[r][0], 8.0f);
    EXPECT_EQ(buf[r][99999], 8.0f);
  }
  for (auto s : streams) EXPECT_EQ(weftStreamDestroy(s), ncclSuccess);
  for (auto c : comms) ncclCommDestroy(c);
}

TEST(Api, MemAllocAndRegister) {
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 1 << 20), ncclSuccess);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 1 << 20);
  ncclComm_t c;
  ASSERT_EQ(ncclCommInitAll(&c, 1, nullptr), ncclSuccess);
  void* h = nullptr;
  EXPECT_EQ(ncclCommRegister(c, p, 1 << 20, &h), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(c, h), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(c, h), ncclInvalidArgument);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  int x;
  EXPECT_EQ(ncclMemFree(&x), ncclInvalidArgument);
  EXPECT_EQ(ncclMemAlloc(&p, 0), ncclInvalidArgument);
  ncclCommDestroy(c);
}

TEST(Api, NonBlockingInit) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t c;
  ncclResult_t r = ncclCommInitRankConfig(&c, 1, id, 0, &cfg);
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress);
  ncclResult_t async = ncclInProgress;
  for (int i = 0; i < 10000 && async == ncclInProgress; ++i) {
    ASSERT_EQ(ncclCommGetAsyncError(c, &async), ncclSuccess);
    if (async == ncclInProgress) usleep(1000);
  }
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(Api, ConfigOfAnotherSizeIsAccepted) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  // A caller built against an older header passes a shorter struct.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.size = offsetof(ncclConfig_t, commName);
  ncclComm_t c;
  ASSERT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclSuccess);
  ncclCommDestroy(c);
}

}  // namespace
