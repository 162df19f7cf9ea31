// Ranks as real processes on this host (shm transport), including processes that hold several
// ranks each, and a peer that dies.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "tests/support/grid.h"
#include "tests/support/values.h"
#include "weft/weft.h"

using namespace weft::test;

namespace {

// Forks the processes; the environment they inherit is set by the test before the call.
std::vector<int> runProcesses(int procs, int perProc, const RankBody& body,
                              const char* algo = nullptr, int timeoutSec = 240) {
  return forkRanks(
      procs, perProc, body,
      [algo](int) {
        if (algo) setenv("NCCL_ALGO", algo, 1);
      },
      timeoutSec);
}

int grid(const std::vector<ncclComm_t>& comms, const std::vector<int>& ranks, int n) {
  return correctnessGrid(comms, ranks, n);
}

class Processes : public ::testing::TestWithParam<std::tuple<int, int, const char*>> {};

TEST_P(Processes, Grid) {
  auto [procs, perProc, algo] = GetParam();
  auto codes = runProcesses(procs, perProc, grid, algo);
  for (int p = 0; p < procs; ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
}

INSTANTIATE_TEST_SUITE_P(
    Shm, Processes,
    ::testing::Values(std::make_tuple(2, 1, "ring"), std::make_tuple(2, 1, "tree"),
                      std::make_tuple(3, 1, "ring"), std::make_tuple(3, 1, "rhd"),
                      std::make_tuple(4, 1, "ring"), std::make_tuple(4, 1, "tree"),
                      std::make_tuple(4, 1, "rhd"), std::make_tuple(4, 1, "rsag"),
                      std::make_tuple(5, 1, "ring"), std::make_tuple(8, 1, "ring"),
                      std::make_tuple(2, 2, "ring"), std::make_tuple(3, 2, "tree")),
    [](const auto& info) {
      return "p" + std::to_string(std::get<0>(info.param)) + "x" +
             std::to_string(std::get<1>(info.param)) + "_" + std::get<2>(info.param);
    });

// The single-copy path (receivers read large slices from the sender with process_vm_readv).
TEST(ProcessesCma, Grid) {
  setenv("WEFT_SHM_CMA", "1", 1);
  auto codes = runProcesses(3, 1, grid, "ring");
  unsetenv("WEFT_SHM_CMA");
  for (int p = 0; p < 3; ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
}

// ncclMemAlloc'd buffers: receivers map the sender's memory and read large slices in place.
TEST(ProcessesMapped, Grid) {
  setenv("WEFT_TEST_MEMALLOC", "1", 1);
  auto codes = runProcesses(3, 1, grid, "ring");
  auto treeCodes = runProcesses(2, 2, grid, "tree");
  unsetenv("WEFT_TEST_MEMALLOC");
  for (int p = 0; p < 3; ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
  for (int p = 0; p < 2; ++p) EXPECT_EQ(treeCodes[p], 0) << "tree process " << p;
}

// ncclMemAlloc'd buffers and two ranks' rsag allreduce: each rank offers its output, and the
// peer maps it writable and stores its reduced half there (every run of receives offered,
// every slice large enough to land).
TEST(ProcessesMapped, LandedAllReduceGrid) {
  setenv("WEFT_TEST_MEMALLOC", "1", 1);
  setenv("WEFT_LANDING_BYTES", "1", 1);
  setenv("WEFT_RDV_BYTES", "64", 1);
  auto codes = runProcesses(2, 1, grid, "rsag");
  unsetenv("WEFT_RDV_BYTES");
  unsetenv("WEFT_LANDING_BYTES");
  unsetenv("WEFT_TEST_MEMALLOC");
  for (int p = 0; p < 2; ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
}

// One in-place broadcast of 100003 floats from the last rank, which starts 300 ms after the
// others so that every receiver has offered its output: the root must store slices into them.
int lateRootBroadcastLands(ncclComm_t comm, int rank, int n) {
  const size_t count = 100003;
  void* mem = nullptr;
  if (ncclMemAlloc(&mem, count * sizeof(float)) != ncclSuccess) return 4;
  float* buf = static_cast<float*>(mem);
  for (size_t i = 0; i < count; ++i) buf[i] = rank == n - 1 ? float(i % 1000) : -1.0f;
  const uint64_t before = weftLandedSlices();
  if (rank == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int code =
      ncclBroadcast(buf, buf, count, ncclFloat32, n - 1, comm, nullptr) == ncclSuccess ? 0 : 5;
  for (size_t i = 0; code == 0 && i < count; ++i)
    if (buf[i] != float(i % 1000)) code = 6;
  if (code == 0 && rank == n - 1 && weftLandedSlices() == before) {
    fprintf(stderr, "the fan root stored no slice into a receiver\n");
    code = 3;
  }
  ncclMemFree(mem);
  return code;
}

// ncclMemAlloc'd buffers and a fan broadcast: the root maps the receivers' outputs writable and
// stores its pushed part there itself (small slots: many slices; every run of receives offered).
TEST(ProcessesMapped, FanBroadcastGrid) {
  setenv("WEFT_TEST_MEMALLOC", "1", 1);
  setenv("WEFT_SLOT_BYTES", "4096", 1);
  setenv("WEFT_LANDING_BYTES", "1", 1);
  setenv("WEFT_RDV_BYTES", "64", 1);
  auto codes = runProcesses(
      4, 1,
      [](const std::vector<ncclComm_t>& comms, const std::vector<int>& ranks, int n) -> int {
        if (int bad = grid(comms, ranks, n)) return bad;
        // A receiver a moment late is sent its slices by reference instead, so landing in the grid
        // depends on timing; a root that starts well after its receivers must land slices.
        return lateRootBroadcastLands(comms[0], ranks[0], n);
      },
      "fan");
  unsetenv("WEFT_RDV_BYTES");
  unsetenv("WEFT_LANDING_BYTES");
  unsetenv("WEFT_SLOT_BYTES");
  unsetenv("WEFT_TEST_MEMALLOC");
  for (int p = 0; p < 4; ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
}

// Processes that share one CPU (each child pinned to CPU 0 before init, so init sees ranks
// outnumber the cores): a plain send's slices go by reference as messages of several slices,
// which receivers take a slice at a time, mapped (ncclMemAlloc'd buffers) or read with
// process_vm_readv; over tcp they stay one slot each.
TEST(ProcessesSharedCore, LargeReferenceGrid) {
  setenv("WEFT_SLOT_BYTES", "4096", 1);
  setenv("WEFT_RDV_BYTES", "64", 1);
  setenv("WEFT_SHARED_REF_BYTES", "16384", 1);
  auto onOneCpu = [](const char* algo) {
    return [algo](int) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(0, &one);
      if (sched_setaffinity(0, sizeof one, &one) != 0) _exit(92);
      setenv("NCCL_ALGO", algo, 1);
    };
  };
  setenv("WEFT_TEST_MEMALLOC", "1", 1);
  auto mapped = forkRanks(3, 1, grid, onOneCpu("ring"), 240);
  unsetenv("WEFT_TEST_MEMALLOC");
  setenv("WEFT_SHM_CMA", "1", 1);
  auto cma = forkRanks(3, 1, grid, onOneCpu("direct"), 240);
  unsetenv("WEFT_SHM_CMA");
  // Tcp sends by reference too, but into the receiver's slots: its messages stay one slot.
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("WEFT_LOCAL_DISABLE", "1", 1);
  auto tcp = forkRanks(3, 1, grid, onOneCpu("ring"), 240);
  unsetenv("WEFT_LOCAL_DISABLE");
  unsetenv("NCCL_SHM_DISABLE");
  unsetenv("WEFT_SHARED_REF_BYTES");
  unsetenv("WEFT_RDV_BYTES");
  unsetenv("WEFT_SLOT_BYTES");
  for (int p = 0; p < 3; ++p) EXPECT_EQ(mapped[p], 0) << "mapped process " << p;
  for (int p = 0; p < 3; ++p) EXPECT_EQ(cma[p], 0) << "cma process " << p;
  for (int p = 0; p < 3; ++p) EXPECT_EQ(tcp[p], 0) << "tcp process " << p;
}

// Four processes on two CPUs, pinned two to a core by placement: small exchanges keep the
// core while they wait on busy ranks of the other core (parking on their doorbells), and yield
// it where they wait on their core mate; also with a hold that runs out at once.
TEST(ProcessesSharingCores, GridWhileWaitersKeepTheirCore) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  cpu_set_t two;
  CPU_ZERO(&two);
  for (int c = 0, picked = 0; c < CPU_SETSIZE && picked < 2; ++c)
    if (CPU_ISSET(c, &mine)) {
      CPU_SET(c, &two);
      ++picked;
    }
  if (CPU_COUNT(&two) < 2) GTEST_SKIP() << "needs two CPUs";
  auto onTwoCpus = [&two](int) {
    if (sched_setaffinity(0, sizeof two, &two) != 0) _exit(92);
  };
  auto held = forkRanks(4, 1, grid, onTwoCpus, 240);
  setenv("WEFT_HOLD_US", "1", 1);
  auto brief = forkRanks(4, 1, grid, onTwoCpus, 240);
  unsetenv("WEFT_HOLD_US");
  for (int p = 0; p < 4; ++p) EXPECT_EQ(held[p], 0) << "process " << p;
  for (int p = 0; p < 4; ++p) EXPECT_EQ(brief[p], 0) << "brief hold, process " << p;
}

TEST(ProcessFailure, DeadPeerIsAnErrorNotAHang) {
  setenv("WEFT_TIMEOUT_MS", "120000", 1);  // far longer than the test allows: death must be seen
  auto start = std::chrono::steady_clock::now();
  auto codes = runProcesses(
      3, 1,
      [](const std::vector<ncclComm_t>& comms, const std::vector<int>& ranks, int n) -> int {
        if (ranks[0] == 2) _exit(0);  // leaves without a word
        std::vector<float> a(1 << 16, 1.0f), b(1 << 16);
        ncclResult_t r =
            ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, comms[0], nullptr);
        if (r != ncclRemoteError) {
          fprintf(stderr, "rank %d got %s instead of a remote error\n", ranks[0],
                  ncclGetErrorString(r));
          return 1;
        }
        ncclResult_t async;
        ncclCommGetAsyncError(comms[0], &async);
        return async == ncclRemoteError ? 0 : 2;
      },
      nullptr, 60);
  unsetenv("WEFT_TIMEOUT_MS");
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
