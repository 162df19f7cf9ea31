// The communicator discovers its topology at init: shared by thread ranks (one probe per
// process), summarised at NCCL_DEBUG=INFO, dumped to NCCL_TOPO_DUMP_FILE.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "src/bootstrap/bootstrap.h"
#include "src/core/communicator.h"
#include "src/topo/discover.h"
#include "src/topo/xml_reader.h"
#include "tests/unit/topo/topo_test_util.h"

namespace weft::topo {
namespace {

std::vector<std::unique_ptr<core::Communicator>> makeComms(int n) {
  bootstrap::UniqueIdBytes id = bootstrap::generateUniqueId(Tuning::fromEnvironment());
  std::vector<std::unique_ptr<core::Communicator>> comms(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      comms[r] = std::make_unique<core::Communicator>(id, r, n, core::configFromEnv());
    });
  for (auto& t : threads) t.join();
  return comms;
}

TEST(CommTopology, ThreadRanksShareOneProbe) {
  int before = localProbeRuns();
  for (int round = 0; round < 3; ++round) {
    auto comms = makeComms(6);
    for (int r = 0; r < 6; ++r) {
      const SystemTopology& s = comms[r]->topology();
      EXPECT_EQ(s.nranks(), 6);
      EXPECT_EQ(s.graph().hostCount(), 1);
      EXPECT_EQ(s.rankHost(r), 0);
      EXPECT_EQ(s.graph().node(s.rankNode(r)).kind, NodeKind::kCpu);
      EXPECT_EQ(s.minInterHostBandwidth(), 0);
    }
  }
  EXPECT_LE(localProbeRuns() - before, 1);
}

TEST(CommTopology, DumpFileAndInfoSummary) {
  if (const char* child = std::getenv("WEFT_TOPO_TEST_CHILD")) {
    // Child: NCCL_DEBUG=INFO and NCCL_TOPO_DUMP_FILE come from the parent.
    auto comms = makeComms(std::atoi(child));
    return;
  }
  char dir[] = "/tmp/weft-comm-topo-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string dump = std::string(dir) + "/system.xml";
  std::string cmd =
      "WEFT_TOPO_TEST_CHILD=3 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_TOPO_DUMP_FILE=" + dump +
      " /proc/" + std::to_string(getpid()) +
      "/exe --gtest_filter=CommTopology.DumpFileAndInfoSummary 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("topology: 1 host(s), 3 rank(s); source probe"), std::string::npos) << out;
  EXPECT_NE(out.find("slowest rank-to-rank path"), std::string::npos) << out;
  ASSERT_TRUE(testing::exists(dump)) << out;
  Topology t = readTopologyFile(dump);
  EXPECT_EQ(t.hostCount(), 1);
  EXPECT_GE(t.count(NodeKind::kCpu), 1);
  std::system(("rm -rf " + std::string(dir)).c_str());
}

}  // namespace
}  // namespace weft::topo
