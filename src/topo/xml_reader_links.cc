// The topology XML reader's links that name their far end by bus id: <pcilink> between PCI
// switches, <nvlink> to a GPU, a CPU or the NVSwitch, and <c2c> to the local CPU. They are resolved
// once every element is read, so a link may name a device that comes later in the file.
#include <algorithm>

#include "src/common/log.h"
#include "src/topo/xml_reader_internal.h"

namespace weft::topo::detail {

void XmlReader::resolvePciLinks() {
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

int XmlReader::localCpu(int node) const {
  for (int n = node; n >= 0; n = topo_.node(n).parent)
    if (topo_.node(n).kind == NodeKind::kCpu) return n;
  return -1;
}

void XmlReader::resolveNvLinks() {
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
          l.bw = l.count * std::min(r.nvlinkPerLink(sm), r.nvlinkPerLink(topo_.node(peer).gpu.sm));
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

void XmlReader::resolveC2c() {
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

int XmlReader::byBus(int h, const std::string& busId) const {
  auto it = nodeByBus_.find({h, normalizeBusId(busId)});
  return it == nodeByBus_.end() ? -1 : it->second;
}

int XmlReader::linkBetween(int a, int b, LinkKind k) const {
  auto it = linkIndex_.find({std::min(a, b), std::max(a, b), static_cast<int>(k)});
  return it == linkIndex_.end() ? -1 : it->second;
}

int XmlReader::addLink(Link l) {
  std::tuple<int, int, int> key{std::min(l.a, l.b), std::max(l.a, l.b), static_cast<int>(l.kind)};
  int i = topo_.addLink(std::move(l));
  linkIndex_[key] = i;
  return i;
}

}  // namespace weft::topo::detail
