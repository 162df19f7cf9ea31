#include "src/topo/xml_reader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <pugixml.hpp>
#include <sstream>
#include <tuple>

#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::topo {
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

class Reader {
 public:
  Reader(std::string_view text, const XmlReadOptions& o) : text_(text), opt_(o), topo_(o.rates) {}

  Topology run() {
    if (text_.size() > opt_.maxBytes)
      fail(Status::kInvalidArgument, opt_.source + ": topology XML of " +
                                         std::to_string(text_.size()) + " bytes exceeds the " +
                                         std::to_string(opt_.maxBytes) + "-byte limit");
    for (size_t i = 0; i < text_.size(); ++i)
      if (text_[i] == '\n') lineStarts_.push_back(i + 1);
    pugi::xml_document doc;
    pugi::xml_parse_result res =
        doc.load_buffer(text_.data(), text_.size(), pugi::parse_default, pugi::encoding_utf8);
    if (res.status == pugi::status_no_document_element)
      fail(Status::kInvalidArgument, opt_.source + ": topology XML has no <system> element");
    if (!res)
      fail(Status::kInvalidArgument, opt_.source + ":" + std::to_string(lineOf(res.offset)) +
                                         ": malformed topology XML: " + res.description());
    checkShape(doc);
    pugi::xml_node system;
    for (pugi::xml_node n : doc.children())
      if (n.type() == pugi::node_element) {
        if (std::string(n.name()) == "system") {
          system = n;
          break;
        }
        WEFT_INFO(INIT, "%s: ignoring top-level element <%s>", opt_.source.c_str(), n.name());
      }
    if (!system)
      fail(Status::kInvalidArgument, opt_.source + ": topology XML has no <system> element");
    parseSystem(system);
    resolvePciLinks();
    resolveNvLinks();
    resolveC2c();
    if (opt_.complete) complete();
    topo_.finalize();
    return std::move(topo_);
  }

 private:
  // Attributes of one element: typed takes, duplicates refused, the rest kept.
  class Attributes {
   public:
    Attributes(Reader* r, const pugi::xml_node& el) : r_(r), el_(el) {
      for (pugi::xml_attribute a : el.attributes()) items_.push_back({a.name(), a.value(), false});
    }
    std::optional<std::string> str(const char* name) {
      std::optional<std::string> out;
      for (auto& it : items_) {
        if (it.name != name) continue;
        if (out) r_->error(el_, std::string("duplicate attribute ") + name);
        it.used = true;
        out = it.value;
      }
      return out;
    }
    std::string required(const char* name) {
      auto v = str(name);
      if (!v) r_->error(el_, std::string("missing attribute ") + name);
      return *v;
    }
    // Integer (decimal or 0x hex); absent or empty -> `absent`.
    int64_t integer(const char* name, int64_t absent, int64_t lo = INT32_MIN,
                    int64_t hi = INT32_MAX) {
      auto v = str(name);
      if (!v || v->empty()) return absent;
      const char* s = v->c_str();
      char* end = nullptr;
      errno = 0;
      bool hex = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'));
      long long x = std::strtoll(s, &end, hex ? 16 : 10);
      if (end == s || *end != '\0' || errno == ERANGE)
        r_->error(el_, std::string("attribute ") + name + "=\"" + *v + "\" is not an integer");
      if (x < lo || x > hi)
        r_->error(el_, std::string("attribute ") + name + "=\"" + *v + "\" is out of range");
      return x;
    }
    int integer32(const char* name, int absent = -1) {
      return static_cast<int>(integer(name, absent));
    }
    int requiredInt(const char* name) {
      auto v = str(name);
      if (!v || v->empty()) r_->error(el_, std::string("missing attribute ") + name);
      return static_cast<int>(integer(name, 0));
    }
    uint64_t hex(const char* name) {
      auto v = str(name);
      if (!v || v->empty()) return 0;
      const char* s = v->c_str();
      char* end = nullptr;
      errno = 0;
      unsigned long long x = std::strtoull(s, &end, 16);
      if (end == s || *end != '\0' || errno == ERANGE || s[0] == '-')
        r_->error(el_, std::string("attribute ") + name + "=\"" + *v + "\" is not a hex number");
      return x;
    }
    double real(const char* name, double absent) {
      auto v = str(name);
      if (!v || v->empty()) return absent;
      const char* s = v->c_str();
      char* end = nullptr;
      double x = std::strtod(s, &end);
      if (end == s || *end != '\0' || !std::isfinite(x))
        r_->error(el_, std::string("attribute ") + name + "=\"" + *v + "\" is not a number");
      return x;
    }
    // Unused attributes, in document order.
    void rest(Attrs* out) {
      for (const auto& it : items_)
        if (!it.used) out->push_back({it.name, it.value});
    }

   private:
    struct Item {
      std::string name, value;
      bool used;
    };
    Reader* r_;
    pugi::xml_node el_;
    std::vector<Item> items_;
  };

  size_t lineOf(ptrdiff_t offset) const {
    if (offset < 0) return 0;
    auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), static_cast<size_t>(offset));
    return static_cast<size_t>(it - lineStarts_.begin()) + 1;
  }
  size_t lineOf(const pugi::xml_node& n) const { return lineOf(n.offset_debug()); }

  std::string describe(const pugi::xml_node& n) const {
    std::string s = "<" + std::string(n.name());
    for (const char* key : {"busid", "numaid", "name", "dev", "target"})
      if (pugi::xml_attribute a = n.attribute(key)) {
        std::string v = a.value();
        if (v.size() > 40) v = v.substr(0, 40) + "...";
        s += " " + std::string(key) + "=\"" + v + "\"";
        break;
      }
    return s + ">";
  }

  [[noreturn]] void error(const pugi::xml_node& n, const std::string& what) const {
    fail(Status::kInvalidArgument,
         opt_.source + ":" + std::to_string(lineOf(n)) + ": " + describe(n) + ": " + what);
  }

  // Bounds the document before anything recursive looks at it.
  void checkShape(const pugi::xml_document& doc) {
    size_t elements = 0;
    int depth = 0;
    pugi::xml_node n = doc.first_child();
    while (n) {
      if (n.type() == pugi::node_element) {
        if (++elements > opt_.maxElements)
          error(n, "topology XML has more than " + std::to_string(opt_.maxElements) + " elements");
        if (depth + 1 > opt_.maxDepth)
          error(n, "topology XML nests deeper than " + std::to_string(opt_.maxDepth) + " levels");
      }
      if (n.first_child()) {
        n = n.first_child();
        ++depth;
        continue;
      }
      while (n && !n.next_sibling()) {
        n = n.parent();
        --depth;
        if (n == doc) n = pugi::xml_node();
      }
      if (n) n = n.next_sibling();
    }
  }

  int hostFor(uint64_t hash) {
    auto it = hostByHash_.find(hash);
    if (it != hostByHash_.end()) return it->second;
    HostInfo info;
    info.hostHash = hash;
    int h = topo_.addHost(info);
    hostByHash_[hash] = h;
    return h;
  }

  void keep(int node, const std::string& container, const pugi::xml_node& el) {
    topo_.mutableNode(node).opaque.push_back({container, serialize(el)});
  }

  void parseSystem(const pugi::xml_node& sys) {
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

  void parseWeftHost(const pugi::xml_node& el) {
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

  void parseCpu(const pugi::xml_node& el) {
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

  static std::vector<pugi::xml_node> childrenNamed(const pugi::xml_node& el, const char* name) {
    std::vector<pugi::xml_node> v;
    for (pugi::xml_node c : el.children(name))
      if (c.type() == pugi::node_element) v.push_back(c);
    return v;
  }

  void parsePci(const pugi::xml_node& el, int parent, int h) {
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

  void parseGpu(const pugi::xml_node& el, int idx) {
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

  // A <nic> directly under a <cpu> (virtual or unknown PCI position).
  void parseCpuNic(const pugi::xml_node& el, int cpu, int h) {
    Node n;
    n.kind = NodeKind::kNic;
    n.host = h;
    n.parent = cpu;
    int idx = topo_.addChildNode(std::move(n), LinkKind::kPci, kLocalBw);
    parseNicPorts(el, idx, h);
  }

  void parseNicPorts(const pugi::xml_node& el, int nic, int h) {
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

  void resolvePciLinks() {
    for (const auto& [sw, el] : pciLinks_) {
      Attributes a(this, el);
      std::string target = a.required("target");
      int h = topo_.node(sw).host;
      int t = byBus(h, target);
      if (t < 0 || t == sw || topo_.node(t).kind != NodeKind::kPciSwitch) {
        WEFT_INFO(INIT, "%s:%zu: pcilink target %s is not another PCI switch; kept, not used",
                  opt_.source.c_str(), lineOf(el), target.c_str());
        keep(sw, "", el);
        continue;
      }
      if (linkBetween(sw, t, LinkKind::kLoc) >= 0) continue;
      Link l;
      l.a = sw;
      l.b = t;
      l.kind = LinkKind::kLoc;
      l.bw = kLocalBw;
      addLink(std::move(l));
    }
  }

  int localCpu(int node) const {
    for (int n = node; n >= 0; n = topo_.node(n).parent)
      if (topo_.node(n).kind == NodeKind::kCpu) return n;
    return -1;
  }

  void resolveNvLinks() {
    for (const auto& [gpu, el] : nvLinks_) {
      Attributes a(this, el);
      std::string target = a.required("target");
      int count = static_cast<int>(a.integer("count", -1, 0, 1 << 16));
      if (count <= 0) error(el, "nvlink count must be a positive integer");
      auto tclassAttr = a.str("tclass");
      int h = topo_.node(gpu).host;
      int sm = topo_.node(gpu).gpu.sm;
      const LinkRates& r = topo_.rates();
      int peer = byBus(h, target);
      bool peerIsGpu = peer >= 0 && topo_.node(peer).kind == NodeKind::kGpu;
      // NCCL: tclass GPU -> that GPU; CPU class -> the local CPU; anything else -> NVSwitch.
      std::string tclass =
          tclassAttr.value_or(peerIsGpu ? topo_.node(peer).pci.classCode : "0x068000");
      if (isGpuClass(tclass)) {
        if (!peerIsGpu) {
          WEFT_INFO(INIT, "%s:%zu: nvlink target %s is not a GPU of this host; kept, not used",
                    opt_.source.c_str(), lineOf(el), target.c_str());
          keep(gpu, "gpu", el);
          continue;
        }
        int existing = linkBetween(gpu, peer, LinkKind::kNvLink);
        if (existing >= 0) {
          Link& l = topo_.mutableLink(existing);
          if (peer == gpu) {
            keep(gpu, "gpu", el);  // a second self declaration
          } else if (l.count != count) {
            WEFT_INFO(INIT, "%s:%zu: nvlink %s declares %d links, its peer %d; using %d",
                      opt_.source.c_str(), lineOf(el), target.c_str(), count, l.count,
                      std::max(count, l.count));
            l.count = std::max(count, l.count);
            l.bw =
                l.count * std::min(r.nvlinkPerLink(sm), r.nvlinkPerLink(topo_.node(peer).gpu.sm));
          }
          continue;
        }
        if (peer == gpu)
          WEFT_INFO(INIT, "%s:%zu: gpu %s declares %d NVLinks to itself (kept, carry no path)",
                    opt_.source.c_str(), lineOf(el), target.c_str(), count);
        Link l;
        l.a = gpu;
        l.b = peer;
        l.kind = LinkKind::kNvLink;
        l.count = count;
        l.bw = count * std::min(r.nvlinkPerLink(sm), r.nvlinkPerLink(topo_.node(peer).gpu.sm));
        l.latencyUs = kNvLinkLatencyUs;
        addLink(std::move(l));
        continue;
      }
      int remote;
      if (isCpuClass(tclass)) {
        remote = localCpu(gpu);
        if (remote < 0) error(el, "nvlink to a CPU but the GPU is not under a <cpu>");
      } else {
        auto it = nvSwitch_.find(h);
        if (it == nvSwitch_.end()) {
          Node sw;
          sw.kind = NodeKind::kNvSwitch;
          sw.host = h;
          it = nvSwitch_.emplace(h, topo_.addNode(std::move(sw))).first;
        }
        remote = it->second;
      }
      int existing = linkBetween(gpu, remote, LinkKind::kNvLink);
      if (existing < 0) {
        Link l;
        l.a = gpu;
        l.b = remote;
        l.kind = LinkKind::kNvLink;
        l.latencyUs = kNvLinkLatencyUs;
        existing = addLink(std::move(l));
      }
      Link& l = topo_.mutableLink(existing);
      l.count += count;
      l.bw += count * r.nvlinkPerLink(sm);
      l.parts.push_back({target, tclass, count});
    }
  }

  void resolveC2c() {
    for (const auto& [gpu, el] : c2cs_) {
      Attributes a(this, el);
      int64_t bw = a.integer("bw", -1, 0, INT32_MAX);
      int count = static_cast<int>(a.integer("count", -1, 0, 1 << 16));
      if (bw <= 0 || count <= 0) error(el, "c2c needs positive bw and count");
      int cpu = localCpu(gpu);
      if (cpu < 0 || linkBetween(gpu, cpu, LinkKind::kC2c) >= 0) {
        keep(gpu, "gpu", el);
        continue;
      }
      Link l;
      l.a = gpu;
      l.b = cpu;
      l.kind = LinkKind::kC2c;
      l.count = count;
      l.bw = static_cast<double>(bw) * count / 1000.0;  // NCCL: bw is MB/s per link
      l.latencyUs = kNvLinkLatencyUs;
      addLink(std::move(l));
    }
  }

  // NCCL fills these from NVML and the network plugin; we number them in bus-id order.
  void complete() {
    auto byBusId = [&](std::vector<int> v) {
      std::stable_sort(v.begin(), v.end(), [&](int x, int y) {
        return normalizeBusId(topo_.node(x).pci.busId) < normalizeBusId(topo_.node(y).pci.busId);
      });
      return v;
    };
    for (int h = 0; h < topo_.hostCount(); ++h) {
      std::vector<char> used;
      auto take = [&used]() {
        size_t d = 0;
        while (d < used.size() && used[d]) ++d;
        if (d == used.size()) used.push_back(0);
        used[d] = 1;
        return static_cast<int>(d);
      };
      auto mark = [&used](int d) {
        if (d < 0 || d > 4096) return;
        if (static_cast<size_t>(d) >= used.size()) used.resize(d + 1, 0);
        used[d] = 1;
      };
      for (int g : topo_.find(NodeKind::kGpu, h)) mark(topo_.node(g).gpu.dev);
      for (int g : byBusId(pendingGpus_))
        if (topo_.node(g).host == h && topo_.node(g).gpu.dev < 0)
          topo_.mutableNode(g).gpu.dev = take();
      used.clear();
      for (int n : topo_.find(NodeKind::kNet, h)) mark(topo_.node(n).net.dev);
      for (int nic : byBusId(pendingNics_)) {
        if (topo_.node(nic).host != h) continue;
        Node n;
        n.kind = NodeKind::kNet;
        n.host = h;
        n.parent = nic;
        n.completed = true;
        n.net.dev = take();
        n.net.linkLayer = isInfinibandClass(topo_.node(nic).pci.classCode) ? "IB" : "Ethernet";
        topo_.addChildNode(std::move(n), LinkKind::kNet, netBandwidth(-1));
      }
    }
  }

  int byBus(int h, const std::string& busId) const {
    auto it = nodeByBus_.find({h, normalizeBusId(busId)});
    return it == nodeByBus_.end() ? -1 : it->second;
  }
  int linkBetween(int a, int b, LinkKind k) const {
    auto it = linkIndex_.find({std::min(a, b), std::max(a, b), static_cast<int>(k)});
    return it == linkIndex_.end() ? -1 : it->second;
  }
  int addLink(Link l) {
    std::tuple<int, int, int> key{std::min(l.a, l.b), std::max(l.a, l.b), static_cast<int>(l.kind)};
    int i = topo_.addLink(std::move(l));
    linkIndex_[key] = i;
    return i;
  }

  std::string_view text_;
  const XmlReadOptions& opt_;
  Topology topo_;
  std::vector<size_t> lineStarts_;
  std::map<uint64_t, int> hostByHash_;
  std::map<std::pair<int, std::string>, size_t> busIds_;
  std::map<std::pair<int, std::string>, int> nodeByBus_;
  std::map<std::pair<int, int>, int> cpuByNuma_;
  std::map<int, int> cpusPerHost_;
  int cpus_ = 0;
  std::map<std::tuple<int, int, int>, int> linkIndex_;
  std::map<int, int> nvSwitch_;
  std::vector<std::pair<int, pugi::xml_node>> pciLinks_, nvLinks_, c2cs_;
  std::vector<int> pendingGpus_, pendingNics_;
};

}  // namespace

Topology readTopologyXml(std::string_view text, const XmlReadOptions& options) {
  return Reader(text, options).run();
}

Topology readTopologyFile(const std::string& path, XmlReadOptions options) {
  if (options.source == "<string>") options.source = path;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::kSystemError, sysError("cannot open topology file " + path, errno));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) fail(Status::kSystemError, "cannot read topology file " + path);
  if (static_cast<uint64_t>(size) > options.maxBytes)
    fail(Status::kInvalidArgument, path + ": topology XML of " + std::to_string(size) +
                                       " bytes exceeds the " + std::to_string(options.maxBytes) +
                                       "-byte limit");
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) fail(Status::kSystemError, "cannot read topology file " + path);
  return readTopologyXml(text, options);
}

}  // namespace weft::topo
