#include "synth/model/bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <sstream>

#include "src/common/error.h"
#include "synth/model/cost_model.h"
#include "synth/model/max_flow.h"

namespace weft::synth {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kAllPartitionsUpTo = 10;  // alltoall: every rank partition up to this many ranks

// Link l as an arc of the (possibly reversed) capacity graph.
int arcFrom(const FabricLink& l, bool reversed) { return reversed ? l.to : l.from; }
int arcTo(const FabricLink& l, bool reversed) { return reversed ? l.from : l.to; }

// Capacity of the arcs leaving `inS` in the (possibly reversed) graph.
double cutBw(const Fabric& f, const std::vector<bool>& inS, bool reversed) {
  double bw = 0;
  for (const FabricLink& l : f.links)
    if (inS[arcFrom(l, reversed)] && !inS[arcTo(l, reversed)]) bw += l.bw;
  return bw;
}

// "gpu0", "host 1" (all ranks of a host), or "{gpu0,gpu3}".
std::string rankSetText(const Fabric& f, const std::vector<int>& ranks) {
  if (ranks.size() == 1) return f.nodes[ranks[0]].name;
  if (ranks.empty()) return "{}";
  const int host = f.hostOf[ranks[0]];
  int onHost = 0;
  bool sameHost = true;
  for (int r = 0; r < f.nranks; ++r) onHost += f.hostOf[r] == host;
  for (int r : ranks) sameHost &= f.hostOf[r] == host;
  const bool multiHost =
      std::any_of(f.hostOf.begin(), f.hostOf.end(), [&](int h) { return h != host; });
  if (sameHost && multiHost && onHost == static_cast<int>(ranks.size()))
    return "host " + std::to_string(host);
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + f.nodes[ranks[i]].name;
  return s + "}";
}

std::string bwText(double bw) {
  std::ostringstream o;
  o.precision(4);
  o << bw << " GB/s";
  return o.str();
}

// Describes the cut S -> rest in the real direction of data. In the graph as given, data leaves
// S; reversed graphs (reduce-scatter) carry data the other way.
Cut makeCut(const Fabric& f, const std::vector<bool>& inS, bool reversed) {
  Cut c;
  for (int v = 0; v < f.nodeCount(); ++v)
    if (inS[v]) c.source.push_back(v);
  c.bw = cutBw(f, inS, reversed);
  std::vector<int> inside, outside;
  for (int r = 0; r < f.nranks; ++r) (inS[r] ? inside : outside).push_back(r);
  // Name the smaller side of ranks: its ingress or egress.
  const bool nameOutside = outside.size() <= inside.size();
  const std::vector<int>& side = nameOutside ? outside : inside;
  const bool ingress = nameOutside != reversed;
  c.text = rankSetText(f, side) + (ingress ? " ingress" : " egress") + " (" + bwText(c.bw) + ")";
  return c;
}

MaxFlow graphOf(const Fabric& f, bool reversed, int extraNodes) {
  MaxFlow g(f.nodeCount() + extraNodes);
  for (const FabricLink& l : f.links) g.addArc(arcFrom(l, reversed), arcTo(l, reversed), l.bw);
  return g;
}

// Lowest latency from `src` to every node over fabric links (Dijkstra).
std::vector<double> latencyFrom(const Fabric& f, int src) {
  std::vector<double> dist(f.nodeCount(), kInf);
  std::vector<std::vector<int>> out(f.nodeCount());
  for (int i = 0; i < static_cast<int>(f.links.size()); ++i) out[f.links[i].from].push_back(i);
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> q;
  dist[src] = 0;
  q.push({0, src});
  while (!q.empty()) {
    auto [d, u] = q.top();
    q.pop();
    if (d > dist[u]) continue;
    for (int li : out[u]) {
      const FabricLink& l = f.links[li];
      if (d + l.latencyUs < dist[l.to]) {
        dist[l.to] = d + l.latencyUs;
        q.push({dist[l.to], l.to});
      }
    }
  }
  return dist;
}

void checkReachable(double d, const Fabric& f, int a, int b) {
  if (!std::isfinite(d))
    throw Error(Status::kInvalidArgument,
                "bounds: no fabric path from " + f.nodes[a].name + " to " + f.nodes[b].name);
}

double latencyDiameter(const Fabric& f) {
  double worst = 0;
  for (int a = 0; a < f.nranks; ++a) {
    const std::vector<double> d = latencyFrom(f, a);
    for (int b = 0; b < f.nranks; ++b) {
      checkReachable(d[b], f, a, b);
      worst = std::max(worst, d[b]);
    }
  }
  return worst;
}

// Max flow from the ranks in `from` to the ranks in `to` (super source and sink).
double setFlow(const Fabric& f, const std::vector<int>& from, const std::vector<int>& to,
               Cut* cut) {
  const int s = f.nodeCount(), t = s + 1;
  MaxFlow g = graphOf(f, false, 2);
  for (int r : from) g.addArc(s, r, kInf);
  for (int r : to) g.addArc(r, t, kInf);
  const double flow = g.solve(s, t);
  if (cut) {
    std::vector<bool> side = g.sourceSide();
    side.resize(f.nodeCount());
    *cut = makeCut(f, side, false);
  }
  return flow;
}

}  // namespace

double busBwFactor(plan::Collective coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case plan::Collective::kAllReduce:
      return nranks > 1 ? 2 * (n - 1) / n : 1;
    case plan::Collective::kAllGather:
    case plan::Collective::kReduceScatter:
    case plan::Collective::kAlltoAll:
    case plan::Collective::kGather:
    case plan::Collective::kScatter:
      return nranks > 1 ? (n - 1) / n : 1;
    default:
      return 1;
  }
}

double maxFlowRate(const Fabric& f, int from, int to, Cut* cut) {
  MaxFlow g = graphOf(f, false, 0);
  const double flow = g.solve(from, to);
  if (cut) *cut = makeCut(f, g.sourceSide(), false);
  return flow;
}

double allGatherCutRate(const Fabric& f, bool reversed, Cut* cut) {
  const int n = f.nranks;
  if (n <= 1) {
    if (cut) *cut = Cut{{}, kInf, "no cut (one rank)"};
    return kInf;
  }
  // Start from the tightest single-rank ingress cut S = V \ {v}: x <= B_in(v) / (N-1).
  double x = kInf;
  std::vector<bool> best;
  for (int v = 0; v < n; ++v) {
    std::vector<bool> inS(f.nodeCount(), true);
    inS[v] = false;
    const double ratio = cutBw(f, inS, reversed) / (n - 1);
    if (ratio < x) {
      x = ratio;
      best = inS;
    }
  }
  if (x <= 0) {
    Cut c = makeCut(f, best, reversed);
    throw Error(Status::kInvalidArgument, "bounds: a rank has no bandwidth: " + c.text);
  }
  // Dinkelbach: a cut with B+(S) < x * |S ∩ ranks| lowers x to its ratio; when no rank's
  // min cut against the super source is violated, x is the optimum and `best` binds.
  const int s = f.nodeCount();
  for (int iter = 0; iter < 200; ++iter) {
    double next = x;
    std::vector<bool> nextSet;
    for (int t = 0; t < n; ++t) {
      MaxFlow g = graphOf(f, reversed, 1);
      for (int v = 0; v < n; ++v) g.addArc(s, v, x);
      const double flow = g.solve(s, t);
      if (flow >= n * x * (1 - 1e-9)) continue;
      std::vector<bool> side = g.sourceSide();
      side.resize(f.nodeCount());
      int ranksIn = 0;
      for (int v = 0; v < n; ++v) ranksIn += side[v];
      if (ranksIn == 0) continue;
      const double ratio = cutBw(f, side, reversed) / ranksIn;
      if (ratio < next * (1 - 1e-12)) {
        next = ratio;
        nextSet = side;
      }
    }
    if (nextSet.empty()) break;
    x = next;
    best = nextSet;
  }
  if (cut) *cut = makeCut(f, best, reversed);
  return x;
}

Bound lowerBound(plan::Collective coll, const Fabric& f, uint64_t bytes, int root) {
  using plan::Collective;
  const int n = f.nranks;
  if (n <= 0) throw Error(Status::kInvalidArgument, "bounds: fabric without ranks");
  Bound b;
  b.coll = coll;
  b.bytes = bytes;
  const double m = static_cast<double>(bytes);
  auto us = [](double bytesPerGBs) { return bytesPerGBs / kBytesPerUsPerGBs; };
  switch (coll) {
    case Collective::kAllGather:
    case Collective::kReduceScatter: {
      const bool reversed = coll == Collective::kReduceScatter;
      const double x = allGatherCutRate(f, reversed, &b.cut);
      b.bandwidthUs = n > 1 ? us(m / n / x) : 0;
      b.latencyUs = latencyDiameter(f);
      break;
    }
    case Collective::kAllReduce: {
      Cut rs, ag;
      const double xr = allGatherCutRate(f, true, &rs), xa = allGatherCutRate(f, false, &ag);
      b.bandwidthUs = n > 1 ? us(m / n / xr) + us(m / n / xa) : 0;
      b.latencyUs = latencyDiameter(f);
      b.cut = ag;
      b.cut.text = "reduce-scatter: " + rs.text + "; allgather: " + ag.text;
      break;
    }
    case Collective::kBroadcast:
    case Collective::kReduce: {
      if (root < 0 || root >= n)
        throw Error(Status::kInvalidArgument, "bounds: root " + std::to_string(root) +
                                                  " out of range for " + std::to_string(n) +
                                                  " ranks");
      const bool bcast = coll == Collective::kBroadcast;
      double rate = kInf;
      const std::vector<double> fromRoot = latencyFrom(f, root);
      for (int v = 0; v < n; ++v) {
        if (v == root) continue;
        Cut c;
        const double r = bcast ? maxFlowRate(f, root, v, &c) : maxFlowRate(f, v, root, &c);
        if (r <= 0) checkReachable(kInf, f, bcast ? root : v, bcast ? v : root);
        if (r < rate) {
          rate = r;
          b.cut = c;
        }
        const double lat = bcast ? fromRoot[v] : latencyFrom(f, v)[root];
        checkReachable(lat, f, bcast ? root : v, bcast ? v : root);
        b.latencyUs = std::max(b.latencyUs, lat);
      }
      b.bandwidthUs = n > 1 ? us(m / rate) : 0;
      break;
    }
    case Collective::kAlltoAll: {
      // Rank partitions whose min cut bounds the bytes that must cross it: all of them on small
      // fabrics; otherwise each rank alone, all but one rank, each host and each prefix of the
      // rank order (rings, chains and host blocks).
      std::vector<std::vector<int>> sides;
      if (n <= kAllPartitionsUpTo) {
        for (uint32_t mask = 1; mask + 1 < (1u << n); ++mask) {
          std::vector<int> a;
          for (int r = 0; r < n; ++r)
            if (mask >> r & 1) a.push_back(r);
          sides.push_back(a);
        }
      } else {
        for (int v = 0; v < n; ++v) {
          sides.push_back({v});
          std::vector<int> rest;
          for (int r = 0; r < n; ++r)
            if (r != v) rest.push_back(r);
          sides.push_back(rest);
        }
        std::vector<int> prefix;
        for (int k = 0; k + 1 < n; ++k) {
          prefix.push_back(k);
          sides.push_back(prefix);
        }
        const int hosts = *std::max_element(f.hostOf.begin(), f.hostOf.end()) + 1;
        for (int h = 0; h < hosts && hosts > 1; ++h) {
          std::vector<int> in;
          for (int r = 0; r < n; ++r)
            if (f.hostOf[r] == h) in.push_back(r);
          sides.push_back(in);
        }
      }
      for (const std::vector<int>& a : sides) {
        if (a.empty() || static_cast<int>(a.size()) >= n) continue;
        std::vector<bool> inA(n, false);
        for (int r : a) inA[r] = true;
        std::vector<int> rest;
        for (int r = 0; r < n; ++r)
          if (!inA[r]) rest.push_back(r);
        Cut c;
        const double flow = setFlow(f, a, rest, &c);
        if (flow <= 0) checkReachable(kInf, f, a[0], rest[0]);
        const double crossing = m / n * a.size() * rest.size();
        if (us(crossing / flow) > b.bandwidthUs) {
          b.bandwidthUs = us(crossing / flow);
          b.cut = c;
        }
      }
      b.latencyUs = latencyDiameter(f);
      break;
    }
    case Collective::kGather:
    case Collective::kScatter: {
      if (root < 0 || root >= n)
        throw Error(Status::kInvalidArgument, "bounds: root " + std::to_string(root) +
                                                  " out of range for " + std::to_string(n) +
                                                  " ranks");
      // Gather: (N-1)/N of M enters the root's side, and each rank's M/N leaves it. Scatter is
      // the same with data flowing the other way.
      const bool gather = coll == Collective::kGather;
      std::vector<int> others;
      for (int v = 0; v < n; ++v)
        if (v != root) others.push_back(v);
      auto consider = [&](double crossing, double flow, const Cut& c) {
        if (flow <= 0) throw Error(Status::kInvalidArgument, "bounds: no path across " + c.text);
        if (us(crossing / flow) > b.bandwidthUs) {
          b.bandwidthUs = us(crossing / flow);
          b.cut = c;
        }
      };
      if (n > 1) {
        Cut c;
        const double flow =
            gather ? setFlow(f, others, {root}, &c) : setFlow(f, {root}, others, &c);
        consider(m / n * (n - 1), flow, c);
      }
      const std::vector<double> fromRoot = latencyFrom(f, root);
      for (int v : others) {
        Cut c;
        const double flow = gather ? maxFlowRate(f, v, root, &c) : maxFlowRate(f, root, v, &c);
        consider(m / n, flow, c);
        const double lat = gather ? latencyFrom(f, v)[root] : fromRoot[v];
        checkReachable(lat, f, gather ? v : root, gather ? root : v);
        b.latencyUs = std::max(b.latencyUs, lat);
      }
      break;
    }
    default:
      throw Error(Status::kInvalidArgument,
                  std::string("bounds: no lower bound for ") + plan::collectiveName(coll));
  }
  if (n <= 1) b.latencyUs = 0;
  b.timeUs = std::max(b.bandwidthUs, b.latencyUs);
  b.algBw = b.bandwidthUs > 0 ? m / b.bandwidthUs / kBytesPerUsPerGBs : kInf;
  b.busBw = b.algBw * busBwFactor(coll, n);
  return b;
}

std::string Bound::describe() const {
  std::ostringstream o;
  o.precision(6);
  o << plan::collectiveName(coll) << " " << bytes << " B: >= " << timeUs << " us (bandwidth "
    << bandwidthUs << " us, latency " << latencyUs << " us; algbw <= " << algBw
    << " GB/s, busbw <= " << busBw << " GB/s); binding cut: " << cut.text;
  return o.str();
}

}  // namespace weft::synth
