// Repeated small blocking calls in which a rank sends or receives one message, sends one to each
// of several peers, or exchanges one with a peer, go straight through (exec::runStraight) when the
// peer is ready: results stay exact call after call as the data changes, a late peer leaves the
// call (or, once a rank's message of an exchange went out, the rest of it) to the executor, and a
// peer that then calls something else (another count, another collective) is an error, never a
// silent mix.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/support/comms.h"
#include "tests/support/repeat_then_last.h"
#include "weft/weft.h"

namespace {

using weft::test::onRanks;

float valueOf(int rank, int iter, size_t i) {
  return static_cast<float>((rank + 1) * 1000 + iter * 7 + static_cast<int>(i % 13));
}

enum class Kind { kBroadcast, kReduce, kGather, kScatter };

// One call of `kind` with root `root`, per rank `count` floats from `in` to `out`; checks the
// result and returns whether it was exact.
::testing::AssertionResult callAndCheck(Kind kind, int rank, int n, int root, size_t count,
                                        int iter, bool inPlace, std::vector<float>& in,
                                        std::vector<float>& out, ncclComm_t comm) {
  const size_t total = count * static_cast<size_t>(n);
  for (size_t i = 0; i < total; ++i) in[i] = valueOf(rank, iter, i);
  std::fill(out.begin(), out.end(), -1.0f);
  ncclResult_t st = ncclSuccess;
  switch (kind) {
    case Kind::kBroadcast:
      if (inPlace) {
        if (rank == root) std::copy(in.begin(), in.begin() + count, out.begin());
        st = ncclBroadcast(out.data(), out.data(), count, ncclFloat32, root, comm, nullptr);
      } else {
        st = ncclBroadcast(in.data(), out.data(), count, ncclFloat32, root, comm, nullptr);
      }
      break;
    case Kind::kReduce:
      st = ncclReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, root, comm, nullptr);
      break;
    case Kind::kGather:
      st = ncclGather(in.data(), out.data(), count, ncclFloat32, root, comm, nullptr);
      break;
    case Kind::kScatter:
      st = ncclScatter(in.data(), out.data(), count, ncclFloat32, root, comm, nullptr);
      break;
  }
  if (st != ncclSuccess) return ::testing::AssertionFailure() << ncclGetLastError(comm);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    switch (kind) {
      case Kind::kBroadcast:
        want = valueOf(root, iter, i);
        break;
      case Kind::kReduce:
        if (rank != root) return ::testing::AssertionSuccess();
        for (int r = 0; r < n; ++r) want += valueOf(r, iter, i);
        break;
      case Kind::kGather:
        if (rank != root) return ::testing::AssertionSuccess();
        for (int r = 0; r < n; ++r)
          if (out[r * count + i] != valueOf(r, iter, i))
            return ::testing::AssertionFailure() << "gather block " << r << " element " << i;
        continue;
      case Kind::kScatter:
        want = valueOf(root, iter, rank * count + i);
        break;
    }
    if (out[i] != want)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << out[i] << " instead of " << want;
  }
  return ::testing::AssertionSuccess();
}

TEST(StraightCalls, RepeatedSmallRootedCallsStayExact) {
  for (int n : {2, 3})
    for (Kind kind : {Kind::kBroadcast, Kind::kReduce, Kind::kGather, Kind::kScatter})
      for (size_t count : {size_t(1), size_t(2), size_t(64), size_t(256), size_t(2048)})
        for (bool inPlace : {false, true}) {
          if (inPlace && kind != Kind::kBroadcast) continue;
          std::vector<uint64_t> straight(n);
          onRanks(n, [&](int rank, ncclComm_t comm) {
            std::vector<float> in(count * n), out(count * n);
            // EXPECT, not ASSERT: a rank that stopped calling would leave the others waiting.
            for (int iter = 0; iter < 300; ++iter)
              EXPECT_TRUE(callAndCheck(kind, rank, n, n - 1, count, iter, inPlace, in, out, comm))
                  << "n " << n << " kind " << int(kind) << " count " << count << " iter " << iter;
            straight[rank] = weftStraightCalls(comm);
          });
          // The ranks that only send or only receive: at least some of their calls go straight
          // (a peer a moment late sends a call to the executor instead).
          uint64_t total = 0;
          for (uint64_t s : straight) total += s;
          if (n == 2) {
            EXPECT_GT(total, 0u) << "kind " << int(kind) << " count " << count;
          }
        }
}

TEST(StraightCalls, RootSendingEveryCopyGoesStraight) {
  // A direct broadcast's root sends one message to each of the other ranks in one straight call.
  setenv("NCCL_ALGO", "broadcast:direct", 1);
  const int n = 4, root = 1;
  for (size_t count : {size_t(1), size_t(300), size_t(2048)})
    for (bool inPlace : {false, true}) {
      std::vector<uint64_t> straight(n);
      onRanks(n, [&](int rank, ncclComm_t comm) {
        std::vector<float> in(count * n), out(count * n);
        for (int iter = 0; iter < 300; ++iter)
          EXPECT_TRUE(
              callAndCheck(Kind::kBroadcast, rank, n, root, count, iter, inPlace, in, out, comm))
              << "count " << count << " iter " << iter;
        straight[rank] = weftStraightCalls(comm);
      });
      // The root waits for nothing but free slots, which the receivers' FIFOs mostly have.
      EXPECT_GT(straight[root], 0u) << "count " << count << " in place " << inPlace;
    }
  unsetenv("NCCL_ALGO");
}

TEST(StraightCalls, LatePeerLeavesTheCallToTheExecutor) {
  // The root sleeps before some calls: the receiver's short wait ends and the executor finishes
  // the call; the next calls go straight again.
  onRanks(2, [](int rank, ncclComm_t comm) {
    std::vector<float> in(16), out(16);
    for (int iter = 0; iter < 40; ++iter) {
      if (rank == 0 && iter % 10 == 5) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_TRUE(callAndCheck(Kind::kBroadcast, rank, 2, 0, 4, iter, false, in, out, comm))
          << iter;
    }
  });
}

TEST(StraightCalls, ChangedCallAfterRepeatsIsReported) {
  // The receiver repeats its call while the root changes the count, then the collective: the
  // message's size or tag no longer fits, the straight path leaves it, and the executor reports
  // the mismatch.
  for (int change : {0, 1}) {
    auto broadcast = [](int, float* a, float* b, ncclComm_t comm) {
      return ncclBroadcast(a, b, 8, ncclFloat32, 0, comm, nullptr);
    };
    const auto last = weft::test::repeatThenLast(
        64, 20, broadcast, [&](int r, float* a, float* b, ncclComm_t comm) {
          if (r == 1) return broadcast(r, a, b, comm);
          if (change == 0) return ncclBroadcast(a, b, 16, ncclFloat32, 0, comm, nullptr);
          return ncclReduce(a, b, 8, ncclFloat32, ncclSum, 1, comm, nullptr);
        });
    EXPECT_NE(last[1], ncclSuccess) << "change " << change;
  }
}

enum class Exchange { kAllReduce, kAllGather, kReduceScatter, kAlltoAll };

// One 2-rank call of `kind`, `count` floats per block; checks the result.
::testing::AssertionResult exchangeAndCheck(Exchange kind, int rank, ncclRedOp_t op, size_t count,
                                            int iter, bool inPlace, std::vector<float>& in,
                                            std::vector<float>& out, ncclComm_t comm) {
  constexpr int n = 2;
  for (size_t i = 0; i < count * n; ++i) in[i] = valueOf(rank, iter, i);
  std::fill(out.begin(), out.end(), -1.0f);
  float* dst = inPlace ? in.data() : out.data();
  ncclResult_t st = ncclSuccess;
  switch (kind) {
    case Exchange::kAllReduce:
      st = ncclAllReduce(in.data(), dst, count, ncclFloat32, op, comm, nullptr);
      break;
    case Exchange::kAllGather:
      if (inPlace)  // the own block sits in place
        for (size_t i = 0; i < count; ++i) in[rank * count + i] = valueOf(rank, iter, i);
      st = ncclAllGather(inPlace ? in.data() + rank * count : in.data(), dst, count, ncclFloat32,
                         comm, nullptr);
      break;
    case Exchange::kReduceScatter:
      st = ncclReduceScatter(in.data(), inPlace ? in.data() + rank * count : dst, count,
                             ncclFloat32, op, comm, nullptr);
      break;
    case Exchange::kAlltoAll:
      st = ncclAlltoAll(in.data(), out.data(), count, ncclFloat32, comm, nullptr);
      dst = out.data();
      break;
  }
  if (st != ncclSuccess) return ::testing::AssertionFailure() << ncclGetLastError(comm);
  auto combine = [&](size_t i) {
    const float a = valueOf(0, iter, i), b = valueOf(1, iter, i);
    switch (op) {
      case ncclProd:
        return a * b;
      case ncclMax:
        return std::max(a, b);
      case ncclMin:
        return std::min(a, b);
      default:
        return a + b;
    }
  };
  for (size_t i = 0; i < count; ++i) {
    float got = 0, want = 0;
    switch (kind) {
      case Exchange::kAllReduce:
        got = dst[i], want = combine(i);
        break;
      case Exchange::kReduceScatter:
        got = (inPlace ? in.data() + rank * count : dst)[i], want = combine(rank * count + i);
        break;
      case Exchange::kAllGather: {
        const int peer = 1 - rank;
        got = dst[peer * count + i], want = valueOf(peer, iter, i);
        if (dst[rank * count + i] != valueOf(rank, iter, i))
          return ::testing::AssertionFailure() << "own block, element " << i;
        break;
      }
      case Exchange::kAlltoAll: {
        const int peer = 1 - rank;
        got = dst[peer * count + i], want = valueOf(peer, iter, rank * count + i);
        if (dst[rank * count + i] != valueOf(rank, iter, rank * count + i))
          return ::testing::AssertionFailure() << "own block, element " << i;
        break;
      }
    }
    if (got != want)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got << " instead of " << want;
  }
  return ::testing::AssertionSuccess();
}

TEST(StraightCalls, RepeatedSmallExchangesStayExact) {
  for (Exchange kind :
       {Exchange::kAllReduce, Exchange::kAllGather, Exchange::kReduceScatter, Exchange::kAlltoAll})
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin})
      for (size_t count : {size_t(1), size_t(3), size_t(64), size_t(256), size_t(512)})
        for (bool inPlace : {false, true}) {
          const bool reduces = kind == Exchange::kAllReduce || kind == Exchange::kReduceScatter;
          if ((!reduces && op != ncclSum) || (inPlace && kind == Exchange::kAlltoAll)) continue;
          std::vector<uint64_t> straight(2);
          onRanks(2, [&](int rank, ncclComm_t comm) {
            std::vector<float> in(count * 2), out(count * 2);
            for (int iter = 0; iter < 200; ++iter)
              EXPECT_TRUE(exchangeAndCheck(kind, rank, op, count, iter, inPlace, in, out, comm))
                  << "kind " << int(kind) << " op " << op << " count " << count << " in place "
                  << inPlace << " iter " << iter;
            straight[rank] = weftStraightCalls(comm);
          });
          EXPECT_GT(straight[0] + straight[1], 0u) << "kind " << int(kind) << " count " << count;
        }
}

TEST(StraightCalls, LateExchangePeerLeavesTheRestToTheExecutor) {
  // One rank sleeps before some calls: the other's message has gone out by then, and the
  // executor waits for the reply with that send counted as done.
  onRanks(2, [](int rank, ncclComm_t comm) {
    std::vector<float> in(8), out(8);
    for (int iter = 0; iter < 40; ++iter) {
      if (rank == iter % 2 && iter % 10 >= 5)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_TRUE(exchangeAndCheck(Exchange::kAllReduce, rank, ncclSum, 4, iter, iter % 3 == 0, in,
                                   out, comm))
          << iter;
    }
  });
}

TEST(StraightCalls, ChangedExchangeAfterRepeatsIsReported) {
  // Both ranks repeat a small allreduce; then one changes the count: the other's message went
  // out straight, the reply does not fit, and the executor reports the mismatch.
  const auto last = weft::test::allReduceCountChangedAfterRepeats(64, 20, 8, 16);
  EXPECT_TRUE(last[0] != ncclSuccess || last[1] != ncclSuccess);
}

TEST(StraightCalls, BadHandleCountsNothing) { EXPECT_EQ(weftStraightCalls(nullptr), 0u); }

}  // namespace
