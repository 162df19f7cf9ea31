// The loop: Weft loads its own libnccl-net-weft.so (NCCL_NET_PLUGIN, NCCL_NET=Weft) and runs the
// collective correctness grid between processes that look like different hosts (WEFT_HOST_ID),
// so every pair goes through the plugin. Each rank's NET log (stderr, kept per process) must
// show plugin connections and no tcp transport connection. A plugin that fails its init leaves
// Weft on its own transports.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/support/grid.h"

using namespace weft::test;

namespace {

// Where the ranks' logs go: one file per process.
struct LogDir {
  LogDir() {
    char tmpl[] = "/tmp/weft-net-plugin-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~LogDir() { std::filesystem::remove_all(path); }
  // In child p: NET logs at INFO to <path>/<p>.log (appended: the plugin's own log writes there
  // too).
  void capture(int p) const {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "NET", 1);
    int fd = open((path + "/" + std::to_string(p) + ".log").c_str(),
                  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) dup2(fd, 2);
  }
  std::string read(int p) const {
    std::ifstream f(path + "/" + std::to_string(p) + ".log");
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  std::string path;
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Connections of Weft's tcp transport (its connect() logs one line each; the plugin's own tcp
// links inside libnccl-net-weft.so log other lines).
size_t tcpTransportLinks(const std::string& log) {
  static const std::regex line(R"(tcp: rank \d+ (connects to|accepts from) rank \d+ channel)");
  return std::distance(std::sregex_iterator(log.begin(), log.end(), line), std::sregex_iterator());
}

class PluginLoop : public ::testing::TestWithParam<int> {};

TEST_P(PluginLoop, GridOverWeftsOwnPlugin) {
  const int procs = GetParam();
  LogDir logs;
  auto codes = forkRanks(
      procs, 1,
      [](auto& comms, auto& ranks, int n) { return correctnessGrid(comms, ranks, n, "plugin "); },
      [&logs](int p) {
        logs.capture(p);
        setenv("WEFT_HOST_ID", ("host" + std::to_string(p)).c_str(), 1);
        setenv("NCCL_NET_PLUGIN", WEFT_NET_PLUGIN_PATH, 1);
        setenv("NCCL_NET", "Weft", 1);
      });
  for (int p = 0; p < procs; ++p) {
    EXPECT_EQ(codes[p], 0) << "process " << p << "\n" << logs.read(p);
    const std::string log = logs.read(p);
    EXPECT_NE(log.find("net plugin Weft (ncclNet v11"), std::string::npos) << log;
    // Every peer of this rank is reached through the plugin, on every channel it uses.
    for (int q = 0; q < procs; ++q)
      if (q != p) {
        const std::string link = "net plugin Weft: rank " + std::to_string(p) +
                                 " connected to rank " + std::to_string(q) + " ";
        EXPECT_GE(count(log, link), 1u) << "process " << p << " to " << q << "\n" << log;
      }
    EXPECT_EQ(tcpTransportLinks(log), 0u) << log;
    // Where an RDMA port is active (WEFT_TEST_IB, the vm tests' guests), the plugin's comms are
    // its ib ones (device 0).
    if (getenv("WEFT_TEST_IB")) {
      EXPECT_GE(count(log, "weft net plugin: weft-ib:"), 2u) << log;
      EXPECT_EQ(count(log, "weft net plugin: weft-socket"), 0u) << log;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Processes, PluginLoop, ::testing::Values(2, 3),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// Without NCCL_NET the loaded plugin is preferred between hosts, as in NCCL; ranks of one host
// keep shared memory. Two hosts of two processes each, a large allreduce after the grid.
TEST(PluginPreference, BetweenHostsByDefault) {
  LogDir logs;
  auto codes = forkRanks(
      4, 1,
      [](auto& comms, auto& ranks, int n) {
        if (int code = correctnessGrid(comms, ranks, n, "preferred ")) return code;
        std::vector<float> a(size_t(4) << 20, float(ranks[0] + 1)), b(a.size());
        if (ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, comms[0], nullptr) !=
            ncclSuccess)
          return 5;
        for (float x : b)
          if (x != float(n * (n + 1) / 2)) return 6;
        return 0;
      },
      [&logs](int p) {
        logs.capture(p);
        setenv("WEFT_HOST_ID", ("host" + std::to_string(p / 2)).c_str(), 1);
        setenv("NCCL_NET_PLUGIN", WEFT_NET_PLUGIN_PATH, 1);
        unsetenv("NCCL_NET");
      });
  size_t pluginLinks = 0;
  for (int p = 0; p < 4; ++p) {
    const std::string log = logs.read(p);
    EXPECT_EQ(codes[p], 0) << "process " << p << "\n" << log;
    EXPECT_EQ(tcpTransportLinks(log), 0u) << log;
    const int sameHost = p ^ 1;
    EXPECT_EQ(count(log, "connected to rank " + std::to_string(sameHost) + " "), 0u) << log;
    pluginLinks += count(log, "net plugin Weft: rank " + std::to_string(p) + " connected to");
  }
  EXPECT_GE(pluginLinks, 2u);
}

// A rank killed while large allreduces run over the plugin: the others fail with a remote error
// (the plugin's control socket closes without a goodbye), well before Weft's own timeout.
TEST(PluginDeadPeer, KilledMidStreamIsAnErrorNotAHang) {
  auto start = std::chrono::steady_clock::now();
  auto codes = forkRanks(
      3, 1,
      [](auto& comms, auto& ranks, int) -> int {
        std::vector<float> a(size_t(16) << 20, 1.0f), b(a.size());
        if (ranks[0] == 2) {
          std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            kill(getpid(), SIGKILL);
          }).detach();
        }
        for (int i = 0; i < 200; ++i) {
          ncclResult_t r =
              ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat, ncclSum, comms[0], nullptr);
          if (r == ncclRemoteError) return 0;
          if (r != ncclSuccess) return 3;
        }
        return 1;
      },
      [](int p) {
        setenv("WEFT_HOST_ID", ("host" + std::to_string(p)).c_str(), 1);
        setenv("NCCL_NET_PLUGIN", WEFT_NET_PLUGIN_PATH, 1);
        setenv("NCCL_NET", "Weft", 1);
        setenv("WEFT_TIMEOUT_MS", "120000", 1);  // far longer than the test allows
      },
      90);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], 128 + SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// A plugin whose init fails: one warning naming it, and the grid runs over Weft's tcp.
TEST(PluginFallback, FailedInitFallsBackToTcp) {
  LogDir logs;
  auto codes = forkRanks(
      2, 1,
      [](auto& comms, auto& ranks, int n) { return correctnessGrid(comms, ranks, n, "fallback "); },
      [&logs](int p) {
        logs.capture(p);
        setenv("WEFT_HOST_ID", ("host" + std::to_string(p)).c_str(), 1);
        setenv("NCCL_NET_PLUGIN", BAD_PLUGIN_INIT_FAILS_PATH, 1);
        unsetenv("NCCL_NET");
      });
  for (int p = 0; p < 2; ++p) {
    const std::string log = logs.read(p);
    EXPECT_EQ(codes[p], 0) << "process " << p << "\n" << log;
    EXPECT_NE(log.find("no usable network plugin"), std::string::npos) << log;
    EXPECT_NE(log.find("init() of plugin Bad failed"), std::string::npos) << log;
    EXPECT_GE(tcpTransportLinks(log), 1u) << log;
  }
}

}  // namespace
