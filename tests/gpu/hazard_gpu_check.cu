// The GPU check's hazard cases, through the public API (include/nccl.h) and the CUDA runtime
// only, so they mean the same whichever path the library takes for them: several ranks of one GPU
// whose kernels cannot all run at once, where a call whose ranks wait for each other on the device
// would never finish. Each case must end with correct results or with a clear error (a failed
// call, or an asynchronous error, with ncclGetLastError's text), never a hang.
//
// Usage: hazard_gpu_check CASE RANKS [DEADLINE_S]
//   same-stream   RANKS communicators of this process, every call on one stream
//   null-stream   the same on the legacy NULL stream (stream 0)
//   own-streams   each rank its own stream (run with CUDA_DEVICE_MAX_CONNECTIONS=1 for that case)
//   processes     RANKS processes on GPU 0 (forked before CUDA starts), each one rank
// Each rank runs an allreduce and an allgather of 2 and of 1 Mi floats, checked.
// Prints one line "hazard CASE RANKS: PASS|FAIL|HANG <why>". Exit status: 0 PASS, 1 FAIL, 3 HANG
// (nothing completed within DEADLINE_S, default 20), 77 no GPU.
#include <cuda_runtime.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

namespace {

enum Outcome { kCorrect = 0, kWrong = 1, kClearError = 2, kHang = 3 };

struct Result {
  Outcome outcome = kCorrect;
  std::string why;
};

using Clock = std::chrono::steady_clock;

float inputOf(int rank, size_t i) { return float(rank + 1) + float(i % 5); }

// An error is clear when the library says what went wrong in words.
Result errorResult(const char* what, ncclResult_t rc, ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  std::string why = std::string(what) + " returned " + ncclGetErrorString(rc);
  if (text && *text) return {kClearError, why + ": " + text};
  return {kWrong, why + " with no message (ncclGetLastError is empty)"};
}

// The ranks this process drives: one or several communicators on GPU 0, each with a stream.
struct Ranks {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;  // may repeat, or be 0 (the legacy NULL stream)
  std::vector<int> rankOf;            // each communicator's rank
  int nranks = 1;
  std::vector<float*> send, recv;
};

// Waits until every stream of `k` has finished, an asynchronous error is raised, or the
// deadline passes; polls, so that a call that never finishes is reported instead of waited for.
Result waitAll(Ranks& k, Clock::time_point deadline) {
  for (;;) {
    bool done = true;
    for (size_t i = 0; i < k.comms.size(); ++i) {
      ncclResult_t async = ncclSuccess;
      ncclResult_t rc = ncclCommGetAsyncError(k.comms[i], &async);
      if (rc != ncclSuccess) return errorResult("ncclCommGetAsyncError", rc, k.comms[i]);
      if (async != ncclSuccess && async != ncclInProgress)
        return errorResult("an asynchronous error", async, k.comms[i]);
      const cudaError_t q = cudaStreamQuery(k.streams[i]);
      if (q == cudaErrorNotReady) {
        done = false;
      } else if (q != cudaSuccess) {
        return {kWrong, std::string("cudaStreamQuery: ") + cudaGetErrorString(q)};
      }
    }
    if (done) return {};
    if (Clock::now() > deadline) return {kHang, "the calls did not finish before the deadline"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Allreduce then allgather of `count` floats per rank, in one group per collective, checked.
Result runCollectives(Ranks& k, size_t count, Clock::time_point deadline) {
  const int n = k.nranks;
  std::vector<float> h(count * n);
  for (size_t i = 0; i < k.comms.size(); ++i) {
    for (size_t e = 0; e < count; ++e) h[e] = inputOf(k.rankOf[i], e);
    if (cudaMemcpy(k.send[i], h.data(), count * 4, cudaMemcpyHostToDevice) != cudaSuccess)
      return {kWrong, "cudaMemcpy of the inputs failed"};
  }
  for (int coll = 0; coll < 2; ++coll) {
    const char* name = coll == 0 ? "ncclAllReduce" : "ncclAllGather";
    ncclResult_t rc = ncclGroupStart();
    for (size_t i = 0; i < k.comms.size() && rc == ncclSuccess; ++i) {
      rc = coll == 0
               ? ncclAllReduce(k.send[i], k.recv[i], count, ncclFloat, ncclSum, k.comms[i],
                               k.streams[i])
               : ncclAllGather(k.send[i], k.recv[i], count, ncclFloat, k.comms[i], k.streams[i]);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (rc != ncclSuccess) return errorResult(name, rc, k.comms[0]);
    if (end != ncclSuccess) return errorResult("ncclGroupEnd", end, k.comms[0]);
    Result r = waitAll(k, deadline);
    if (r.outcome != kCorrect) return r;
    const size_t outCount = coll == 0 ? count : count * n;
    for (size_t i = 0; i < k.comms.size(); ++i) {
      if (cudaMemcpy(h.data(), k.recv[i], outCount * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
        return {kWrong, "cudaMemcpy of the results failed"};
      for (size_t e = 0; e < outCount; ++e) {
        float want = 0;
        if (coll == 0) {
          for (int q = 0; q < n; ++q) want += inputOf(q, e);
        } else {
          want = inputOf(static_cast<int>(e / count), e % count);
        }
        if (h[e] != want) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "%s of %zu floats: rank %d element %zu is %g, not %g",
                        name, count, k.rankOf[i], e, h[e], want);
          return {kWrong, buf};
        }
      }
    }
  }
  return {};
}

// Both sizes: the small one takes a latency path, the large one a bandwidth path.
Result runSizes(Ranks& k, Clock::time_point deadline) {
  const size_t largest = size_t(1) << 20;
  for (size_t i = 0; i < k.comms.size(); ++i) {
    if (cudaMalloc(&k.send[i], largest * 4) != cudaSuccess ||
        cudaMalloc(&k.recv[i], largest * 4 * k.nranks) != cudaSuccess)
      return {kWrong, "cudaMalloc failed"};
  }
  for (size_t count : {size_t(2), largest}) {
    Result r = runCollectives(k, count, deadline);
    if (r.outcome != kCorrect) return r;
  }
  return {};
}

// Destroys the communicators, or abandons them after an error (ncclCommAbort: nothing waits for
// them). After a hang nothing is called: the process ends, and its kernels with it.
void finish(Ranks& k, const Result& r) {
  if (r.outcome == kHang) return;
  for (ncclComm_t c : k.comms) {
    if (r.outcome == kCorrect)
      ncclCommDestroy(c);
    else
      ncclCommAbort(c);
  }
}

Result inOneProcess(const std::string& which, int n, Clock::time_point deadline) {
  Ranks k;
  k.nranks = n;
  k.comms.resize(n);
  k.send.resize(n);
  k.recv.resize(n);
  std::vector<int> devices(n, 0);  // every rank on the one GPU
  cudaSetDevice(0);
  ncclResult_t rc = ncclCommInitAll(k.comms.data(), n, devices.data());
  if (rc != ncclSuccess) return errorResult("ncclCommInitAll", rc, nullptr);
  cudaStream_t shared = nullptr;
  if (which == "same-stream") cudaStreamCreate(&shared);
  for (int i = 0; i < n; ++i) {
    k.rankOf.push_back(i);
    cudaStream_t s = shared;  // null-stream keeps 0: the legacy NULL stream
    if (which == "own-streams") cudaStreamCreate(&s);
    k.streams.push_back(s);
  }
  Result r = runSizes(k, deadline);
  finish(k, r);
  return r;
}

// Reads exactly `bytes` from `fd` before the deadline; false on end of file, error or timeout.
bool readBefore(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd pfd = {fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t got = read(fd, p, bytes);
    if (got <= 0) return false;
    p += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

// One rank of the processes case, in a child forked before CUDA started. Rank 0 makes the
// unique id (its bootstrap root then lives in a rank that stays for the whole call) and writes
// it into `idPipe` once per other rank; the others read it from there. Exit status: Outcome.
[[noreturn]] void processRank(int rank, int n, const int idPipe[2], Clock::time_point deadline) {
  Ranks k;
  k.nranks = n;
  k.comms.resize(1);
  k.send.resize(1);
  k.recv.resize(1);
  k.rankOf.push_back(rank);
  Result r;
  ncclUniqueId id;
  if (rank == 0) {
    close(idPipe[0]);
    ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) {
      r = errorResult("ncclGetUniqueId", rc, nullptr);
      std::printf("  rank 0: %s\n", r.why.c_str());
      std::fflush(stdout);
      std::_Exit(r.outcome);
    }
    for (int i = 1; i < n; ++i)
      if (write(idPipe[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) std::_Exit(kWrong);
    close(idPipe[1]);
  } else {
    close(idPipe[1]);
    if (!readBefore(idPipe[0], &id, sizeof id, deadline)) {
      std::printf("  rank %d: no unique id from rank 0 before the deadline\n", rank);
      std::fflush(stdout);
      std::_Exit(kWrong);
    }
    close(idPipe[0]);
  }
  cudaSetDevice(0);
  cudaStream_t s = nullptr;
  cudaStreamCreate(&s);
  k.streams.push_back(s);
  ncclResult_t rc = ncclCommInitRank(&k.comms[0], n, id, rank);
  if (rc != ncclSuccess) {
    r = errorResult("ncclCommInitRank", rc, nullptr);
  } else {
    r = runSizes(k, deadline);
    finish(k, r);
  }
  if (r.outcome != kCorrect) std::printf("  rank %d: %s\n", rank, r.why.c_str());
  std::fflush(stdout);
  std::_Exit(r.outcome);
}

Result inProcesses(int n, Clock::time_point deadline) {
  int idPipe[2];
  if (pipe(idPipe) != 0) return {kWrong, "pipe failed"};
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) processRank(r, n, idPipe, deadline);
    if (pid < 0) return {kWrong, "fork failed"};
    children.push_back(pid);
  }
  close(idPipe[0]);
  close(idPipe[1]);
  // The children's own deadline reports a hang; this one, a little later, catches a child stuck
  // where it cannot look at the clock (in a CUDA call).
  const Clock::time_point hard = deadline + std::chrono::seconds(2);
  Result worst;
  size_t left = children.size();
  while (left > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --left;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      Result got = {kWrong, "a rank process exited with status " + std::to_string(code)};
      if (code == kCorrect || code == kClearError || code == kHang)
        got = {static_cast<Outcome>(code), code == kClearError ? "a rank failed with a clear error"
                                           : code == kHang     ? "a rank's calls did not finish"
                                                               : ""};
      // The worst outcome wins: hang, then wrong, then a clear error.
      auto severity = [](Outcome o) {
        return o == kHang ? 3 : o == kWrong ? 2 : o == kClearError ? 1 : 0;
      };
      if (severity(got.outcome) > severity(worst.outcome)) worst = got;
      continue;
    }
    if (Clock::now() > hard) {
      for (pid_t c : children) kill(c, SIGKILL);
      while (waitpid(-1, &status, 0) > 0) {
      }
      return {kHang, "rank processes still running after the deadline (killed)"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: hazard_gpu_check same-stream|null-stream|own-streams|processes RANKS "
                 "[DEADLINE_S]\n");
    return 2;
  }
  const std::string which = argv[1];
  const int n = std::atoi(argv[2]);
  const int seconds = argc > 3 ? std::atoi(argv[3]) : 20;
  if (n < 1 || n > 64 || seconds < 1 ||
      (which != "same-stream" && which != "null-stream" && which != "own-streams" &&
       which != "processes")) {
    std::fprintf(stderr, "hazard_gpu_check: bad case, rank count or deadline\n");
    return 2;
  }
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::string label = "hazard " + which + " " + std::to_string(n);
  if (connections) label += " (CUDA_DEVICE_MAX_CONNECTIONS=" + std::string(connections) + ")";
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(seconds);
  Result r;
  if (which == "processes") {
    // No CUDA call before the fork: a child inherits no CUDA state. The device count is asked in
    // a child of its own for that reason.
    const pid_t probe = fork();
    if (probe == 0) {
      int devices = 0;
      std::_Exit(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 ? 0 : 77);
    }
    int status = 0;
    waitpid(probe, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("%s: SKIP no GPU\n", label.c_str());
      return 77;
    }
    r = inProcesses(n, deadline);
  } else {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::printf("%s: SKIP no GPU\n", label.c_str());
      return 77;
    }
    r = inOneProcess(which, n, deadline);
  }
  static const char* const kWord[] = {"PASS correct", "FAIL", "PASS clear error:", "HANG"};
  std::printf("%s: %s %s\n", label.c_str(), kWord[r.outcome], r.why.c_str());
  std::fflush(stdout);
  if (r.outcome == kHang) std::_Exit(3);  // a hung call's kernels end with the process
  return r.outcome == kWrong ? 1 : 0;
}
