#include "tests/support/grid.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "tests/support/collective_check.h"

namespace weft::test {

int correctnessGrid(const std::vector<ncclComm_t>& comms, const std::vector<int>& ranks, int n,
                    const std::string& label) {
  auto check = [&](const CheckCase& c) {
    CheckResult r = runCheckRanks(comms, ranks, n, c);
    if (r.status != ncclSuccess || r.wrong) {
      std::fprintf(stderr, "FAILED %s%s: %s\n", label.c_str(), describe(c, n).c_str(),
                   r.message.c_str());
      return false;
    }
    return true;
  };
  for (Coll coll :
       {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce, Coll::kBroadcast, Coll::kAllGather,
        Coll::kAlltoAll, Coll::kGather, Coll::kScatter, Coll::kSendRecv})
    for (ncclDataType_t t : {ncclFloat32, ncclInt64, ncclFloat16, ncclFloat8e4m3})
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(40009)})
        for (bool inPlace : {false, true}) {
          if (inPlace && !supportsInPlace(coll)) continue;
          if (count == 40009 && t != ncclFloat32) continue;
          if (!check(CheckCase{coll, t, ncclSum, count, n - 1, inPlace})) return 1;
        }
  for (int op : {int(ncclProd), int(ncclMax), int(ncclMin), int(ncclAvg), -1})
    if (!check(CheckCase{Coll::kAllReduce, ncclBfloat16, op, 1001, 0, false})) return 1;
  return 0;
}

namespace {

// A child process that creates the unique id (which starts the bootstrap root's thread) and
// keeps the root alive until the parent closes `hold`. The rank processes are then forked from a
// parent that never started a thread: a fork from a threaded process may inherit a lock another
// thread held (a sanitizer allocator's, for one) and hang the child.
struct RootHost {
  pid_t pid = -1;
  int hold = -1;
  bool ok = false;
  ncclUniqueId id{};

  RootHost() {
    int idPipe[2], holdPipe[2];
    if (pipe(idPipe) != 0) return;
    if (pipe(holdPipe) != 0) {
      close(idPipe[0]);
      close(idPipe[1]);
      return;
    }
    pid = fork();
    if (pid == 0) {
      close(idPipe[0]);
      close(holdPipe[1]);
      ncclUniqueId made;
      if (ncclGetUniqueId(&made) != ncclSuccess) _exit(92);
      if (write(idPipe[1], &made, sizeof made) != ssize_t(sizeof made)) _exit(93);
      char byte;
      while (read(holdPipe[0], &byte, 1) > 0) {
      }
      _exit(0);
    }
    close(idPipe[1]);
    close(holdPipe[0]);
    hold = holdPipe[1];
    size_t got = 0;
    while (pid > 0 && got < sizeof id) {
      ssize_t r = read(idPipe[0], reinterpret_cast<char*>(&id) + got, sizeof id - got);
      if (r <= 0) break;
      got += size_t(r);
    }
    close(idPipe[0]);
    ok = pid > 0 && got == sizeof id;
  }
  ~RootHost() {
    if (hold >= 0) close(hold);
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
};

}  // namespace

std::vector<int> forkRanks(int procs, int perProc, const RankBody& body,
                           const std::function<void(int)>& setup, int timeoutSec) {
  RootHost root;
  if (!root.ok) return std::vector<int>(procs, 92);
  const ncclUniqueId id = root.id;
  const int n = procs * perProc;
  std::vector<pid_t> pids;
  for (int p = 0; p < procs; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      if (setup) setup(p);
      std::vector<ncclComm_t> comms(perProc);
      std::vector<int> ranks;
      ncclGroupStart();
      for (int j = 0; j < perProc; ++j) {
        ranks.push_back(p * perProc + j);
        if (ncclCommInitRank(&comms[j], n, id, p * perProc + j) != ncclSuccess) _exit(90);
      }
      if (ncclGroupEnd() != ncclSuccess) _exit(91);
      close(root.hold);
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

}  // namespace weft::test
