// Ranks as real processes talking tcp: the core correctness grid over tcp alone (shm and the
// in-process transport disabled), over "hosts" simulated on this machine with WEFT_HOST_ID (shm
// inside a host, tcp between hosts, hierarchical algorithms), IPv6, a 1 GiB message, and a peer
// that dies.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/support/grid.h"

using namespace weft::test;

namespace {

void tcpOnly() {
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("WEFT_LOCAL_DISABLE", "1", 1);
}

class TcpProcesses : public ::testing::TestWithParam<std::tuple<int, int, const char*>> {};

TEST_P(TcpProcesses, Grid) {
  auto [procs, perProc, algo] = GetParam();
  auto codes = forkRanks(
      procs, perProc,
      [](auto& comms, auto& ranks, int n) { return correctnessGrid(comms, ranks, n, "tcp "); },
      [algo = algo](int p) {
        tcpOnly();
        setenv("NCCL_ALGO", algo, 1);
        // 1 to 3 sockets per connection, differing between processes: the connecting (lower) rank's
        // count rules, and large messages are striped.
        setenv("NCCL_NSOCKS_PERTHREAD", std::to_string(p % 3 + 1).c_str(), 1);
        setenv("WEFT_TCP_MIN_PART", "8192", 1);
        // And one or two progress threads, a connection's sockets spread over them.
        setenv("NCCL_SOCKET_NTHREADS", std::to_string(p / 3 % 2 + 1).c_str(), 1);
      });
  for (int p = 0; p < procs; ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
}

INSTANTIATE_TEST_SUITE_P(
    TcpOnly, TcpProcesses,
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

// Hosts simulated on this machine: process p is on host p / procsPerHost.
struct HostLayout {
  int hosts, procsPerHost, perProc;
  const char* algo;          // nullptr: the selector chooses
  bool interleaved = false;  // process p on host p % hosts instead of p / procsPerHost
};

class SimulatedHosts : public ::testing::TestWithParam<HostLayout> {};

TEST_P(SimulatedHosts, Grid) {
  HostLayout l = GetParam();
  auto codes = forkRanks(
      l.hosts * l.procsPerHost, l.perProc,
      [](auto& comms, auto& ranks, int n) { return correctnessGrid(comms, ranks, n, "hosts "); },
      [l](int p) {
        int host = l.interleaved ? p % l.hosts : p / l.procsPerHost;
        setenv("WEFT_HOST_ID", ("host" + std::to_string(host)).c_str(), 1);
        if (l.algo) setenv("NCCL_ALGO", l.algo, 1);
      });
  for (size_t p = 0; p < codes.size(); ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
}

INSTANTIATE_TEST_SUITE_P(
    Hosts, SimulatedHosts,
    ::testing::Values(HostLayout{2, 1, 1, nullptr}, HostLayout{2, 2, 1, nullptr},
                      HostLayout{2, 2, 1, "ring"}, HostLayout{3, 1, 2, nullptr},
                      HostLayout{2, 3, 1, nullptr}, HostLayout{4, 1, 1, nullptr},
                      HostLayout{2, 2, 1, "hier"}, HostLayout{3, 1, 2, "hier"},
                      HostLayout{2, 3, 1, "hier"}, HostLayout{3, 2, 1, "hier"},
                      HostLayout{2, 2, 1, "hier", true}, HostLayout{3, 2, 1, nullptr, true}),
    [](const auto& info) {
      const HostLayout& l = info.param;
      return "h" + std::to_string(l.hosts) + "p" + std::to_string(l.procsPerHost) + "x" +
             std::to_string(l.perProc) + "_" + (l.algo ? l.algo : "auto") +
             (l.interleaved ? "_interleaved" : "");
    });

// ::1 listed is not enough (containers may list it with IPv6 switched off): a socket must bind,
// listen and be connected to there.
bool haveIpv6Loopback() {
  int server = socket(AF_INET6, SOCK_STREAM, 0);
  if (server < 0) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  socklen_t len = sizeof(addr);
  bool ok = bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            listen(server, 1) == 0 &&
            getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (ok) {
    int client = socket(AF_INET6, SOCK_STREAM, 0);
    ok = client >= 0 && connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (client >= 0) close(client);
  }
  close(server);
  return ok;
}

// Whether this process holds a socket listening on ::1: its descriptors' socket inodes, looked up
// among /proc/net/tcp6's listeners (state 0A) at ::1.
bool listensOnIpv6Loopback() {
  std::vector<std::string> inodes;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0)
      inodes.push_back(target.substr(8, target.size() - 9));
  }
  std::ifstream table("/proc/net/tcp6");
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    f >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
        inode;
    const bool loopback = local.rfind("00000000000000000000000001000000:", 0) == 0;
    if (state == "0A" && loopback && std::find(inodes.begin(), inodes.end(), inode) != inodes.end())
      return true;
  }
  return false;
}

// NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY reach the tcp transport: every rank listens on ::1 and
// the ranks' allreduce over it is exact.
TEST(TcpTransport, Ipv6Loopback) {
  if (!haveIpv6Loopback())
    GTEST_SKIP() << "no usable ::1 here (no IPv6 socket binds and connects there)";
  auto codes = forkRanks(
      3, 1,
      [](auto& comms, auto& ranks, int n) {
        if (!listensOnIpv6Loopback()) return 3;
        for (size_t count : {size_t(1), size_t(100003)}) {
          std::vector<float> a(count, float(ranks[0] + 1)), b(count);
          if (ncclAllReduce(a.data(), b.data(), count, ncclFloat, ncclSum, comms[0], nullptr) !=
              ncclSuccess)
            return 1;
          for (float x : b)
            if (x != float(n * (n + 1) / 2)) return 2;
        }
        return 0;
      },
      [](int) {
        tcpOnly();
        setenv("NCCL_SOCKET_IFNAME", "lo", 1);
        setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
      });
  for (size_t p = 0; p < codes.size(); ++p)
    EXPECT_EQ(codes[p], 0) << "process " << p << (codes[p] == 3 ? ": not listening on ::1" : "");
}

TEST(TcpTransport, OneGiBSendRecv) {
  const size_t bytes = size_t(1) << 30;
  auto codes = forkRanks(
      2, 1,
      [bytes](auto& comms, auto& ranks, int) {
        std::vector<uint64_t> buf(bytes / 8);
        if (ranks[0] == 0) {
          for (size_t i = 0; i < buf.size(); ++i) buf[i] = i * 0x9e3779b97f4a7c15ull;
          return ncclSend(buf.data(), bytes, ncclUint8, 1, comms[0], nullptr) == ncclSuccess ? 0
                                                                                             : 1;
        }
        if (ncclRecv(buf.data(), bytes, ncclUint8, 0, comms[0], nullptr) != ncclSuccess) return 1;
        for (size_t i = 0; i < buf.size(); ++i)
          if (buf[i] != i * 0x9e3779b97f4a7c15ull) return 3;
        return 0;
      },
      [](int) { tcpOnly(); }, 300);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

// A survivor's lanes wait on several peers at once (rsag: both peers on two channels); the one
// that died must be seen whichever lane stalled last.
class DeadPeer : public testing::TestWithParam<const char*> {};

TEST_P(DeadPeer, IsAnErrorNotAHang) {
  const std::string algo = GetParam();
  auto start = std::chrono::steady_clock::now();
  auto codes = forkRanks(
      3, 1,
      [](auto& comms, auto& ranks, int) -> int {
        if (ranks[0] == 2) _exit(0);  // leaves without a word
        std::vector<float> a(1 << 18, 1.0f), b(1 << 18);
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
      [algo](int) {
        tcpOnly();
        setenv("WEFT_TIMEOUT_MS", "120000",
               1);  // far longer than the test allows: death must be seen
        if (algo != "default") setenv("NCCL_ALGO", algo.c_str(), 1);
      },
      60);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

INSTANTIATE_TEST_SUITE_P(TcpTransport, DeadPeer,
                         ::testing::Values("default", "ring", "rhd", "rsag"));

TEST(TcpTransport, DeathInTheMiddleOfAStream) {
  // Rank 1 is killed while a large allreduce is in flight; rank 0 must fail, not hang.
  auto start = std::chrono::steady_clock::now();
  auto codes = forkRanks(
      2, 1,
      [](auto& comms, auto& ranks, int) -> int {
        std::vector<float> a(64 << 20, 1.0f), b(64 << 20);
        if (ranks[0] == 1) {
          std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            _exit(0);
          }).detach();
        }
        for (int i = 0; i < 100; ++i) {
          ncclResult_t r =
              ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, comms[0], nullptr);
          if (r == ncclRemoteError) return 0;
          if (r != ncclSuccess) return 3;
        }
        return ranks[0] == 0 ? 1 : 0;
      },
      [](int) {
        tcpOnly();
        setenv("WEFT_TIMEOUT_MS", "120000", 1);
      },
      90);
  EXPECT_EQ(codes[0], 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

}  // namespace
