// The topology XML reader's elements: <system>, <weft_host>, <cpu> and the <pci> trees under it
// with their <gpu> and <nic>, each into nodes; what it does not interpret is kept verbatim.
#include <sstream>

#include "src/topo/xml_reader_internal.h"

namespace weft::topo::detail {
namespace {

constexpr int kTopoXmlVersion = 1;  // NCCL_TOPO_XML_VERSION
// Every pair of CPUs of a host gets a link, so their number is bounded (NCCL allows 256 nodes of
// a kind per host at most).
constexpr int kMaxCpusPerHost = 256;
constexpr int kMaxCpus = 4096;

std::string serialize(const pugi::xml_node& n) {
  std::ostringstream out;
  n.print(out, "", pugi::format_raw, pugi::encoding_utf8);
  return out.str();
}

}  // namespace

int XmlReader::hostFor(uint64_t hash) {
  auto it = hostByHash_.find(hash);
  if (it != hostByHash_.end()) return it->second;
  HostInfo info;
  info.hostHash = hash;
  int h = topo_.addHost(info);
  hostByHash_[hash] = h;
  return h;
}

void XmlReader::keep(int node, const std::string& container, const pugi::xml_node& el) {
  topo_.mutableNode(node).opaque.push_back({container, serialize(el)});
}

void XmlReader::parseSystem(const pugi::xml_node& sys) {
  Attributes a(this, sys);
  auto version = a.str("version");
  if (!version) error(sys, "missing attribute version");
  if (*version != std::to_string(kTopoXmlVersion))
    error(sys, "unsupported topology XML version " + *version + " (expected " +
                   std::to_string(kTopoXmlVersion) + ")");
  Attrs systemExtra;
  a.rest(&systemExtra);
  std::vector<pugi::xml_node> systemOpaque;
  for (pugi::xml_node c : sys.children()) {
    if (c.type() != pugi::node_element) continue;
    std::string name = c.name();
    if (name == "cpu")
      parseCpu(c);
    else if (name == "weft_host")
      parseWeftHost(c);
    else
      systemOpaque.push_back(c);
  }
  if (topo_.hostCount() == 0) hostFor(0);
  Node& h0 = topo_.mutableNode(topo_.hostNode(0));
  h0.extra = std::move(systemExtra);
  for (const auto& c : systemOpaque) h0.opaque.push_back({"", serialize(c)});
}

void XmlReader::parseWeftHost(const pugi::xml_node& el) {
  Attributes a(this, el);
  int h = hostFor(a.hex("host_hash"));
  HostInfo& info = topo_.mutableHost(h);
  info.hostname = a.str("hostname").value_or("");
  info.packages = a.integer32("packages", 0);
  info.numaNodes = a.integer32("numa_nodes", 0);
  info.cores = a.integer32("cores", 0);
  info.pus = a.integer32("pus", 0);
  info.memoryBytes = a.integer("memory", 0, 0, INT64_MAX);
  info.cpuModel = a.str("cpu_model").value_or("");
  Node& hn = topo_.mutableNode(topo_.hostNode(h));
  a.rest(&hn.innerExtra);
  for (pugi::xml_node c : el.children()) {
    if (c.type() != pugi::node_element) continue;
    std::string name = c.name();
    Attributes ca(this, c);
    if (name == "cache") {
      CacheInfo ci;
      ci.level = ca.integer32("level", 0);
      ci.type = ca.str("type").value_or("");
      ci.sizeBytes = ca.integer("size", 0, 0, INT64_MAX);
      ci.count = ca.integer32("count", 0);
      info.caches.push_back(ci);
    } else if (name == "pcidev") {
      PciDevice d;
      d.busId = ca.str("busid").value_or("");
      d.classCode = ca.str("class").value_or("");
      d.vendor = ca.str("vendor").value_or("");
      d.device = ca.str("device").value_or("");
      d.name = ca.str("name").value_or("");
      d.numaId = ca.integer32("numaid", -1);
      info.pciDevices.push_back(d);
    } else {
      hn.opaque.push_back({"weft_host", serialize(c)});
    }
  }
}

void XmlReader::parseCpu(const pugi::xml_node& el) {
  Attributes a(this, el);
  int h = hostFor(a.hex("host_hash"));
  Node n;
  n.kind = NodeKind::kCpu;
  n.host = h;
  n.parent = topo_.hostNode(h);
  n.cpu.numaId = a.requiredInt("numaid");
  if (cpuByNuma_.count({h, n.cpu.numaId}))
    error(el, "duplicate cpu numaid " + std::to_string(n.cpu.numaId) + " on one host");
  if (++cpusPerHost_[h] > kMaxCpusPerHost || ++cpus_ > kMaxCpus)
    error(el, "too many <cpu> elements (at most " + std::to_string(kMaxCpusPerHost) +
                  " per host and " + std::to_string(kMaxCpus) + " in all)");
  n.cpu.affinity = a.str("affinity").value_or("");
  n.cpu.arch = a.str("arch").value_or("");
  n.cpu.vendor = a.str("vendor").value_or("");
  n.cpu.familyId = a.integer32("familyid");
  n.cpu.modelId = a.integer32("modelid");
  n.cpu.cores = a.integer32("cores", 0);
  n.cpu.pus = a.integer32("pus", 0);
  a.rest(&n.extra);
  int numa = n.cpu.numaId;
  int idx = topo_.addNode(std::move(n));
  cpuByNuma_[{h, numa}] = idx;
  for (pugi::xml_node c : el.children()) {
    if (c.type() != pugi::node_element) continue;
    std::string name = c.name();
    if (name == "pci")
      parsePci(c, idx, h);
    else if (name == "nic")
      parseCpuNic(c, idx, h);
    else
      keep(idx, "", c);
  }
}

std::vector<pugi::xml_node> XmlReader::childrenNamed(const pugi::xml_node& el, const char* name) {
  std::vector<pugi::xml_node> v;
  for (pugi::xml_node c : el.children(name))
    if (c.type() == pugi::node_element) v.push_back(c);
  return v;
}

void XmlReader::parsePci(const pugi::xml_node& el, int parent, int h) {
  Attributes a(this, el);
  Node n;
  n.host = h;
  n.parent = parent;
  n.pci.busId = a.required("busid");
  if (n.pci.busId.empty()) error(el, "empty busid");
  n.pci.classCode = a.required("class");
  n.pci.vendor = a.str("vendor").value_or("");
  n.pci.device = a.str("device").value_or("");
  n.pci.subsystemVendor = a.str("subsystem_vendor").value_or("");
  n.pci.subsystemDevice = a.str("subsystem_device").value_or("");
  n.pci.linkSpeed = a.str("link_speed").value_or("");
  n.pci.linkWidth = a.integer32("link_width", 0);
  if (n.pci.linkWidth < 0) error(el, "negative link_width");
  a.rest(&n.extra);

  auto gpus = childrenNamed(el, "gpu");
  auto nics = childrenNamed(el, "nic");
  const std::string& cls = n.pci.classCode;
  bool completedGpu = false, completedNic = false;
  if (!gpus.empty()) {
    n.kind = NodeKind::kGpu;
  } else if (!nics.empty()) {
    n.kind = NodeKind::kNic;
  } else if (isNvSwitchClass(cls) || isCpuClass(cls)) {
    keep(parent, "", el);  // NCCL makes no node of these either
    return;
  } else if (isGpuClass(cls) || isNicClass(cls)) {
    if (!opt_.complete) {
      keep(parent, "", el);
      return;
    }
    n.kind = isGpuClass(cls) ? NodeKind::kGpu : NodeKind::kNic;
    (isGpuClass(cls) ? completedGpu : completedNic) = true;
    n.completed = completedGpu;
  } else {
    n.kind = NodeKind::kPciSwitch;
  }

  std::string key = normalizeBusId(n.pci.busId);
  auto seen = busIds_.find({h, key});
  if (seen != busIds_.end())
    error(el, "duplicate pci busid " + n.pci.busId + " (first at line " +
                  std::to_string(seen->second) + "): the PCI tree would have a cycle");
  busIds_[{h, key}] = lineOf(el);

  double bw = pcieBandwidth(n.pci.linkSpeed, n.pci.linkWidth);
  NodeKind kind = n.kind;
  int idx = topo_.addChildNode(std::move(n), LinkKind::kPci, bw, kPciLatencyUs);
  nodeByBus_[{h, key}] = idx;
  if (completedGpu) pendingGpus_.push_back(idx);
  if (completedNic) pendingNics_.push_back(idx);

  bool usedGpu = false, usedNic = false;
  for (pugi::xml_node c : el.children()) {
    if (c.type() != pugi::node_element) continue;
    std::string name = c.name();
    if (kind == NodeKind::kGpu && name == "gpu" && !usedGpu) {
      usedGpu = true;
      parseGpu(c, idx);
    } else if (kind == NodeKind::kNic && name == "nic" && !usedNic) {
      usedNic = true;
      parseNicPorts(c, idx, h);
    } else if (kind == NodeKind::kPciSwitch && name == "pci") {
      parsePci(c, idx, h);
    } else if (kind == NodeKind::kPciSwitch && name == "pcilink") {
      pciLinks_.push_back({idx, c});
    } else {
      keep(idx, "", c);
    }
  }
}

void XmlReader::parseGpu(const pugi::xml_node& el, int idx) {
  Attributes a(this, el);
  Node& n = topo_.mutableNode(idx);
  n.gpu.dev = a.integer32("dev");
  n.gpu.sm = a.integer32("sm");
  n.gpu.rank = a.integer32("rank");
  n.gpu.gdr = a.integer32("gdr");
  n.gpu.name = a.str("name").value_or("");
  a.rest(&n.innerExtra);
  if (n.gpu.dev < 0 && opt_.complete) pendingGpus_.push_back(idx);
  for (pugi::xml_node c : el.children()) {
    if (c.type() != pugi::node_element) continue;
    std::string name = c.name();
    if (name == "nvlink")
      nvLinks_.push_back({idx, c});
    else if (name == "c2c")
      c2cs_.push_back({idx, c});
    else
      keep(idx, "gpu", c);
  }
}

void XmlReader::parseCpuNic(const pugi::xml_node& el, int cpu, int h) {
  Node n;
  n.kind = NodeKind::kNic;
  n.host = h;
  n.parent = cpu;
  int idx = topo_.addChildNode(std::move(n), LinkKind::kPci, kLocalBw);
  parseNicPorts(el, idx, h);
}

void XmlReader::parseNicPorts(const pugi::xml_node& el, int nic, int h) {
  Attributes a(this, el);
  a.rest(&topo_.mutableNode(nic).innerExtra);
  for (pugi::xml_node c : el.children()) {
    if (c.type() != pugi::node_element) continue;
    if (std::string(c.name()) != "net") {
      keep(nic, "nic", c);
      continue;
    }
    Attributes na(this, c);
    Node n;
    n.kind = NodeKind::kNet;
    n.host = h;
    n.parent = nic;
    n.net.name = na.str("name").value_or("");
    n.net.dev = na.integer32("dev");
    n.net.speedMbps = na.integer("speed", -1, INT64_MIN / 2, INT64_MAX / 2);
    n.net.port = na.integer32("port");
    n.net.latency = na.real("latency", -1);
    n.net.guid = na.str("guid").value_or("");
    n.net.maxConn = na.integer32("maxconn");
    n.net.gdr = na.integer32("gdr");
    n.net.coll = na.integer32("coll");
    n.net.linkLayer = na.str("link_layer").value_or("");
    n.net.gid = na.str("gid").value_or("");
    na.rest(&n.extra);
    double bw = netBandwidth(n.net.speedMbps);
    int idx = topo_.addChildNode(std::move(n), LinkKind::kNet, bw);
    for (pugi::xml_node cc : c.children())
      if (cc.type() == pugi::node_element) keep(idx, "", cc);
  }
}

}  // namespace weft::topo::detail
