#include "synth/pack/arborescence.h"

#include <cmath>
#include <limits>
#include <string>

#include "src/common/error.h"

namespace weft::synth {
namespace {

struct Edge {
  int u, v;
  double w;
  int id;  // index in the caller's edge list
};

// Chosen edge id for every node but the root (index = node), on nodes 0..n-1.
std::vector<int> solve(int n, int root, const std::vector<Edge>& edges) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<int> in(n, -1);  // index into `edges`
  std::vector<double> best(n, kInf);
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (e.u == e.v || e.v == root) continue;
    if (e.w < best[e.v]) best[e.v] = e.w, in[e.v] = static_cast<int>(i);
  }
  for (int v = 0; v < n; ++v)
    if (v != root && in[v] < 0)
      throw Error(Status::kInvalidArgument,
                  "arborescence: node " + std::to_string(v) + " cannot be reached from the root");
  // Cycles among the chosen edges.
  std::vector<int> comp(n, -1), mark(n, -1);
  int comps = 0;
  bool cycle = false;
  for (int s = 0; s < n; ++s) {
    int v = s;
    while (v != root && mark[v] < 0 && comp[v] < 0) mark[v] = s, v = edges[in[v]].u;
    if (v != root && mark[v] == s && comp[v] < 0) {
      cycle = true;
      for (int x = v;;) {
        comp[x] = comps;
        x = edges[in[x]].u;
        if (x == v) break;
      }
      ++comps;
    }
  }
  std::vector<int> chosen(n, -1);
  if (!cycle) {
    for (int v = 0; v < n; ++v)
      if (v != root) chosen[v] = in[v];
    return chosen;
  }
  for (int v = 0; v < n; ++v)
    if (comp[v] < 0) comp[v] = comps++;
  // Contract: an edge entering a cycle node costs what it saves over the cycle's own edge.
  std::vector<Edge> sub;
  std::vector<int> origin;  // sub edge -> index in `edges`
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    const int cu = comp[e.u], cv = comp[e.v];
    if (cu == cv || e.v == root) continue;
    sub.push_back({cu, cv, e.w - (e.v != root ? best[e.v] : 0), static_cast<int>(sub.size())});
    origin.push_back(static_cast<int>(i));
  }
  const std::vector<int> subChosen = solve(comps, comp[root], sub);
  // Expand: every node keeps its cycle edge unless a chosen edge enters it from outside.
  for (int v = 0; v < n; ++v)
    if (v != root) chosen[v] = in[v];
  for (int c = 0; c < comps; ++c) {
    if (c == comp[root] || subChosen[c] < 0) continue;
    const int e = origin[subChosen[c]];
    chosen[edges[e].v] = e;
  }
  return chosen;
}

}  // namespace

std::vector<int> minArborescence(const std::vector<std::vector<double>>& cost, int root) {
  const int n = static_cast<int>(cost.size());
  if (root < 0 || root >= n)
    throw Error(Status::kInvalidArgument, "arborescence: root " + std::to_string(root) +
                                              " is not a node of " + std::to_string(n));
  std::vector<Edge> edges;
  for (int u = 0; u < n; ++u) {
    if (static_cast<int>(cost[u].size()) != n)
      throw Error(Status::kInvalidArgument, "arborescence: cost matrix is not square");
    for (int v = 0; v < n; ++v)
      if (u != v && v != root && std::isfinite(cost[u][v])) {
        if (cost[u][v] < 0)
          throw Error(Status::kInvalidArgument, "arborescence: negative edge cost");
        edges.push_back({u, v, cost[u][v], static_cast<int>(edges.size())});
      }
  }
  const std::vector<int> chosen = solve(n, root, edges);
  std::vector<int> parent(n, -1);
  for (int v = 0; v < n; ++v)
    if (v != root) parent[v] = edges[chosen[v]].u;
  return parent;
}

std::vector<int> twoLevelTree(const std::vector<std::vector<double>>& cost, int root) {
  const int n = static_cast<int>(cost.size());
  if (root < 0 || root >= n)
    throw Error(Status::kInvalidArgument, "two-level tree: root " + std::to_string(root) +
                                              " is not a node of " + std::to_string(n));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<char> hub(n, 0);
  // Cost of the tree with the current hubs (and the parents it implies when `parent`).
  auto evaluate = [&](std::vector<int>* parent) {
    double total = 0;
    for (int v = 0; v < n; ++v) {
      if (v == root) continue;
      if (hub[v]) {
        total += cost[root][v];
        if (parent) (*parent)[v] = root;
        continue;
      }
      double best = cost[root][v];
      int from = root;
      for (int u = 0; u < n; ++u)
        if (hub[u] && cost[u][v] < best) best = cost[u][v], from = u;
      total += best;
      if (parent) (*parent)[v] = from;
    }
    return total;
  };
  double current = evaluate(nullptr);
  if (!std::isfinite(current)) current = kInf;
  for (int iter = 0; iter < 4 * n; ++iter) {
    double best = current;
    int flipA = -1, flipB = -1;
    // Add or drop one hub; where neither helps, swap a hub for a non-hub.
    for (int a = 0; a < n; ++a) {
      if (a == root) continue;
      hub[a] ^= 1;
      const double c = evaluate(nullptr);
      if (c < best * (1 - 1e-12)) best = c, flipA = a, flipB = -1;
      hub[a] ^= 1;
    }
    for (int a = 0; a < n && flipA < 0; ++a) {
      if (a == root || hub[a]) continue;
      hub[a] = 1;
      for (int b = 0; b < n; ++b) {
        if (b == root || b == a || !hub[b]) continue;
        hub[b] = 0;
        const double c = evaluate(nullptr);
        if (c < best * (1 - 1e-12)) best = c, flipA = a, flipB = b;
        hub[b] = 1;
      }
      hub[a] = 0;
    }
    if (flipA < 0) break;
    hub[flipA] ^= 1;
    if (flipB >= 0) hub[flipB] ^= 1;
    current = best;
  }
  std::vector<int> parent(n, -1);
  evaluate(&parent);
  for (int v = 0; v < n; ++v)
    if (v != root && !std::isfinite(cost[parent[v]][v]))
      throw Error(Status::kInvalidArgument,
                  "two-level tree: node " + std::to_string(v) + " cannot be reached in two hops");
  return parent;
}

}  // namespace weft::synth
