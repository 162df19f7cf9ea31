#include "synth/solver/rank_graph.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <sstream>

#include "src/common/error.h"

namespace weft::synth::solver {

std::vector<RankGraph::Link> RankGraph::links() const {
  std::vector<Link> out;
  for (int a = 0; a < nranks; ++a)
    for (int b = 0; b < nranks; ++b)
      if (capacity[a][b] > 0) out.push_back({a, b, capacity[a][b]});
  return out;
}

std::vector<std::vector<int>> RankGraph::hops() const {
  std::vector<std::vector<int>> dist(nranks, std::vector<int>(nranks, -1));
  for (int s = 0; s < nranks; ++s) {
    std::deque<int> queue{s};
    dist[s][s] = 0;
    while (!queue.empty()) {
      int u = queue.front();
      queue.pop_front();
      for (int v = 0; v < nranks; ++v)
        if (capacity[u][v] > 0 && dist[s][v] < 0) {
          dist[s][v] = dist[s][u] + 1;
          queue.push_back(v);
        }
    }
  }
  return dist;
}

int RankGraph::diameter() const {
  int d = 0;
  const auto dist = hops();
  for (int a = 0; a < nranks; ++a)
    for (int b = 0; b < nranks; ++b) {
      if (dist[a][b] < 0)
        throw Error(Status::kInvalidArgument, "rank graph '" + name + "': rank " +
                                                  std::to_string(b) + " is unreachable from rank " +
                                                  std::to_string(a));
      d = std::max(d, dist[a][b]);
    }
  return d;
}

int RankGraph::unitsIn(int r) const {
  int sum = 0;
  for (int a = 0; a < nranks; ++a) sum += capacity[a][r];
  return sum;
}

int RankGraph::unitsOut(int r) const {
  int sum = 0;
  for (int b = 0; b < nranks; ++b) sum += capacity[r][b];
  return sum;
}

std::string RankGraph::describe() const {
  std::ostringstream out;
  out << "rank graph '" << name << "': " << nranks << " ranks\n";
  for (int a = 0; a < nranks; ++a) {
    out << "  " << a << ":";
    for (int b = 0; b < nranks; ++b) out << " " << capacity[a][b];
    out << "\n";
  }
  return out.str();
}

RankGraph rankGraphFromMatrix(const std::vector<std::vector<int>>& units, const std::string& name) {
  RankGraph g;
  g.name = name;
  g.nranks = static_cast<int>(units.size());
  if (g.nranks == 0) throw Error(Status::kInvalidArgument, "rank graph '" + name + "' is empty");
  for (int a = 0; a < g.nranks; ++a) {
    if (static_cast<int>(units[a].size()) != g.nranks)
      throw Error(Status::kInvalidArgument, "rank graph '" + name + "': row " + std::to_string(a) +
                                                " has " + std::to_string(units[a].size()) +
                                                " entries, expected " + std::to_string(g.nranks));
    for (int b = 0; b < g.nranks; ++b) {
      if (units[a][b] < 0)
        throw Error(Status::kInvalidArgument, "rank graph '" + name + "': link " +
                                                  std::to_string(a) + "->" + std::to_string(b) +
                                                  " has negative units");
      if (a == b && units[a][b] != 0)
        throw Error(Status::kInvalidArgument,
                    "rank graph '" + name + "': rank " + std::to_string(a) + " links to itself");
    }
  }
  g.capacity = units;
  return g;
}

RankGraph rankGraphFromFabric(const Fabric& fabric, double unitGBps, const std::string& name) {
  const int n = fabric.nranks;
  std::vector<std::vector<double>> bw(n, std::vector<double>(n, 0));
  double slowest = std::numeric_limits<double>::infinity();
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b || fabric.routes[a][b].size() != 1) continue;
      const FabricLink& l = fabric.links[fabric.routes[a][b].front()];
      if (l.to != b) continue;  // a one-link route ending at a switch is not rank-to-rank
      bw[a][b] = l.bw;
      slowest = std::min(slowest, l.bw);
    }
  if (!std::isfinite(slowest))
    throw Error(Status::kInvalidArgument,
                "rank graph '" + name + "': no two ranks of the fabric are directly linked");
  const double unit = unitGBps > 0 ? unitGBps : slowest;
  std::vector<std::vector<int>> units(n, std::vector<int>(n, 0));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (bw[a][b] > 0) units[a][b] = std::max(1, static_cast<int>(std::lround(bw[a][b] / unit)));
  return rankGraphFromMatrix(units, name);
}

}  // namespace weft::synth::solver
