#include "synth/model/fabric.h"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

#include "src/common/error.h"

namespace weft::synth {

std::vector<int> Fabric::outLinks(int v) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(links.size()); ++i)
    if (links[i].from == v) out.push_back(i);
  return out;
}

std::vector<int> Fabric::inLinks(int v) const {
  std::vector<int> in;
  for (int i = 0; i < static_cast<int>(links.size()); ++i)
    if (links[i].to == v) in.push_back(i);
  return in;
}

int Fabric::findLink(int u, int v) const {
  for (int i = 0; i < static_cast<int>(links.size()); ++i)
    if (links[i].from == u && links[i].to == v) return i;
  return -1;
}

double Fabric::routeBw(int a, int b) const {
  if (a == b) return topo::kLocalBw;
  double bw = std::numeric_limits<double>::infinity();
  for (int l : routes.at(a).at(b)) bw = std::min(bw, links[l].bw);
  return bw;
}

double Fabric::routeLatencyUs(int a, int b) const {
  double lat = 0;
  if (a == b) return 0;
  for (int l : routes.at(a).at(b)) lat += links[l].latencyUs;
  return lat;
}

std::string Fabric::describe() const {
  std::ostringstream out;
  out << "fabric: " << nranks << " ranks, " << nodes.size() << " nodes, " << links.size()
      << " directed links\n";
  for (size_t i = 0; i < nodes.size(); ++i)
    out << "  node " << i << " " << nodes[i].name << " (" << topo::nodeKindName(nodes[i].kind)
        << ", host " << nodes[i].host << ")\n";
  for (const FabricLink& l : links)
    out << "  " << nodes[l.from].name << " -> " << nodes[l.to].name << " "
        << topo::linkKindName(l.kind) << " " << l.bw << " GB/s " << l.latencyUs << " us\n";
  return out.str();
}

namespace {

// Adds both directions of a topology link between fabric nodes u and v (once).
void addDuplex(Fabric& f, int u, int v, const topo::Link& link) {
  if (f.findLink(u, v) >= 0) return;
  f.links.push_back({u, v, link.bw, link.latencyUs, link.kind});
  f.links.push_back({v, u, link.bw, link.latencyUs, link.kind});
}

// The widest topology link joining nodes a and b.
const topo::Link* widestLink(const topo::Topology& t, int a, int b) {
  const topo::Link* best = nullptr;
  for (int li : t.linksAt(a)) {
    const topo::Link& l = t.link(li);
    if (l.other(a) == b && (!best || l.bw > best->bw)) best = &l;
  }
  return best;
}

// Each rank's own network port, or -1: the ports nearest its GPU (widest path, then fewest
// hops), and where GPUs share the same nearest ports (two GPUs and two NICs behind one PCIe
// switch) they take them in turn, as NCCL's rail-optimised channels do. Sending every GPU of
// a switch through its first NIC would leave half of a DGX's NICs idle.
std::vector<int> ownNets(const topo::Topology& t, const std::vector<int>& rankTopo,
                         const topo::PathOptions& po) {
  std::vector<int> own(rankTopo.size(), -1);
  std::map<std::vector<int>, int> taken;  // nearest ports -> ranks that took one so far
  for (size_t r = 0; r < rankTopo.size(); ++r) {
    const int g = rankTopo[r];
    if (g < 0 || t.node(g).kind != topo::NodeKind::kGpu) continue;
    const std::vector<int> nets = t.find(topo::NodeKind::kNet, t.node(g).host);
    if (nets.empty()) continue;
    const std::vector<topo::Path> paths = t.pathsFrom(g, po);
    std::vector<int> nearest;
    for (int net : nets) {
      const topo::Path& p = paths[net];
      if (!p.connected()) continue;
      if (!nearest.empty()) {
        const topo::Path& q = paths[nearest.front()];
        if (p.bw < q.bw || (p.bw == q.bw && p.hops > q.hops)) continue;
        if (p.bw > q.bw || p.hops < q.hops) nearest.clear();
      }
      nearest.push_back(net);
    }
    if (nearest.empty()) continue;
    own[r] = nearest[taken[nearest]++ % nearest.size()];
  }
  return own;
}

// The route a -> b between hosts through a's own port and b's own port: a to its port, port to
// port over the network, b's port to b. Empty when either has no port or a piece is missing.
std::vector<int> crossHostPath(const topo::Topology& t, int from, int to, int netFrom, int netTo,
                               const topo::PathOptions& po) {
  if (netFrom < 0 || netTo < 0) return {};
  std::vector<int> nodes;
  for (const auto& [a, b] : {std::pair{from, netFrom}, {netFrom, netTo}, {netTo, to}}) {
    const topo::Path p = t.path(a, b, po);
    if (!p.connected() || p.nodes.size() < 2) return {};
    nodes.insert(nodes.end(), p.nodes.begin() + (nodes.empty() ? 0 : 1), p.nodes.end());
  }
  return nodes;
}

}  // namespace

Fabric fabricFromTopology(const topo::Topology& t, const FabricOptions& options) {
  Fabric f;
  std::map<int, int> fabricOf;  // topology node -> fabric node
  std::vector<int> rankTopo;    // per rank: topology node it sits at
  const std::vector<int> gpus = t.find(topo::NodeKind::kGpu);
  if (!gpus.empty()) {
    std::vector<int> chosen = options.gpus;
    if (chosen.empty())
      for (int i = 0; i < static_cast<int>(gpus.size()); ++i) chosen.push_back(i);
    for (int g : chosen) {
      if (g < 0 || g >= static_cast<int>(gpus.size()))
        throw Error(Status::kInvalidArgument, "fabric: GPU " + std::to_string(g) +
                                                  " does not exist (topology has " +
                                                  std::to_string(gpus.size()) + ")");
      const int node = gpus[g];
      if (fabricOf.count(node))
        throw Error(Status::kInvalidArgument, "fabric: GPU " + std::to_string(g) + " given twice");
      fabricOf[node] = static_cast<int>(f.nodes.size());
      f.nodes.push_back({t.label(node), topo::NodeKind::kGpu, t.node(node).host, node});
      f.hostOf.push_back(t.node(node).host);
      rankTopo.push_back(node);
    }
  } else {
    // Host ranks: made-up nodes hanging off each host's first CPU.
    for (int h = 0; h < t.hostCount(); ++h)
      for (int r = 0; r < options.hostRanksPerHost; ++r) {
        f.nodes.push_back(
            {(t.hostCount() > 1 ? "h" + std::to_string(h) + "/" : "") + "rank" + std::to_string(r),
             topo::NodeKind::kCpu, h, -1});
        f.hostOf.push_back(h);
        rankTopo.push_back(-1);
      }
  }
  f.nranks = static_cast<int>(f.nodes.size());
  if (f.nranks == 0) throw Error(Status::kInvalidArgument, "fabric: no ranks");

  auto fabricNode = [&](int topoNode) {
    auto it = fabricOf.find(topoNode);
    if (it != fabricOf.end()) return it->second;
    const topo::Node& n = t.node(topoNode);
    fabricOf[topoNode] = static_cast<int>(f.nodes.size());
    f.nodes.push_back({t.label(topoNode), n.kind, n.host, topoNode});
    return fabricOf[topoNode];
  };
  // Host ranks attach to their host's first CPU.
  std::vector<int> attach(f.nranks, -1);
  for (int r = 0; r < f.nranks; ++r) {
    if (rankTopo[r] >= 0) continue;
    const std::vector<int> cpus = t.find(topo::NodeKind::kCpu, f.hostOf[r]);
    if (cpus.empty())
      throw Error(Status::kInvalidArgument,
                  "fabric: host " + std::to_string(f.hostOf[r]) + " has neither GPUs nor CPUs");
    attach[r] = cpus.front();
    rankTopo[r] = cpus.front();
    topo::Link l;
    l.kind = topo::LinkKind::kLoc;
    l.bw = options.hostRankBw;
    l.latencyUs = options.hostRankLatencyUs;
    addDuplex(f, r, fabricNode(cpus.front()), l);
  }

  topo::PathOptions po;
  po.gpuRelay = options.gpuRelay;
  f.routes.assign(f.nranks, std::vector<std::vector<int>>(f.nranks));
  const std::vector<int> net = ownNets(t, rankTopo, po);
  for (int a = 0; a < f.nranks; ++a) {
    const std::vector<topo::Path> paths = t.pathsFrom(rankTopo[a], po);
    for (int b = 0; b < f.nranks; ++b) {
      if (a == b) continue;
      std::vector<int>& route = f.routes[a][b];
      if (attach[a] >= 0) route.push_back(f.findLink(a, fabricNode(attach[a])));
      if (rankTopo[a] != rankTopo[b]) {
        const topo::Path& p = paths[rankTopo[b]];
        if (!p.connected() || p.nodes.size() < 2)
          throw Error(Status::kInvalidArgument, "fabric: no route from rank " + std::to_string(a) +
                                                    " to rank " + std::to_string(b));
        std::vector<int> nodes = p.nodes;
        if (f.hostOf[a] != f.hostOf[b]) {
          std::vector<int> own = crossHostPath(t, rankTopo[a], rankTopo[b], net[a], net[b], po);
          if (!own.empty()) nodes = std::move(own);
        }
        for (size_t i = 0; i + 1 < nodes.size(); ++i) {
          const topo::Link* link = widestLink(t, nodes[i], nodes[i + 1]);
          if (!link) throw Error(Status::kInternalError, "fabric: path hop without a link");
          const int u = fabricNode(nodes[i]), v = fabricNode(nodes[i + 1]);
          addDuplex(f, u, v, *link);
          route.push_back(f.findLink(u, v));
        }
      }
      if (attach[b] >= 0) route.push_back(f.findLink(fabricNode(attach[b]), b));
    }
  }
  if (options.allLinks) {
    std::vector<bool> otherGpu(t.nodes().size(), false);
    for (int g : gpus) otherGpu[g] = !fabricOf.count(g);
    for (const topo::Link& l : t.links()) {
      if (otherGpu[l.a] || otherGpu[l.b]) continue;
      if (t.node(l.a).kind == topo::NodeKind::kHost || t.node(l.b).kind == topo::NodeKind::kHost)
        continue;
      addDuplex(f, fabricNode(l.a), fabricNode(l.b), *widestLink(t, l.a, l.b));
    }
  }
  return f;
}

Fabric fullyConnectedFabric(int nranks, double bw, double latencyUs) {
  Fabric f;
  f.nranks = nranks;
  for (int r = 0; r < nranks; ++r) {
    f.nodes.push_back({"rank" + std::to_string(r), topo::NodeKind::kGpu, 0, -1});
    f.hostOf.push_back(0);
  }
  f.routes.assign(nranks, std::vector<std::vector<int>>(nranks));
  for (int a = 0; a < nranks; ++a)
    for (int b = 0; b < nranks; ++b)
      if (a != b) {
        f.routes[a][b] = {static_cast<int>(f.links.size())};
        f.links.push_back({a, b, bw, latencyUs, topo::LinkKind::kNvLink});
      }
  return f;
}

}  // namespace weft::synth
