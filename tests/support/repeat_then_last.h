// Two ranks (threads of one process) repeat a call that must succeed, then each makes one last
// call that may not: for tests of what a repeated call does when the ranks stop agreeing.
#pragma once
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "nccl.h"

namespace weft::test {

// Each rank gets buffers a (all 1.0f) and b of `elems` floats, makes `repeat(rank, a, b, comm)`
// `times` times (each must return ncclSuccess), then `last(rank, a, b, comm)`; returns each
// rank's last result. The communicators are aborted afterwards (a mismatch leaves them failed).
template <class Repeat, class Last>
std::vector<ncclResult_t> repeatThenLast(size_t elems, int times, Repeat repeat, Last last) {
  std::vector<ncclComm_t> comms(2);
  std::vector<ncclResult_t> results(2, ncclSuccess);
  EXPECT_EQ(ncclCommInitAll(comms.data(), 2, nullptr), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> a(elems, 1.0f), b(elems);
      for (int i = 0; i < times; ++i)
        ASSERT_EQ(repeat(r, a.data(), b.data(), comms[r]), ncclSuccess);
      results[r] = last(r, a.data(), b.data(), comms[r]);
    });
  for (auto& t : threads) t.join();
  for (auto c : comms) ncclCommAbort(c);
  return results;
}

// The common case: both ranks repeat a float sum allreduce of `count`, then rank 1 alone asks
// for `changedCount` (its buffers hold `elems` floats).
inline std::vector<ncclResult_t> allReduceCountChangedAfterRepeats(size_t elems, int times,
                                                                   size_t count,
                                                                   size_t changedCount) {
  return repeatThenLast(
      elems, times,
      [count](int, float* a, float* b, ncclComm_t comm) {
        return ncclAllReduce(a, b, count, ncclFloat32, ncclSum, comm, nullptr);
      },
      [count, changedCount](int r, float* a, float* b, ncclComm_t comm) {
        return ncclAllReduce(a, b, r == 0 ? count : changedCount, ncclFloat32, ncclSum, comm,
                             nullptr);
      });
}

}  // namespace weft::test
