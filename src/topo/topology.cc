#include "src/topo/topology.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <tuple>

#include "src/common/error.h"

namespace weft::topo {

const char* nodeKindName(NodeKind k) {
  switch (k) {
    case NodeKind::kHost:
      return "host";
    case NodeKind::kCpu:
      return "cpu";
    case NodeKind::kPciSwitch:
      return "pci";
    case NodeKind::kGpu:
      return "gpu";
    case NodeKind::kNic:
      return "nic";
    case NodeKind::kNet:
      return "net";
    case NodeKind::kNvSwitch:
      return "nvswitch";
    case NodeKind::kNetSwitch:
      return "fabric";
  }
  return "?";
}

const char* linkKindName(LinkKind k) {
  switch (k) {
    case LinkKind::kLoc:
      return "LOC";
    case LinkKind::kNvLink:
      return "NVL";
    case LinkKind::kC2c:
      return "C2C";
    case LinkKind::kPci:
      return "PCI";
    case LinkKind::kSys:
      return "SYS";
    case LinkKind::kNet:
      return "NET";
  }
  return "?";
}

const char* pathTypeName(PathType t) {
  static const char* kNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX",
                                 "PXB", "PHB", "SYS", "NET", "DIS"};
  return kNames[static_cast<int>(t)];
}

std::string normalizeBusId(const std::string& in) {
  std::string s;
  for (char c : in) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // domain:bus:device.function, all hex; the domain is optional.
  unsigned long parts[4] = {0, 0, 0, 0};
  int n = 0;
  const char* p = s.c_str();
  while (n < 4) {
    char* end = nullptr;
    if (!std::isxdigit(static_cast<unsigned char>(*p))) return s;
    parts[n] = std::strtoul(p, &end, 16);
    if (end - p > 8) return s;
    ++n;
    p = end;
    if (*p == '\0') break;
    if (*p != ':' && *p != '.') return s;
    ++p;
  }
  if (*p != '\0') return s;
  unsigned long domain, bus, dev, fn;
  if (n == 4) {
    domain = parts[0], bus = parts[1], dev = parts[2], fn = parts[3];
  } else if (n == 3 && s.find('.') != std::string::npos) {
    domain = 0, bus = parts[0], dev = parts[1], fn = parts[2];
  } else {
    return s;
  }
  if (bus > 0xff || dev > 0x1f || fn > 7) return s;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%04lx:%02lx:%02lx.%lx", domain & 0xffffffffUL, bus, dev, fn);
  return buf;
}

static bool classPrefix(const std::string& cls, const char* prefix) {
  std::string c;
  for (char ch : cls) c += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return c.rfind(prefix, 0) == 0;
}
bool isGpuClass(const std::string& cls) { return classPrefix(cls, "0x03"); }
bool isNicClass(const std::string& cls) { return classPrefix(cls, "0x02"); }
bool isInfinibandClass(const std::string& cls) { return classPrefix(cls, "0x0207"); }
bool isNvSwitchClass(const std::string& cls) { return classPrefix(cls, "0x068000"); }
bool isCpuClass(const std::string& cls) { return classPrefix(cls, "0x068001"); }

Topology::Topology(LinkRates rates) : rates_(std::move(rates)) {}

int Topology::addHost(HostInfo info) {
  hosts_.push_back(std::move(info));
  int h = static_cast<int>(hosts_.size()) - 1;
  Node n;
  n.kind = NodeKind::kHost;
  n.host = h;
  hostNodes_.push_back(-1);
  hostNodes_[h] = addNode(std::move(n));
  return h;
}

int Topology::addNode(Node node) {
  bool hostless = node.kind == NodeKind::kNetSwitch;
  if (hostless)
    node.host = -1;
  else if (node.host < 0 || node.host >= hostCount())
    fail(Status::kInternalError, "topology: node of kind " + std::string(nodeKindName(node.kind)) +
                                     " on unknown host " + std::to_string(node.host));
  if (node.parent >= static_cast<int>(nodes_.size()))
    fail(Status::kInternalError, "topology: node parent out of range");
  nodes_.push_back(std::move(node));
  adjacency_.emplace_back();
  children_.emplace_back();
  int i = static_cast<int>(nodes_.size()) - 1;
  if (nodes_[i].parent >= 0) children_[nodes_[i].parent].push_back(i);
  return i;
}

int Topology::addLink(Link link) {
  int n = static_cast<int>(nodes_.size());
  if (link.a < 0 || link.a >= n || link.b < 0 || link.b >= n)
    fail(Status::kInternalError, "topology: link endpoint out of range");
  links_.push_back(std::move(link));
  int i = static_cast<int>(links_.size()) - 1;
  adjacency_[links_[i].a].push_back(i);
  if (links_[i].b != links_[i].a) adjacency_[links_[i].b].push_back(i);
  return i;
}

int Topology::addChildNode(Node node, LinkKind kind, double bw, double latencyUs) {
  const int parent = node.parent;
  const int idx = addNode(std::move(node));
  const bool parentFirst = kind == LinkKind::kNet;
  Link l;
  l.a = parentFirst ? parent : idx;
  l.b = parentFirst ? idx : parent;
  l.kind = kind;
  l.bw = bw;
  l.latencyUs = latencyUs;
  addLink(std::move(l));
  return idx;
}

int Topology::findLink(int a, int b, LinkKind kind) const {
  if (a < 0 || a >= static_cast<int>(adjacency_.size())) return -1;
  for (int l : adjacency_[a]) {
    const Link& k = links_[l];
    if (k.kind == kind && ((k.a == a && k.b == b) || (k.a == b && k.b == a))) return l;
  }
  return -1;
}

void Topology::rebuildAdjacency() {
  children_.assign(nodes_.size(), {});
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].parent >= 0) children_[nodes_[i].parent].push_back(static_cast<int>(i));
  adjacency_.assign(nodes_.size(), {});
  for (size_t i = 0; i < links_.size(); ++i) {
    adjacency_[links_[i].a].push_back(static_cast<int>(i));
    if (links_[i].b != links_[i].a) adjacency_[links_[i].b].push_back(static_cast<int>(i));
  }
}

static std::string netLayer(const Topology& t, const Node& net) {
  if (!net.net.linkLayer.empty()) return net.net.linkLayer;
  if (net.parent >= 0 && isInfinibandClass(t.node(net.parent).pci.classCode)) return "IB";
  return "Ethernet";
}

void Topology::finalize() {
  // 1. Canonical node order: per host, the host node, its tree depth-first, its NVSwitch; then the
  // fabric switches. Readers, probes and merges then agree on indices.
  std::vector<std::vector<int>> kids(nodes_.size());
  std::vector<int> roots;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int p = nodes_[i].parent;
    if (p >= 0 && p < static_cast<int>(nodes_.size()) && p != static_cast<int>(i))
      kids[p].push_back(static_cast<int>(i));
    else
      roots.push_back(static_cast<int>(i));
  }
  std::vector<int> order;
  std::vector<char> placed(nodes_.size(), 0);
  auto visit = [&](int root) {
    std::vector<int> stack{root};
    while (!stack.empty()) {
      int n = stack.back();
      stack.pop_back();
      if (placed[n]) continue;
      placed[n] = 1;
      order.push_back(n);
      for (auto it = kids[n].rbegin(); it != kids[n].rend(); ++it) stack.push_back(*it);
    }
  };
  for (int h = 0; h < hostCount(); ++h) {
    visit(hostNodes_[h]);
    // Parentless nodes of this host (CPUs written without a host, NVSwitch) in index order.
    for (int r : roots)
      if (!placed[r] && nodes_[r].host == h && nodes_[r].kind != NodeKind::kNvSwitch) visit(r);
    for (int r : roots)
      if (!placed[r] && nodes_[r].host == h) visit(r);
  }
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (!placed[i]) visit(static_cast<int>(i));
  std::vector<int> newIndex(nodes_.size());
  for (size_t k = 0; k < order.size(); ++k) newIndex[order[k]] = static_cast<int>(k);
  std::vector<Node> sorted;
  sorted.reserve(nodes_.size());
  for (int o : order) {
    Node n = std::move(nodes_[o]);
    if (n.parent >= 0) n.parent = newIndex[n.parent];
    sorted.push_back(std::move(n));
  }
  nodes_ = std::move(sorted);
  for (auto& h : hostNodes_) h = newIndex[h];
  // Kept elements: only the order within one container is meaningful.
  for (Node& n : nodes_)
    std::stable_sort(n.opaque.begin(), n.opaque.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });

  // 2. Drop derived links, renumber the rest.
  std::vector<Link> kept;
  for (auto& l : links_) {
    if (l.derived) continue;
    l.a = newIndex[l.a];
    l.b = newIndex[l.b];
    kept.push_back(std::move(l));
  }
  links_ = std::move(kept);

  // 3. CPU interconnect within each host (NCCL connects every pair).
  for (int h = 0; h < hostCount(); ++h) {
    std::vector<int> cpus = find(NodeKind::kCpu, h);
    for (size_t i = 0; i < cpus.size(); ++i)
      for (size_t j = i + 1; j < cpus.size(); ++j) {
        Link l;
        l.a = cpus[i];
        l.b = cpus[j];
        l.kind = LinkKind::kSys;
        l.bw = std::min(interCpuBandwidth(nodes_[cpus[i]].cpu),
                        interCpuBandwidth(nodes_[cpus[j]].cpu));
        l.latencyUs = kSysLatencyUs;
        l.derived = true;
        links_.push_back(std::move(l));
      }
  }

  // 4. Network fabric between hosts: one switch per link layer.
  if (hostCount() > 1) {
    std::map<std::string, int> fabric;
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].kind == NodeKind::kNetSwitch)
        fabric[nodes_[i].net.linkLayer] = static_cast<int>(i);
    size_t n = nodes_.size();
    for (size_t i = 0; i < n; ++i) {
      if (nodes_[i].kind != NodeKind::kNet) continue;
      std::string layer = netLayer(*this, nodes_[i]);
      auto it = fabric.find(layer);
      if (it == fabric.end()) {
        Node sw;
        sw.kind = NodeKind::kNetSwitch;
        sw.host = -1;
        sw.net.linkLayer = layer;
        nodes_.push_back(std::move(sw));
        it = fabric.emplace(layer, static_cast<int>(nodes_.size()) - 1).first;
      }
      Link l;
      l.a = static_cast<int>(i);
      l.b = it->second;
      l.kind = LinkKind::kNet;
      l.bw = netBandwidth(nodes_[i].net.speedMbps);
      l.latencyUs = nodes_[i].net.latency > 0 ? nodes_[i].net.latency : kNetLatencyUs;
      l.derived = true;
      links_.push_back(std::move(l));
    }
  }

  // 5. Canonical link order.
  for (auto& l : links_)
    if (l.a > l.b) std::swap(l.a, l.b);
  std::stable_sort(links_.begin(), links_.end(), [](const Link& x, const Link& y) {
    return std::tie(x.a, x.b, x.kind) < std::tie(y.a, y.b, y.kind);
  });
  rebuildAdjacency();
}

int Topology::appendHost(const Topology& src, int host) {
  int h = addHost(src.host(host));
  std::vector<int> map(src.nodes().size(), -1);
  map[src.hostNode(host)] = hostNode(h);
  for (size_t i = 0; i < src.nodes().size(); ++i) {
    const Node& n = src.node(static_cast<int>(i));
    if (n.host != host || n.kind == NodeKind::kHost || n.kind == NodeKind::kNetSwitch) continue;
    Node copy = n;
    copy.host = h;
    copy.parent = n.parent >= 0 ? map[n.parent] : -1;
    map[i] = addNode(std::move(copy));
  }
  for (const Link& l : src.links()) {
    if (l.derived || map[l.a] < 0 || map[l.b] < 0) continue;
    Link copy = l;
    copy.a = map[l.a];
    copy.b = map[l.b];
    addLink(std::move(copy));
  }
  return h;
}

std::vector<int> Topology::find(NodeKind kind, int host) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == kind && (host < 0 || nodes_[i].host == host))
      out.push_back(static_cast<int>(i));
  return out;
}

int Topology::count(NodeKind kind, int host) const {
  return static_cast<int>(find(kind, host).size());
}

int Topology::countLinks(LinkKind kind) const {
  int c = 0;
  for (const auto& l : links_) c += l.kind == kind;
  return c;
}

int Topology::findCpu(int host, int numaId) const {
  for (int i : find(NodeKind::kCpu, host))
    if (nodes_[i].cpu.numaId == numaId) return i;
  return -1;
}

int Topology::findGpu(int host, int dev) const {
  for (int i : find(NodeKind::kGpu, host))
    if (nodes_[i].gpu.dev == dev) return i;
  return -1;
}

int Topology::findBusId(int host, const std::string& busId) const {
  if (busId.empty()) return -1;
  std::string want = normalizeBusId(busId);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if ((host >= 0 && n.host != host) || n.pci.busId.empty()) continue;
    if (n.kind != NodeKind::kPciSwitch && n.kind != NodeKind::kGpu && n.kind != NodeKind::kNic)
      continue;
    if (normalizeBusId(n.pci.busId) == want) return static_cast<int>(i);
  }
  return -1;
}

int Topology::findNet(int host, const std::string& name) const {
  for (int i : find(NodeKind::kNet, host))
    if (nodes_[i].net.name == name) return i;
  return -1;
}

int Topology::findNvSwitch(int host) const {
  auto v = find(NodeKind::kNvSwitch, host);
  return v.empty() ? -1 : v.front();
}

std::string Topology::label(int i) const {
  const Node& n = nodes_.at(i);
  std::string prefix = hostCount() > 1 && n.host >= 0 ? "h" + std::to_string(n.host) + "/" : "";
  switch (n.kind) {
    case NodeKind::kHost:
      return "host" + std::to_string(n.host);
    case NodeKind::kCpu:
      return prefix + "cpu" + std::to_string(n.cpu.numaId);
    case NodeKind::kPciSwitch:
      return prefix + "pci " + n.pci.busId;
    case NodeKind::kGpu:
      return prefix + (n.gpu.dev >= 0 ? "gpu" + std::to_string(n.gpu.dev) : "gpu " + n.pci.busId);
    case NodeKind::kNic:
      return prefix + (n.pci.busId.empty() ? "nic#" + std::to_string(i) : "nic " + n.pci.busId);
    case NodeKind::kNet:
      return prefix +
             (n.net.name.empty() ? "net" + std::to_string(n.net.dev) : "net " + n.net.name);
    case NodeKind::kNvSwitch:
      return prefix + "nvswitch";
    case NodeKind::kNetSwitch:
      return "fabric " + n.net.linkLayer;
  }
  return "?";
}

static PathType hopType(const Node& from, const Node& to, const Link& link, PathType soFar,
                        int hopsAfter) {
  PathType t = PathType::kLoc;
  switch (link.kind) {
    case LinkKind::kLoc:
      t = PathType::kLoc;
      break;
    case LinkKind::kNvLink:
      t = PathType::kNvl;
      break;
    case LinkKind::kC2c:
      t = PathType::kC2c;
      break;
    case LinkKind::kPci:
      t = PathType::kPix;
      break;
    case LinkKind::kSys:
      t = PathType::kSys;
      break;
    case LinkKind::kNet:
      // NIC -> port is local (NCCL's NET nodes are endpoints); port -> fabric leaves the host.
      t = (from.kind == NodeKind::kNetSwitch || to.kind == NodeKind::kNetSwitch) ? PathType::kNet
                                                                                 : PathType::kLoc;
      break;
  }
  if (from.kind == NodeKind::kPciSwitch && to.kind == NodeKind::kPciSwitch) t = PathType::kPxb;
  if (link.kind == LinkKind::kPci && (from.kind == NodeKind::kCpu || to.kind == NodeKind::kCpu))
    t = PathType::kPhb;
  if (from.kind == NodeKind::kGpu && soFar == PathType::kNvl && t == PathType::kNvl &&
      hopsAfter > 1)
    t = PathType::kNvb;
  return std::max(soFar, t);
}

std::vector<Path> Topology::pathsFrom(int from, const PathOptions& options) const {
  const int n = static_cast<int>(nodes_.size());
  if (from < 0 || from >= n) fail(Status::kInvalidArgument, "topology: path from unknown node");
  struct State {
    int hops = -1;
    double bw = 0;
    PathType type = PathType::kDis;
    int prev = -1;
    int prevLink = -1;
  };
  std::vector<State> st(n);
  st[from] = {0, kLocalBw, PathType::kLoc, -1, -1};
  const int srcHost = nodes_[from].host;
  std::vector<int> frontier{from}, next;
  std::vector<char> inNext(n, 0);
  while (!frontier.empty()) {
    next.clear();
    std::fill(inNext.begin(), inNext.end(), 0);
    for (int node : frontier) {
      const State& p = st[node];
      const Node& nd = nodes_[node];
      for (int li : adjacency_[node]) {
        const Link& link = links_[li];
        int rem = link.other(node);
        if (rem == node || link.bw <= 0) continue;
        const Node& rn = nodes_[rem];
        // GPUs relay only a direct NVLink hop into another NVLink hop to a GPU (NVB).
        if (node != from && nd.kind == NodeKind::kGpu &&
            (!options.gpuRelay || link.kind != LinkKind::kNvLink || rn.kind != NodeKind::kGpu ||
             p.hops > 1 || p.type != PathType::kNvl))
          continue;
        // Nodes of the source's own host are never reached through the network fabric, and
        // network ports relay only between their NIC and the fabric.
        if (nd.kind == NodeKind::kNetSwitch && rn.host == srcHost) continue;
        if (node != from && nd.kind == NodeKind::kNet &&
            !(rn.kind == NodeKind::kNetSwitch ||
              nodes_[st[node].prev].kind == NodeKind::kNetSwitch))
          continue;
        double bw = std::min(p.bw, link.bw);
        State& r = st[rem];
        if ((r.hops < 0 || r.hops > p.hops) && r.bw < bw) {
          r.hops = p.hops + 1;
          r.bw = bw;
          r.prev = node;
          r.prevLink = li;
          r.type = hopType(nd, rn, link, p.type, r.hops);
          if (!inNext[rem]) {
            inNext[rem] = 1;
            next.push_back(rem);
          }
        }
      }
    }
    frontier.swap(next);
  }
  std::vector<Path> out(n);
  for (int i = 0; i < n; ++i) {
    if (st[i].hops < 0) continue;
    Path& path = out[i];
    path.type = st[i].type;
    path.bw = st[i].bw;
    path.hops = st[i].hops;
    for (int c = i; c >= 0; c = st[c].prev) {
      path.nodes.push_back(c);
      if (st[c].prevLink >= 0) path.latencyUs += links_[st[c].prevLink].latencyUs;
    }
    std::reverse(path.nodes.begin(), path.nodes.end());
  }
  return out;
}

Path Topology::path(int from, int to, const PathOptions& options) const {
  if (to < 0 || to >= static_cast<int>(nodes_.size()))
    fail(Status::kInvalidArgument, "topology: path to unknown node");
  return pathsFrom(from, options)[to];
}

namespace {

std::string attrsText(const Attrs& a) {
  std::string s;
  for (const auto& [k, v] : a) s += " " + k + "=\"" + v + "\"";
  return s;
}

std::string describeDifference(const Topology& x, const Topology& y, int i) {
  const Node& a = x.node(i);
  const Node& b = y.node(i);
  std::string where = "node " + std::to_string(i) + " (" + x.label(i) + " vs " + y.label(i) + "): ";
  if (a.kind != b.kind) return where + "kind differs";
  if (a.host != b.host) return where + "host differs";
  if (a.parent != b.parent) return where + "parent differs";
  if (!(a.pci == b.pci)) return where + "pci attributes differ";
  if (!(a.cpu == b.cpu)) return where + "cpu attributes differ";
  if (!(a.gpu == b.gpu)) return where + "gpu attributes differ";
  if (!(a.net == b.net)) return where + "net attributes differ";
  if (a.extra != b.extra)
    return where + "extra attributes differ:" + attrsText(a.extra) + " vs" + attrsText(b.extra);
  if (a.innerExtra != b.innerExtra)
    return where + "inner extra attributes differ:" + attrsText(a.innerExtra) + " vs" +
           attrsText(b.innerExtra);
  if (a.opaque != b.opaque) return where + "kept elements differ";
  return "";
}

using LinkKey = std::tuple<int, int, int, long long, int, bool>;

std::vector<std::pair<LinkKey, std::vector<LinkPart>>> linkSet(const Topology& t) {
  std::vector<std::pair<LinkKey, std::vector<LinkPart>>> v;
  for (const Link& l : t.links()) {
    int a = std::min(l.a, l.b), b = std::max(l.a, l.b);
    v.push_back(
        {LinkKey{a, b, static_cast<int>(l.kind), std::llround(l.bw * 1e6), l.count, l.derived},
         l.parts});
  }
  std::sort(v.begin(), v.end(), [](const auto& p, const auto& q) { return p.first < q.first; });
  return v;
}

}  // namespace

std::string Topology::diff(const Topology& other) const {
  if (hostCount() != other.hostCount())
    return "host count " + std::to_string(hostCount()) + " vs " + std::to_string(other.hostCount());
  for (int h = 0; h < hostCount(); ++h) {
    const HostInfo &a = host(h), &b = other.host(h);
    if (a == b) continue;
    std::string w = "host " + std::to_string(h) + ": ";
    if (a.hostHash != b.hostHash) return w + "host hash differs";
    if (a.caches != b.caches) return w + "caches differ";
    if (a.pciDevices != b.pciDevices) return w + "PCI device list differs";
    return w + "host attributes differ";
  }
  if (nodes_.size() != other.nodes_.size())
    return "node count " + std::to_string(nodes_.size()) + " vs " +
           std::to_string(other.nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::string d = describeDifference(*this, other, static_cast<int>(i));
    if (!d.empty()) return d;
  }
  auto la = linkSet(*this), lb = linkSet(other);
  if (la.size() != lb.size())
    return "link count " + std::to_string(la.size()) + " vs " + std::to_string(lb.size());
  for (size_t i = 0; i < la.size(); ++i) {
    if (la[i] == lb[i]) continue;
    const auto& k = la[i].first;
    std::ostringstream o;
    o << "link " << label(std::get<0>(k)) << " - " << label(std::get<1>(k)) << " ("
      << linkKindName(static_cast<LinkKind>(std::get<2>(k))) << ") differs";
    return o.str();
  }
  return "";
}

}  // namespace weft::topo
