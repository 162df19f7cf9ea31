// Calls on device memory through the public API, ordered on the caller's stream, against a
// driver whose "GPU" runs streams on host threads (fake_stream_driver.cc, loaded by the library
// through WEFT_CUDA_DRIVER as it loads libcuda.so.1): every collective with 1-4 ranks as
// threads, each rank on its own stream and all on one stream; in place; work queued before and
// after a call on the same stream; a captured graph replayed with new inputs; an aborted
// communicator that leaves its stream running; and the errors of mixed memory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "tests/unit/cuda/fake_stream_api.h"

namespace {

// Set before the library first asks for its driver.
const bool kFakeDriver = setenv("WEFT_CUDA_DRIVER", WEFT_FAKE_STREAM_DRIVER, 1) == 0;

using DeviceBuffer = weft::test::FakeDeviceBuffer<float>;

// Each case runs on both paths: the device interpreter's kernel (ranks of one process on one
// GPU, the default) and staging through host memory (WEFT_DEVICE_KERNELS=0).
class DeviceCalls : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kFakeDriver);
    n_ = std::get<0>(GetParam());
    kernels_ = std::get<1>(GetParam());
    setenv("WEFT_DEVICE_KERNELS", kernels_ ? "1" : "0", 1);  // read at init
    launchesBefore_ = weftFakeKernelLaunches();
    comms_.resize(n_);
    ASSERT_EQ(ncclCommInitAll(comms_.data(), n_, nullptr), ncclSuccess);
    for (int r = 0; r < n_; ++r) streams_.push_back(weftFakeStreamCreate());
  }
  void TearDown() override {
    for (void* s : streams_) weftFakeStreamSynchronize(s);
    for (auto c : comms_) ncclCommDestroy(c);
    for (void* s : streams_) weftFakeStreamDestroy(s);
    unsetenv("WEFT_DEVICE_KERNELS");
  }
  // The calls so far took the path the case is about.
  void expectPath() {
    const uint64_t launches = weftFakeKernelLaunches() - launchesBefore_;
    if (kernels_ && weft::test::kKernelImage)
      EXPECT_GT(launches, 0u) << "no call ran in the device interpreter's kernel";
    else
      EXPECT_EQ(launches, 0u) << "WEFT_DEVICE_KERNELS=0, yet the kernel ran";
  }
  cudaStream_t stream(int r) { return static_cast<cudaStream_t>(streams_[r]); }
  void syncAll() {
    for (void* s : streams_) weftFakeStreamSynchronize(s);
  }
  int n_ = 0;
  bool kernels_ = true;
  uint64_t launchesBefore_ = 0;
  std::vector<ncclComm_t> comms_;
  std::vector<void*> streams_;
};

float valueOf(int rank, size_t i) { return float(rank + 1) + float(i % 7); }

TEST_P(DeviceCalls, EveryCollectiveOnItsStream) {
  const size_t count = 1000 + 3;
  const int n = n_;
  std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
  for (int r = 0; r < n; ++r) {
    send.push_back(std::make_unique<DeviceBuffer>(count * n));
    recv.push_back(std::make_unique<DeviceBuffer>(count * n));
  }
  auto fill = [&] {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count * n; ++i) {
        send[r]->p[i] = valueOf(r, i);
        recv[r]->p[i] = -1;
      }
  };
  auto group = [&](auto&& call) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r) ASSERT_EQ(call(r), ncclSuccess) << ncclGetLastError(comms_[r]);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    syncAll();
  };
  float sum0 = 0;  // sum over ranks of valueOf(r, i) minus n * (i % 7)
  for (int r = 0; r < n; ++r) sum0 += float(r + 1);

  fill();
  group([&](int r) {
    return ncclAllReduce(send[r]->p, recv[r]->p, count, ncclFloat, ncclSum, comms_[r], stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(recv[r]->p[i], sum0 + float(n) * float(i % 7)) << "allreduce rank " << r;

  fill();
  group([&](int r) {
    return ncclAllGather(send[r]->p, recv[r]->p, count, ncclFloat, comms_[r], stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(recv[r]->p[q * count + i], valueOf(q, i)) << "allgather rank " << r;

  fill();
  group([&](int r) {
    return ncclReduceScatter(send[r]->p, recv[r]->p, count, ncclFloat, ncclSum, comms_[r],
                             stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      const size_t at = r * count + i;
      ASSERT_EQ(recv[r]->p[i], sum0 + float(n) * float(at % 7)) << "reducescatter rank " << r;
    }

  fill();
  const int root = n - 1;
  group([&](int r) {
    return ncclBroadcast(send[r]->p, recv[r]->p, count, ncclFloat, root, comms_[r], stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[r]->p[i], valueOf(root, i));

  fill();
  group([&](int r) {
    return ncclReduce(send[r]->p, recv[r]->p, count, ncclFloat, ncclMax, 0, comms_[r], stream(r));
  });
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[0]->p[i], valueOf(n - 1, i));
  for (int r = 1; r < n; ++r) ASSERT_EQ(recv[r]->p[0], -1) << "a non-root's output is untouched";

  fill();
  group([&](int r) {
    return ncclAlltoAll(send[r]->p, recv[r]->p, count, ncclFloat, comms_[r], stream(r));
  });
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(recv[r]->p[q * count + i], valueOf(q, r * count + i));

  // Point to point: each rank sends to the next, receives from the previous.
  fill();
  group([&](int r) {
    ncclResult_t a = ncclSend(send[r]->p, count, ncclFloat, (r + 1) % n, comms_[r], stream(r));
    ncclResult_t b = ncclRecv(recv[r]->p, count, ncclFloat, (r + n - 1) % n, comms_[r], stream(r));
    return a != ncclSuccess ? a : b;
  });
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[r]->p[i], valueOf((r + n - 1) % n, i));
  expectPath();
}

TEST_P(DeviceCalls, InPlaceAndOneStreamForAllRanks) {
  const size_t count = 4099;
  const int n = n_;
  std::vector<std::unique_ptr<DeviceBuffer>> buf;
  for (int r = 0; r < n; ++r) {
    buf.push_back(std::make_unique<DeviceBuffer>(count * n));
    for (size_t i = 0; i < count * n; ++i) buf[r]->p[i] = valueOf(r, i);
  }
  // Several ranks on one GPU driven by one thread through one stream: one job for the group.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(
        ncclAllGather(buf[r]->p + r * count, buf[r]->p, count, ncclFloat, comms_[r], stream(0)),
        ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  weftFakeStreamSynchronize(streams_[0]);
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(buf[r]->p[q * count + i], valueOf(q, q * count + i)) << "rank " << r;
  expectPath();
}

struct Fill {
  float* p;
  size_t count;
  float value;
};
void fillKernel(void* arg) {
  auto* f = static_cast<Fill*>(arg);
  for (size_t i = 0; i < f->count; ++i) f->p[i] = f->value;
}
struct Scale {
  const float* in;
  float* out;
  size_t count;
};
void doubleKernel(void* arg) {
  auto* s = static_cast<Scale*>(arg);
  for (size_t i = 0; i < s->count; ++i) s->out[i] = 2 * s->in[i];
}

TEST_P(DeviceCalls, OrderedWithOtherWorkOnTheStream) {
  const size_t count = 1 << 16;
  const int n = n_;
  std::vector<std::unique_ptr<DeviceBuffer>> in, out, after;
  std::vector<Fill> fills(n);
  std::vector<Scale> scales(n);
  for (int r = 0; r < n; ++r) {
    in.push_back(std::make_unique<DeviceBuffer>(count));
    out.push_back(std::make_unique<DeviceBuffer>(count));
    after.push_back(std::make_unique<DeviceBuffer>(count));
    in[r]->p[0] = -100;  // overwritten by the fill queued before the call
    fills[r] = {in[r]->p, count, float(r + 1)};
    scales[r] = {out[r]->p, after[r]->p, count};
    weftFakeLaunch(streams_[r], fillKernel, &fills[r]);
  }
  // A group's calls join their streams at ncclGroupEnd, as NCCL's do.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(in[r]->p, out[r]->p, count, ncclFloat, ncclSum, comms_[r], stream(r)),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) weftFakeLaunch(streams_[r], doubleKernel, &scales[r]);
  syncAll();
  const float total = float(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; i += 997) ASSERT_EQ(after[r]->p[i], 2 * total);
  expectPath();
}

TEST_P(DeviceCalls, CapturedGraphReplaysWithNewInputs) {
  const size_t count = 333;
  const int n = n_;
  std::vector<std::unique_ptr<DeviceBuffer>> in, out;
  std::vector<void*> graphs;
  for (int r = 0; r < n; ++r) {
    in.push_back(std::make_unique<DeviceBuffer>(count));
    out.push_back(std::make_unique<DeviceBuffer>(count));
    weftFakeBeginCapture(streams_[r]);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(in[r]->p, out[r]->p, count, ncclFloat, ncclSum, comms_[r], stream(r)),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) graphs.push_back(weftFakeEndCapture(streams_[r]));
  for (int replay = 0; replay < 3; ++replay) {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) in[r]->p[i] = float(replay * 10 + r);
    for (int r = 0; r < n; ++r) weftFakeGraphLaunch(graphs[r], streams_[r]);
    syncAll();
    float expect = 0;
    for (int r = 0; r < n; ++r) expect += float(replay * 10 + r);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r]->p[i], expect) << "replay " << replay;
  }
  for (void* g : graphs) weftFakeGraphDestroy(g);
  expectPath();
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCalls,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_kernel" : "_staged");
                         });

TEST(DeviceCallErrors, MixedMemoryIsAnError) {
  ASSERT_TRUE(kFakeDriver);
  ncclComm_t comm;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  DeviceBuffer dev(16);
  std::vector<float> host(16);
  void* s = weftFakeStreamCreate();
  EXPECT_EQ(
      ncclAllReduce(dev.p, host.data(), 16, ncclFloat, ncclSum, comm, static_cast<cudaStream_t>(s)),
      ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("host"), std::string::npos)
      << ncclGetLastError(comm);
  ncclCommDestroy(comm);
  weftFakeStreamDestroy(s);
}

// A rank whose peer never joins: its call fails when the communicator is aborted, and the stream
// goes on (the failure is the communicator's async error). On both paths.
TEST(DeviceCallErrors, AbortedCallLetsTheStreamGoOn) {
  ASSERT_TRUE(kFakeDriver);
  for (const char* kernels : {"1", "0"}) {
    SCOPED_TRACE(std::string("WEFT_DEVICE_KERNELS=") + kernels);
    setenv("WEFT_DEVICE_KERNELS", kernels, 1);
    std::vector<ncclComm_t> comms(2);
    ASSERT_EQ(ncclCommInitAll(comms.data(), 2, nullptr), ncclSuccess);
    DeviceBuffer a(1024), b(1024);
    void* s = weftFakeStreamCreate();
    ASSERT_EQ(
        ncclAllReduce(a.p, b.p, 1024, ncclFloat, ncclSum, comms[0], static_cast<cudaStream_t>(s)),
        ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
    weftFakeStreamSynchronize(s);  // returns: the call gave up
    ncclCommDestroy(comms[1]);
    weftFakeStreamDestroy(s);
  }
  unsetenv("WEFT_DEVICE_KERNELS");
}

}  // namespace
