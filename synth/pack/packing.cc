#include "synth/pack/packing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>

#include "src/common/error.h"
#include "synth/pack/arborescence.h"
#include "synth/pack/lp.h"
#include "synth/search/ring_search.h"

namespace weft::synth {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Uses of each link by the tree (index = link).
std::vector<double> treeUses(const Fabric& f, const std::vector<int>& parent, TreeFlow flow) {
  std::vector<double> uses(f.links.size(), 0.0);
  for (int v = 0; v < static_cast<int>(parent.size()); ++v) {
    const int u = parent[v];
    if (u < 0) continue;
    if (flow != TreeFlow::kUp)
      for (int l : f.routes[u][v]) uses[l] += 1;
    if (flow != TreeFlow::kDown)
      for (int l : f.routes[v][u]) uses[l] += 1;
  }
  return uses;
}

// Cost of tree edge u -> v under link prices.
std::vector<std::vector<double>> edgeCosts(const Fabric& f, const std::vector<double>& price,
                                           TreeFlow flow) {
  const int n = f.nranks;
  std::vector<std::vector<double>> cost(n, std::vector<double>(n, kInf));
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v) {
      if (u == v) continue;
      double c = 0;
      if (flow != TreeFlow::kUp)
        for (int l : f.routes[u][v]) c += price[l];
      if (flow != TreeFlow::kDown)
        for (int l : f.routes[v][u]) c += price[l];
      cost[u][v] = c;
    }
  return cost;
}

// Per tree edge u -> v: the time its last piece adds to the tree's drain, the route latency
// (both ways for kBoth) plus hopUs.
std::vector<std::vector<double>> hopCosts(const Fabric& f, TreeFlow flow, double hopUs) {
  const int n = f.nranks;
  std::vector<std::vector<double>> hop(n, std::vector<double>(n, 0.0));
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v) {
      if (u == v) continue;
      double h = hopUs;
      if (flow != TreeFlow::kUp) h += f.routeLatencyUs(u, v);
      if (flow != TreeFlow::kDown) h += f.routeLatencyUs(v, u);
      hop[u][v] = h;
    }
  return hop;
}

// Per rank: the summed hop costs from the root (the root 0).
std::vector<double> drains(const std::vector<int>& parent,
                           const std::vector<std::vector<double>>& hop) {
  const int n = static_cast<int>(parent.size());
  std::vector<double> d(n, -1.0);
  for (int v = 0; v < n; ++v) {
    std::vector<int> path;
    int x = v;
    while (x >= 0 && d[x] < 0 && parent[x] >= 0) path.push_back(x), x = parent[x];
    if (x >= 0 && parent[x] < 0) d[x] = 0;
    for (auto it = path.rbegin(); it != path.rend(); ++it)
      d[*it] = d[parent[*it]] + hop[parent[*it]][*it];
  }
  return d;
}

double treeDrain(const std::vector<int>& parent, const std::vector<std::vector<double>>& hop) {
  const auto d = drains(parent, hop);
  return *std::max_element(d.begin(), d.end());
}

// The tree re-parented towards its root where that costs nothing at the current prices: each
// rank moves under the rank (outside its own subtree) that reaches it soonest among those whose
// edge to it costs no more than its parent's. Edmonds breaks ties by rank order, which on a
// switch turns equal-cost stars into chains.
std::vector<int> shallower(const std::vector<std::vector<double>>& cost, std::vector<int> parent,
                           const std::vector<std::vector<double>>& hop, double tol) {
  const int n = static_cast<int>(parent.size());
  auto inSubtree = [&](int u, int v) {  // u is v or below it
    for (int x = u; x >= 0; x = parent[x])
      if (x == v) return true;
    return false;
  };
  std::vector<double> d = drains(parent, hop);
  for (int pass = 0; pass < n; ++pass) {
    bool changed = false;
    for (int v = 0; v < n; ++v) {
      const int p = parent[v];
      if (p < 0) continue;
      double best = d[v] - 1e-9;
      int to = -1;
      for (int u = 0; u < n; ++u) {
        if (u == p || u == v || cost[u][v] > cost[p][v] + tol || inSubtree(u, v)) continue;
        if (d[u] + hop[u][v] < best) best = d[u] + hop[u][v], to = u;
      }
      if (to >= 0) {
        parent[v] = to;
        changed = true;
        d = drains(parent, hop);  // v's subtree drains sooner now
      }
    }
    if (!changed) break;
  }
  return parent;
}

void checkFabric(const Fabric& f, const std::vector<int>& roots) {
  if (f.nranks < 1) throw Error(Status::kInvalidArgument, "packing: fabric has no ranks");
  if (static_cast<int>(f.routes.size()) != f.nranks)
    throw Error(Status::kInvalidArgument, "packing: fabric has no routes");
  for (int a = 0; a < f.nranks; ++a)
    for (int b = 0; b < f.nranks; ++b)
      if (a != b && f.routes[a].at(b).empty())
        throw Error(Status::kInvalidArgument, "packing: no route from rank " + std::to_string(a) +
                                                  " to rank " + std::to_string(b));
  if (roots.empty()) throw Error(Status::kInvalidArgument, "packing: no roots");
  for (int r : roots)
    if (r < 0 || r >= f.nranks)
      throw Error(Status::kInvalidArgument,
                  "packing: root " + std::to_string(r) + " is not a rank");
}

}  // namespace

std::vector<double> packLinkLoads(const Fabric& f, const std::vector<PackedTree>& trees,
                                  TreeFlow flow) {
  std::vector<double> load(f.links.size(), 0.0);
  for (const PackedTree& t : trees) {
    const auto uses = treeUses(f, t.parent, flow);
    for (size_t l = 0; l < uses.size(); ++l) load[l] += t.weight * uses[l];
  }
  return load;
}

PackResult packTrees(const Fabric& f, const std::vector<int>& roots, TreeFlow flow,
                     const PackOptions& o) {
  checkFabric(f, roots);
  PackResult result;
  if (f.nranks == 1) {
    result.trees.push_back({roots[0], {-1}, kInf});
    result.rate = kInf;
    result.optimal = true;
    return result;
  }
  const int R = static_cast<int>(roots.size());
  const int L = static_cast<int>(f.links.size());
  // Rows: one per root (lambda - sum of its trees <= 0), then one per link (load <= bw).
  std::vector<double> b(R, 0.0);
  for (const FabricLink& l : f.links) b.push_back(l.bw);
  PackingLp lp(b);
  std::vector<double> lambdaCol(R + L, 0.0);
  for (int i = 0; i < R; ++i) lambdaCol[i] = 1;
  lp.addColumn(1.0, lambdaCol);
  struct Column {
    int rootIndex;
    std::vector<int> parent;
    int lpIndex;
  };
  std::vector<Column> cols;
  std::map<std::pair<int, std::vector<int>>, int> seen;
  // A tree's column costs eps times its drain: over all roots' trees (weights about the rate
  // each) at most depthTrade of the rate, so the rate drops by at most that for shallowness.
  const auto hop = hopCosts(f, flow, o.hopUs);
  double maxHop = 0;
  for (const auto& row : hop)
    for (double h : row) maxHop = std::max(maxHop, h);
  const double eps =
      o.depthTrade > 0 && maxHop > 0 ? o.depthTrade / (R * (f.nranks - 1) * maxHop) : 0.0;
  // Adds a tree unless it is there already; returns its position in `cols` and whether it is new.
  auto addTree = [&](int ri, std::vector<int> parent) -> std::pair<size_t, bool> {
    auto it = seen.find({ri, parent});
    if (it != seen.end()) return {static_cast<size_t>(it->second), false};
    const auto uses = treeUses(f, parent, flow);
    std::vector<double> a(R + L, 0.0);
    a[ri] = -1;
    for (int l = 0; l < L; ++l) a[R + l] = uses[l];
    const int idx = lp.addColumn(eps > 0 ? -eps * treeDrain(parent, hop) : 0.0, a);
    seen[{ri, parent}] = static_cast<int>(cols.size());
    cols.push_back({ri, std::move(parent), idx});
    return {cols.size() - 1, true};
  };
  // Start from the trees that are cheapest when a link costs its inverse bandwidth.
  std::vector<double> price(L);
  for (int l = 0; l < L; ++l) price[l] = 1.0 / f.links[l].bw;
  for (int ri = 0; ri < R; ++ri) addTree(ri, minArborescence(edgeCosts(f, price, flow), roots[ri]));
  // And chains along the rings of the ring search (kept alone below when they are optimal).
  std::vector<size_t> ringColumns;  // ring-major, one per root
  std::vector<double> ringBw;
  if (o.seedWithRings) {
    RingSearchOptions ro;
    ro.maxIterations = 20000;
    for (const Ring& ring : searchRings(f, ro)) {
      ringBw.push_back(ring.bw);
      const int n = f.nranks;
      std::vector<int> pos(n);
      for (int i = 0; i < n; ++i) pos[ring.order[i]] = i;
      for (int ri = 0; ri < R; ++ri) {
        std::vector<int> parent(n, -1);
        const int p0 = pos[roots[ri]];
        for (int k = 1; k < n; ++k) {
          const int v = ring.order[(p0 + k) % n];
          // Down: the chain root, next, ...; up: data runs along the ring into the root.
          parent[v] =
              flow == TreeFlow::kUp ? ring.order[(p0 + k + 1) % n] : ring.order[(p0 + k - 1) % n];
        }
        ringColumns.push_back(addTree(ri, std::move(parent)).first);
      }
    }
  }

  while (true) {
    lp.solve(100000, eps > 0);  // the drain costs make Bland's rule slow
    const std::vector<double> y = lp.duals();
    for (int l = 0; l < L; ++l) price[l] = std::max(0.0, y[R + l]);  // round-off
    const auto cost = edgeCosts(f, price, flow);
    // Reduced cost of a tree of root r: z_r - (its links' prices) - eps * drain. Add every
    // improving tree (the cheapest, or its shallower equal-cost form where that is better).
    double maxCost = 0;
    for (const auto& row : cost)
      for (double c : row)
        if (std::isfinite(c)) maxCost = std::max(maxCost, c);
    bool added = false;
    for (int ri = 0; ri < R; ++ri) {
      auto reduced = [&](const std::vector<int>& par) {
        double c = 0;
        for (int v = 0; v < f.nranks; ++v)
          if (par[v] >= 0) c += cost[par[v]][v];
        return y[ri] - c - (eps > 0 ? eps * treeDrain(par, hop) : 0.0);
      };
      const double tol = o.tolerance * std::max(1.0, y[ri]);
      auto offer = [&](std::vector<int> par) {
        if (reduced(par) > tol && static_cast<int>(cols.size()) < o.maxColumns)
          added |= addTree(ri, std::move(par)).second;
      };
      std::vector<int> parent = minArborescence(cost, roots[ri]);
      if (eps > 0) {
        std::vector<int> flat = shallower(cost, parent, hop, 1e-9 * maxCost);
        if (reduced(flat) >= reduced(parent)) parent = std::move(flat);
        // A two-hop tree may price a little above the optimum and still drain much sooner.
        offer(twoLevelTree(cost, roots[ri]));
      }
      offer(std::move(parent));
    }
    if (!added) {
      // Optimal unless the budget stopped the search.
      result.optimal = static_cast<int>(cols.size()) < o.maxColumns;
      break;
    }
  }
  const double lambda = lp.value(0);  // the rate (the objective also holds the drain costs)
  result.columns = static_cast<int>(cols.size());
  // Where the ring chains alone reach the optimum, prefer them: every root splits its data
  // over the rings in proportion to ring bandwidth, as ring schedules do, so the trees are few,
  // evenly weighted and stream like rings.
  std::vector<double> weight(cols.size(), 0.0);
  for (size_t c = 0; c < cols.size(); ++c) weight[c] = lp.value(cols[c].lpIndex);
  if (!ringColumns.empty()) {
    std::vector<double> unit(cols.size(), 0.0), load(L, 0.0);
    for (size_t k = 0; k < ringColumns.size(); ++k) unit[ringColumns[k]] += ringBw[k / R];
    for (size_t c = 0; c < cols.size(); ++c) {
      if (unit[c] == 0) continue;
      const auto uses = treeUses(f, cols[c].parent, flow);
      for (int l = 0; l < L; ++l) load[l] += unit[c] * uses[l];
    }
    double scale = kInf;
    for (int l = 0; l < L; ++l)
      if (load[l] > 0) scale = std::min(scale, f.links[l].bw / load[l]);
    double ringRate = 0;
    for (double bw : ringBw) ringRate += bw * scale;
    if (ringRate >= lambda * (1 - 1e-9))
      for (size_t c = 0; c < cols.size(); ++c) weight[c] = unit[c] * scale;
  }
  result.rate = lambda;
  std::vector<double> perRoot(R, 0.0);
  for (size_t c = 0; c < cols.size(); ++c) perRoot[cols[c].rootIndex] += weight[c];
  for (size_t ci = 0; ci < cols.size(); ++ci) {
    const Column& c = cols[ci];
    const double w = weight[ci];
    // A root may get more than the common rate; scale its trees down to exactly the rate.
    if (w > lambda * 1e-9)
      result.trees.push_back({roots[c.rootIndex], c.parent, w * lambda / perRoot[c.rootIndex]});
  }
  std::stable_sort(result.trees.begin(), result.trees.end(),
                   [](const PackedTree& a, const PackedTree& b) {
                     return a.root != b.root ? a.root < b.root : a.weight > b.weight;
                   });
  return result;
}

std::string describePack(const Fabric& f, const PackResult& pack) {
  std::ostringstream out;
  out << "rate " << pack.rate << " GB/s per root, " << pack.trees.size() << " trees"
      << (pack.optimal ? " (optimal)" : " (search budget reached)") << "\n";
  for (const PackedTree& t : pack.trees) {
    out << "root " << t.root << ": " << t.weight << " GB/s";
    for (int v = 0; v < static_cast<int>(t.parent.size()); ++v)
      if (t.parent[v] >= 0)
        out << " " << f.nodes.at(t.parent[v]).name << "->" << f.nodes.at(v).name;
    out << "\n";
  }
  return out.str();
}

PackResult packAllGather(const Fabric& f, const PackOptions& o) {
  std::vector<int> roots;
  for (int r = 0; r < f.nranks; ++r) roots.push_back(r);
  return packTrees(f, roots, TreeFlow::kDown, o);
}

PackResult packBroadcast(const Fabric& f, int root, const PackOptions& o) {
  return packTrees(f, {root}, TreeFlow::kDown, o);
}

}  // namespace weft::synth
