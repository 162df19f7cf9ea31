// The graph model: building, canonical order, derived links, NCCL's path rules.
#include "src/topo/topology.h"

#include <gtest/gtest.h>

#include "src/common/error.h"

namespace weft::topo {
namespace {

int addCpu(Topology& t, int host, int numa, const std::string& vendor = "GenuineIntel",
           int family = 6, int model = 85) {
  Node n;
  n.kind = NodeKind::kCpu;
  n.host = host;
  n.parent = t.hostNode(host);
  n.cpu.numaId = numa;
  n.cpu.arch = "x86_64";
  n.cpu.vendor = vendor;
  n.cpu.familyId = family;
  n.cpu.modelId = model;
  return t.addNode(n);
}

int addPci(Topology& t, int parent, NodeKind kind, const std::string& busId, double bw) {
  Node n;
  n.kind = kind;
  n.host = t.node(parent).host;
  n.parent = parent;
  n.pci.busId = busId;
  n.pci.classCode = kind == NodeKind::kGpu   ? "0x030200"
                    : kind == NodeKind::kNic ? "0x020700"
                                             : "0x060400";
  int i = t.addNode(n);
  Link l;
  l.a = i;
  l.b = parent;
  l.kind = LinkKind::kPci;
  l.bw = bw;
  t.addLink(l);
  return i;
}

void nvlink(Topology& t, int a, int b, int count) {
  Link l;
  l.a = a;
  l.b = b;
  l.kind = LinkKind::kNvLink;
  l.count = count;
  l.bw = 25.0 * count;
  t.addLink(l);
}

int findGpuByBus(const Topology& t, const std::string& bus) { return t.findBusId(0, bus); }

TEST(TopoNames, BusIdNormalisation) {
  EXPECT_EQ(normalizeBusId("00000000:06:00.0"), "0000:06:00.0");
  EXPECT_EQ(normalizeBusId("0000:06:00.0"), "0000:06:00.0");
  EXPECT_EQ(normalizeBusId("0000:AB:1F.7"), "0000:ab:1f.7");
  EXPECT_EQ(normalizeBusId("06:00.0"), "0000:06:00.0");
  EXPECT_EQ(normalizeBusId("10000:01:00.0"), "10000:01:00.0");      // VMD domains
  EXPECT_EQ(normalizeBusId("fffffff:ffff:ff"), "fffffff:ffff:ff");  // NVML's hidden placeholder
  EXPECT_EQ(normalizeBusId("not a bus id"), "not a bus id");
  EXPECT_EQ(normalizeBusId(""), "");
}

TEST(TopoNames, PciClasses) {
  EXPECT_TRUE(isGpuClass("0x030200"));
  EXPECT_TRUE(isGpuClass("0x030000"));
  EXPECT_TRUE(isNicClass("0x020700"));
  EXPECT_TRUE(isInfinibandClass("0x020700"));
  EXPECT_FALSE(isInfinibandClass("0x020000"));
  EXPECT_TRUE(isNvSwitchClass("0x068000"));
  EXPECT_TRUE(isCpuClass("0x068001"));
  EXPECT_FALSE(isGpuClass("0x060400"));
}

TEST(TopoRates, NcclModelAndNominal) {
  EXPECT_DOUBLE_EQ(pcieBandwidth("8.0 GT/s PCIe", 16), 12.0);
  EXPECT_DOUBLE_EQ(pcieBandwidth("8 GT/s", 16), 12.0);
  EXPECT_DOUBLE_EQ(pcieBandwidth("16 GT/s", 16), 24.0);
  EXPECT_DOUBLE_EQ(pcieBandwidth("16.0 GT/s PCIe", 16), 24.0);
  EXPECT_DOUBLE_EQ(pcieBandwidth("32.0 GT/s PCIe", 16), 48.0);
  EXPECT_DOUBLE_EQ(pcieBandwidth("16.0 GT/s PCIe", 8), 12.0);
  EXPECT_DOUBLE_EQ(pcieBandwidth("", 0), 12.0);  // unknown: gen3 x16, like NCCL
  EXPECT_DOUBLE_EQ(netBandwidth(100000), 12.5);
  EXPECT_DOUBLE_EQ(netBandwidth(200000), 25.0);
  EXPECT_DOUBLE_EQ(netBandwidth(400000), 50.0);
  EXPECT_DOUBLE_EQ(netBandwidth(-1), 1.25);  // NCCL: unknown speed counts as 10 Gb/s
  LinkRates nominal = LinkRates::nominal(), nccl = LinkRates::nccl();
  EXPECT_DOUBLE_EQ(nominal.nvlinkPerLink(70) * 6, 150.0);
  EXPECT_DOUBLE_EQ(nominal.nvlinkPerLink(80) * 12, 300.0);
  EXPECT_DOUBLE_EQ(nominal.nvlinkPerLink(90) * 18, 450.0);
  EXPECT_DOUBLE_EQ(nccl.nvlinkPerLink(70), 20.0);
  EXPECT_DOUBLE_EQ(nccl.nvlinkPerLink(90), 20.6);
  EXPECT_EQ(LinkRates::byName("nccl").name, "nccl");
  EXPECT_THROW(LinkRates::byName("fast"), Error);
  CpuInfo c;
  c.arch = "x86_64";
  c.vendor = "GenuineIntel";
  c.familyId = 6;
  c.modelId = 79;
  EXPECT_DOUBLE_EQ(interCpuBandwidth(c), 6.0);  // Broadwell QPI
  c.modelId = 85;
  EXPECT_DOUBLE_EQ(interCpuBandwidth(c), 10.0);  // Skylake UPI
  c.modelId = 143;
  EXPECT_DOUBLE_EQ(interCpuBandwidth(c), 22.0);  // Sapphire Rapids
  c.vendor = "AuthenticAMD";
  c.familyId = 23;
  EXPECT_DOUBLE_EQ(interCpuBandwidth(c), 16.0);  // Zen 2
  c.familyId = 25;
  EXPECT_DOUBLE_EQ(interCpuBandwidth(c), 24.0);  // Zen 3/4
}

// Two sockets, a PCIe switch with two GPUs under socket 0, a GPU straight under socket 1, a NIC.
class SmallBox : public ::testing::Test {
 protected:
  void SetUp() override {
    int h = t.addHost(HostInfo{});
    cpu0 = addCpu(t, h, 0);
    cpu1 = addCpu(t, h, 1);
    sw = addPci(t, cpu0, NodeKind::kPciSwitch, "0000:10:00.0", 24);
    g0 = addPci(t, sw, NodeKind::kGpu, "0000:11:00.0", 24);
    g1 = addPci(t, sw, NodeKind::kGpu, "0000:12:00.0", 24);
    g2 = addPci(t, cpu1, NodeKind::kGpu, "0000:81:00.0", 12);
    nic = addPci(t, sw, NodeKind::kNic, "0000:13:00.0", 24);
    Node net;
    net.kind = NodeKind::kNet;
    net.parent = nic;
    net.net.name = "mlx5_0";
    net.net.speedMbps = 200000;
    int n = t.addNode(net);
    Link l;
    l.a = nic;
    l.b = n;
    l.kind = LinkKind::kNet;
    l.bw = 25;
    t.addLink(l);
    t.finalize();
    // finalize() reorders; look nodes up again.
    cpu0 = t.findCpu(0, 0);
    cpu1 = t.findCpu(0, 1);
    g0 = findGpuByBus(t, "0000:11:00.0");
    g1 = findGpuByBus(t, "0000:12:00.0");
    g2 = findGpuByBus(t, "0000:81:00.0");
    sw = t.findBusId(0, "0000:10:00.0");
    net0 = t.findNet(0, "mlx5_0");
  }
  Topology t;
  int cpu0, cpu1, sw, g0, g1, g2, nic, net0;
};

TEST_F(SmallBox, CountsAndDerivedLinks) {
  EXPECT_EQ(t.hostCount(), 1);
  EXPECT_EQ(t.count(NodeKind::kHost), 1);
  EXPECT_EQ(t.count(NodeKind::kCpu), 2);
  EXPECT_EQ(t.count(NodeKind::kGpu), 3);
  EXPECT_EQ(t.count(NodeKind::kNet), 1);
  EXPECT_EQ(t.countLinks(LinkKind::kSys), 1);  // added by finalize()
  int sys = t.findLink(cpu0, cpu1, LinkKind::kSys);
  ASSERT_GE(sys, 0);
  EXPECT_TRUE(t.link(sys).derived);
  EXPECT_DOUBLE_EQ(t.link(sys).bw, 10.0);
  // finalize() is idempotent.
  Topology copy = t;
  copy.finalize();
  EXPECT_EQ(t.diff(copy), "");
}

TEST_F(SmallBox, CanonicalOrderIsDepthFirst) {
  EXPECT_EQ(t.node(0).kind, NodeKind::kHost);
  for (size_t i = 1; i < t.nodes().size(); ++i) {
    int p = t.node(static_cast<int>(i)).parent;
    EXPECT_LT(p, static_cast<int>(i)) << "parents come before children";
  }
  EXPECT_EQ(t.children(t.hostNode(0)).size(), 2u);
}

TEST_F(SmallBox, PathTypesFollowNccl) {
  Path p = t.path(g0, g1);
  EXPECT_EQ(p.type, PathType::kPix);
  EXPECT_EQ(p.hops, 2);
  EXPECT_DOUBLE_EQ(p.bw, 24.0);
  EXPECT_EQ(p.nodes, (std::vector<int>{g0, sw, g1}));
  p = t.path(g0, g2);
  EXPECT_EQ(p.type, PathType::kSys);
  EXPECT_DOUBLE_EQ(p.bw, 10.0);  // the UPI link
  p = t.path(g0, cpu0);
  EXPECT_EQ(p.type, PathType::kPhb);
  p = t.path(g0, net0);
  EXPECT_EQ(p.type, PathType::kPix);  // NIC -> port is local, like NCCL's GPU -> NET paths
  EXPECT_DOUBLE_EQ(p.bw, 24.0);
  p = t.path(g2, net0);
  EXPECT_EQ(p.type, PathType::kSys);
  p = t.path(g0, g0);
  EXPECT_EQ(p.type, PathType::kLoc);
  EXPECT_EQ(p.hops, 0);
}

TEST(TopoPaths, GpuRelaysOneNvLinkHop) {
  // g0 =2= g1 =2= g2, plus g0 -1- g2; all under one CPU through PCIe.
  Topology t;
  int h = t.addHost({});
  int cpu = addCpu(t, h, 0);
  int g0 = addPci(t, cpu, NodeKind::kGpu, "0000:01:00.0", 12);
  int g1 = addPci(t, cpu, NodeKind::kGpu, "0000:02:00.0", 12);
  int g2 = addPci(t, cpu, NodeKind::kGpu, "0000:03:00.0", 12);
  int g3 = addPci(t, cpu, NodeKind::kGpu, "0000:04:00.0", 12);
  nvlink(t, g0, g1, 2);
  nvlink(t, g1, g2, 2);
  nvlink(t, g2, g3, 2);
  t.finalize();
  g0 = findGpuByBus(t, "0000:01:00.0");
  g2 = findGpuByBus(t, "0000:03:00.0");
  g3 = findGpuByBus(t, "0000:04:00.0");
  Path p = t.path(g0, g2);
  EXPECT_EQ(p.type, PathType::kNvb);
  EXPECT_DOUBLE_EQ(p.bw, 50.0);
  EXPECT_EQ(p.hops, 2);
  // Two relays are not allowed: g0 -> g3 goes through the CPU.
  p = t.path(g0, g3);
  EXPECT_EQ(p.type, PathType::kPhb);
  EXPECT_DOUBLE_EQ(p.bw, 12.0);
  PathOptions noNvb;
  noNvb.gpuRelay = false;
  p = t.path(g0, g2, noNvb);
  EXPECT_EQ(p.type, PathType::kPhb);
}

TEST(TopoPaths, WidestOfTheShortest) {
  // Two 2-hop routes from a to c: through b1 (10) and b2 (40); BFS keeps the wider one. A 3-hop
  // route of 100 loses: NCCL prefers fewer hops.
  Topology t;
  int h = t.addHost({});
  int cpu = addCpu(t, h, 0);
  int a = addPci(t, cpu, NodeKind::kPciSwitch, "0000:01:00.0", 100);
  int b1 = addPci(t, a, NodeKind::kPciSwitch, "0000:02:00.0", 10);
  int b2 = addPci(t, a, NodeKind::kPciSwitch, "0000:03:00.0", 40);
  Node c;
  c.kind = NodeKind::kPciSwitch;
  c.parent = b1;
  c.pci.busId = "0000:04:00.0";
  int ci = t.addNode(c);
  Link l;
  l.a = ci;
  l.b = b1;
  l.bw = 100;
  t.addLink(l);
  l.b = b2;
  l.bw = 100;
  t.addLink(l);
  t.finalize();
  int ai = t.findBusId(0, "0000:01:00.0");
  ci = t.findBusId(0, "0000:04:00.0");
  Path p = t.path(ai, ci);
  EXPECT_EQ(p.hops, 2);
  EXPECT_DOUBLE_EQ(p.bw, 40.0);
  EXPECT_EQ(p.type, PathType::kPxb);
}

TEST(TopoPaths, NetworkFabricJoinsHostsOnly) {
  Topology t;
  for (int h = 0; h < 2; ++h) {
    HostInfo info;
    info.hostHash = 100 + h;
    t.addHost(info);
    int cpu = addCpu(t, h, 0);
    int g = addPci(t, cpu, NodeKind::kGpu, "0000:01:00.0", 24);
    (void)g;
    for (int k = 0; k < 2; ++k) {
      int nic = addPci(t, cpu, NodeKind::kNic, k ? "0000:03:00.0" : "0000:02:00.0", 24);
      Node net;
      net.kind = NodeKind::kNet;
      net.host = h;
      net.parent = nic;
      net.net.name = "mlx5_" + std::to_string(k);
      net.net.speedMbps = 100000;
      net.net.linkLayer = "IB";
      int n = t.addNode(net);
      Link l;
      l.a = nic;
      l.b = n;
      l.kind = LinkKind::kNet;
      l.bw = 12.5;
      t.addLink(l);
    }
  }
  t.finalize();
  EXPECT_EQ(t.count(NodeKind::kNetSwitch), 1);
  EXPECT_EQ(t.countLinks(LinkKind::kNet), 4 + 4);
  int a = t.findBusId(0, "0000:01:00.0"), b = t.findBusId(1, "0000:01:00.0");
  Path p = t.path(a, b);
  EXPECT_EQ(p.type, PathType::kNet);
  EXPECT_DOUBLE_EQ(p.bw, 12.5);
  // Two NICs of one host never talk through the fabric.
  int n0 = t.findBusId(0, "0000:02:00.0"), n1 = t.findBusId(0, "0000:03:00.0");
  p = t.path(n0, n1);
  EXPECT_EQ(p.type, PathType::kPhb);
  for (int n : p.nodes) EXPECT_NE(t.node(n).kind, NodeKind::kNetSwitch);
  EXPECT_EQ(t.label(b), "h1/gpu 0000:01:00.0");
  // Appending a host of another topology copies its nodes and explicit links only.
  Topology one;
  one.appendHost(t, 1);
  one.finalize();
  EXPECT_EQ(one.hostCount(), 1);
  EXPECT_EQ(one.count(NodeKind::kNetSwitch), 0);
  EXPECT_EQ(one.count(NodeKind::kNet), 2);
  EXPECT_EQ(one.host(0).hostHash, 101u);
}

TEST(TopoModel, DiffNamesTheDifference) {
  Topology a;
  a.addHost({});
  addCpu(a, 0, 0);
  a.finalize();
  Topology b = a;
  EXPECT_EQ(a.diff(b), "");
  b.mutableNode(1).cpu.affinity = "ff";
  EXPECT_NE(a.diff(b).find("cpu attributes"), std::string::npos);
  Topology c = a;
  c.mutableNode(1).extra.push_back({"x", "1"});
  EXPECT_NE(a.diff(c).find("extra attributes"), std::string::npos);
  Topology d;
  EXPECT_NE(a.diff(d).find("host count"), std::string::npos);
}

TEST(TopoModel, RejectsBadIndices) {
  Topology t;
  Node n;
  n.kind = NodeKind::kCpu;
  EXPECT_THROW(t.addNode(n), Error);  // no host yet
  t.addHost({});
  Link l;
  l.a = 0;
  l.b = 7;
  EXPECT_THROW(t.addLink(l), Error);
  EXPECT_THROW(t.path(0, 99), Error);
}

}  // namespace
}  // namespace weft::topo
