// The reference machines in tests/golden/topologies: node and link counts, known path
// bandwidths, round trips.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "src/topo/xml_reader.h"
#include "src/topo/xml_writer.h"
#include "tests/unit/topo/topo_test_util.h"

namespace weft::topo {
namespace {

Topology load(const std::string& name, LinkRates rates = LinkRates::nominal()) {
  XmlReadOptions o;
  o.rates = rates;
  return readTopologyFile(testing::golden(name), o);
}

struct Counts {
  int hosts, cpus, pciSwitches, gpus, nics, nets, nvswitches, fabrics;
  int pciLinks, netLinks, nvLinks, sysLinks;
};

void expectCounts(const Topology& t, const Counts& c) {
  EXPECT_EQ(t.hostCount(), c.hosts);
  EXPECT_EQ(t.count(NodeKind::kHost), c.hosts);
  EXPECT_EQ(t.count(NodeKind::kCpu), c.cpus);
  EXPECT_EQ(t.count(NodeKind::kPciSwitch), c.pciSwitches);
  EXPECT_EQ(t.count(NodeKind::kGpu), c.gpus);
  EXPECT_EQ(t.count(NodeKind::kNic), c.nics);
  EXPECT_EQ(t.count(NodeKind::kNet), c.nets);
  EXPECT_EQ(t.count(NodeKind::kNvSwitch), c.nvswitches);
  EXPECT_EQ(t.count(NodeKind::kNetSwitch), c.fabrics);
  int nodes =
      c.hosts + c.cpus + c.pciSwitches + c.gpus + c.nics + c.nets + c.nvswitches + c.fabrics;
  EXPECT_EQ(static_cast<int>(t.nodes().size()), nodes);
  EXPECT_EQ(t.countLinks(LinkKind::kPci), c.pciLinks);
  EXPECT_EQ(t.countLinks(LinkKind::kNet), c.netLinks);
  EXPECT_EQ(t.countLinks(LinkKind::kNvLink), c.nvLinks);
  EXPECT_EQ(t.countLinks(LinkKind::kSys), c.sysLinks);
  EXPECT_EQ(static_cast<int>(t.links().size()), c.pciLinks + c.netLinks + c.nvLinks + c.sysLinks);
}

void expectPath(const Topology& t, int a, int b, PathType type, double bw,
                const PathOptions& o = {}) {
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  Path p = t.path(a, b, o);
  EXPECT_EQ(p.type, type) << t.label(a) << " -> " << t.label(b) << ": " << pathTypeName(p.type);
  EXPECT_NEAR(p.bw, bw, 1e-9) << t.label(a) << " -> " << t.label(b);
  Path back = t.path(b, a, o);
  EXPECT_NEAR(back.bw, bw, 1e-9) << "paths are symmetric";
}

void expectRoundTrip(const Topology& t) {
  std::string xml = writeTopologyXml(t);
  Topology back = readTopologyXml(xml);
  EXPECT_EQ(t.diff(back), "") << xml;
  EXPECT_EQ(writeTopologyXml(back), xml);
}

int gpu(const Topology& t, int dev, int host = 0) { return t.findGpu(host, dev); }
int net(const Topology& t, const char* name, int host = 0) { return t.findNet(host, name); }

const int kDgx1[8][8] = {{0, 2, 1, 1, 2, 0, 0, 0}, {2, 0, 1, 2, 0, 1, 0, 0},
                         {1, 1, 0, 2, 0, 0, 2, 0}, {1, 2, 2, 0, 0, 0, 0, 1},
                         {2, 0, 0, 0, 0, 2, 1, 1}, {0, 1, 0, 0, 2, 0, 1, 2},
                         {0, 0, 2, 0, 1, 1, 0, 2}, {0, 0, 0, 1, 1, 2, 2, 0}};

void expectCubeMesh(const Topology& t, int host) {
  for (int i = 0; i < 8; ++i) {
    int lanes = 0;
    for (int j = 0; j < 8; ++j) {
      int l = t.findLink(gpu(t, i, host), gpu(t, j, host), LinkKind::kNvLink);
      EXPECT_EQ(l >= 0 ? t.link(l).count : 0, kDgx1[i][j]) << "gpu" << i << "-gpu" << j;
      lanes += kDgx1[i][j];
    }
    EXPECT_EQ(lanes, 6);
  }
}

TEST(TopoGolden, Dgx1V100) {
  Topology t = load("dgx1-v100.xml");
  expectCounts(t, {1, 2, 4, 8, 4, 4, 0, 0, 16, 4, 16, 1});
  expectCubeMesh(t, 0);
  // Two NVLinks vs one; no direct link: one relay through a GPU (NVB), the widest one.
  expectPath(t, gpu(t, 0), gpu(t, 1), PathType::kNvl, 50);
  expectPath(t, gpu(t, 0), gpu(t, 2), PathType::kNvl, 25);
  expectPath(t, gpu(t, 0), gpu(t, 5), PathType::kNvb, 50);  // via gpu4 (2 + 2 links)
  expectPath(t, gpu(t, 0), gpu(t, 7), PathType::kNvb, 25);  // via gpu3 or gpu4 (a single link)
  EXPECT_EQ(t.path(gpu(t, 0), gpu(t, 5)).nodes[1], gpu(t, 4));
  PathOptions noNvb;
  noNvb.gpuRelay = false;
  expectPath(t, gpu(t, 0), gpu(t, 5), PathType::kSys, 6, noNvb);  // Broadwell QPI
  expectPath(t, gpu(t, 0), net(t, "mlx5_0"), PathType::kPix, 12);
  expectPath(t, gpu(t, 0), net(t, "mlx5_2"), PathType::kSys, 6);
  expectRoundTrip(t);
  // NCCL's own constants: 20 GB/s per V100 link.
  Topology n = load("dgx1-v100.xml", LinkRates::nccl());
  expectPath(n, gpu(n, 0), gpu(n, 1), PathType::kNvl, 40);
  expectPath(n, gpu(n, 0), gpu(n, 2), PathType::kNvl, 20);
  expectPath(n, gpu(n, 0), gpu(n, 5), PathType::kNvb, 40);
}

TEST(TopoGolden, Dgx2) {
  Topology t = load("dgx2.xml");
  expectCounts(t, {1, 2, 12, 16, 8, 8, 1, 0, 36, 8, 16, 1});
  int nvs = t.findNvSwitch(0);
  for (int g : t.find(NodeKind::kGpu)) {
    int l = t.findLink(g, nvs, LinkKind::kNvLink);
    ASSERT_GE(l, 0);
    EXPECT_EQ(t.link(l).count, 6);
    EXPECT_EQ(t.link(l).parts.size(), 6u);  // one link to each switch chip of its baseboard
    EXPECT_DOUBLE_EQ(t.link(l).bw, 150);
  }
  expectPath(t, gpu(t, 0), gpu(t, 1), PathType::kNvl, 150);
  expectPath(t, gpu(t, 0), gpu(t, 15), PathType::kNvl, 150);  // across baseboards
  EXPECT_EQ(t.path(gpu(t, 0), gpu(t, 15)).hops, 2);
  expectPath(t, gpu(t, 0), net(t, "mlx5_0"), PathType::kPix, 12);
  expectPath(t, gpu(t, 0), net(t, "mlx5_1"), PathType::kPxb, 12);
  expectPath(t, gpu(t, 0), net(t, "mlx5_7"), PathType::kSys, 10);
  expectRoundTrip(t);
  Topology n = load("dgx2.xml", LinkRates::nccl());
  expectPath(n, gpu(n, 0), gpu(n, 15), PathType::kNvl, 120);
}

TEST(TopoGolden, DgxA100) {
  Topology t = load("dgx-a100.xml");
  expectCounts(t, {1, 4, 4, 8, 8, 8, 1, 0, 20, 8, 8, 6});
  EXPECT_EQ(t.node(t.node(t.node(gpu(t, 0)).parent).parent).cpu.numaId, 3);
  for (int g : t.find(NodeKind::kGpu))
    EXPECT_EQ(t.link(t.findLink(g, t.findNvSwitch(0), LinkKind::kNvLink)).count, 12);
  expectPath(t, gpu(t, 0), gpu(t, 7), PathType::kNvl, 300);
  expectPath(t, gpu(t, 0), net(t, "mlx5_0"), PathType::kPix, 24);  // PCIe gen4 below HDR 25
  expectPath(t, gpu(t, 0), net(t, "mlx5_7"), PathType::kSys, 16);  // AMD Zen 2 link
  for (int n : t.find(NodeKind::kNet)) EXPECT_EQ(t.node(n).net.speedMbps, 200000);
  expectRoundTrip(t);
  Topology n = load("dgx-a100.xml", LinkRates::nccl());
  expectPath(n, gpu(n, 0), gpu(n, 7), PathType::kNvl, 240);
}

TEST(TopoGolden, DgxH100) {
  Topology t = load("dgx-h100.xml");
  expectCounts(t, {1, 2, 4, 8, 8, 8, 1, 0, 20, 8, 8, 1});
  int l = t.findLink(gpu(t, 3), t.findNvSwitch(0), LinkKind::kNvLink);
  ASSERT_GE(l, 0);
  EXPECT_EQ(t.link(l).count, 18);
  ASSERT_EQ(t.link(l).parts.size(), 4u);
  EXPECT_EQ(t.link(l).parts[0].count, 5);
  EXPECT_EQ(t.link(l).parts[1].count, 4);
  expectPath(t, gpu(t, 0), gpu(t, 7), PathType::kNvl, 450);
  expectPath(t, gpu(t, 0), net(t, "mlx5_0"), PathType::kPix, 48);  // PCIe gen5 below NDR 50
  expectPath(t, gpu(t, 0), net(t, "mlx5_7"), PathType::kSys, 22);  // Sapphire Rapids UPI
  expectRoundTrip(t);
  Topology n = load("dgx-h100.xml", LinkRates::nccl());
  expectPath(n, gpu(n, 0), gpu(n, 7), PathType::kNvl, 18 * 20.6);
}

TEST(TopoGolden, Ndv2TwoNodes) {
  Topology t = load("ndv2-x2.xml");
  expectCounts(t, {2, 4, 0, 16, 2, 2, 0, 1, 18, 2 + 2, 32, 2});
  EXPECT_EQ(t.host(0).hostHash, 1u);
  EXPECT_EQ(t.host(1).hostHash, 2u);
  expectCubeMesh(t, 0);
  expectCubeMesh(t, 1);
  expectPath(t, gpu(t, 0, 0), gpu(t, 1, 0), PathType::kNvl, 50);
  expectPath(t, gpu(t, 0, 0), gpu(t, 0, 1), PathType::kNet, 12.5);  // the one EDR NIC per VM
  expectPath(t, gpu(t, 4, 0), gpu(t, 4, 1), PathType::kNet, 10);    // ... reached over UPI
  expectRoundTrip(t);
}

TEST(TopoGolden, DgxA100TwoNodes) {
  Topology t = load("dgx-a100-x2.xml");
  expectCounts(t, {2, 8, 8, 16, 16, 16, 2, 1, 40, 16 + 16, 16, 12});
  expectPath(t, gpu(t, 0, 0), gpu(t, 5, 0), PathType::kNvl, 300);
  expectPath(t, gpu(t, 0, 0), gpu(t, 0, 1), PathType::kNet, 24);
  expectPath(t, gpu(t, 3, 0), gpu(t, 6, 1), PathType::kNet, 24);  // rail to rail: one fabric
  Path p = t.path(gpu(t, 0, 0), gpu(t, 0, 1));
  EXPECT_EQ(p.hops, 8);  // gpu, switch, nic, port, fabric, port, nic, switch, gpu
  expectRoundTrip(t);
}

TEST(TopoGolden, DgxH100TwoNodes) {
  Topology t = load("dgx-h100-x2.xml");
  expectCounts(t, {2, 4, 8, 16, 16, 16, 2, 1, 40, 16 + 16, 16, 2});
  expectPath(t, gpu(t, 2, 1), gpu(t, 7, 1), PathType::kNvl, 450);
  expectPath(t, gpu(t, 0, 0), gpu(t, 0, 1), PathType::kNet, 48);
  expectRoundTrip(t);
}

TEST(TopoGolden, PcieOnlyEightGpus) {
  Topology t = load("pcie-8gpu.xml");
  expectCounts(t, {1, 2, 4, 8, 1, 1, 0, 0, 13, 1, 0, 1});
  expectPath(t, gpu(t, 0), gpu(t, 1), PathType::kPix, 12);
  expectPath(t, gpu(t, 0), gpu(t, 2), PathType::kPhb, 12);
  expectPath(t, gpu(t, 0), gpu(t, 4), PathType::kSys, 10);
  expectPath(t, gpu(t, 7), net(t, "eth2"), PathType::kSys, 10);
  EXPECT_EQ(t.node(net(t, "eth2")).net.linkLayer, "");
  expectRoundTrip(t);
}

TEST(TopoGolden, ThisBuildMachine) {
  Topology t = load("build-vm.xml");
  EXPECT_EQ(t.hostCount(), 1);
  EXPECT_EQ(t.host(0).cores, 2);
  EXPECT_EQ(t.host(0).packages, 1);
  EXPECT_EQ(t.count(NodeKind::kCpu), 1);
  EXPECT_EQ(t.count(NodeKind::kGpu), 0);
  ASSERT_GE(net(t, "eth0"), 0);
  expectPath(t, t.findCpu(0, 0), net(t, "eth0"), PathType::kPhb, 1.25);  // speed unknown: 10 Gb/s
  expectRoundTrip(t);
}

TEST(TopoGolden, EveryFileIsNcclReadable) {
  // What NCCL's hand-written parser needs: no declaration, quoted values, spaces only.
  for (const char* f : {"dgx1-v100.xml", "dgx2.xml", "dgx-a100.xml", "dgx-h100.xml", "ndv2-x2.xml",
                        "dgx-a100-x2.xml", "dgx-h100-x2.xml", "pcie-8gpu.xml", "build-vm.xml"}) {
    std::string text = testing::slurp(testing::golden(f));
    ASSERT_FALSE(text.empty()) << f;
    EXPECT_EQ(text.find("<?xml"), std::string::npos) << f;
    EXPECT_EQ(text.find('\t'), std::string::npos) << f;
    EXPECT_EQ(text.find(" />"), std::string::npos) << f;
    EXPECT_NE(text.find("<system version=\"1\">"), std::string::npos) << f;
  }
}

}  // namespace
}  // namespace weft::topo
