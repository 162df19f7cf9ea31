// The system topology of a communicator: the exchange between ranks, ranks on hosts and nodes,
// the per-process cache of discovery, NCCL_TOPO_FILE and NCCL_TOPO_DUMP_FILE.
#include "src/topo/system.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "src/common/error.h"
#include "src/topo/xml_reader.h"
#include "src/topo/xml_writer.h"
#include "tests/support/scoped_env.h"
#include "tests/unit/topo/topo_test_util.h"

namespace weft::topo {
namespace {

using weft::test::ScopedEnv;

// A fixed-size allgather among threads of this process.
class ThreadAllgather {
 public:
  explicit ThreadAllgather(int n) : n_(n), barrier_(n), blocks_(n) {}
  void operator()(int rank, void* data, size_t bytes) {
    blocks_[rank].assign(static_cast<char*>(data) + rank * bytes,
                         static_cast<char*>(data) + (rank + 1) * bytes);
    barrier_.arrive_and_wait();
    for (int r = 0; r < n_; ++r)
      std::memcpy(static_cast<char*>(data) + r * bytes, blocks_[r].data(), bytes);
    barrier_.arrive_and_wait();
  }

 private:
  int n_;
  std::barrier<> barrier_;
  std::vector<std::vector<char>> blocks_;
};

TEST(TopoSystem, VariableAllgatherOverAFixedOne) {
  const int n = 5;
  ThreadAllgather fixed(n);
  std::vector<std::vector<std::string>> got(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      AllgatherFn ag = variableAllgather(r, n, [&, r](void* d, size_t b) { fixed(r, d, b); });
      got[r] = ag(std::string(static_cast<size_t>(r * 1000), static_cast<char>('a' + r)));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(got[r].size(), static_cast<size_t>(n));
    for (int q = 0; q < n; ++q)
      EXPECT_EQ(got[r][q], std::string(static_cast<size_t>(q * 1000), static_cast<char>('a' + q)));
  }
}

TEST(TopoSystem, OneRankNeedsNoExchange) {
  LocalRankInfo me;
  SystemTopology s = buildSystemTopology(
      me,
      [](const std::string&) -> std::vector<std::string> {
        ADD_FAILURE() << "no exchange for one rank";
        return {};
      },
      Tuning::fromEnvironment());
  EXPECT_EQ(s.nranks(), 1);
  EXPECT_EQ(s.graph().hostCount(), 1);
  EXPECT_EQ(s.graph().node(s.rankNode(0)).kind, NodeKind::kCpu);
  EXPECT_EQ(s.minIntraHostBandwidth(), 0);
  EXPECT_EQ(s.minInterHostBandwidth(), 0);
  EXPECT_NE(s.summary().find("1 host(s), 1 rank(s)"), std::string::npos) << s.summary();
}

TEST(TopoSystem, SixteenThreadRanksProbeOnce) {
  const int n = 16;
  int before = localProbeRuns();
  ThreadAllgather fixed(n);
  std::vector<SystemTopology> systems(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      LocalRankInfo me;
      me.rank = r;
      me.nranks = n;
      systems[r] = buildSystemTopology(
          me, variableAllgather(r, n, [&, r](void* d, size_t b) { fixed(r, d, b); }),
          Tuning::fromEnvironment());
    });
  for (auto& t : threads) t.join();
  EXPECT_LE(localProbeRuns() - before, 1) << "discovery is shared by the ranks of a process";
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(systems[r].nranks(), n);
    EXPECT_EQ(systems[r].graph().hostCount(), 1);
    EXPECT_EQ(systems[r].graph().diff(systems[0].graph()), "");
    for (int q = 0; q < n; ++q) EXPECT_EQ(systems[r].rankHost(q), 0);
  }
  EXPECT_GT(systems[0].minIntraHostBandwidth(), 0);
  EXPECT_EQ(systems[0].minInterHostBandwidth(), 0);
  EXPECT_EQ(localDiscovery(Tuning::fromEnvironment()), localDiscovery(Tuning::fromEnvironment()));
}

// Blobs as ranks on two DGX A100s (one rank per GPU) would send them.
std::vector<std::string> twoDgxA100Blobs() {
  Topology both = readTopologyFile(testing::golden("dgx-a100-x2.xml"));
  std::vector<std::string> blobs;
  for (int h = 0; h < 2; ++h) {
    Topology one;
    one.appendHost(both, h);
    one.finalize();
    Discovery d;
    d.xml = writeTopologyXml(one);
    d.source = "test host " + std::to_string(h);
    for (int g = 0; g < 8; ++g) {
      LocalRankInfo me;
      me.hostHash = 0x1000 + h;
      me.endpoint.gpu = true;
      me.endpoint.busId = one.node(one.findGpu(0, g)).pci.busId;
      blobs.push_back(encodeRankBlob(me, d));
    }
  }
  return blobs;
}

TEST(TopoSystem, TwoHostsOfGpuRanks) {
  SystemTopology s = assembleSystem(twoDgxA100Blobs());
  const Topology& t = s.graph();
  EXPECT_EQ(t.hostCount(), 2);
  EXPECT_EQ(t.host(1).hostHash, 0x1001u);
  EXPECT_EQ(t.count(NodeKind::kGpu), 16);
  EXPECT_EQ(t.count(NodeKind::kNetSwitch), 1);
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(s.rankHost(r), r / 8);
    EXPECT_EQ(t.node(s.rankNode(r)).kind, NodeKind::kGpu);
    EXPECT_EQ(t.node(s.rankNode(r)).gpu.dev, r % 8);
  }
  EXPECT_DOUBLE_EQ(s.minIntraHostBandwidth(), 300);  // NVSwitch
  EXPECT_DOUBLE_EQ(s.minInterHostBandwidth(), 24);   // PCIe gen4 to the HDR NIC
  Path p = s.rankPath(0, 8);
  EXPECT_EQ(p.type, PathType::kNet);
  EXPECT_EQ(s.rankPath(3, 3).type, PathType::kLoc);
  std::string sum = s.summary();
  EXPECT_NE(sum.find("2 host(s), 16 rank(s)"), std::string::npos) << sum;
  EXPECT_NE(sum.find("host1: ranks 8-15, one per gpu (gpu0..gpu7)"), std::string::npos) << sum;
  EXPECT_NE(sum.find("within a host NVL 300 GB/s, across hosts NET 24 GB/s"), std::string::npos)
      << sum;
  EXPECT_NE(sum.find("test host 0, test host 1"), std::string::npos) << sum;
  EXPECT_LE(std::count(sum.begin(), sum.end(), '\n'), 24) << "one screen";
}

TEST(TopoSystem, CpuRanksOnTwoHosts) {
  Discovery d;
  d.xml = testing::slurp(testing::golden("pcie-8gpu.xml"));
  d.source = "probe";
  std::vector<std::string> blobs;
  for (int r = 0; r < 6; ++r) {
    LocalRankInfo me;
    me.hostHash = r < 4 ? 7 : 9;
    me.endpoint.numaId = r % 2;
    blobs.push_back(encodeRankBlob(me, d));
  }
  SystemTopology s = assembleSystem(blobs);
  EXPECT_EQ(s.graph().hostCount(), 2);
  EXPECT_EQ(s.graph().node(s.rankNode(1)).cpu.numaId, 1);
  EXPECT_DOUBLE_EQ(s.minIntraHostBandwidth(), 10);  // the UPI link between the sockets
  EXPECT_DOUBLE_EQ(s.minInterHostBandwidth(), 10);  // eth2 100 Gb/s, reached over UPI
  EXPECT_EQ(s.rankPath(0, 4).type, PathType::kNet);
  EXPECT_NE(s.summary().find("host0: ranks 0 on cpu0, 1 on cpu1, 2 on cpu0, 3 on cpu1\n"),
            std::string::npos)
      << s.summary();
  // A NUMA domain a host does not have: the rank lands on the host's first CPU.
  LocalRankInfo odd;
  odd.hostHash = 7;
  odd.endpoint.numaId = 5;
  blobs[0] = encodeRankBlob(odd, d);
  SystemTopology s2 = assembleSystem(blobs);
  EXPECT_EQ(s2.graph().node(s2.rankNode(0)).cpu.numaId, 0);
}

TEST(TopoSystem, MalformedBlobsNameTheRank) {
  std::vector<std::string> blobs = twoDgxA100Blobs();
  auto expectError = [&](int rank, const std::string& blob, const char* what) {
    std::vector<std::string> b = blobs;
    b[rank] = blob;
    try {
      assembleSystem(b);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("rank " + std::to_string(rank)), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
    }
  };
  expectError(3, "", "truncated header");
  expectError(3, "hello\n1\ncpu:0\nx\n<system version=\"1\"/>", "bad magic");
  expectError(9, "weft-topo 1\nxyz\ncpu:0\nx\n<system version=\"1\"/>", "bad host hash");
  expectError(9, "weft-topo 1\n99\ncpu:zero\nx\n<system version=\"1\"/>",
              "malformed rank endpoint");
  expectError(15, "weft-topo 1\n99\ncpu:0\nx\n<system version=\"1\"><cpu/></system>",
              "missing attribute numaid");
  EXPECT_THROW(Endpoint::parse("gpu:"), Error);
  EXPECT_EQ(Endpoint::parse("gpu:0000:01:00.0").busId, "0000:01:00.0");
  EXPECT_EQ(Endpoint::parse("cpu:-1").numaId, -1);
}

TEST(TopoSystem, OneRanksFailureFailsEveryRankPromptly) {
  const int n = 3;
  char path[] = "/tmp/weft-bad-topo-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char bad[] = "<system version=\"1\">\n<cpu/>\n</system>";
  ASSERT_EQ(write(fd, bad, sizeof(bad) - 1), static_cast<ssize_t>(sizeof(bad) - 1));
  close(fd);
  ScopedEnv file("NCCL_TOPO_FILE", path);
  Discovery good;
  good.topology =
      std::make_shared<const Topology>(readTopologyFile(testing::golden("dgx1-v100.xml")));
  good.xml = writeTopologyXml(*good.topology);
  ThreadAllgather fixed(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      LocalRankInfo me;
      me.rank = r;
      me.nranks = n;
      if (r != 1) me.discovery = std::make_shared<const Discovery>(good);  // rank 1 reads the file
      try {
        buildSystemTopology(me,
                            variableAllgather(r, n, [&, r](void* d, size_t b) { fixed(r, d, b); }),
                            Tuning::fromEnvironment());
      } catch (const Error& e) {
        errors[r] = e.what();
        if (r != 1) {
          EXPECT_EQ(e.code(), Status::kRemoteError);
        }
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(errors[r].find("rank 1 could not describe its host"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find(":2: <cpu>: missing attribute numaid"), std::string::npos)
        << errors[r];
  }
  unlink(path);
}

TEST(TopoSystem, NcclTopoFileReplacesTheProbes) {
  {
    ScopedEnv file("NCCL_TOPO_FILE", testing::golden("dgx-h100.xml"));
    auto d = localDiscovery(Tuning::fromEnvironment());
    EXPECT_EQ(d->source, "NCCL_TOPO_FILE=" + testing::golden("dgx-h100.xml"));
    EXPECT_EQ(d->topology->count(NodeKind::kGpu), 8);
    EXPECT_EQ(d->topology->count(NodeKind::kNvSwitch), 1);
    EXPECT_EQ(localDiscovery(Tuning::fromEnvironment()), d) << "cached";
    LocalRankInfo me;
    SystemTopology s = buildSystemTopology(me, nullptr, Tuning::fromEnvironment());
    EXPECT_EQ(s.graph().count(NodeKind::kGpu), 8);
    EXPECT_NE(s.summary().find("NCCL_TOPO_FILE="), std::string::npos);
  }
  {
    // Two hosts in the file, neither this one: the first host is used.
    ScopedEnv file("NCCL_TOPO_FILE", testing::golden("dgx-a100-x2.xml"));
    auto d = localDiscovery(Tuning::fromEnvironment());
    EXPECT_EQ(d->topology->hostCount(), 1);
    EXPECT_EQ(d->topology->count(NodeKind::kGpu), 8);
    EXPECT_EQ(d->topology->host(0).hostHash, 1u);
  }
  {
    ScopedEnv file("NCCL_TOPO_FILE", "/nonexistent/topology.xml");
    EXPECT_EQ(localDiscovery(Tuning::fromEnvironment())->source, "probe");  // warned, then probed
  }
  {
    char path[] = "/tmp/weft-bad-topo-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    const char bad[] = "<system version=\"1\"><cpu numaid=\"0\">";
    ASSERT_EQ(write(fd, bad, sizeof(bad) - 1), static_cast<ssize_t>(sizeof(bad) - 1));
    close(fd);
    ScopedEnv file("NCCL_TOPO_FILE", path);
    try {
      localDiscovery(Tuning::fromEnvironment());
      ADD_FAILURE() << "a malformed NCCL_TOPO_FILE must fail";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    unlink(path);
  }
}

TEST(TopoSystem, DumpFileIsWrittenByItsRank) {
  char dir[] = "/tmp/weft-dump-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/topo.xml";
  SystemTopology s = assembleSystem(twoDgxA100Blobs());
  {
    ScopedEnv dump("NCCL_TOPO_DUMP_FILE", path);
    ScopedEnv rank("NCCL_TOPO_DUMP_FILE_RANK", "3");
    reportAtInit(s, 0, Tuning::fromEnvironment());
    EXPECT_FALSE(testing::exists(path));
    reportAtInit(s, 3, Tuning::fromEnvironment());
  }
  ASSERT_TRUE(testing::exists(path));
  Topology back = readTopologyFile(path);
  EXPECT_EQ(back.diff(s.graph()), "");
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace weft::topo
