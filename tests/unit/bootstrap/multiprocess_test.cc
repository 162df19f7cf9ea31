// Ranks as real processes: the test binary re-executes itself as a child rank (fork + exec, so
// no lock or thread of the parent leaks into the child).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/unit/bootstrap/test_util.h"

extern char** environ;

namespace weft::bootstrap::test {
namespace {

constexpr const char* kChildVar = "WEFT_BOOTSTRAP_TEST_CHILD";

std::string toHex(const UniqueIdBytes& id) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (char c : id.bytes) {
    s += kDigits[static_cast<uint8_t>(c) >> 4];
    s += kDigits[static_cast<uint8_t>(c) & 15];
  }
  return s;
}

UniqueIdBytes fromHex(const std::string& s) {
  UniqueIdBytes id{};
  for (size_t i = 0; i < kUniqueIdBytes && 2 * i + 1 < s.size(); ++i)
    id.bytes[i] = static_cast<char>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return id;
}

// Child modes: "gather" joins, checks collectives and exits 0; "crash" joins, passes one barrier
// and kills itself without any cleanup.
int runChild(const char* spec) {
  char mode[16] = {};
  int rank = -1, nranks = 0;
  char hex[2 * kUniqueIdBytes + 1] = {};
  if (std::sscanf(spec, "%15s %d %d %256s", mode, &rank, &nranks, hex) != 4) return 2;
  try {
    auto b = Bootstrap::create(fromHex(hex), rank, nranks, 10s, Tuning::fromEnvironment().timeout);
    if (std::strcmp(mode, "crash") == 0) {
      b->barrier();
      ::kill(::getpid(), SIGKILL);
    }
    for (int iter = 0; iter < 10; ++iter) {
      std::vector<int64_t> v(static_cast<size_t>(nranks) * 3);
      for (int i = 0; i < 3; ++i) v[rank * 3 + i] = (int64_t{rank} << 32) + iter * 3 + i;
      b->allgather(v.data(), 3 * sizeof(int64_t));
      for (int q = 0; q < nranks; ++q)
        for (int i = 0; i < 3; ++i)
          if (v[q * 3 + i] != (int64_t{q} << 32) + iter * 3 + i) return 3;
    }
    int64_t out = rank, in = -1;
    b->send((rank + 1) % nranks, 9, &out, sizeof(out));
    b->recv((rank + nranks - 1) % nranks, 9, &in, sizeof(in));
    if (in != (rank + nranks - 1) % nranks) return 4;
    b->barrier();
    if (b->commHash() != describe(fromHex(hex)).secretHash) return 5;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}

// Runs before gtest's main in a re-executed child and never returns there.
struct ChildEntry {
  ChildEntry() {
    if (const char* spec = std::getenv(kChildVar)) std::_Exit(runChild(spec));
  }
} childEntry;

pid_t spawnChild(const std::string& spec) {
  char exe[4096];
  ssize_t len = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return -1;
  exe[len] = '\0';
  // Everything is prepared before fork: the child only calls execve.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kChildVar, std::strlen(kChildVar)) != 0) env.emplace_back(*e);
  env.push_back(std::string(kChildVar) + "=" + spec);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  char* argv[] = {exe, nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execve(exe, argv, envp.data());
    ::_exit(127);
  }
  return pid;
}

// Waits for a child up to `within`, killing it when late. Returns the wait status.
int reap(pid_t pid, std::chrono::milliseconds within) {
  auto end = std::chrono::steady_clock::now() + within;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "child " << pid << " did not finish in time";
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  return status;
}

TEST(BootstrapMultiProcessTest, FourProcessesRendezvousAndAllgather) {
  constexpr int n = 4;
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pids.push_back(
        spawnChild("gather " + std::to_string(r) + " " + std::to_string(n) + " " + toHex(id)));
    ASSERT_GT(pids.back(), 0);
  }
  for (int r = 0; r < n; ++r) {
    int status = reap(pids[r], 20s);
    EXPECT_TRUE(WIFEXITED(status)) << "rank " << r;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r;
  }
}

TEST(BootstrapMultiProcessTest, CrashedProcessBecomesRemoteError) {
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  pid_t child = spawnChild("crash 1 2 " + toHex(id));
  ASSERT_GT(child, 0);
  auto b = Bootstrap::create(id, 0, 2, 10s, Tuning::fromEnvironment().timeout);
  b->barrier();
  auto start = std::chrono::steady_clock::now();
  int v;
  Caught c = errorOf([&] { b->recv(1, 9, &v, sizeof(v)); });
  EXPECT_EQ(c.code, Status::kRemoteError);
  EXPECT_NE(c.message.find("rank 1"), std::string::npos) << c.message;
  EXPECT_LT(secondsSince(start), 3.0);
  int status = reap(child, 5s);
  EXPECT_TRUE(WIFSIGNALED(status));
}

}  // namespace
}  // namespace weft::bootstrap::test
