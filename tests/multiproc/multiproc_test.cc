// Ranks as real processes on this host (shm transport), including processes that hold several
// ranks each, and a peer that dies.
#include <gtest/gtest.h>
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
#include "tests/support/values.h"

using namespace weft::test;

namespace {

using RankBody = std::function<int(const std::vector<ncclComm_t>&, const std::vector<int>&, int)>;

// Forks `procs` processes holding `perProc` ranks each; returns the exit codes.
std::vector<int> runProcesses(int procs, int perProc, const RankBody& body,
                              const char* algo = nullptr, int timeoutSec = 240) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const int n = procs * perProc;
  std::vector<pid_t> pids;
  for (int p = 0; p < procs; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      if (algo) setenv("NCCL_ALGO", algo, 1);
      std::vector<ncclComm_t> comms(perProc);
      std::vector<int> ranks;
      ncclGroupStart();
      for (int j = 0; j < perProc; ++j) {
        ranks.push_back(p * perProc + j);
        if (ncclCommInitRank(&comms[j], n, id, p * perProc + j) != ncclSuccess) _exit(90);
      }
      if (ncclGroupEnd() != ncclSuccess) _exit(91);
      int code = body(comms, ranks, n);
      for (auto c : comms) ncclCommDestroy(c);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(procs, -1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  int left = procs;
  while (left > 0) {
    for (int p = 0; p < procs; ++p) {
      if (codes[p] != -1) continue;
      int status = 0;
      if (waitpid(pids[p], &status, WNOHANG) == pids[p]) {
        codes[p] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int p = 0; p < procs; ++p)
        if (codes[p] == -1) {
          kill(pids[p], SIGKILL);
          waitpid(pids[p], nullptr, 0);
          codes[p] = 124;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

int grid(const std::vector<ncclComm_t>& comms, const std::vector<int>& ranks, int n) {
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce, Coll::kBroadcast,
                    Coll::kAllGather, Coll::kAlltoAll, Coll::kGather, Coll::kScatter,
                    Coll::kSendRecv})
    for (ncclDataType_t t : {ncclFloat32, ncclInt64, ncclFloat16, ncclFloat8e4m3})
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(40009)})
        for (bool inPlace : {false, true}) {
          if (inPlace && !supportsInPlace(coll)) continue;
          if (count == 40009 && t != ncclFloat32) continue;
          CheckCase c{coll, t, ncclSum, count, n - 1, inPlace};
          CheckResult r = runCheckRanks(comms, ranks, n, c);
          if (r.status != ncclSuccess || r.wrong) {
            fprintf(stderr, "FAILED %s: %s\n", describe(c, n).c_str(), r.message.c_str());
            return 1;
          }
        }
  for (int op : {int(ncclProd), int(ncclMax), int(ncclMin), int(ncclAvg), -1}) {
    CheckCase c{Coll::kAllReduce, ncclBfloat16, op, 1001, 0, false};
    CheckResult r = runCheckRanks(comms, ranks, n, c);
    if (r.status != ncclSuccess || r.wrong) {
      fprintf(stderr, "FAILED %s: %s\n", describe(c, n).c_str(), r.message.c_str());
      return 1;
    }
  }
  return 0;
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
                      std::make_tuple(4, 1, "rhd"), std::make_tuple(5, 1, "ring"),
                      std::make_tuple(8, 1, "ring"), std::make_tuple(2, 2, "ring"),
                      std::make_tuple(3, 2, "tree")),
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

TEST(ProcessFailure, DeadPeerIsAnErrorNotAHang) {
  setenv("WEFT_TIMEOUT_MS", "120000", 1);  // far longer than the test allows: death must be seen
  auto start = std::chrono::steady_clock::now();
  auto codes = runProcesses(3, 1, [](const std::vector<ncclComm_t>& comms,
                                     const std::vector<int>& ranks, int n) -> int {
    if (ranks[0] == 2) _exit(0);  // leaves without a word
    std::vector<float> a(1 << 16, 1.0f), b(1 << 16);
    ncclResult_t r = ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, comms[0], nullptr);
    if (r != ncclRemoteError) {
      fprintf(stderr, "rank %d got %s instead of a remote error\n", ranks[0], ncclGetErrorString(r));
      return 1;
    }
    ncclResult_t async;
    ncclCommGetAsyncError(comms[0], &async);
    return async == ncclRemoteError ? 0 : 2;
  }, nullptr, 60);
  unsetenv("WEFT_TIMEOUT_MS");
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
