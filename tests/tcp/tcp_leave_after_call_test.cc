// Ranks that leave as soon as their call returns, over tcp (threads of this process with shared
// memory and in-process links disabled). A rank that finished its part destroys its
// communicator, which closes its sockets: the peer reads EOF on them. The messages that rank
// sent before are in the peer's slots or still in its sockets, and must count: the peer fails
// only where the link holds nothing more for the lane that waits on it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "algorithms/registry.h"
#include "nccl.h"
#include "tests/support/collective_check.h"
#include "tests/support/leave_after_call.h"
#include "tests/support/scoped_env.h"

using namespace weft::test;

namespace {

// A lost message shows as a timeout: short, so that a failure does not stall the suite.
constexpr const char* kTimeoutMs = "5000";

// tcp only; small slots, so that a message spans several and a link holds few bytes unread.
template <class Before, class After>
std::string runAndLeaveTcp(int n, const char* algo, const CheckCase& c, Before before,
                           After after) {
  ScopedEnv env({{"NCCL_SHM_DISABLE", "1"},
                 {"WEFT_LOCAL_DISABLE", "1"},
                 {"WEFT_SLOTS", "8"},
                 {"WEFT_SLOT_BYTES", "65536"}});
  return runAndLeave(n, algo, c, kTimeoutMs, before, after);
}

// Sleeps until `flag` is set (bounded: a rank that cannot set it fails on its own), then `ms`.
void waitFor(const std::atomic<bool>& flag, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

class TcpLeaveAfterCall : public ::testing::TestWithParam<const char*> {};

// Every collective of the algorithm, 2 to 4 ranks, counts with empty, single and uneven parts.
TEST_P(TcpLeaveAfterCall, EveryCollectiveAndSmallCount) {
  const weft::algo::Algorithm* algorithm = weft::algo::find(GetParam());
  ASSERT_NE(algorithm, nullptr);
  for (int n = 2; n <= 4; ++n)
    for (weft::plan::Collective pc : algorithm->colls)
      for (size_t count : {size_t(0), size_t(1), size_t(n), size_t(2 * n + 1), size_t(40000)}) {
        const Coll coll = collOf(pc);
        const CheckCase c{coll,  ncclInt32, isReduction(coll) ? int(ncclProd) : int(ncclSum),
                          count, n - 1,     false};
        ASSERT_EQ(runAndLeaveTcp(
                      n, GetParam(), c, [](int) {}, [](int) {}),
                  "");
      }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, TcpLeaveAfterCall,
                         ::testing::Values("ring", "tree", "rhd", "direct", "rsag", "fan"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// A broadcast root sends and returns without hearing from anyone; its receivers call only once
// it has begun its destroy, so its sockets end before they read a byte.
TEST(TcpLeaveAfterCall, RootGoneBeforeItsReceiversCall) {
  for (const char* algo : {"ring", "tree", "direct", "fan"})
    for (size_t count : {size_t(1), size_t(7), size_t(4099)}) {
      std::atomic<bool> rootReturned{false};
      auto before = [&](int rank) {
        if (rank != 0) waitFor(rootReturned, 20);
      };
      auto after = [&](int rank) {
        if (rank == 0) rootReturned.store(true);
      };
      const CheckCase c{Coll::kBroadcast, ncclInt32, ncclSum, count, 0, false};
      ASSERT_EQ(runAndLeaveTcp(3, algo, c, before, after), "");
    }
}

// A ring broadcast 0 -> 1 -> 2 whose last receiver comes late: rank 1 forwards until its
// sockets to rank 2 are full and waits there, while the root finishes, leaves, and its
// remaining messages sit in rank 1's slots behind the root's EOF. Rank 1 must go on once rank 2
// reads, not fail because the root ended.
TEST(TcpLeaveAfterCall, EndedPeersMessagesWaitBehindASlowSend) {
  for (size_t count : {size_t(160) << 10, size_t(192) << 10, size_t(224) << 10}) {
    std::atomic<bool> rootReturned{false};
    auto before = [&](int rank) {
      if (rank == 2) waitFor(rootReturned, 300);
    };
    auto after = [&](int rank) {
      if (rank == 0) rootReturned.store(true);
    };
    const CheckCase c{Coll::kBroadcast, ncclInt32, ncclSum, count, 0, false};
    ASSERT_EQ(runAndLeaveTcp(3, "ring", c, before, after), "");
  }
}

}  // namespace

// Small socket buffers (process-wide: the tcp engine reads them once) make a late reader stall
// its sender after a few messages.
int main(int argc, char** argv) {
  setenv("WEFT_TCP_SOCKBUF", "16384", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
