// Running a job: ranks as threads of this process, or as processes (this program started again
// with --rank-child), each under a watchdog that calls a job a hang when no rank has made
// progress for hangMs.
#include "tests/soak/soak_job.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

namespace soak {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(10);
// After a watchdog abort, how long a thread job's ranks get to return before the run gives up.
constexpr auto kAbortGrace = std::chrono::seconds(30);
// How long rank 0 of a process job gets to publish the unique id.
constexpr int kIdWaitMs = 60000;

// The environment a job's ranks are initialised under.
void applyEnvironment(const JobSpec& job) {
  auto set = [](const char* name, bool on) {
    if (on)
      setenv(name, "1", 1);
    else
      unsetenv(name);
  };
  // Threads reach each other through the in-process transport unless NCCL_P2P_DISABLE is set;
  // then through shared memory unless NCCL_SHM_DISABLE is set; then through TCP.
  set("NCCL_P2P_DISABLE", job.transport != Transport::kLocal);
  set("NCCL_SHM_DISABLE", job.transport == Transport::kTcp);
  if (job.algo[0])
    setenv("NCCL_ALGO", job.algo, 1);
  else
    unsetenv("NCCL_ALGO");
}

int64_t totalProgress(const RankOutcome* outcomes, int n) {
  int64_t sum = 0;
  for (int r = 0; r < n; ++r) sum += outcomes[r].progress.load(std::memory_order_relaxed);
  return sum;
}

std::string stuckRanks(const RankOutcome* outcomes, int n) {
  std::string s;
  char text[96];
  static const char* const kPhases[] = {"not started", "init", "calls", "teardown", "done"};
  for (int r = 0; r < n; ++r) {
    const int phase = outcomes[r].phase.load();
    std::snprintf(text, sizeof(text), "%s rank %d in %s (call %d)", r ? ";" : "", r,
                  kPhases[phase < 0 || phase > 4 ? 0 : phase], outcomes[r].currentCall.load());
    s += text;
  }
  return s;
}

// Watches a job until done() or until no rank has made progress for hangMs; true when done.
template <typename Done>
bool watch(const RankOutcome* outcomes, int n, int hangMs, Done done) {
  int64_t last = -1;
  auto lastChange = Clock::now();
  while (!done()) {
    const int64_t now = totalProgress(outcomes, n);
    if (now != last) {
      last = now;
      lastChange = Clock::now();
    } else if (Clock::now() - lastChange > std::chrono::milliseconds(hangMs)) {
      return false;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  return true;
}

// What a process job shares with its rank processes.
struct Shared {
  JobSpec job;
  ncclUniqueId id;
  RankOutcome outcomes[kMaxRanks];
};

}  // namespace

bool runThreadJob(const JobSpec& job, int hangMs, JobResult* result) {
  applyEnvironment(job);
  const int n = job.nranks;
  // Shared with the rank threads, which keep it alive should a hang leave them behind.
  struct State {
    explicit State(const JobSpec& j) : job(j), outcomes(j.nranks), slots(j.nranks) {}
    const JobSpec job;
    ncclUniqueId id{};
    std::vector<RankOutcome> outcomes;
    std::vector<std::atomic<ncclComm_t>> slots;
    std::atomic<int> finished{0};
  };
  auto state = std::make_shared<State>(job);
  if (job.initAll) {
    std::vector<ncclComm_t> comms(n, nullptr);
    const ncclResult_t rc = ncclCommInitAll(comms.data(), n, nullptr);
    if (rc != ncclSuccess) {
      result->problems.push_back(std::string("ncclCommInitAll failed: ") + ncclGetErrorString(rc) +
                                 ": " + ncclGetLastError(nullptr));
      return true;
    }
    for (int r = 0; r < n; ++r) state->slots[r].store(comms[r]);
  } else if (ncclGetUniqueId(&state->id) != ncclSuccess) {
    result->problems.push_back(std::string("ncclGetUniqueId failed: ") + ncclGetLastError(nullptr));
    return true;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([state, r] {
      runRank(state->job, r, state->job.initAll ? nullptr : &state->id, &state->slots[r],
              &state->outcomes[r]);
      state->finished.fetch_add(1);
    });
  RankOutcome* outcomes = state->outcomes.data();
  const bool done = watch(outcomes, n, hangMs, [&] { return state->finished.load() == n; });
  if (!done) {
    result->hang = true;
    result->problems.push_back("HANG: no progress for " + std::to_string(hangMs) +
                               " ms: " + stuckRanks(outcomes, n));
    // A watchdog's remedy: abort every communicator, which must make the blocked calls return.
    for (auto& slot : state->slots)
      if (ncclComm_t c = slot.exchange(nullptr)) ncclCommAbort(c);
    const auto deadline = Clock::now() + kAbortGrace;
    while (state->finished.load() < n && Clock::now() < deadline)
      std::this_thread::sleep_for(kPollInterval);
    if (state->finished.load() < n) {
      result->problems.push_back("HANG: ranks still blocked " +
                                 std::to_string(kAbortGrace.count()) +
                                 " s after ncclCommAbort: " + stuckRanks(outcomes, n));
      for (auto& t : threads) t.detach();
      return false;
    }
  }
  for (auto& t : threads) t.join();
  if (!result->hang) judge(job, outcomes, {}, result);
  for (int r = 0; r < n && result->hang; ++r) result->calls += outcomes[r].callsOk;
  return true;
}

void runProcessJob(const JobSpec& job, int hangMs, JobResult* result) {
  const int n = job.nranks;
  // Shared memory the rank processes inherit across exec (no O_CLOEXEC on purpose).
  const int fd = memfd_create("weft-soak-job", 0);
  if (fd < 0 || ftruncate(fd, sizeof(Shared)) != 0) {
    result->problems.push_back("memfd_create failed");
    if (fd >= 0) close(fd);
    return;
  }
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) {
    result->problems.push_back("mmap of the job's shared memory failed");
    close(fd);
    return;
  }
  Shared* shared = new (mem) Shared();
  shared->job = job;
  int idPipe[2];
  if (pipe2(idPipe, O_CLOEXEC) != 0) {
    result->problems.push_back("pipe failed");
    munmap(mem, sizeof(Shared));
    close(fd);
    return;
  }
  applyEnvironment(job);  // here, not in the child: between fork and exec only exec is safe
  std::vector<pid_t> pids(n, -1);
  auto start = [&](int rank) {
    char fdText[16], rankText[16], idText[16];
    std::snprintf(fdText, sizeof(fdText), "%d", fd);
    std::snprintf(rankText, sizeof(rankText), "%d", rank);
    const int idFd = rank == 0 ? dup(idPipe[1]) : -1;  // the dup has no O_CLOEXEC
    std::snprintf(idText, sizeof(idText), "%d", idFd);
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", "weft_soak", "--rank-child", fdText, rankText, idText, nullptr);
      _exit(127);
    }
    if (idFd >= 0) close(idFd);
    return pid;
  };
  pids[0] = start(0);
  // Rank 0 makes the unique id (its process hosts the bootstrap root) and says when it is there.
  pollfd p{idPipe[0], POLLIN, 0};
  char ready = 0;
  const bool haveId = pids[0] > 0 && poll(&p, 1, kIdWaitMs) == 1 && read(idPipe[0], &ready, 1) == 1;
  close(idPipe[0]);
  close(idPipe[1]);
  if (haveId)
    for (int r = 1; r < n; ++r) pids[r] = start(r);
  std::vector<int> status(n, 0);
  int alive = 0;
  for (pid_t pid : pids) alive += pid > 0;
  auto reap = [&] {
    for (int r = 0; r < n; ++r)
      if (pids[r] > 0 && waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
        pids[r] = -1;
        --alive;
      }
    return alive == 0;
  };
  const bool done = watch(shared->outcomes, n, hangMs, reap);
  if (!done) {
    result->hang = true;
    result->problems.push_back("HANG: no progress for " + std::to_string(hangMs) +
                               " ms: " + stuckRanks(shared->outcomes, n));
    for (pid_t pid : pids)
      if (pid > 0) kill(pid, SIGKILL);
    for (int r = 0; r < n; ++r)
      if (pids[r] > 0) waitpid(pids[r], &status[r], 0);
  }
  if (!haveId) {
    result->problems.push_back("rank 0 published no unique id");
  } else if (!result->hang) {
    judge(job, shared->outcomes, status, result);
  } else {
    for (int r = 0; r < n; ++r) result->calls += shared->outcomes[r].callsOk;
  }
  // Every rank process has been waited for: none may remain (nor any process it started).
  if (waitpid(-1, nullptr, WNOHANG) != -1 || errno != ECHILD)
    result->problems.push_back("a child process remains after the job");
  shared->~Shared();
  munmap(mem, sizeof(Shared));
  close(fd);
}

int rankChildMain(int argc, char** argv) {
  if (argc < 3) return 2;
  const int fd = std::atoi(argv[0]), rank = std::atoi(argv[1]), idFd = std::atoi(argv[2]);
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) return 3;
  close(fd);
  auto* shared = static_cast<Shared*>(mem);
  if (rank == 0) {
    if (ncclGetUniqueId(&shared->id) != ncclSuccess) return 4;
    if (write(idFd, "i", 1) != 1) return 5;
    close(idFd);
  }
  std::atomic<ncclComm_t> slot{nullptr};
  runRank(shared->job, rank, &shared->id, &slot, &shared->outcomes[rank]);
  return 0;
}

}  // namespace soak
