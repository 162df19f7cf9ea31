// The kernel path of calls on device memory (src/cuda/device_kernels.h) through the public API,
// against the fake stream driver whose "kernels" run the device interpreter's host build on host
// threads: ranks sharing a stream run in one launch, a rank's calls on two streams stay in
// order, plans of different lane counts follow each other over the same counters, operators give
// the host path's bits (one lowering), and failures
// (mismatched calls, a peer that never calls, an abort) end the launches with the
// communicator's asynchronous error instead of a hang.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/unit/cuda/fake_stream_api.h"

namespace {

using weft::test::FakeDeviceBuffer;

const bool kFakeDriver = setenv("WEFT_CUDA_DRIVER", WEFT_FAKE_STREAM_DRIVER, 1) == 0;

class DeviceKernels : public ::testing::Test {
 public:
  void SetUp() override {
    ASSERT_TRUE(kFakeDriver);
    if (!weft::test::kKernelImage)
      GTEST_SKIP() << "built without nvcc: no kernel image, calls on device memory are staged";
  }
  void init(int n) {
    comms_.resize(n);
    ASSERT_EQ(ncclCommInitAll(comms_.data(), n, nullptr), ncclSuccess);
    for (int r = 0; r < 2 * n; ++r) streams_.push_back(weftFakeStreamCreate());
  }
  void TearDown() override {
    for (void* s : streams_) weftFakeStreamSynchronize(s);
    for (auto c : comms_) ncclCommDestroy(c);
    for (void* s : streams_) weftFakeStreamDestroy(s);
    unsetenv("WEFT_TIMEOUT_MS");
    unsetenv("WEFT_FAKE_GPUS");
    unsetenv("WEFT_FAKE_NO_PEER");
  }
  // Ranks on the given GPUs (ncclCommInitAll's devlist).
  void initOn(const std::vector<int>& devices) {
    const int n = static_cast<int>(devices.size());
    comms_.resize(n);
    ASSERT_EQ(ncclCommInitAll(comms_.data(), n, devices.data()), ncclSuccess);
    for (int r = 0; r < 2 * n; ++r) streams_.push_back(weftFakeStreamCreate());
  }
  ncclComm_t comm(int r) { return comms_[r]; }
  cudaStream_t stream(int i) { return static_cast<cudaStream_t>(streams_[i]); }
  void syncAll() {
    for (void* s : streams_) weftFakeStreamSynchronize(s);
  }
  ncclResult_t asyncError(int r) {
    ncclResult_t st = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comms_[r], &st), ncclSuccess);
    return st;
  }
  std::vector<ncclComm_t> comms_;
  std::vector<void*> streams_;
};

TEST_F(DeviceKernels, RanksSharingAStreamRunInOneLaunch) {
  const int n = 4;
  const size_t count = 5000;
  init(n);
  std::vector<std::unique_ptr<FakeDeviceBuffer<float>>> in, out;
  for (int r = 0; r < n; ++r) {
    in.push_back(std::make_unique<FakeDeviceBuffer<float>>(count));
    out.push_back(std::make_unique<FakeDeviceBuffer<float>>(count));
    for (size_t i = 0; i < count; ++i) in[r]->p[i] = float(r + 1);
  }
  const uint64_t before = weftFakeKernelLaunches();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(in[r]->p, out[r]->p, count, ncclFloat, ncclSum, comms_[r], stream(0)),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  syncAll();
  EXPECT_EQ(weftFakeKernelLaunches() - before, 1u);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(asyncError(r), ncclSuccess) << ncclGetLastError(comms_[r]);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r]->p[i], 10.0f) << "rank " << r;
  }
}

// Each rank reduces on one stream, then reduces that result again on another: the second call
// waits for the first as NCCL orders a communicator's calls.
TEST_F(DeviceKernels, ARanksCallsOnTwoStreamsStayInOrder) {
  const int n = 2;
  const size_t count = 1 << 16;
  init(n);
  std::vector<std::unique_ptr<FakeDeviceBuffer<float>>> in, mid, out;
  for (int r = 0; r < n; ++r) {
    in.push_back(std::make_unique<FakeDeviceBuffer<float>>(count));
    mid.push_back(std::make_unique<FakeDeviceBuffer<float>>(count));
    out.push_back(std::make_unique<FakeDeviceBuffer<float>>(count));
    for (size_t i = 0; i < count; ++i) in[r]->p[i] = float(r + 1);
  }
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(ncclAllReduce(in[r]->p, mid[r]->p, count, ncclFloat, ncclSum, comms_[r], stream(r)),
                ncclSuccess);
      ASSERT_EQ(
          ncclAllReduce(mid[r]->p, out[r]->p, count, ncclFloat, ncclSum, comms_[r], stream(n + r)),
          ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    syncAll();
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; i += 101) ASSERT_EQ(out[r]->p[i], 6.0f) << "rank " << r;
  }
}

// Integer averages of sizes whose plans differ, one after another over the same counters: the
// division falls to each run's last lane whatever the lane counts before it.
TEST_F(DeviceKernels, IntegerAverageOverPlansOfDifferentSizes) {
  const int n = 3;
  init(n);
  for (size_t count : {size_t{7}, size_t{300000}, size_t{64}, size_t{300000}, size_t{7}}) {
    SCOPED_TRACE(count);
    std::vector<std::unique_ptr<FakeDeviceBuffer<int32_t>>> in, out;
    for (int r = 0; r < n; ++r) {
      in.push_back(std::make_unique<FakeDeviceBuffer<int32_t>>(count));
      out.push_back(std::make_unique<FakeDeviceBuffer<int32_t>>(count));
      for (size_t i = 0; i < count; ++i) in[r]->p[i] = int32_t(3 * r + int(i % 5)) - 2;
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(ncclAllReduce(in[r]->p, out[r]->p, count, ncclInt32, ncclAvg, comms_[r], stream(r)),
                ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    syncAll();
    for (size_t i = 0; i < count; ++i) {
      int32_t sum = 0;
      for (int r = 0; r < n; ++r) sum += in[r]->p[i];
      for (int r = 0; r < n; ++r) ASSERT_EQ(out[r]->p[i], sum / n) << "rank " << r << " at " << i;
    }
  }
}

// One lowering for both paths: floating Avg (PreMulSum by a rounded 1/n), a PreMulSum handle
// and integer Avg on a reduce (divided on the root only) give the same bits on device memory
// (the kernel, from the Work the communicator lowered) as on host memory (the host executor).
TEST_F(DeviceKernels, OperatorsGiveTheHostPathsBits) {
  const int n = 3;
  init(n);
  const size_t count = 1000;
  ncclRedOp_t premul;
  float factor = 0.37f;
  ASSERT_EQ(
      ncclRedOpCreatePreMulSum(&premul, &factor, ncclFloat, ncclScalarHostImmediate, comms_[0]),
      ncclSuccess);
  for (int r = 1; r < n; ++r) {
    ncclRedOp_t same;
    ASSERT_EQ(
        ncclRedOpCreatePreMulSum(&same, &factor, ncclFloat, ncclScalarHostImmediate, comms_[r]),
        ncclSuccess);
    ASSERT_EQ(same, premul);
  }
  struct Case {
    const char* name;
    ncclDataType_t type;
    ncclRedOp_t op;
    bool rooted;
  };
  for (const Case& c :
       {Case{"float avg", ncclFloat, ncclAvg, false}, Case{"half avg", ncclFloat16, ncclAvg, false},
        Case{"float premulsum", ncclFloat, premul, false},
        Case{"int32 avg on a reduce", ncclInt32, ncclAvg, true}}) {
    SCOPED_TRACE(c.name);
    const size_t bytes = count * (c.type == ncclFloat16 ? 2 : 4);
    std::vector<std::unique_ptr<FakeDeviceBuffer<char>>> in, out;
    std::vector<std::vector<char>> hostIn(n), hostOut(n);
    for (int r = 0; r < n; ++r) {
      in.push_back(std::make_unique<FakeDeviceBuffer<char>>(bytes));
      out.push_back(std::make_unique<FakeDeviceBuffer<char>>(bytes));
      hostIn[r].resize(bytes);
      hostOut[r].assign(bytes, 0x5a);
      for (size_t i = 0; i < count; ++i) {
        const float f = 0.1f * float(r + 1) + 0.013f * float(i % 97);
        if (c.type == ncclFloat) std::memcpy(&hostIn[r][4 * i], &f, 4);
        if (c.type == ncclInt32) {
          const int32_t v = int32_t(7 * r) - int32_t(i % 11);
          std::memcpy(&hostIn[r][4 * i], &v, 4);
        }
        if (c.type == ncclFloat16) {
          const uint16_t h = static_cast<uint16_t>(0x3000 + 37 * r + i % 300);
          std::memcpy(&hostIn[r][2 * i], &h, 2);
        }
      }
      std::memcpy(in[r]->p, hostIn[r].data(), bytes);
      std::memset(out[r]->p, 0x5a, bytes);
    }
    for (bool device : {true, false}) {
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      for (int r = 0; r < n; ++r) {
        const void* from = device ? static_cast<const void*>(in[r]->p) : hostIn[r].data();
        void* to = device ? static_cast<void*>(out[r]->p) : hostOut[r].data();
        // Host memory goes with no stream (the call completes in ncclGroupEnd).
        cudaStream_t s = device ? stream(r) : nullptr;
        ASSERT_EQ(c.rooted ? ncclReduce(from, to, count, c.type, c.op, 1, comms_[r], s)
                           : ncclAllReduce(from, to, count, c.type, c.op, comms_[r], s),
                  ncclSuccess);
      }
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
      syncAll();
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(asyncError(r), ncclSuccess);
      EXPECT_EQ(std::memcmp(out[r]->p, hostOut[r].data(), bytes), 0) << "rank " << r;
    }
  }
}

// Calls much larger than a link's FIFO (slots x slot bytes), with every built-in algorithm
// forced in turn: lanes stream their steps slice by slice, whatever the plan's shape.
class LargeDeviceCalls : public DeviceKernels, public ::testing::WithParamInterface<const char*> {};

TEST_P(LargeDeviceCalls, EveryCollective) {
  setenv("NCCL_ALGO", GetParam(), 1);  // read at init
  setenv("WEFT_SLOTS", "4", 1);
  // A forced algorithm runs in the interpreter; the chosen one takes the direct kernels.
  setenv("WEFT_DIRECT", *GetParam() ? "0" : "1", 1);
  const int n = 3;
  init(n);
  unsetenv("NCCL_ALGO");
  unsetenv("WEFT_SLOTS");
  unsetenv("WEFT_DIRECT");
  const size_t count = (size_t{3} << 20) / 4 + 13;  // 3 MiB of floats per rank, and a tail
  std::vector<std::unique_ptr<FakeDeviceBuffer<float>>> send, recv;
  for (int r = 0; r < n; ++r) {
    send.push_back(std::make_unique<FakeDeviceBuffer<float>>(count * n));
    recv.push_back(std::make_unique<FakeDeviceBuffer<float>>(count * n));
    for (size_t i = 0; i < count * n; ++i) send[r]->p[i] = float(r + 1) + float(i % 3);
  }
  auto run = [&](const char* what, auto&& call) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r) ASSERT_EQ(call(r), ncclSuccess) << what;
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    syncAll();
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(asyncError(r), ncclSuccess) << what << ": " << ncclGetLastError(comms_[r]);
  };
  run("allreduce", [&](int r) {
    return ncclAllReduce(send[r]->p, recv[r]->p, count, ncclFloat, ncclSum, comms_[r], stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; i += 7) ASSERT_EQ(recv[r]->p[i], 6.0f + 3.0f * float(i % 3));
  run("allgather", [&](int r) {
    return ncclAllGather(send[r]->p, recv[r]->p, count, ncclFloat, comms_[r], stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; i += 7)
        ASSERT_EQ(recv[r]->p[q * count + i], float(q + 1) + float(i % 3));
  run("reducescatter", [&](int r) {
    return ncclReduceScatter(send[r]->p, recv[r]->p, count, ncclFloat, ncclSum, comms_[r],
                             stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; i += 7)
      ASSERT_EQ(recv[r]->p[i], 6.0f + 3.0f * float((r * count + i) % 3));
  run("broadcast", [&](int r) {
    return ncclBroadcast(send[r]->p, recv[r]->p, count, ncclFloat, 1, comms_[r], stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; i += 7) ASSERT_EQ(recv[r]->p[i], 2.0f + float(i % 3));
  run("alltoall", [&](int r) {
    return ncclAlltoAll(send[r]->p, recv[r]->p, count, ncclFloat, comms_[r], stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; i += 7)
        ASSERT_EQ(recv[r]->p[q * count + i], float(q + 1) + float((r * count + i) % 3));
  run("sendrecv", [&](int r) {
    ncclResult_t a = ncclSend(send[r]->p, count, ncclFloat, (r + 1) % n, comms_[r], stream(r));
    ncclResult_t b = ncclRecv(recv[r]->p, count, ncclFloat, (r + n - 1) % n, comms_[r], stream(r));
    return a != ncclSuccess ? a : b;
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; i += 7)
      ASSERT_EQ(recv[r]->p[i], float((r + n - 1) % n + 1) + float(i % 3));
}

INSTANTIATE_TEST_SUITE_P(Algorithms, LargeDeviceCalls,
                         ::testing::Values("", "ring", "tree", "rhd", "direct", "rsag", "fan"),
                         [](const auto& info) {
                           return std::string(*info.param ? info.param : "chosen");
                         });

// Ranks of one process on two GPUs (ncclCommInitAll's devlist): where the GPUs reach each
// other's memory the calls run in the kernel, each FIFO in its receiver's GPU memory and the
// senders storing into it through peer access; where they do not, the calls are staged.
void allreduceOnTwoGpus(DeviceKernels& t, bool peerAccess) {
  setenv("WEFT_FAKE_GPUS", "2", 1);
  if (!peerAccess) setenv("WEFT_FAKE_NO_PEER", "1", 1);
  const int n = 4;
  const std::vector<int> devices{0, 1, 1, 0};
  t.initOn(devices);
  const size_t count = 70000;
  std::vector<std::unique_ptr<FakeDeviceBuffer<float>>> in, out;
  for (int r = 0; r < n; ++r) {
    in.push_back(std::make_unique<FakeDeviceBuffer<float>>(count));
    out.push_back(std::make_unique<FakeDeviceBuffer<float>>(count));
    for (size_t i = 0; i < count; ++i) in[r]->p[i] = float(r + 1) * float(i % 4);
  }
  const uint64_t before = weftFakeKernelLaunches();
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(
          ncclAllReduce(in[r]->p, out[r]->p, count, ncclFloat, ncclSum, t.comm(r), t.stream(r)),
          ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    t.syncAll();
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r]->p[i], 10.0f * float(i % 4));
  }
  if (peerAccess)
    EXPECT_GT(weftFakeKernelLaunches(), before);
  else
    EXPECT_EQ(weftFakeKernelLaunches(), before);
}

TEST_F(DeviceKernels, RanksOnTwoGpusWithPeerAccess) { allreduceOnTwoGpus(*this, true); }
TEST_F(DeviceKernels, GpusWithoutPeerAccessAreStaged) { allreduceOnTwoGpus(*this, false); }

TEST_F(DeviceKernels, MismatchedCallsFailInsteadOfHanging) {
  const int n = 2;
  init(n);
  FakeDeviceBuffer<float> a0(4096), b0(4096), a1(4096), b1(4096);
  ASSERT_EQ(ncclAllReduce(a0.p, b0.p, 1000, ncclFloat, ncclSum, comms_[0], stream(0)), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(a1.p, b1.p, 3000, ncclFloat, ncclSum, comms_[1], stream(1)), ncclSuccess);
  syncAll();
  const ncclResult_t e0 = asyncError(0), e1 = asyncError(1);
  EXPECT_NE(e0, ncclSuccess);
  EXPECT_NE(e1, ncclSuccess);
  const std::string why =
      std::string(ncclGetLastError(comms_[0])) + " | " + ncclGetLastError(comms_[1]);
  EXPECT_NE(why.find("mismatched"), std::string::npos) << why;
  // A call on a failed communicator is refused.
  EXPECT_NE(ncclAllReduce(a0.p, b0.p, 10, ncclFloat, ncclSum, comms_[0], stream(0)), ncclSuccess);
}

TEST_F(DeviceKernels, APeerThatNeverCallsTimesOut) {
  setenv("WEFT_TIMEOUT_MS", "400", 1);  // read at init
  init(2);
  FakeDeviceBuffer<float> a(1024), b(1024);
  ASSERT_EQ(ncclAllReduce(a.p, b.p, 1024, ncclFloat, ncclSum, comms_[0], stream(0)), ncclSuccess);
  weftFakeStreamSynchronize(streams_[0]);
  EXPECT_EQ(asyncError(0), ncclRemoteError);
  const std::string why = ncclGetLastError(comms_[0]);
  EXPECT_NE(why.find("timed out"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
}

TEST_F(DeviceKernels, AbortEndsAWaitingLaunch) {
  init(2);
  FakeDeviceBuffer<float> a(1024), b(1024);
  ASSERT_EQ(ncclAllReduce(a.p, b.p, 1024, ncclFloat, ncclSum, comms_[0], stream(0)), ncclSuccess);
  ASSERT_EQ(ncclCommAbort(comms_[1]), ncclSuccess);  // the peer gives up instead of calling
  comms_.pop_back();
  weftFakeStreamSynchronize(streams_[0]);
  EXPECT_EQ(asyncError(0), ncclRemoteError);
  const std::string why = ncclGetLastError(comms_[0]);
  EXPECT_NE(why.find("aborted"), std::string::npos) << why;
}

}  // namespace
