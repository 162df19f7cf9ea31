// NCCL topology XML: real Azure files, completion of partial files, round trips, NCCL's output
// style, and malformed, truncated, cyclic and huge inputs.
#include <gtest/gtest.h>

#include <string>

#include "src/common/error.h"
#include "src/topo/xml_reader.h"
#include "src/topo/xml_writer.h"
#include "tests/unit/topo/topo_test_util.h"

namespace weft::topo {
namespace {

using testing::sharedDir;

Topology roundTrip(const Topology& t, std::string* xml = nullptr) {
  std::string text = writeTopologyXml(t);
  if (xml) *xml = text;
  return readTopologyXml(text);
}

// Throws and returns the message.
std::string errorOf(const std::string& xml, XmlReadOptions o = {}) {
  try {
    readTopologyXml(xml, o);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << xml;
  return "";
}

TEST(TopoXmlAzure, Ndv4IsCompletedLikeNccl) {
  WEFT_REQUIRE_SHARED("ndv4-topo.xml");
  Topology t = readTopologyFile(sharedDir() + "/ndv4-topo.xml");
  EXPECT_EQ(t.count(NodeKind::kCpu), 4);
  EXPECT_EQ(t.count(NodeKind::kPciSwitch), 4);  // the ffff:ff:0X.0 bridges
  EXPECT_EQ(t.count(NodeKind::kGpu), 8);        // class 0x030200, no <gpu>
  EXPECT_EQ(t.count(NodeKind::kNic), 8);        // class 0x020700, no <nic>
  EXPECT_EQ(t.count(NodeKind::kNet), 8);
  for (int n : t.find(NodeKind::kNet)) EXPECT_EQ(t.node(n).net.linkLayer, "IB");
  // GPU devs in bus-id order: 0001, 0002, 0003, 0004, 000b, 000c, 000d, 000e.
  EXPECT_EQ(t.node(t.findGpu(0, 0)).pci.busId, "0001:00:00.0");
  EXPECT_EQ(t.node(t.findGpu(0, 4)).pci.busId, "000b:00:00.0");
  EXPECT_EQ(t.node(t.findGpu(0, 7)).pci.busId, "000e:00:00.0");
  EXPECT_TRUE(t.node(t.findGpu(0, 0)).completed);
  // GPUs on one bridge: PIX at PCIe gen4 (24 GB/s); across NUMA domains: AMD Zen 2 (16 GB/s).
  Path p = t.path(t.findGpu(0, 0), t.findGpu(0, 1));
  EXPECT_EQ(p.type, PathType::kPix);
  EXPECT_DOUBLE_EQ(p.bw, 24.0);
  p = t.path(t.findGpu(0, 0), t.findGpu(0, 7));
  EXPECT_EQ(p.type, PathType::kSys);
  EXPECT_DOUBLE_EQ(p.bw, 16.0);
  EXPECT_EQ(t.diff(roundTrip(t)), "");
}

TEST(TopoXmlAzure, Ndv2KeepsItsFlatPciTree) {
  WEFT_REQUIRE_SHARED("ndv2-topo.xml");
  Topology t = readTopologyFile(sharedDir() + "/ndv2-topo.xml");
  EXPECT_EQ(t.count(NodeKind::kCpu), 2);
  EXPECT_EQ(t.count(NodeKind::kGpu), 8);
  EXPECT_EQ(t.count(NodeKind::kNic), 1);
  EXPECT_EQ(t.count(NodeKind::kPciSwitch), 0);
  EXPECT_EQ(t.node(t.node(t.findGpu(0, 4)).parent).cpu.numaId, 1);
  Path p = t.path(t.findGpu(0, 0), t.findGpu(0, 1));
  EXPECT_EQ(p.type, PathType::kPhb);
  EXPECT_DOUBLE_EQ(p.bw, 24.0);
  p = t.path(t.findGpu(0, 0), t.findGpu(0, 5));
  EXPECT_EQ(p.type, PathType::kSys);
  EXPECT_DOUBLE_EQ(p.bw, 10.0);  // Skylake (family 6 model 85) UPI
  EXPECT_EQ(t.diff(roundTrip(t)), "");
}

TEST(TopoXmlAzure, Ncv4KeepsEveryNcclField) {
  WEFT_REQUIRE_SHARED("ncv4-topo.xml");
  Topology t = readTopologyFile(sharedDir() + "/ncv4-topo.xml");
  EXPECT_EQ(t.count(NodeKind::kCpu), 4);
  ASSERT_EQ(t.count(NodeKind::kGpu), 4);
  int g = t.findGpu(0, 2);
  ASSERT_GE(g, 0);
  const Node& gpu = t.node(g);
  EXPECT_EQ(gpu.gpu.sm, 80);
  EXPECT_EQ(gpu.gpu.rank, 2);
  EXPECT_EQ(gpu.gpu.gdr, 1);
  EXPECT_EQ(gpu.pci.vendor, "0x10de");
  EXPECT_EQ(gpu.pci.device, "0x20b5");
  EXPECT_EQ(gpu.pci.subsystemDevice, "0x1533");
  EXPECT_EQ(gpu.pci.linkSpeed, "");
  EXPECT_EQ(gpu.pci.linkWidth, 0);
  EXPECT_FALSE(gpu.completed);
  // Each GPU declares 12 NVLinks to itself (NVML inside the VM); kept, but no path uses them.
  int self = t.findLink(g, g, LinkKind::kNvLink);
  ASSERT_GE(self, 0);
  EXPECT_EQ(t.link(self).count, 12);
  const Node& cpu = t.node(t.findCpu(0, 3));
  EXPECT_EQ(cpu.cpu.affinity, "ffffff00,00000000,00000000");
  EXPECT_EQ(cpu.cpu.vendor, "AuthenticAMD");
  EXPECT_EQ(cpu.cpu.familyId, 175);
  int eth = t.findNet(0, "eth0");
  ASSERT_GE(eth, 0);
  const NetInfo& net = t.node(eth).net;
  EXPECT_EQ(net.speedMbps, 100000);
  EXPECT_EQ(net.port, 0);
  EXPECT_EQ(net.maxConn, 65536);
  EXPECT_EQ(net.guid, "0x0");
  EXPECT_EQ(net.gdr, 0);
  EXPECT_DOUBLE_EQ(net.latency, 0.0);
  EXPECT_EQ(t.node(t.node(eth).parent).pci.busId, "");  // a <nic> straight under <cpu>
  std::string xml;
  Topology back = roundTrip(t, &xml);
  EXPECT_EQ(t.diff(back), "") << xml;
  EXPECT_NE(xml.find("<nvlink target=\"0001:00:00.0\" count=\"12\" tclass=\"0x030200\"/>"),
            std::string::npos);
}

TEST(TopoXmlAzure, GraphFileIsNotATopology) {
  WEFT_REQUIRE_SHARED("ncv4-graph.xml");
  try {
    readTopologyFile(sharedDir() + "/ncv4-graph.xml");
    FAIL() << "an NCCL graph file must not load as a topology";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no <system> element"), std::string::npos) << e.what();
  }
}

TEST(TopoXmlAzure, EveryFileReadsWritesAndReadsBack) {
  for (const char* f : {"ndv2-topo.xml", "ndv4-topo.xml", "ncv4-topo.xml"}) {
    if (!testing::exists(sharedDir() + "/" + f)) continue;
    Topology a = readTopologyFile(sharedDir() + "/" + f);
    std::string x1 = writeTopologyXml(a);
    Topology b = readTopologyXml(x1);
    EXPECT_EQ(a.diff(b), "") << f;
    EXPECT_EQ(writeTopologyXml(b), x1) << f << ": the writer is a fixed point";
  }
}

TEST(TopoXml, WritesNcclsOwnStyle) {
  Topology t = readTopologyXml(
      "<system version=\"1\"><cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" "
      "familyid=\"6\" modelid=\"85\"><pci busid=\"0000:01:00.0\" class=\"0x030200\" "
      "link_speed=\"8.0 GT/s PCIe\" link_width=\"16\"><gpu dev=\"0\" sm=\"70\" rank=\"0\" "
      "gdr=\"1\"/></pci></cpu></system>");
  XmlWriteOptions o;
  o.comment = "a -- comment";
  std::string x = writeTopologyXml(t, o);
  EXPECT_EQ(x.find("<?xml"), std::string::npos) << "NCCL's parser rejects a declaration";
  EXPECT_EQ(x.find(" />"), std::string::npos) << "NCCL writes <a b=\"c\"/>";
  EXPECT_EQ(x.find('\t'), std::string::npos) << "NCCL's parser skips spaces only";
  EXPECT_NE(x.find("<!-- a - - comment -->\n<system version=\"1\">\n  <cpu numaid=\"0\""),
            std::string::npos)
      << x;
  EXPECT_NE(
      x.find("    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"8.0 GT/s PCIe\" "
             "link_width=\"16\">\n      <gpu dev=\"0\" sm=\"70\" rank=\"0\" gdr=\"1\"/>"),
      std::string::npos)
      << x;
}

TEST(TopoXml, KeepsWhatItDoesNotInterpret) {
  const char* xml =
      "<system version=\"1\" name=\"lab\">\n"
      "  <cpu numaid=\"0\" affinity=\"ff\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" "
      "modelid=\"1\" rack=\"r7\">\n"
      "    <pci busid=\"0000:01:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\" keep=\"1\">\n"
      "      <pci busid=\"0000:02:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\">\n"
      "        <gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\" mlopart=\"0\">\n"
      "          <nvlink target=\"0000:99:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
      "          <future thing=\"1\"/>\n"
      "        </gpu>\n"
      "      </pci>\n"
      "      <pci busid=\"0000:03:00.0\" class=\"0x020700\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\">\n"
      "        <nic flavour=\"x\"><net name=\"mlx5_0\" dev=\"0\" speed=\"200000\" rail=\"3\"/>"
      "<gin dev=\"0\"/></nic>\n"
      "      </pci>\n"
      "      <pcilink target=\"0000:77:00.0\"/>\n"
      "    </pci>\n"
      "    <pci busid=\"0000:05:00.0\" class=\"0x068000\" link_speed=\"\" link_width=\"0\"/>\n"
      "  </cpu>\n"
      "  <extension><x a=\"1\">text</x></extension>\n"
      "</system>\n";
  Topology t = readTopologyXml(xml);
  std::string out;
  Topology back = roundTrip(t, &out);
  EXPECT_EQ(t.diff(back), "") << out;
  for (const char* kept :
       {"name=\"lab\"", "rack=\"r7\"", "keep=\"1\"", "mlopart=\"0\"", "<future thing=\"1\"/>",
        "flavour=\"x\"", "rail=\"3\"", "<gin dev=\"0\"/>", "<pcilink target=\"0000:77:00.0\"/>",
        "class=\"0x068000\"", "<extension><x a=\"1\">text</x></extension>",
        "<nvlink target=\"0000:99:00.0\" count=\"2\" tclass=\"0x030200\"/>"})
    EXPECT_NE(out.find(kept), std::string::npos) << kept << "\n" << out;
  // The dangling NVLink and the unknown-target pcilink make no links.
  EXPECT_EQ(t.countLinks(LinkKind::kNvLink), 0);
  EXPECT_EQ(t.countLinks(LinkKind::kLoc), 0);
}

TEST(TopoXml, NvSwitchAndPciLinksAndC2c) {
  const char* xml = R"(<system version="1">
  <cpu numaid="0" arch="arm64">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pcilink target="0000:20:00.0"/>
      <pci busid="0000:11:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1">
          <nvlink target="0000:05:00.0" count="5" tclass="0x068000"/>
          <nvlink target="0000:06:00.0" count="13" tclass="0x068000"/>
          <c2c bw="22500" count="10"/>
        </gpu>
      </pci>
    </pci>
    <pci busid="0000:20:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pcilink target="0000:10:00.0"/>
      <pci busid="0000:21:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="90" rank="1" gdr="1">
          <nvlink target="fffffff:ffff:ff" count="18"/>
        </gpu>
      </pci>
    </pci>
  </cpu>
</system>)";
  Topology t = readTopologyXml(xml);
  int g0 = t.findGpu(0, 0), g1 = t.findGpu(0, 1), nvs = t.findNvSwitch(0);
  ASSERT_GE(nvs, 0);
  int l0 = t.findLink(g0, nvs, LinkKind::kNvLink);
  ASSERT_GE(l0, 0);
  EXPECT_EQ(t.link(l0).count, 18);
  EXPECT_DOUBLE_EQ(t.link(l0).bw, 450.0);
  EXPECT_EQ(t.link(l0).parts.size(), 2u);
  Path p = t.path(g0, g1);
  EXPECT_EQ(p.type, PathType::kNvl);
  EXPECT_DOUBLE_EQ(p.bw, 450.0);
  EXPECT_EQ(t.countLinks(LinkKind::kLoc), 1);  // both sides listed, one link
  int c2c = t.findLink(g0, t.findCpu(0, 0), LinkKind::kC2c);
  ASSERT_GE(c2c, 0);
  EXPECT_DOUBLE_EQ(t.link(c2c).bw, 225.0);
  LinkRates nccl = LinkRates::nccl();
  XmlReadOptions o;
  o.rates = nccl;
  Topology n = readTopologyXml(xml, o);
  EXPECT_NEAR(n.path(n.findGpu(0, 0), n.findGpu(0, 1)).bw, 18 * 20.6, 1e-9);
  std::string out;
  EXPECT_EQ(t.diff(roundTrip(t, &out)), "") << out;
  EXPECT_NE(out.find("<c2c bw=\"22500\" count=\"10\"/>"), std::string::npos) << out;
}

TEST(TopoXml, CompletesPartialFilesOnlyWhenAsked) {
  const char* xml =
      "<system version=\"1\"><cpu numaid=\"0\">"
      "<pci busid=\"0000:02:00.0\" class=\"0x030200\" link_speed=\"\" link_width=\"0\"/>"
      "<pci busid=\"0000:01:00.0\" class=\"0x030000\" link_speed=\"\" link_width=\"0\"/>"
      "<pci busid=\"0000:03:00.0\" class=\"0x020000\" link_speed=\"\" link_width=\"0\"/>"
      "</cpu></system>";
  Topology t = readTopologyXml(xml);
  ASSERT_EQ(t.count(NodeKind::kGpu), 2);
  EXPECT_EQ(t.node(t.findGpu(0, 0)).pci.busId, "0000:01:00.0");  // numbered in bus-id order
  EXPECT_EQ(t.count(NodeKind::kNet), 1);
  EXPECT_EQ(t.node(t.find(NodeKind::kNet)[0]).net.linkLayer, "Ethernet");
  EXPECT_EQ(t.diff(roundTrip(t)), "");
  XmlReadOptions o;
  o.complete = false;
  Topology raw = readTopologyXml(xml, o);
  EXPECT_EQ(raw.count(NodeKind::kGpu), 0);
  EXPECT_EQ(raw.count(NodeKind::kNic), 0);
  EXPECT_EQ(raw.diff(readTopologyXml(writeTopologyXml(raw), o)), "");
}

TEST(TopoXml, MultiHostFilesUseHostHash) {
  const char* xml =
      "<system version=\"1\">"
      "<cpu host_hash=\"0xabc\" numaid=\"0\"><nic><net name=\"ib0\" dev=\"0\" "
      "speed=\"100000\"/></nic></cpu>"
      "<cpu host_hash=\"0xdef\" numaid=\"0\"><nic><net name=\"ib0\" dev=\"0\" "
      "speed=\"200000\"/></nic></cpu>"
      "<cpu host_hash=\"0xabc\" numaid=\"1\"/>"
      "</system>";
  Topology t = readTopologyXml(xml);
  ASSERT_EQ(t.hostCount(), 2);
  EXPECT_EQ(t.host(0).hostHash, 0xabcu);
  EXPECT_EQ(t.host(1).hostHash, 0xdefu);
  EXPECT_EQ(t.count(NodeKind::kCpu, 0), 2);
  EXPECT_EQ(t.count(NodeKind::kNetSwitch), 1);
  Path p = t.path(t.findNet(0, "ib0"), t.findNet(1, "ib0"));
  EXPECT_EQ(p.type, PathType::kNet);
  EXPECT_DOUBLE_EQ(p.bw, 12.5);
  EXPECT_EQ(t.diff(roundTrip(t)), "");
}

TEST(TopoXml, WeftHostRoundTrips) {
  Topology t(LinkRates::nominal());
  HostInfo info;
  info.hostHash = 0x1234;
  info.hostname = "box & <co>";
  info.packages = 2;
  info.cores = 64;
  info.pus = 128;
  info.numaNodes = 2;
  info.memoryBytes = int64_t{512} << 30;
  info.cpuModel = "AMD EPYC \"7742\"";
  info.caches.push_back({3, "unified", 16 << 20, 16});
  info.pciDevices.push_back({"0000:00:02.0", "0x010802", "0x144d", "0xa808", "NVMe", 0});
  t.addHost(info);
  Node cpu;
  cpu.kind = NodeKind::kCpu;
  cpu.parent = t.hostNode(0);
  cpu.cpu.numaId = 0;
  cpu.cpu.cores = 32;
  cpu.cpu.pus = 64;
  t.addNode(cpu);
  t.finalize();
  std::string xml;
  Topology back = roundTrip(t, &xml);
  EXPECT_EQ(t.diff(back), "") << xml;
  EXPECT_EQ(back.host(0).hostname, "box & <co>");
  EXPECT_NE(xml.find("hostname=\"box &amp; &lt;co&gt;\""), std::string::npos) << xml;
}

TEST(TopoXmlErrors, MalformedInputNamesTheLine) {
  struct Case {
    const char* xml;
    const char* expect;
  } cases[] = {
      {"", "no <system> element"},
      {"<system version=\"1\">", "malformed topology XML"},
      {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=", "malformed topology XML"},
      {"<system version=\"1\"></cpu></system>", ":1: malformed topology XML"},
      {"<system>\n</system>", "missing attribute version"},
      {"<system version=\"2\"/>", "unsupported topology XML version 2"},
      {"<system version=\"1\">\n<cpu/>\n</system>", ":2: <cpu>: missing attribute numaid"},
      {"<system version=\"1\">\n<cpu numaid=\"x\"/></system>", "numaid=\"x\" is not an integer"},
      {"<system version=\"1\"><cpu numaid=\"0\" numaid=\"1\"/></system>",
       "duplicate attribute numaid"},
      {"<system version=\"1\"><cpu numaid=\"0\"/>\n<cpu numaid=\"0\"/></system>",
       ":2: <cpu numaid=\"0\">: duplicate cpu numaid 0"},
      {"<system version=\"1\"><cpu numaid=\"0\"><pci class=\"0x060400\"/></cpu></system>",
       "missing attribute busid"},
      {"<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"/></cpu></system>",
       "<pci busid=\"0000:01:00.0\">: missing attribute class"},
      {"<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x060400\" "
       "link_width=\"-4\"/></cpu></system>",
       "negative link_width"},
      {"<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"1\" class=\"0x030200\"><gpu "
       "dev=\"99999999999\"/></pci></cpu></system>",
       "dev=\"99999999999\" is out of range"},
      {"<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"1\" class=\"0x030200\"><gpu dev=\"0\">"
       "<nvlink target=\"1\" count=\"0\"/></gpu></pci></cpu></system>",
       "nvlink count must be a positive integer"},
      {"<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"1\" class=\"0x030200\"><gpu dev=\"0\">"
       "<c2c bw=\"-1\" count=\"2\"/></gpu></pci></cpu></system>",
       "out of range"},
      {"<system version=\"1\"><cpu numaid=\"0\"><nic><net dev=\"0\" latency=\"nan\"/></nic></cpu>"
       "</system>",
       "latency=\"nan\" is not a number"},
      {"<system version=\"1\"><weft_host host_hash=\"zz\"/></system>",
       "host_hash=\"zz\" is not a hex"},
  };
  for (const auto& c : cases) {
    std::string msg = errorOf(c.xml);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "input: " << c.xml << "\nmessage: " << msg;
    EXPECT_EQ(msg.rfind("<string>:", 0), 0u) << msg;
  }
}

TEST(TopoXmlErrors, TruncatedFilesFail) {
  std::string full = testing::slurp(testing::golden("dgx1-v100.xml"));
  ASSERT_FALSE(full.empty());
  size_t ok = 0;
  for (size_t n = 0; n < full.size(); n += 97) {
    try {
      readTopologyXml(std::string_view(full).substr(0, n));
      ++ok;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::kInvalidArgument);
    }
  }
  EXPECT_EQ(ok, 0u) << "no proper prefix of a topology is a topology";
  EXPECT_NO_THROW(readTopologyXml(full));
}

TEST(TopoXmlErrors, CyclesAreRefused) {
  // The same PCI function twice is a loop in the PCI tree.
  std::string msg = errorOf(
      "<system version=\"1\"><cpu numaid=\"0\">\n"
      "<pci busid=\"0000:01:00.0\" class=\"0x060400\">\n"
      "  <pci busid=\"0000:01:00.0\" class=\"0x060400\"/>\n"
      "</pci></cpu></system>");
  EXPECT_NE(msg.find(":3: <pci busid=\"0000:01:00.0\">: duplicate pci busid 0000:01:00.0 (first "
                     "at line 2)"),
            std::string::npos)
      << msg;
  // Spelled differently, still the same function.
  msg = errorOf(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:0A:00.0\" class=\"0x060400\"/>"
      "</cpu><cpu numaid=\"1\"><pci busid=\"0a:00.0\" class=\"0x060400\"/></cpu></system>");
  EXPECT_NE(msg.find("duplicate pci busid"), std::string::npos) << msg;
  // A switch linked to itself, and NVLinks around in a circle, are fine: no path loops.
  Topology t = readTopologyXml(
      "<system version=\"1\"><cpu numaid=\"0\">"
      "<pci busid=\"0000:01:00.0\" class=\"0x060400\"><pcilink target=\"0000:01:00.0\"/>"
      "<pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\">"
      "<nvlink target=\"0000:03:00.0\" count=\"1\" tclass=\"0x030200\"/></gpu></pci>"
      "<pci busid=\"0000:03:00.0\" class=\"0x030200\"><gpu dev=\"1\" sm=\"80\">"
      "<nvlink target=\"0000:04:00.0\" count=\"1\" tclass=\"0x030200\"/></gpu></pci>"
      "<pci busid=\"0000:04:00.0\" class=\"0x030200\"><gpu dev=\"2\" sm=\"80\">"
      "<nvlink target=\"0000:02:00.0\" count=\"1\" tclass=\"0x030200\"/></gpu></pci>"
      "</pci></cpu></system>");
  EXPECT_EQ(t.countLinks(LinkKind::kNvLink), 3);
  EXPECT_EQ(t.path(t.findGpu(0, 0), t.findGpu(0, 2)).hops, 1);
  EXPECT_EQ(t.diff(roundTrip(t)), "");
}

TEST(TopoXmlErrors, HugeAndDeepInputsAreBounded) {
  XmlReadOptions o;
  o.maxBytes = 1000;
  std::string big = "<system version=\"1\">" + std::string(2000, ' ') + "</system>";
  EXPECT_NE(errorOf(big, o).find("exceeds the 1000-byte limit"), std::string::npos);

  std::string deep = "<system version=\"1\"><cpu numaid=\"0\">";
  for (int i = 0; i < 100; ++i)
    deep += "<pci busid=\"" + std::to_string(i) + "\" class=\"0x060400\">";
  for (int i = 0; i < 100; ++i) deep += "</pci>";
  deep += "</cpu></system>";
  EXPECT_NE(errorOf(deep).find("nests deeper than 64 levels"), std::string::npos);

  std::string deepJunk(200000, ' ');
  deepJunk = "<system version=\"1\">";
  for (int i = 0; i < 100000; ++i) deepJunk += "<a>";
  EXPECT_NE(errorOf(deepJunk).find("malformed"), std::string::npos);
  for (int i = 0; i < 100000; ++i) deepJunk += "</a>";
  deepJunk += "</system>";
  EXPECT_NE(errorOf(deepJunk).find("nests deeper"), std::string::npos);

  std::string wide = "<system version=\"1\">";
  for (int i = 0; i < 200; ++i) wide += "<x/>";
  wide += "</system>";
  o = {};
  o.maxElements = 100;
  EXPECT_NE(errorOf(wide, o).find("more than 100 elements"), std::string::npos);

  std::string cpus = "<system version=\"1\">";
  for (int i = 0; i < 300; ++i) cpus += "<cpu numaid=\"" + std::to_string(i) + "\"/>";
  cpus += "</system>";
  EXPECT_NE(errorOf(cpus).find("too many <cpu> elements"), std::string::npos);
}

TEST(TopoXmlErrors, FilesThatCannotBeRead) {
  try {
    readTopologyFile("/nonexistent/topo.xml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kSystemError);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/topo.xml"), std::string::npos);
  }
  XmlReadOptions o;
  o.maxBytes = 100;
  try {
    readTopologyFile(testing::golden("dgx2.xml"), o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dgx2.xml: topology XML of"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace weft::topo
