// Collectives on device memory through the public API taking the direct peer-memory kernels
// (src/cuda/direct_rank.h): ranks of one process on one GPU, against the fake stream driver whose
// weftDirect runs the kernel's host build. Every collective in place and out of place, ranks on
// streams of their own and sharing one, CUDA graph capture and replay, WEFT_DIRECT=0, and
// ncclCommAbort ending a waiting launch.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/unit/cuda/fake_stream_api.h"

namespace {

using weft::test::FakeDeviceBuffer;

const bool kFakeDriver = setenv("WEFT_CUDA_DRIVER", WEFT_FAKE_STREAM_DRIVER, 1) == 0;

constexpr int kRanks = 3;
constexpr size_t kCount = 1031;  // a prime: tails in every split

class DirectCalls : public ::testing::Test {
 public:
  void SetUp() override {
    ASSERT_TRUE(kFakeDriver);
    if (!weft::test::kKernelImage)
      GTEST_SKIP() << "built without nvcc: no kernel image, calls on device memory are staged";
  }
  void init() {
    comms_.resize(kRanks);
    ASSERT_EQ(ncclCommInitAll(comms_.data(), kRanks, nullptr), ncclSuccess);
    for (int r = 0; r < kRanks; ++r) {
      streams_.push_back(weftFakeStreamCreate());
      in_.push_back(std::make_unique<FakeDeviceBuffer<int32_t>>(kCount * kRanks));
      out_.push_back(std::make_unique<FakeDeviceBuffer<int32_t>>(kCount * kRanks));
    }
  }
  void TearDown() override {
    for (void* s : streams_) weftFakeStreamSynchronize(s);
    for (auto c : comms_) ncclCommDestroy(c);
    for (void* s : streams_) weftFakeStreamDestroy(s);
    unsetenv("WEFT_DIRECT");
  }
  cudaStream_t stream(int r) { return static_cast<cudaStream_t>(streams_[r]); }
  // Input i of rank r.
  static int32_t value(int r, size_t i) { return int32_t(r * 1000 + int(i % 97)); }
  void fill() {
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount * kRanks; ++i) {
        in_[r]->p[i] = value(r, i);
        out_[r]->p[i] = -1;
      }
  }
  // Runs `call` for every rank in a group, waits, and checks no rank failed.
  template <class F>
  void run(const char* what, F&& call) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(call(r), ncclSuccess) << what;
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    for (void* s : streams_) weftFakeStreamSynchronize(s);
    for (int r = 0; r < kRanks; ++r) {
      ncclResult_t st = ncclSuccess;
      ASSERT_EQ(ncclCommGetAsyncError(comms_[r], &st), ncclSuccess);
      ASSERT_EQ(st, ncclSuccess) << what << ": " << ncclGetLastError(comms_[r]);
    }
  }
  int32_t sumAt(size_t i) const {
    int32_t s = 0;
    for (int r = 0; r < kRanks; ++r) s += value(r, i);
    return s;
  }
  std::vector<ncclComm_t> comms_;
  std::vector<void*> streams_;
  std::vector<std::unique_ptr<FakeDeviceBuffer<int32_t>>> in_, out_;
};

TEST_F(DirectCalls, EveryCollectiveInAndOutOfPlace) {
  init();
  for (bool inPlace : {false, true}) {
    SCOPED_TRACE(inPlace ? "in place" : "out of place");
    const uint64_t direct = weftFakeDirectLaunches();
    auto src = [&](int r, size_t offset) -> const int32_t* {
      return inPlace ? out_[r]->p + offset : in_[r]->p;
    };
    // In place, the input is the output buffer (or its rank's segment of it).
    auto prime = [&](size_t offsetElems, size_t elems) {
      fill();
      if (inPlace)
        for (int r = 0; r < kRanks; ++r)
          for (size_t i = 0; i < elems; ++i) out_[r]->p[offsetElems * r + i] = value(r, i);
    };
    prime(0, kCount);
    run("allreduce", [&](int r) {
      return ncclAllReduce(src(r, 0), out_[r]->p, kCount, ncclInt32, ncclSum, comms_[r], stream(r));
    });
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out_[r]->p[i], sumAt(i)) << r << " " << i;
    prime(kCount, kCount);
    run("allgather", [&](int r) {
      return ncclAllGather(src(r, r * kCount), out_[r]->p, kCount, ncclInt32, comms_[r], stream(r));
    });
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount * kRanks; ++i)
        ASSERT_EQ(out_[r]->p[i], value(int(i / kCount), i % kCount)) << r << " " << i;
    prime(0, kCount * kRanks);
    run("reducescatter", [&](int r) {
      int32_t* dst = inPlace ? out_[r]->p + r * kCount : out_[r]->p;
      return ncclReduceScatter(src(r, 0), dst, kCount, ncclInt32, ncclSum, comms_[r], stream(r));
    });
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i)
        ASSERT_EQ(out_[r]->p[(inPlace ? r * kCount : 0) + i], sumAt(r * kCount + i)) << r;
    prime(0, kCount);
    run("broadcast", [&](int r) {
      return ncclBroadcast(src(r, 0), out_[r]->p, kCount, ncclInt32, 1, comms_[r], stream(r));
    });
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out_[r]->p[i], value(1, i)) << r;
    prime(0, kCount);
    run("reduce", [&](int r) {
      return ncclReduce(src(r, 0), out_[r]->p, kCount, ncclInt32, ncclMax, 2, comms_[r], stream(r));
    });
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out_[2]->p[i], value(kRanks - 1, i));
    prime(0, kCount * kRanks);
    run("alltoall", [&](int r) {
      return ncclAlltoAll(src(r, 0), out_[r]->p, kCount, ncclInt32, comms_[r], stream(r));
    });
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount * kRanks; ++i)
        ASSERT_EQ(out_[r]->p[i], value(int(i / kCount), r * kCount + i % kCount)) << r << " " << i;
    EXPECT_EQ(weftFakeDirectLaunches() - direct, 6u * kRanks);
  }
}

// Ranks driven by one thread on one stream run in one direct launch; integer Avg divides.
TEST_F(DirectCalls, RanksSharingAStreamRunInOneLaunch) {
  init();
  fill();
  const uint64_t before = weftFakeDirectLaunches();
  run("allreduce avg", [&](int r) {
    return ncclAllReduce(in_[r]->p, out_[r]->p, kCount, ncclInt32, ncclAvg, comms_[r], stream(0));
  });
  EXPECT_EQ(weftFakeDirectLaunches() - before, 1u);
  for (int r = 0; r < kRanks; ++r)
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out_[r]->p[i], sumAt(i) / kRanks);
  // A reduce's result is reduced by every rank, a part each: every part is divided.
  fill();
  run("reduce avg", [&](int r) {
    return ncclReduce(in_[r]->p, out_[r]->p, kCount, ncclInt32, ncclAvg, 1, comms_[r], stream(0));
  });
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out_[1]->p[i], sumAt(i) / kRanks) << i;
}

// Each rank's call captured on its stream, the graphs replayed: each replay is the next call.
TEST_F(DirectCalls, CapturedCallsReplay) {
  init();
  for (int r = 0; r < kRanks; ++r) weftFakeBeginCapture(streams_[r]);
  run("captured allreduce", [&](int r) {
    return ncclAllReduce(in_[r]->p, out_[r]->p, kCount, ncclInt32, ncclSum, comms_[r], stream(r));
  });
  std::vector<void*> graphs;
  for (int r = 0; r < kRanks; ++r) graphs.push_back(weftFakeEndCapture(streams_[r]));
  for (int replay = 0; replay < 3; ++replay) {
    fill();
    for (int r = 0; r < kRanks; ++r) in_[r]->p[0] = replay;
    for (int r = 0; r < kRanks; ++r) weftFakeGraphLaunch(graphs[r], streams_[r]);
    for (void* s : streams_) weftFakeStreamSynchronize(s);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(out_[r]->p[0], kRanks * replay) << "replay " << replay;
      for (size_t i = 1; i < kCount; ++i) ASSERT_EQ(out_[r]->p[i], sumAt(i)) << replay;
    }
  }
  for (void* g : graphs) weftFakeGraphDestroy(g);
}

TEST_F(DirectCalls, DisabledByTheKnob) {
  setenv("WEFT_DIRECT", "0", 1);  // read at init
  init();
  fill();
  const uint64_t direct = weftFakeDirectLaunches(), all = weftFakeKernelLaunches();
  run("allreduce", [&](int r) {
    return ncclAllReduce(in_[r]->p, out_[r]->p, kCount, ncclInt32, ncclSum, comms_[r], stream(r));
  });
  EXPECT_EQ(weftFakeDirectLaunches(), direct);
  EXPECT_GT(weftFakeKernelLaunches(), all);  // the interpreter ran them
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out_[0]->p[i], sumAt(i));
}

TEST_F(DirectCalls, AbortEndsAWaitingLaunch) {
  init();
  ASSERT_EQ(ncclAllReduce(in_[0]->p, out_[0]->p, kCount, ncclInt32, ncclSum, comms_[0], stream(0)),
            ncclSuccess);
  ASSERT_EQ(ncclCommAbort(comms_[2]), ncclSuccess);  // a peer gives up instead of calling
  comms_.pop_back();
  weftFakeStreamSynchronize(streams_[0]);
  ncclResult_t st = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comms_[0], &st), ncclSuccess);
  EXPECT_EQ(st, ncclRemoteError);
  const std::string why = ncclGetLastError(comms_[0]);
  EXPECT_NE(why.find("direct kernel aborted"), std::string::npos) << why;
  // Rank 1 never called: its comm is destroyed with the others (no launch of its own waits).
}

}  // namespace
