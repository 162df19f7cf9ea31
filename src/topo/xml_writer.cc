#include "src/topo/xml_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "src/common/error.h"

namespace weft::topo {
namespace {

struct El {
  explicit El(std::string n) : name(std::move(n)) {}
  std::string name;
  Attrs attrs;
  std::vector<El> kids;
  std::vector<std::string> raw;  // kept elements, already serialized
  void set(const std::string& k, const std::string& v) { attrs.push_back({k, v}); }
  void setIf(const std::string& k, const std::string& v) {
    if (!v.empty()) set(k, v);
  }
  void setInt(const std::string& k, int64_t v, int64_t absent) {
    if (v != absent) set(k, std::to_string(v));
  }
};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        if (u < 0x20)
          o += "&#" + std::to_string(u) + ";";
        else
          o += c;
    }
  }
  return o;
}

// Shortest text that reads back as the same double.
std::string realText(double v) {
  char buf[64];
  for (int p = 6; p <= 17; ++p) {
    std::snprintf(buf, sizeof(buf), "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

void print(const El& e, int indent, std::string* out) {
  out->append(indent, ' ');
  *out += "<" + e.name;
  for (const auto& [k, v] : e.attrs) *out += " " + k + "=\"" + escape(v) + "\"";
  if (e.kids.empty() && e.raw.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const El& k : e.kids) print(k, indent + 2, out);
  for (const std::string& r : e.raw) {
    out->append(indent + 2, ' ');
    *out += r + "\n";
  }
  out->append(indent, ' ');
  *out += "</" + e.name + ">\n";
}

class Writer {
 public:
  explicit Writer(const Topology& t) : t_(t) {}

  El system() {
    El sys{"system"};
    sys.set("version", "1");
    const Node& h0 = t_.node(t_.hostNode(0));
    for (const auto& [k, v] : h0.extra) sys.set(k, v);
    for (int h = 0; h < t_.hostCount(); ++h) {
      const HostInfo& info = t_.host(h);
      const Node& hn = t_.node(t_.hostNode(h));
      bool hostExtras = !hn.innerExtra.empty();
      for (const auto& [c, x] : hn.opaque) hostExtras |= c == "weft_host";
      if (t_.hostCount() > 1 || !(info == HostInfo{}) || hostExtras) sys.kids.push_back(host(h));
    }
    for (int h = 0; h < t_.hostCount(); ++h)
      for (int c : t_.children(t_.hostNode(h)))
        if (t_.node(c).kind == NodeKind::kCpu) sys.kids.push_back(cpu(c));
    for (const auto& [c, x] : h0.opaque)
      if (c.empty()) sys.raw.push_back(x);
    return sys;
  }

 private:
  static std::string hex(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
    return buf;
  }

  El host(int h) {
    const HostInfo& info = t_.host(h);
    const Node& hn = t_.node(t_.hostNode(h));
    El e{"weft_host"};
    e.set("host_hash", hex(info.hostHash));
    e.setIf("hostname", info.hostname);
    e.setInt("packages", info.packages, 0);
    e.setInt("numa_nodes", info.numaNodes, 0);
    e.setInt("cores", info.cores, 0);
    e.setInt("pus", info.pus, 0);
    e.setInt("memory", info.memoryBytes, 0);
    e.setIf("cpu_model", info.cpuModel);
    for (const auto& [k, v] : hn.innerExtra) e.set(k, v);
    for (const CacheInfo& c : info.caches) {
      El k{"cache"};
      k.setInt("level", c.level, 0);
      k.setIf("type", c.type);
      k.setInt("size", c.sizeBytes, 0);
      k.setInt("count", c.count, 0);
      e.kids.push_back(k);
    }
    for (const PciDevice& d : info.pciDevices) {
      El k{"pcidev"};
      k.setIf("busid", d.busId);
      k.setIf("class", d.classCode);
      k.setIf("vendor", d.vendor);
      k.setIf("device", d.device);
      k.setIf("name", d.name);
      k.setInt("numaid", d.numaId, -1);
      e.kids.push_back(k);
    }
    for (const auto& [c, x] : hn.opaque)
      if (c == "weft_host") e.raw.push_back(x);
    return e;
  }

  void plainExtras(const Node& n, El* e) {
    for (const auto& [k, v] : n.extra) e->set(k, v);
  }
  void innerExtras(const Node& n, El* e) {
    for (const auto& [k, v] : n.innerExtra) e->set(k, v);
  }
  void kept(const Node& n, const std::string& container, El* e) {
    for (const auto& [c, x] : n.opaque)
      if (c == container) e->raw.push_back(x);
  }

  El cpu(int i) {
    const Node& n = t_.node(i);
    El e{"cpu"};
    uint64_t hash = t_.host(n.host).hostHash;
    if (hash != 0) e.set("host_hash", hex(hash));
    e.set("numaid", std::to_string(n.cpu.numaId));
    e.setIf("affinity", n.cpu.affinity);
    e.setIf("arch", n.cpu.arch);
    e.setIf("vendor", n.cpu.vendor);
    e.setInt("familyid", n.cpu.familyId, -1);
    e.setInt("modelid", n.cpu.modelId, -1);
    e.setInt("cores", n.cpu.cores, 0);
    e.setInt("pus", n.cpu.pus, 0);
    plainExtras(n, &e);
    for (int c : t_.children(i)) addChild(c, &e);
    kept(n, "", &e);
    return e;
  }

  void addChild(int c, El* parent) {
    switch (t_.node(c).kind) {
      case NodeKind::kPciSwitch:
        parent->kids.push_back(pciSwitch(c));
        break;
      case NodeKind::kGpu:
        parent->kids.push_back(gpu(c));
        break;
      case NodeKind::kNic:
        parent->kids.push_back(nic(c));
        break;
      case NodeKind::kNet:
        parent->kids.push_back(net(c));
        break;
      default:
        break;
    }
  }

  El pci(const Node& n) {
    El e{"pci"};
    e.set("busid", n.pci.busId);
    e.set("class", n.pci.classCode);
    e.setIf("vendor", n.pci.vendor);
    e.setIf("device", n.pci.device);
    e.setIf("subsystem_vendor", n.pci.subsystemVendor);
    e.setIf("subsystem_device", n.pci.subsystemDevice);
    e.set("link_speed", n.pci.linkSpeed);  // NCCL requires both
    e.set("link_width", std::to_string(n.pci.linkWidth));
    plainExtras(n, &e);
    return e;
  }

  El pciSwitch(int i) {
    const Node& n = t_.node(i);
    El e = pci(n);
    for (int c : t_.children(i)) addChild(c, &e);
    for (int l : t_.linksAt(i)) {
      const Link& link = t_.link(l);
      int o = link.other(i);
      if (link.kind != LinkKind::kLoc || o == i || t_.node(o).kind != NodeKind::kPciSwitch)
        continue;
      El k{"pcilink"};
      k.set("target", t_.node(o).pci.busId);
      e.kids.push_back(k);
    }
    kept(n, "", &e);
    return e;
  }

  El gpu(int i) {
    const Node& n = t_.node(i);
    El e = pci(n);
    El g{"gpu"};
    g.setInt("dev", n.gpu.dev, -1);
    g.setInt("sm", n.gpu.sm, -1);
    g.setInt("rank", n.gpu.rank, -1);
    g.setInt("gdr", n.gpu.gdr, -1);
    g.setIf("name", n.gpu.name);
    innerExtras(n, &g);
    for (int l : t_.linksAt(i)) {
      const Link& link = t_.link(l);
      int o = link.other(i);
      const Node& peer = t_.node(o);
      if (link.kind == LinkKind::kNvLink) {
        if (peer.kind == NodeKind::kGpu) {
          El k{"nvlink"};
          k.set("target", peer.pci.busId);
          k.set("count", std::to_string(link.count));
          // A peer GPU whose own class is not a GPU class (hand-edited) still reads back as one.
          k.set("tclass", isGpuClass(peer.pci.classCode) ? peer.pci.classCode : "0x030200");
          g.kids.push_back(k);
        } else if (link.parts.empty()) {
          El k{"nvlink"};
          k.set("target", "fffffff:ffff:ff");
          k.set("count", std::to_string(link.count));
          k.set("tclass", peer.kind == NodeKind::kCpu ? "0x068001" : "0x068000");
          g.kids.push_back(k);
        } else {
          for (const LinkPart& p : link.parts) {
            El k{"nvlink"};
            k.set("target", p.target);
            k.set("count", std::to_string(p.count));
            k.set("tclass", p.tclass);
            g.kids.push_back(k);
          }
        }
      } else if (link.kind == LinkKind::kC2c && link.count > 0) {
        El k{"c2c"};
        k.set("bw", std::to_string(std::llround(link.bw * 1000.0 / link.count)));
        k.set("count", std::to_string(link.count));
        g.kids.push_back(k);
      }
    }
    kept(n, "gpu", &g);
    e.kids.push_back(std::move(g));
    kept(n, "", &e);
    return e;
  }

  El nicElement(int i) {
    const Node& n = t_.node(i);
    El e{"nic"};
    innerExtras(n, &e);
    for (int c : t_.children(i)) addChild(c, &e);
    kept(n, "nic", &e);
    return e;
  }

  El nic(int i) {
    const Node& n = t_.node(i);
    if (n.pci.busId.empty()) {
      El e = nicElement(i);
      plainExtras(n, &e);
      kept(n, "", &e);
      return e;
    }
    El e = pci(n);
    e.kids.push_back(nicElement(i));
    kept(n, "", &e);
    return e;
  }

  El net(int i) {
    const Node& n = t_.node(i);
    El e{"net"};
    e.setIf("name", n.net.name);
    e.setInt("dev", n.net.dev, -1);
    e.setInt("speed", n.net.speedMbps, -1);
    e.setInt("port", n.net.port, -1);
    if (n.net.latency != -1) e.set("latency", realText(n.net.latency));
    e.setIf("guid", n.net.guid);
    e.setInt("maxconn", n.net.maxConn, -1);
    e.setInt("gdr", n.net.gdr, -1);
    e.setInt("coll", n.net.coll, -1);
    e.setIf("link_layer", n.net.linkLayer);
    e.setIf("gid", n.net.gid);
    plainExtras(n, &e);
    kept(n, "", &e);
    return e;
  }

  const Topology& t_;
};

}  // namespace

std::string writeTopologyXml(const Topology& topology, const XmlWriteOptions& options) {
  std::string out;
  if (!options.comment.empty()) {
    std::string c = options.comment;
    for (size_t p; (p = c.find("--")) != std::string::npos;) c.replace(p, 2, "- -");
    out += "<!-- " + c + " -->\n";
  }
  if (topology.hostCount() == 0) return out + "<system version=\"1\"/>\n";
  print(Writer(topology).system(), 0, &out);
  return out;
}

void writeTopologyFile(const Topology& topology, const std::string& path,
                       const XmlWriteOptions& options) {
  std::string text = writeTopologyXml(topology, options);
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail(Status::kSystemError, sysError("cannot write topology file " + tmp, errno));
    f << text;
    f.flush();
    if (!f) fail(Status::kSystemError, sysError("cannot write topology file " + tmp, errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(Status::kSystemError, sysError("cannot rename topology file to " + path, err));
  }
}

}  // namespace weft::topo
