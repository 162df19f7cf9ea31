// What could hang a real program on the kernel path of calls on device memory, against the fake
// stream driver, whose allocations synchronise the device (waiting for running kernels) and
// whose scheduler can withhold co-residency as a GPU does (fake_stream_driver.cc): no allocation
// while kernels wait for peers, and ranks whose kernels cannot run side by side (the legacy NULL
// stream, CUDA_DEVICE_MAX_CONNECTIONS=1, one stream shared from two threads) end with correct
// results or a clear error, never a hang. Processes sharing a GPU without MPS are in
// device_kernels_procs_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/unit/cuda/fake_stream_api.h"

namespace {

using weft::test::FakeDeviceBuffer;

const bool kFakeDriver = setenv("WEFT_CUDA_DRIVER", WEFT_FAKE_STREAM_DRIVER, 1) == 0;
cudaStream_t kLegacy = nullptr;

class DeviceHazards : public ::testing::Test {
 public:
  void SetUp() override {
    ASSERT_TRUE(kFakeDriver);
    if (!weft::test::kKernelImage)
      GTEST_SKIP() << "built without nvcc: no kernel image, calls on device memory are staged";
    // A deadlock shows as a failure within seconds, not as a hang.
    setenv("WEFT_FAKE_SYNC_LIMIT_MS", "5000", 1);
    hazards_ = weftFakeSyncHazards();
    deadlocks_ = weftFakeDeadlocks();
  }
  void TearDown() override {
    for (void* s : streams_) weftFakeStreamSynchronize(s);
    weftFakeStreamSynchronize(nullptr);
    for (auto c : comms_) ncclCommDestroy(c);
    for (void* s : streams_) weftFakeStreamDestroy(s);
    for (const char* v : {"WEFT_TIMEOUT_MS", "WEFT_FAKE_LEGACY_SYNC", "WEFT_FAKE_ONE_QUEUE",
                          "CUDA_DEVICE_MAX_CONNECTIONS", "WEFT_FAKE_SYNC_LIMIT_MS"})
      unsetenv(v);
    EXPECT_EQ(weftFakeDeadlocks(), deadlocks_) << "the fake driver saw a deadlock";
  }
  void init(int n, bool blockingStreams = false) {
    comms_.resize(n);
    ASSERT_EQ(ncclCommInitAll(comms_.data(), n, nullptr), ncclSuccess);
    for (int r = 0; r < n; ++r)
      streams_.push_back(blockingStreams ? weftFakeStreamCreateBlocking() : weftFakeStreamCreate());
  }
  cudaStream_t stream(int i) { return static_cast<cudaStream_t>(streams_[i]); }
  ncclResult_t asyncError(int r) {
    ncclResult_t st = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comms_[r], &st), ncclSuccess);
    return st;
  }
  // Allreduce of `count` floats by rank r on `s`, input r + 1 + i % 7.
  struct Call {
    FakeDeviceBuffer<float> in, out;
    explicit Call(size_t count) : in(count), out(count) {}
  };
  std::unique_ptr<Call> allreduce(int r, size_t count, cudaStream_t s, ncclResult_t* result) {
    auto c = std::make_unique<Call>(count);
    for (size_t i = 0; i < count; ++i) c->in.p[i] = float(r + 1) + float(i % 7);
    *result = ncclAllReduce(c->in.p, c->out.p, count, ncclFloat, ncclSum, comms_[r], s);
    return c;
  }
  void expectSums(const std::vector<std::unique_ptr<Call>>& calls, size_t count) {
    const int n = static_cast<int>(calls.size());
    for (const auto& c : calls)
      for (size_t i = 0; i < count; i += 97)
        ASSERT_EQ(c->out.p[i], float(n * (n + 1) / 2) + float(n) * float(i % 7)) << i;
  }
  void syncAll() {
    for (void* s : streams_) weftFakeStreamSynchronize(s);
    weftFakeStreamSynchronize(nullptr);
  }

  std::vector<ncclComm_t> comms_;
  std::vector<void*> streams_;
  uint64_t hazards_ = 0, deadlocks_ = 0;
};

// Rank 0's kernel waits for rank 1 while rank 1's first call, and then a call of a new and
// larger plan, set up their plans, counters and scratch: nothing is allocated or freed while a
// kernel runs (each would synchronise the device under the waiting kernel).
TEST_F(DeviceHazards, NoAllocationWhileKernelsWaitForPeers) {
  init(2);
  for (size_t count : {size_t{1024}, size_t{1} << 20}) {
    std::vector<std::unique_ptr<Call>> calls;
    ncclResult_t r0, r1;
    calls.push_back(allreduce(0, count, stream(0), &r0));
    ASSERT_EQ(r0, ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0's kernel waits
    calls.push_back(allreduce(1, count, stream(1), &r1));
    ASSERT_EQ(r1, ncclSuccess) << ncclGetLastError(comms_[1]);
    syncAll();
    ASSERT_EQ(asyncError(0), ncclSuccess) << ncclGetLastError(comms_[0]);
    ASSERT_EQ(asyncError(1), ncclSuccess) << ncclGetLastError(comms_[1]);
    expectSums(calls, count);
  }
  EXPECT_EQ(weftFakeSyncHazards(), hazards_) << "an allocation or free while kernels ran";
}

// The fake withholds co-residency where a GPU does: a "kernel" on a blocking stream that waits
// for one on the legacy stream never sees it start (legacy-stream order), nor one behind an
// operation held up on its stream (one hardware queue), nor one queued after it on its stream.
struct Flag {
  std::atomic<int> set{0};
  std::atomic<int> sawIt{-1};
};
void waitForFlag(void* p) {
  auto* f = static_cast<Flag*>(p);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (!f->set.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  f->sawIt = f->set.load();
}
void raiseFlag(void* p) { static_cast<Flag*>(p)->set = 1; }

TEST_F(DeviceHazards, FakeSchedulerWithholdsCoResidency) {
  void* a = weftFakeStreamCreateBlocking();
  void* b = weftFakeStreamCreate();
  auto run = [&](void* waiter, void* raiser, void* between) {
    Flag f;
    weftFakeLaunch(waiter, waitForFlag, &f);
    if (between)
      weftFakeLaunch(
          between, [](void*) {}, nullptr);
    weftFakeLaunch(raiser, raiseFlag, &f);
    weftFakeStreamSynchronize(waiter);
    weftFakeStreamSynchronize(raiser);
    return f.sawIt.load();
  };
  EXPECT_EQ(run(a, nullptr, nullptr), 1);  // plain: they run side by side
  EXPECT_EQ(run(a, a, nullptr), 0);        // one stream: one after the other
  setenv("WEFT_FAKE_LEGACY_SYNC", "1", 1);
  EXPECT_EQ(run(a, nullptr, nullptr), 0);  // the legacy stream waits for the blocking one
  EXPECT_EQ(run(b, nullptr, nullptr), 1);  // but not for a non-blocking one
  unsetenv("WEFT_FAKE_LEGACY_SYNC");
  setenv("WEFT_FAKE_ONE_QUEUE", "1", 1);
  EXPECT_EQ(run(a, b, nullptr), 1);  // adjacent in the queue: side by side
  EXPECT_EQ(run(a, b, a), 0);        // behind an operation waiting on a's stream: held back
  unsetenv("WEFT_FAKE_ONE_QUEUE");
  weftFakeStreamDestroy(a);
  weftFakeStreamDestroy(b);
}

// Ranks called from their own threads on the legacy NULL stream, whose work serialises with every
// blocking stream: they meet and one kernel carries both, with correct results.
TEST_F(DeviceHazards, LegacyStreamRanksFromThreadsRunAsOneKernel) {
  setenv("WEFT_FAKE_LEGACY_SYNC", "1", 1);
  setenv("WEFT_TIMEOUT_MS", "10000", 1);
  init(2, true);
  for (int round = 0; round < 3; ++round) {
    const uint64_t launches = weftFakeKernelLaunches();
    std::vector<std::unique_ptr<Call>> calls(2);
    ncclResult_t rc[2];
    std::thread t([&] { calls[1] = allreduce(1, 4096, kLegacy, &rc[1]); });
    calls[0] = allreduce(0, 4096, kLegacy, &rc[0]);
    t.join();
    ASSERT_EQ(rc[0], ncclSuccess) << ncclGetLastError(comms_[0]);
    ASSERT_EQ(rc[1], ncclSuccess) << ncclGetLastError(comms_[1]);
    syncAll();
    ASSERT_EQ(asyncError(0), ncclSuccess) << ncclGetLastError(comms_[0]);
    expectSums(calls, 4096);
    EXPECT_EQ(weftFakeKernelLaunches() - launches, 1u);
  }
}

// One rank on a stream of its own launches first; its peer then calls on the legacy stream,
// which would serialise behind it: the second call fails naming the cause and the first launch
// ends (aborted) instead of hanging.
TEST_F(DeviceHazards, LegacyStreamAfterAPeerLaunchedAloneFailsClearly) {
  setenv("WEFT_FAKE_LEGACY_SYNC", "1", 1);
  setenv("WEFT_TIMEOUT_MS", "20000", 1);
  init(2, true);
  ncclResult_t r0, r1;
  auto c1 = allreduce(1, 2048, stream(1), &r1);
  ASSERT_EQ(r1, ncclSuccess);
  const auto start = std::chrono::steady_clock::now();
  auto c0 = allreduce(0, 2048, kLegacy, &r0);
  EXPECT_NE(r0, ncclSuccess);
  const std::string why = ncclGetLastError(comms_[0]);
  EXPECT_NE(why.find("legacy NULL stream"), std::string::npos) << why;
  syncAll();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(asyncError(1), ncclRemoteError);
}

// CUDA_DEVICE_MAX_CONNECTIONS=1 (read at init): every stream feeds one queue. Ranks from their
// own threads on their own streams meet and run as one kernel; a group from one thread too; one
// thread calling its ranks outside a group gets a clear error naming the cause, not a hang.
TEST_F(DeviceHazards, OneHardwareQueueRanksRunAsOneKernel) {
  setenv("WEFT_FAKE_ONE_QUEUE", "1", 1);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  setenv("WEFT_TIMEOUT_MS", "1500", 1);
  init(2, true);
  for (int round = 0; round < 3; ++round) {
    const uint64_t launches = weftFakeKernelLaunches();
    std::vector<std::unique_ptr<Call>> calls(2);
    ncclResult_t rc[2];
    std::thread t([&] { calls[1] = allreduce(1, 5000, stream(1), &rc[1]); });
    calls[0] = allreduce(0, 5000, stream(0), &rc[0]);
    t.join();
    ASSERT_EQ(rc[0], ncclSuccess) << ncclGetLastError(comms_[0]);
    ASSERT_EQ(rc[1], ncclSuccess) << ncclGetLastError(comms_[1]);
    syncAll();
    ASSERT_EQ(asyncError(1), ncclSuccess) << ncclGetLastError(comms_[1]);
    expectSums(calls, 5000);
    EXPECT_EQ(weftFakeKernelLaunches() - launches, 1u);
  }
  {
    std::vector<std::unique_ptr<Call>> calls(2);
    ncclResult_t rc[2];
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    calls[0] = allreduce(0, 3000, stream(0), &rc[0]);
    calls[1] = allreduce(1, 3000, stream(1), &rc[1]);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comms_[0]);
    syncAll();
    expectSums(calls, 3000);
  }
  ncclResult_t rc;
  const auto start = std::chrono::steady_clock::now();
  auto lone = allreduce(0, 1000, stream(0), &rc);
  EXPECT_NE(rc, ncclSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  const std::string why = ncclGetLastError(comms_[0]);
  EXPECT_NE(why.find("CUDA_DEVICE_MAX_CONNECTIONS=1"), std::string::npos) << why;
  EXPECT_NE(why.find("ncclGroupStart"), std::string::npos) << why;
}

// Sends and receives never meet (a rank's partners change from group to group): under
// CUDA_DEVICE_MAX_CONNECTIONS=1 a send to a rank of this process on this GPU outside its launch
// fails naming the cause; both sides in one group on one stream run as one kernel.
TEST_F(DeviceHazards, OneHardwareQueuePointToPoint) {
  setenv("WEFT_FAKE_ONE_QUEUE", "1", 1);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  setenv("WEFT_TIMEOUT_MS", "5000", 1);
  init(2, true);
  FakeDeviceBuffer<float> a(1024), b(1024);
  for (size_t i = 0; i < 1024; ++i) a.p[i] = float(i);
  EXPECT_NE(ncclSend(a.p, 1024, ncclFloat, 1, comms_[0], stream(0)), ncclSuccess);
  const std::string why = ncclGetLastError(comms_[0]);
  EXPECT_NE(why.find("CUDA_DEVICE_MAX_CONNECTIONS=1"), std::string::npos) << why;
  const uint64_t launches = weftFakeKernelLaunches();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(a.p, 1024, ncclFloat, 1, comms_[0], stream(0)), ncclSuccess);
  ASSERT_EQ(ncclRecv(b.p, 1024, ncclFloat, 0, comms_[1], stream(0)), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comms_[1]);
  syncAll();
  EXPECT_EQ(weftFakeKernelLaunches() - launches, 1u);
  for (size_t i = 0; i < 1024; i += 31) ASSERT_EQ(b.p[i], float(i)) << i;
}

// Two ranks of one process on one stream, called one after the other outside a group: the
// second kernel would queue behind the first, which waits for it. The second call fails naming
// the cause, and the first launch ends (aborted) instead of hanging.
TEST_F(DeviceHazards, RanksOnOneStreamOutsideAGroupFailClearly) {
  setenv("WEFT_TIMEOUT_MS", "20000", 1);
  init(2);
  ncclResult_t r0, r1;
  auto c0 = allreduce(0, 2048, stream(0), &r0);
  ASSERT_EQ(r0, ncclSuccess);
  const auto start = std::chrono::steady_clock::now();
  auto c1 = allreduce(1, 2048, stream(0), &r1);
  EXPECT_NE(r1, ncclSuccess);
  const std::string why = ncclGetLastError(comms_[1]);
  EXPECT_NE(why.find("one stream"), std::string::npos) << why;
  syncAll();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(asyncError(0), ncclRemoteError);
}

}  // namespace
