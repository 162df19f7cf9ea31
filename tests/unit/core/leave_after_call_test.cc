// Ranks that leave as soon as their call returns. A rank opens a link to a peer only when its
// plan first uses it, so a peer may still have to open the link that holds a rank's messages
// after that rank's call returned and its ncclCommDestroy began: the destroy must leave those
// messages readable (it waits until the peer took them). Plans whose ranks own empty parts
// (counts below the rank count) open links late, and a broadcast root needs nothing from its
// receivers, so either can finish before a peer arrives.
//
// Ranks are threads of this process, each with its own ncclCommInitRank, on the shared-memory
// transport (NCCL_P2P_DISABLE=1), which is where a link is a named segment that its first user
// creates.
#include "tests/support/leave_after_call.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "algorithms/registry.h"
#include "nccl.h"
#include "tests/support/collective_check.h"

using namespace weft::test;

namespace {

// A lost message shows as a timeout: short, so that a failure does not stall the suite.
constexpr const char* kTimeoutMs = "3000";
// Each case runs out of place, then in place where the collective has an in-place form: a
// second run also meets the ranks in another order.
constexpr int kRuns = 2;

template <class Before, class After>
std::string runAndLeave(int n, const char* algo, const CheckCase& c, Before before, After after) {
  return weft::test::runAndLeave(n, algo, c, kTimeoutMs, before, after);
}

class LeaveAfterCall : public ::testing::TestWithParam<const char*> {};

// Every collective of the algorithm, 2 to 8 ranks, every count from 0 to 2 n + 1 (parts of
// every size, empty ones included), results checked.
TEST_P(LeaveAfterCall, EveryCollectiveAndSmallCount) {
  const weft::algo::Algorithm* algorithm = weft::algo::find(GetParam());
  ASSERT_NE(algorithm, nullptr);
  for (int run = 0; run < kRuns; ++run)
    for (int n = 2; n <= 8; ++n)
      for (weft::plan::Collective pc : algorithm->colls)
        for (size_t count = 0; count <= static_cast<size_t>(2 * n + 1); ++count) {
          const Coll coll = collOf(pc);
          const bool inPlace = run % 2 == 1 && supportsInPlace(coll);
          if (run % 2 == 1 && !supportsInPlace(coll) && count > 2) continue;  // seen out of place
          CheckCase c{coll,  ncclInt32, isReduction(coll) ? int(ncclProd) : int(ncclSum),
                      count, n - 1,     inPlace};
          const std::string why = runAndLeave(
              n, GetParam(), c, [](int) {}, [](int) {});
          ASSERT_EQ(why, "");
        }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, LeaveAfterCall,
                         ::testing::Values("ring", "tree", "rhd", "direct", "rsag", "hier", "fan"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// A broadcast root sends and returns without hearing from anyone: here its receivers call only
// once it has returned and begun its destroy, so they open its links after it left.
TEST(LeaveAfterCall, RootGoneBeforeItsReceiversCall) {
  for (const char* algo : {"ring", "tree", "direct", "fan"})
    for (size_t count : {size_t(1), size_t(7), size_t(4099)}) {
      std::atomic<bool> rootReturned{false};
      auto before = [&](int rank) {
        if (rank == 0) return;
        // Bounded: a root that cannot return fails on its own.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!rootReturned.load() && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the destroy has begun
      };
      auto after = [&](int rank) {
        if (rank == 0) rootReturned.store(true);
      };
      const CheckCase c{Coll::kBroadcast, ncclInt32, ncclSum, count, 0, false};
      ASSERT_EQ(runAndLeave(3, algo, c, before, after), "");
    }
}

}  // namespace
