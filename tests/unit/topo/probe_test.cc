// Probes: this machine against lstopo and sysfs, hwloc synthetic machines, a fake sysfs tree, the
// InfiniBand rate table, and the graph built from hand-made GPU / HCA probe results.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "src/common/error.h"
#include "src/common/host_id.h"
#include "src/topo/discover.h"
#include "src/topo/probes/cuda_probe.h"
#include "src/topo/probes/hwloc_probe.h"
#include "src/topo/probes/ibverbs_probe.h"
#include "src/topo/probes/nvml_probe.h"
#include "src/topo/probes/sysfs_net_probe.h"
#include "src/topo/xml_reader.h"
#include "src/topo/xml_writer.h"
#include "tests/unit/topo/topo_test_util.h"

namespace weft::topo {
namespace {

// Lines printed by a command, or -1 when it cannot run.
int commandLines(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return -1;
  int lines = 0;
  char buf[512];
  while (fgets(buf, sizeof(buf), p)) ++lines;
  int rc = pclose(p);
  return rc == 0 ? lines : -1;
}

std::set<std::string> dirEntries(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

TEST(TopoProbe, HwlocMatchesLstopoOnThisMachine) {
  probe::HwlocResult r;
  probe::Report rep;
  ASSERT_TRUE(probe::probeHwloc({}, &r, &rep)) << rep.detail;
  EXPECT_TRUE(rep.available);
  EXPECT_GT(r.host.cores, 0);
  EXPECT_GE(r.host.pus, r.host.cores);
  EXPECT_GE(r.host.packages, 1);
  EXPECT_EQ(static_cast<int>(r.numas.size()), r.host.numaNodes);
  int pus = 0;
  for (const auto& n : r.numas) pus += static_cast<int>(n.pus.size());
  EXPECT_EQ(pus, r.host.pus);
  EXPECT_EQ(r.host.pus, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  int numaDirs = 0;
  for (const auto& e : dirEntries("/sys/devices/system/node"))
    numaDirs +=
        e.rfind("node", 0) == 0 && e.size() > 4 && isdigit(static_cast<unsigned char>(e[4]));
  if (numaDirs > 0) {
    EXPECT_EQ(r.host.numaNodes, numaDirs);
  }
  int cores = commandLines("lstopo-no-graphics --only core");
  int numas = commandLines("lstopo-no-graphics --only numanode");
  int packages = commandLines("lstopo-no-graphics --only package");
  if (cores < 0) GTEST_SKIP() << "lstopo-no-graphics (package hwloc) not installed";
  EXPECT_EQ(r.host.cores, cores);
  EXPECT_EQ(r.host.numaNodes, numas);
  EXPECT_EQ(r.host.packages, packages);
  EXPECT_EQ(r.host.pus, commandLines("lstopo-no-graphics --only pu"));
  EXPECT_EQ(static_cast<int>(r.host.pciDevices.size()),
            commandLines("lstopo-no-graphics --whole-io --only pcidev"));
}

TEST(TopoProbe, SysfsNetMatchesSysClassNet) {
  std::vector<probe::NetInterface> ifs;
  probe::Report rep;
  ASSERT_TRUE(probe::probeSysfsNet("/sys", &ifs, &rep)) << rep.detail;
  std::set<std::string> names;
  for (const auto& i : ifs) names.insert(i.name);
  EXPECT_EQ(names, dirEntries("/sys/class/net"));
  for (const auto& i : ifs) {
    if (i.name == "lo") {
      EXPECT_TRUE(i.loopback);
    }
    std::string flags = probe::readFirstLine("/sys/class/net/" + i.name + "/flags");
    EXPECT_EQ(i.up, (std::strtoul(flags.c_str(), nullptr, 16) & 1) != 0) << i.name;
  }
  // The discovered graph has a network port for each interface that is up and not loopback.
  DiscoverOptions o;
  o.probes = parseProbeSelection("hwloc,sysfs");
  Discovery d = discoverHost(o);
  std::set<std::string> ports;
  for (int n : d.topology->find(NodeKind::kNet)) ports.insert(d.topology->node(n).net.name);
  std::set<std::string> usable;
  for (const auto& i : ifs)
    if (i.up && !i.loopback) usable.insert(i.name);
  EXPECT_EQ(ports, usable);
  for (const auto& i : ifs) {
    if (!i.up || i.loopback || i.busId.empty()) continue;
    int n = d.topology->findNet(0, i.name);
    EXPECT_EQ(d.topology->node(d.topology->node(n).parent).pci.busId, i.busId) << i.name;
  }
}

TEST(TopoProbe, DiscoveryOfThisMachineRoundTrips) {
  Discovery d = discoverHost({});
  const Topology& t = *d.topology;
  EXPECT_EQ(t.hostCount(), 1);
  EXPECT_EQ(t.host(0).hostHash, weft::hostHash(DiscoverOptions{}.hostId));
  EXPECT_EQ(t.count(NodeKind::kCpu), t.host(0).numaNodes);
  EXPECT_EQ(d.source, "probe");
  ASSERT_EQ(d.reports.size(), 5u);
  for (const auto& r : d.reports) EXPECT_FALSE(r.detail.empty()) << r.name;
  Topology back = readTopologyXml(d.xml);
  EXPECT_EQ(t.diff(back), "") << d.xml;
  int numa = currentNumaNode(t, 0);
  EXPECT_GE(t.findCpu(0, numa), 0) << "this thread runs on a NUMA domain of the graph";
}

TEST(TopoProbe, AbsentLibrariesAreReportedNotFatal) {
  std::vector<probe::NvmlGpu> gpus;
  probe::Report rep;
  bool ok = probe::probeNvml(&gpus, &rep);
  EXPECT_TRUE(rep.ran);
  EXPECT_FALSE(rep.detail.empty());
  if (!ok) {
    EXPECT_TRUE(gpus.empty());
  }
  std::vector<probe::CudaGpu> cuda;
  probe::Report crep;
  ok = probe::probeCuda(&cuda, &crep);
  EXPECT_FALSE(crep.detail.empty());
  if (!ok) {
    EXPECT_TRUE(cuda.empty());
  }
  std::vector<probe::IbDevice> hcas;
  probe::Report irep;
  probe::probeIbverbs("/sys", &hcas, &irep);
  EXPECT_FALSE(irep.detail.empty());
  for (const auto& h : hcas) EXPECT_FALSE(h.name.empty());
  // With every probe off there is still a host with its CPUs (from sysfs).
  DiscoverOptions o;
  o.probes = parseProbeSelection("none");
  Discovery d = discoverHost(o);
  EXPECT_GE(d.topology->count(NodeKind::kCpu), 1);
  EXPECT_EQ(d.topology->count(NodeKind::kNet), 0);
  EXPECT_NE(probeSummary(d.reports).find("disabled by WEFT_TOPO_PROBES"), std::string::npos);
}

TEST(TopoProbe, ProbeSelection) {
  ProbeSelection all;
  EXPECT_EQ(parseProbeSelection(""), all);
  EXPECT_EQ(parseProbeSelection("all"), all);
  ProbeSelection s = parseProbeSelection("hwloc, sysfs");
  EXPECT_TRUE(s.hwloc && s.sysfsNet);
  EXPECT_FALSE(s.ibverbs || s.nvml || s.cuda);
  s = parseProbeSelection("^nvml,cuda");
  EXPECT_TRUE(s.hwloc && s.sysfsNet && s.ibverbs);
  EXPECT_FALSE(s.nvml || s.cuda);
  EXPECT_THROW(parseProbeSelection("hwloc,gpu"), Error);
}

TEST(TopoProbe, HwlocSyntheticMachine) {
  DiscoverOptions o;
  o.probes = parseProbeSelection("hwloc");
  o.hwlocSynthetic = "pack:2 numa:2 l3:1 core:4 pu:2";
  Discovery d = discoverHost(o);
  const Topology& t = *d.topology;
  EXPECT_EQ(t.host(0).packages, 2);
  EXPECT_EQ(t.host(0).numaNodes, 4);
  EXPECT_EQ(t.host(0).cores, 16);
  EXPECT_EQ(t.host(0).pus, 32);
  ASSERT_EQ(t.count(NodeKind::kCpu), 4);
  EXPECT_EQ(t.countLinks(LinkKind::kSys), 6);
  const Node& cpu1 = t.node(t.findCpu(0, 1));
  EXPECT_EQ(cpu1.cpu.cores, 4);
  EXPECT_EQ(cpu1.cpu.pus, 8);
  EXPECT_EQ(cpu1.cpu.affinity, "0000ff00");
  EXPECT_EQ(probe::parseCpuMask(cpu1.cpu.affinity),
            (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  probe::HwlocOptions bad;
  bad.synthetic = "not a machine";
  probe::HwlocResult r;
  probe::Report rep;
  EXPECT_FALSE(probe::probeHwloc(bad, &r, &rep));
  EXPECT_NE(rep.detail.find("synthetic"), std::string::npos);
}

TEST(TopoProbe, CpuMasks) {
  EXPECT_EQ(probe::cpuMaskText({0, 1}), "00000003");
  EXPECT_EQ(probe::cpuMaskText({0, 33}), "00000002,00000001");
  EXPECT_EQ(probe::parseCpuMask("00000002,00000001"), (std::vector<int>{0, 33}));
  EXPECT_EQ(probe::parseCpuMask("ffffff00,00000000,00000000").size(), 24u);
  EXPECT_EQ(probe::parseCpuMask("3"), (std::vector<int>{0, 1}));
  EXPECT_TRUE(probe::parseCpuMask("zz,qq").empty());  // junk from a file is not a crash
  EXPECT_EQ(probe::busIdFromDevicePath("/sys/devices/pci0000:00/0000:00:03.0/virtio2"),
            "0000:00:03.0");
  EXPECT_EQ(probe::busIdFromDevicePath("/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.1/net"),
            "0000:03:00.1");
  EXPECT_EQ(probe::busIdFromDevicePath("/sys/devices/virtual/net/lo"), "");
}

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root = tmpl;
    mk("devices/pci0000:00/0000:00:02.0/0000:03:00.0/net");
    put("devices/pci0000:00/0000:00:02.0/0000:03:00.0/class", "0x020700");
    put("devices/pci0000:00/0000:00:02.0/0000:03:00.0/numa_node", "1");
    mk("devices/virtual/net");
    mk("class/net");
    iface("ib0", "0x1003", "32", "200000", "devices/pci0000:00/0000:00:02.0/0000:03:00.0");
    iface("veth7", "0x1003", "1", "10000", "");
    iface("lo", "0x9", "772", "", "");
    iface("eth9", "0x1002", "1", "", "devices/pci0000:00/0000:00:02.0/0000:03:00.0");
  }
  void TearDown() override { std::system(("rm -rf " + root).c_str()); }
  void mk(const std::string& rel) { std::system(("mkdir -p " + root + "/" + rel).c_str()); }
  void put(const std::string& rel, const std::string& text) {
    std::ofstream(root + "/" + rel) << text << "\n";
  }
  void iface(const std::string& name, const char* flags, const char* type, const char* speed,
             const std::string& device) {
    mk("class/net/" + name);
    put("class/net/" + name + "/flags", flags);
    put("class/net/" + name + "/type", type);
    if (*speed) put("class/net/" + name + "/speed", speed);
    put("class/net/" + name + "/mtu", "4092");
    put("class/net/" + name + "/operstate", "up");
    if (!device.empty()) {
      std::string link = root + "/class/net/" + name + "/device";
      EXPECT_EQ(symlink(("../../../" + device).c_str(), link.c_str()), 0);
    }
  }
  std::string root;
};

TEST_F(FakeSysfs, InterfacesWithTheirPciDeviceAndNuma) {
  std::vector<probe::NetInterface> ifs;
  probe::Report rep;
  ASSERT_TRUE(probe::probeSysfsNet(root, &ifs, &rep));
  ASSERT_EQ(ifs.size(), 4u);
  const auto& ib = ifs[1];  // sorted: eth9, ib0, lo, veth7
  EXPECT_EQ(ib.name, "ib0");
  EXPECT_EQ(ib.linkLayer, "IB");
  EXPECT_EQ(ib.speedMbps, 200000);
  EXPECT_EQ(ib.busId, "0000:03:00.0");
  EXPECT_EQ(ib.classCode, "0x020700");
  EXPECT_EQ(ib.numa, 1);
  EXPECT_EQ(ib.mtu, 4092);
  EXPECT_TRUE(ib.up);
  EXPECT_FALSE(ifs[0].up);  // eth9: flags without IFF_UP
  EXPECT_EQ(ifs[0].speedMbps, -1);
  EXPECT_TRUE(ifs[2].loopback);
  EXPECT_TRUE(ifs[3].busId.empty());
  EXPECT_EQ(rep.detail, "4 interface(s), 2 up and not loopback");
  EXPECT_FALSE(probe::probeSysfsNet(root + "/nope", &ifs, &rep));
}

TEST(TopoProbe, InfinibandRates) {
  EXPECT_EQ(probe::ibPortSpeedMbps(32, 2), 100000);   // EDR 4x
  EXPECT_EQ(probe::ibPortSpeedMbps(64, 2), 200000);   // HDR 4x
  EXPECT_EQ(probe::ibPortSpeedMbps(128, 2), 400000);  // NDR 4x
  EXPECT_EQ(probe::ibPortSpeedMbps(16, 2), 56000);    // FDR 4x
  int lanes = 0;
  EXPECT_EQ(probe::ibPortSpeedMbps(64, 16, &lanes), 100000);  // HDR 2x
  EXPECT_EQ(lanes, 2);
  EXPECT_EQ(probe::ibPortSpeedMbps(0, 0), 2500);
}

// A made-up machine with GPUs and an HCA, as the NVML / ibverbs / sysfs probes would see it.
ProbeResults fakeMachine() {
  ProbeResults r;
  r.haveHwloc = true;
  r.hwloc.host.packages = 2;
  r.hwloc.host.cores = 8;
  r.hwloc.host.pus = 8;
  r.hwloc.host.numaNodes = 2;
  r.hwloc.arch = "x86_64";
  r.hwloc.vendor = "GenuineIntel";
  r.hwloc.familyId = 6;
  r.hwloc.modelId = 143;
  r.hwloc.numas = {{0, {0, 1, 2, 3}, 4, 0}, {1, {4, 5, 6, 7}, 4, 0}};
  auto fn = [](const char* bus, const char* cls, const char* vendor, const char* parent, int numa,
               bool bridge) {
    probe::PciFunction f;
    f.info.busId = bus;
    f.info.classCode = cls;
    f.info.vendor = vendor;
    f.info.linkSpeed = "32.0 GT/s PCIe";
    f.info.linkWidth = 16;
    f.parentBusId = parent;
    f.numa = numa;
    f.bridge = bridge;
    return f;
  };
  r.hwloc.pci = {fn("0000:10:00.0", "0x060400", "0x1000", "", 0, true),
                 fn("0000:11:00.0", "0x030200", "0x10de", "0000:10:00.0", 0, false),
                 fn("0000:12:00.0", "0x030200", "0x10de", "0000:10:00.0", 0, false),
                 fn("0000:13:00.0", "0x020700", "0x15b3", "0000:10:00.0", 0, false),
                 fn("0000:81:00.0", "0x030200", "0x10de", "", 1, false),
                 fn("0000:82:00.0", "0x030000", "0x1a03", "", 1, false)};  // a BMC's VGA
  r.haveIb = true;
  probe::IbDevice hca;
  hca.name = "mlx5_0";
  hca.busId = "0000:13:00.0";
  hca.guid = "0x0000000000000abc";
  hca.ports = {{1, 4, 200000, 4, "IB", "fe80:0000:0000:0000:0000:0000:0000:0abc", 7, 4096},
               {2, 1, 0, 0, "IB", "", 0, 0}};  // port 2 is down
  r.ib.push_back(hca);
  r.haveNet = true;
  probe::NetInterface eth;
  eth.name = "eth0";
  eth.up = true;
  eth.linkLayer = "Ethernet";
  eth.speedMbps = 25000;
  r.interfaces.push_back(eth);
  r.haveNvml = true;
  auto gpu = [](int index, const char* bus, std::vector<probe::NvLinkPeer> links) {
    probe::NvmlGpu g;
    g.index = index;
    g.busId = bus;
    g.name = "NVIDIA H100 80GB HBM3";
    g.sm = 90;
    g.nvlinks = std::move(links);
    return g;
  };
  r.nvml = {gpu(0, "0000:11:00.0",
                {{0, "0000:12:00.0", 0}, {1, "0000:12:00.0", 0}, {2, "0000:e1:00.0", 2}}),
            gpu(1, "0000:12:00.0",
                {{0, "0000:11:00.0", 0},
                 {1, "0000:11:00.0", 0},
                 {2, "0000:e1:00.0", 2},
                 {3, "0000:e2:00.0", 2}}),
            gpu(2, "0000:81:00.0", {{0, "0000:e1:00.0", 2}})};
  return r;
}

TEST(TopoProbe, GraphFromGpuAndHcaProbes) {
  DiscoverOptions o;
  o.hostHash = 42;
  Topology t = buildHostTopology(fakeMachine(), o);
  EXPECT_EQ(t.host(0).hostHash, 42u);
  ASSERT_EQ(t.count(NodeKind::kGpu), 3);  // not the VGA
  int g0 = t.findGpu(0, 0), g1 = t.findGpu(0, 1), g2 = t.findGpu(0, 2);
  EXPECT_EQ(t.node(g0).gpu.sm, 90);
  EXPECT_EQ(t.node(g0).gpu.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.node(t.node(g0).parent).kind, NodeKind::kPciSwitch);
  EXPECT_EQ(t.node(t.node(g2).parent).cpu.numaId, 1);
  int l = t.findLink(g0, g1, LinkKind::kNvLink);
  ASSERT_GE(l, 0);
  EXPECT_EQ(t.link(l).count, 2);
  EXPECT_DOUBLE_EQ(t.link(l).bw, 50);
  int nvs = t.findNvSwitch(0);
  ASSERT_GE(nvs, 0);
  l = t.findLink(g1, nvs, LinkKind::kNvLink);
  ASSERT_GE(l, 0);
  EXPECT_EQ(t.link(l).count, 2);
  EXPECT_EQ(t.link(l).parts.size(), 2u);
  // The HCA's active port is a network port (dev 0: InfiniBand first), the virtual eth0 another.
  int ib = t.findNet(0, "mlx5_0");
  ASSERT_GE(ib, 0);
  EXPECT_EQ(t.node(ib).net.dev, 0);
  EXPECT_EQ(t.node(ib).net.port, 1);
  EXPECT_EQ(t.node(ib).net.speedMbps, 200000);
  EXPECT_EQ(t.node(ib).net.gid, "fe80:0000:0000:0000:0000:0000:0000:0abc");
  EXPECT_EQ(t.count(NodeKind::kNet), 2);
  int eth = t.findNet(0, "eth0");
  EXPECT_EQ(t.node(eth).net.dev, 1);
  EXPECT_TRUE(t.node(t.node(eth).parent).pci.busId.empty());
  Path p = t.path(g0, ib);
  EXPECT_EQ(p.type, PathType::kPix);
  EXPECT_DOUBLE_EQ(p.bw, 25);                      // HDR below PCIe gen5
  EXPECT_EQ(t.path(g0, g2).type, PathType::kNvl);  // through the NVSwitch
  EXPECT_DOUBLE_EQ(t.countLinks(LinkKind::kSys), 1);
  EXPECT_EQ(t.diff(readTopologyXml(writeTopologyXml(t))), "");
}

TEST(TopoProbe, LoadedFileIsCompletedFromProbes) {
  // A partial description of the fake machine, as Azure ships them: classes only.
  Topology t = readTopologyXml(
      "<system version=\"1\">"
      "<cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">"
      "<pci busid=\"0000:10:00.0\" class=\"0x060400\" link_speed=\"32.0 GT/s PCIe\" "
      "link_width=\"16\">"
      "<pci busid=\"0000:11:00.0\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" "
      "link_width=\"16\"/>"
      "<pci busid=\"0000:12:00.0\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" "
      "link_width=\"16\"/>"
      "<pci busid=\"0000:13:00.0\" class=\"0x020700\" link_speed=\"32.0 GT/s PCIe\" "
      "link_width=\"16\"/>"
      "</pci></cpu></system>");
  EXPECT_EQ(t.countLinks(LinkKind::kNvLink), 0);
  int ib = t.find(NodeKind::kNet)[0];
  EXPECT_TRUE(t.node(ib).net.name.empty());
  completeFromProbes(&t, 0, fakeMachine());
  int g0 = t.findGpu(0, 0), g1 = t.findGpu(0, 1);
  EXPECT_EQ(t.node(g0).gpu.sm, 90);
  EXPECT_EQ(t.link(t.findLink(g0, g1, LinkKind::kNvLink)).count, 2);
  EXPECT_GE(t.findNvSwitch(0), 0);
  int net = t.findNet(0, "mlx5_0");
  ASSERT_GE(net, 0);
  EXPECT_EQ(t.node(net).net.speedMbps, 200000);
  EXPECT_DOUBLE_EQ(t.path(g0, net).bw, 25);
  EXPECT_EQ(t.diff(readTopologyXml(writeTopologyXml(t))), "");
}

}  // namespace
}  // namespace weft::topo
