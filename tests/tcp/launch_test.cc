// weftCommInitFromEnv: ranks started torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
// find each other with no unique id passed around.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "nccl.h"
#include "weft/weft.h"

namespace {

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Forks n ranks with `env(rank)` applied; each inits from the environment and checks an
// allreduce. Returns the exit codes.
std::vector<int> launch(int n, const std::function<void(int)>& env, bool expectInit = true) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      env(r);
      ncclComm_t comm;
      ncclResult_t res = weftCommInitFromEnv(&comm);
      if (res != ncclSuccess) _exit(expectInit ? 10 : 0);
      if (!expectInit) _exit(11);
      int rank = -1, size = -1;
      ncclCommUserRank(comm, &rank);
      ncclCommCount(comm, &size);
      if (size != n) _exit(12);
      std::vector<float> v(1000, float(rank + 1)), out(1000);
      if (ncclAllReduce(v.data(), out.data(), v.size(), ncclFloat, ncclSum, comm, nullptr) !=
          ncclSuccess)
        _exit(13);
      for (float x : out)
        if (x != float(n * (n + 1) / 2)) _exit(14);
      ncclCommDestroy(comm);
      _exit(0);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  return codes;
}

TEST(InitFromEnv, TorchrunVariables) {
  const std::string port = std::to_string(freePort());
  auto codes = launch(3, [&](int r) {
    setenv("RANK", std::to_string(r).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
    setenv("WORLD_SIZE", "3", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port.c_str(), 1);
    if (r == 2) usleep(200000);  // late ranks are fine; so is rank 0 being late below
  });
  for (int c : codes) EXPECT_EQ(c, 0);
}

TEST(InitFromEnv, WeftVariablesWinAndRankZeroMayComeLast) {
  const std::string port = std::to_string(freePort());
  auto codes = launch(2, [&](int r) {
    setenv("WEFT_RANK", std::to_string(r).c_str(), 1);
    setenv("WEFT_WORLD_SIZE", "2", 1);
    setenv("RANK", "7", 1);  // ignored: WEFT_RANK wins
    setenv("WEFT_MASTER_ADDR", "localhost", 1);
    setenv("WEFT_MASTER_PORT", port.c_str(), 1);
    setenv("WEFT_JOB_SECRET", "shared words", 1);
    setenv("NCCL_SHM_DISABLE", "1", 1);  // and over tcp
    setenv("WEFT_LOCAL_DISABLE", "1", 1);
    if (r == 0) usleep(300000);
  });
  for (int c : codes) EXPECT_EQ(c, 0);
}

TEST(InitFromEnv, MissingOrBadVariablesAreErrors) {
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "WEFT_RANK",
                        "WEFT_WORLD_SIZE", "WEFT_MASTER_ADDR", "WEFT_MASTER_PORT"})
    unsetenv(v);
  ncclComm_t comm;
  EXPECT_EQ(weftCommInitFromEnv(&comm), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("WORLD_SIZE"), std::string::npos);
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "1234", 1);
  EXPECT_EQ(weftCommInitFromEnv(&comm), ncclInvalidArgument);  // rank out of range
  setenv("RANK", "0", 1);
  setenv("MASTER_PORT", "70000", 1);
  EXPECT_EQ(weftCommInitFromEnv(&comm), ncclInvalidArgument);
  EXPECT_EQ(weftCommInitFromEnv(nullptr), ncclInvalidArgument);
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(v);
}

TEST(InitFromEnv, WrongJobSecretIsKeptOut) {
  const std::string port = std::to_string(freePort());
  // Rank 1 has another secret: the root drops it, and everyone gives up after the timeout.
  auto codes = launch(
      2,
      [&](int r) {
        setenv("RANK", std::to_string(r).c_str(), 1);
        setenv("WORLD_SIZE", "2", 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", port.c_str(), 1);
        setenv("WEFT_JOB_SECRET", r == 0 ? "right" : "wrong", 1);
        setenv("WEFT_BOOTSTRAP_TIMEOUT_MS", "3000", 1);
      },
      /*expectInit=*/false);
  for (int c : codes) EXPECT_EQ(c, 0);
}

}  // namespace
