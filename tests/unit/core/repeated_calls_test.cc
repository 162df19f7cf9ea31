// Blocking calls repeated with the same arguments reuse the thread's prepared Work (only the
// message tags advance): results stay exact as the buffers' contents change, and any change of
// argument, operator or communicator (also one rebuilt at a reused address) prepares anew.
#include <gtest/gtest.h>

#include <barrier>
#include <cstdint>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/support/comms.h"
#include "tests/support/repeat_then_last.h"

namespace {

using weft::test::onRanks;

TEST(RepeatedCalls, SameArgumentsNewContentsStayExact) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 4099;  // more than one slot of int32
  onRanks(kRanks, [](int rank, ncclComm_t comm) {
    std::vector<int32_t> in(kCount), out(kCount);
    for (int iter = 0; iter < 50; ++iter) {
      for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(i % 97) * (rank + 1) + iter;
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr),
                ncclSuccess);
      for (size_t i = 0; i < kCount; ++i)
        ASSERT_EQ(out[i], static_cast<int32_t>(i % 97) * 6 + kRanks * iter) << iter << " " << i;
    }
    // The same buffers with another operator, then integer Avg (divides after the sum).
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(rank * 10 + i % 5);
    for (int iter = 0; iter < 3; ++iter) {
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclMax, comm, nullptr),
                ncclSuccess);
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(20 + i % 5));
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclAvg, comm, nullptr),
                ncclSuccess);
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(10 + i % 5));
    }
    // Alternating in place and out of place, and another count over the same memory.
    for (int iter = 0; iter < 3; ++iter) {
      for (size_t i = 0; i < kCount; ++i) out[i] = rank + 1;
      ASSERT_EQ(ncclAllReduce(out.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr),
                ncclSuccess);
      ASSERT_EQ(out[0], 6);
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), 7, ncclInt32, ncclSum, comm, nullptr),
                ncclSuccess);
      for (size_t i = 0; i < 7; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(30 + 3 * (i % 5)));
    }
  });
}

TEST(RepeatedCalls, RebuiltCommunicatorsPrepareAnew) {
  // Communicators destroyed and made again may land at the same addresses; each generation
  // has a different rank count, so a stale Work would send to the wrong peers or hang.
  for (int n : {2, 3, 2, 4}) {
    onRanks(n, [n](int rank, ncclComm_t comm) {
      std::vector<float> buf(1031);
      for (int iter = 0; iter < 5; ++iter) {
        for (float& x : buf) x = static_cast<float>(rank + iter);
        ASSERT_EQ(
            ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr),
            ncclSuccess);
        ASSERT_EQ(buf[0], static_cast<float>(n * (n - 1) / 2 + n * iter));
      }
    });
  }
}

TEST(RepeatedCalls, RankThreadsKeptAcrossRebuilds) {
  // The same threads call through communicators destroyed and made again (likely at reused
  // addresses) with the same buffers: the executor keeps what it derived from a Work, and each
  // step's links, while the same Work runs again, and must not keep them across generations.
  // Rank counts differ by generation, so stale links would reach the wrong or a freed peer.
  const std::vector<int> generations{2, 3, 2, 4, 2};
  constexpr int kThreads = 4;
  std::barrier sync(kThreads);
  ncclUniqueId id{};
  std::vector<std::thread> threads;
  for (int r = 0; r < kThreads; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> buf(37);
      for (int n : generations) {
        if (r == 0) {
          ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
        }
        sync.arrive_and_wait();  // the id is out
        if (r < n) {
          ncclComm_t comm = nullptr;
          ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
          for (int iter = 0; iter < 6; ++iter) {
            for (float& x : buf) x = static_cast<float>(r + iter);
            ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm,
                                    nullptr),
                      ncclSuccess);
            ASSERT_EQ(buf[36], static_cast<float>(n * (n - 1) / 2 + n * iter)) << n << " " << r;
          }
          ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
        }
        sync.arrive_and_wait();  // this generation is gone before the next id
      }
    });
  for (auto& t : threads) t.join();
}

TEST(RepeatedCalls, MismatchAfterRepeatsIsReported) {
  // Ranks agree twice, then disagree on the count: the repeated call still carries fresh tags
  // and sizes, so the mismatch is an error, not a hang or a silent mix.
  const auto last = weft::test::allReduceCountChangedAfterRepeats(300000, 2, 1000, 300000);
  EXPECT_TRUE(last[0] != ncclSuccess || last[1] != ncclSuccess);
}

}  // namespace
